// Package doctor is `psych doctor [--json] [--python PATH]
// [--require-cgroup] [--image REF]`: internal/doctor's checks of this
// host, printed. psych-full has it; the lean psych hands it over.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/internal/doctor"
	"github.com/psych-runtime/psych/sandbox/container"
)

// Command is psych doctor: one line per check, then the attestation of
// one fully isolated execution. It exits 1 when any check FAILs (the
// subprocess backend cannot give full isolation here), else 0; 2 on a
// usage error.
var Command = cli.Command{Name: "doctor", Run: func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return command(args, stdout, stderr)
}}

// exitFailed is the exit code when a check FAILs.
const exitFailed = 1

func command(args []string, stdout, stderr io.Writer) int {
	var opts doctor.Options
	var asJSON bool
	fs := flag.NewFlagSet("psych doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&asJSON, "json", false, `print {"checks": [{"name", "status", "found", "fix"}], "attestation": {...}}`)
	fs.StringVar(&opts.Python, "python", "", "interpreter (default: python3 on PATH, resolved to sys.executable)")
	fs.BoolVar(&opts.RequireCgroup, "require-cgroup", false, "FAIL, not WARN, where no per-run cgroup can be made")
	fs.StringVar(&opts.Image, "image", "", "container image to look for in each engine (default "+container.DefaultImage+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "psych doctor: unexpected argument %q\n", fs.Arg(0))
		return cli.ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep := doctor.Run(ctx, opts)
	if ctx.Err() != nil {
		return cli.ExitInterrupted
	}
	var err error
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "psych doctor: %v\n", err)
		return cli.ExitHostFault
	}
	if rep.Failed() {
		return exitFailed
	}
	return cli.ExitOK
}
