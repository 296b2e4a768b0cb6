package run

import (
	"io"

	"github.com/psych-runtime/psych/sandbox"
)

// passThrough is the Output of psych run without --json: the program's
// stdout and stderr pass through to psych's own as the program writes
// them (what reaches them is exactly the Result's, caps included), and
// the value and summary follow when the run ends (cli.PrintEnd). A write
// waits for psych's reader, as any program's output does; a failed one
// drops the rest of that stream's output (the Result still has it).
func passThrough(stdout, stderr io.Writer) sandbox.Output {
	var outFailed, errFailed bool // each touched by its stream's calls only
	return func(s sandbox.Stream, data string) {
		w, failed := stdout, &outFailed
		if s == sandbox.Stderr {
			w, failed = stderr, &errFailed
		}
		if *failed {
			return
		}
		if _, err := io.WriteString(w, data); err != nil {
			*failed = true
		}
	}
}
