// Command psych-full is psych's command line with everything linked: the
// container backend (containerd, podman, docker), the SQLite store, and the
// commands that use them (runs, doctor, bench). psych hands those to it by
// exec; it accepts every psych command itself. See internal/cli for the
// runner, cmd/internal/commands for the commands.
package main

import (
	"os"

	"github.com/psych-runtime/psych/cmd/internal/commands/bench"
	"github.com/psych-runtime/psych/cmd/internal/commands/call"
	"github.com/psych-runtime/psych/cmd/internal/commands/doctor"
	"github.com/psych-runtime/psych/cmd/internal/commands/run"
	"github.com/psych-runtime/psych/cmd/internal/commands/runs"
	"github.com/psych-runtime/psych/cmd/internal/commands/serve"
	"github.com/psych-runtime/psych/cmd/internal/full"
	"github.com/psych-runtime/psych/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr,
		run.New(run.Config{Container: full.Container, Execute: full.Execute, Events: full.Events}),
		call.Command,
		runs.Command,
		doctor.Command,
		bench.Command,
		serve.Command,
	))
}
