// Command psych runs one Python program in psych's sandbox and prints the
// result. It links the subprocess backend only; what needs the container
// backend, a psych.Runtime or the store (run --backend container, run
// --demo-tools, run --store, runs, doctor, bench) it hands to psych-full,
// beside it or on PATH. See internal/cli for the commands, their flags and
// exit codes.
package main

import (
	"os"

	command "github.com/psych-runtime/psych/internal/cli"
)

func main() {
	os.Exit(command.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, nil))
}
