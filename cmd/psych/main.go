// Command psych runs one Python program in psych's sandbox and prints the
// result. It links the subprocess backend only: its table has psych run
// alone, and it hands every other command (runs, doctor, bench, …) and
// what run needs psych-full for (--backend container, --demo-tools,
// --store) to psych-full, beside it or on PATH. See internal/cli for the
// runner and the exit codes, cmd/internal/commands for the commands.
package main

import (
	"os"

	"github.com/psych-runtime/psych/cmd/internal/commands/run"
	"github.com/psych-runtime/psych/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr,
		run.Lean,
		cli.Rest, // every other command: psych-full's
	))
}
