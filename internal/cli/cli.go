// Package cli is the runner of psych's command line, shared by its two
// builds: each build's main is a table of Commands that Main runs.
//
//	psych run [flags] FILE|-
//	psych run --backend container [--engine E] [--image REF] [flags] FILE|-
//	psych run --demo-tools [--approve yes|no|ask] [--store FILE] FILE|-
//	psych run --host unix:///PATH|tcp://HOST:PORT|tls://HOST:PORT [--token-file F] [flags] FILE|-
//	psych runs list|show|replay --store FILE [ID]
//	psych serve [--listen ADDR] [--pool N] [flags]
//	psych doctor | psych bench
//
// The commands are packages of their own under cmd/internal/commands; this
// package holds what they share: the runner (Main), the flags that choose
// and configure the backend (SandboxFlags), the report of a result or an
// error (PrintResult, Report) and the exit codes.
//
// cmd/psych links the subprocess backend only, so that `psych run` starts
// in what a small Go program costs. The container backend links the
// containerd client (gRPC, protobuf, OpenTelemetry: about 4 ms of package
// initialisation on every start), the store links SQLite (about 0.5 ms)
// and a psych.Runtime its policy, egress and schema code (about 0.5 ms),
// so they live in a second build, cmd/psych-full, with the commands that
// use them: runs, doctor and bench. psych hands every command its table
// lacks, `--backend container`, `--demo-tools` and `--store` to psych-full
// by exec (HandOver), with the same arguments, looking beside its own
// executable and then on PATH; without it they fail with a usage error
// that says how to build it, having read nothing. Both builds accept every
// command.
//
// A run with bindings or a store goes through a psych.Runtime
// (cmd/internal/full): its bindings are the Runtime's tools (the demo
// tools with --demo-tools), called through its Policy (destructive tools
// ask; --approve answers, default no) and recorded into --store. A run with
// neither has nothing for a Runtime to do: it goes to the backend as it
// is, with the same result.
//
// Exit codes: 0 when a result was produced, whatever the program did; 2 for
// usage and configuration errors; 3 when the run was refused (a Require…
// option the host cannot meet); 1 for a host fault; 75 when a server
// (psych run --host) refused the run for now (429, 503); 130 when
// interrupted.
// runs replay exits 0 when the run is reproduced, 1 on a divergence and 4
// on a host fault.
package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// The exit codes every command shares (a command may add its own, as runs
// replay does).
const (
	ExitOK          = 0   // a result was produced, whatever the program did
	ExitHostFault   = 1   // the host failed
	ExitUsage       = 2   // a usage or configuration error
	ExitRefused     = 3   // the run was refused: a Require… option the host cannot meet
	ExitRetry       = 75  // a server refused the run for now (429, 503): retry later (EX_TEMPFAIL)
	ExitInterrupted = 130 // SIGINT or SIGTERM
)

// FullBinary is the build of this command line that links the container
// backend and has every command.
const FullBinary = "psych-full"

// Command is one line of a build's command table: psych NAME ARGS calls
// Run with ARGS and exits with what it returns.
type Command struct {
	Name string
	Run  func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

	rest bool
}

// Rest, as a line of a command table, hands every command the table lacks
// to psych-full (HandOver); without it such a command is unknown.
var Rest = Command{rest: true}

const usage = `usage: psych run [flags] FILE|-
       psych run --host unix:///PATH|tcp://HOST:PORT|tls://HOST:PORT [flags] FILE|-
       psych serve [--listen ADDR] [--pool N] [flags]
       psych runs list|show|replay --store FILE [ID]
       psych doctor [--json] [--python PATH] [--require-cgroup] [--image REF]

Runs one Python program in the sandbox and prints its result.
Run "psych run -h" for the flags.
`

// Main runs the command line args (without the program name) with the
// command table commands and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, commands ...Command) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	}
	rest := false
	for _, c := range commands {
		if c.rest {
			rest = true
		} else if c.Name == args[0] {
			return c.Run(args[1:], stdin, stdout, stderr)
		}
	}
	if rest {
		return HandOver(stderr, args, "psych "+args[0])
	}
	fmt.Fprintf(stderr, "psych: unknown command %q\n%s", args[0], usage)
	return ExitUsage
}

// HandOver replaces this process with psych-full, given args (the whole
// command line, without the program name); what names what psych-full has
// that this build lacks, for the error. It returns only on failure: a
// usage error when psych-full is nowhere, a host fault when its exec fails.
func HandOver(stderr io.Writer, args []string, what string) int {
	path, err := findFull()
	if err != nil {
		fmt.Fprintf(stderr, "psych: %s is in %s, the build that links the container backend: %v (make build puts it beside psych; or go install github.com/psych-runtime/psych/cmd/%s)\n", what, FullBinary, err, FullBinary)
		return ExitUsage
	}
	err = syscall.Exec(path, append([]string{path}, args...), os.Environ())
	fmt.Fprintf(stderr, "psych: exec %s: %v\n", path, err)
	return ExitHostFault
}

// findFull looks for psych-full beside this executable, then on PATH.
func findFull() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), FullBinary)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(FullBinary)
	if err != nil {
		return "", fmt.Errorf("not beside this executable nor on PATH")
	}
	return filepath.Abs(p)
}
