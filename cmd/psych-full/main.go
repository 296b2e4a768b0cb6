// Command psych-full is psych's command line with everything linked: the
// container backend (containerd, podman, docker), the SQLite store, and the
// commands that use them (runs, doctor, bench). psych hands those to it by
// exec; it accepts every psych command itself. See internal/cli.
package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/internal/cli/runtimecmd"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/container"
	"github.com/psych-runtime/psych/store/sqlite"
)

const (
	exitOK          = cli.ExitOK
	exitHostFault   = cli.ExitHostFault
	exitUsage       = cli.ExitUsage
	exitInterrupted = cli.ExitInterrupted
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, engines()))
}

func engines() *cli.Engines {
	open := func(path string) (runtimecmd.Store, error) { return sqlite.Open(path) }
	eng := &cli.Engines{
		Container: newContainer,
		Execute: func(ctx context.Context, sb sandbox.Sandbox, req sandbox.Request, o cli.ExecOptions) (*sandbox.Result, error) {
			return runtimecmd.Execute(ctx, sb, req, o, open)
		},
	}
	eng.Commands = map[string]func([]string, io.Writer, io.Writer) int{
		"doctor": doctorCmd,
		"bench":  benchCmd,
		"runs": func(args []string, stdout, stderr io.Writer) int {
			return runtimecmd.Runs(args, stdout, stderr, open, func(fs *flag.FlagSet) func() (sandbox.Sandbox, func(), error) {
				return cli.SandboxFlags(fs, eng)
			})
		},
	}
	return eng
}

func newContainer(o cli.ContainerOptions) (sandbox.Sandbox, func(), error) {
	sb, err := container.New(container.Config{
		Engine:               container.Engine(o.Engine),
		Image:                o.Image,
		ContainerPythonBin:   o.ContainerPython,
		EnvAllowlist:         o.EnvAllowlist,
		RequireNetworkDenial: o.RequireNetworkDenial,
		MaxOutputBytes:       o.MaxOutputBytes,
	})
	if err != nil {
		return nil, nil, err
	}
	return sb, func() { sb.Close() }, nil
}

func readProgram(name string, stdin io.Reader) (string, error) { return cli.ReadProgram(name, stdin) }

func encodeJSON(stdout, stderr io.Writer, v any) int { return cli.EncodeJSON(stdout, stderr, v) }
