package cli

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestMainTable: Main calls the command the table names with the rest of
// the arguments; a command the table lacks is unknown, or with Rest is
// psych-full's (here nowhere: a usage error naming it, nothing run).
func TestMainTable(t *testing.T) {
	var got []string
	echo := Command{Name: "echo", Run: func(args []string, _ io.Reader, stdout, _ io.Writer) int {
		got = args
		return 7
	}}
	var out, errb bytes.Buffer
	if code := Main([]string{"echo", "a", "-b"}, nil, &out, &errb, echo); code != 7 || !slices.Equal(got, []string{"a", "-b"}) {
		t.Fatalf("echo a -b: exit %d, args %q", code, got)
	}
	for _, c := range []struct {
		args   []string
		table  []Command
		code   int
		stdout string
		stderr string
	}{
		{nil, []Command{echo}, ExitUsage, "", "usage: psych run"},
		{[]string{"help"}, []Command{echo, Rest}, ExitOK, "usage: psych run", ""},
		{[]string{"launch"}, []Command{echo}, ExitUsage, "", `psych: unknown command "launch"`},
		{[]string{"launch", "x"}, []Command{echo, Rest}, ExitUsage, "", "psych launch is in psych-full"},
	} {
		t.Setenv("PATH", "") // no psych-full to hand over to
		out.Reset()
		errb.Reset()
		code := Main(c.args, nil, &out, &errb, c.table...)
		if code != c.code || !strings.Contains(out.String(), c.stdout) || !strings.Contains(errb.String(), c.stderr) || c.stdout == "" && out.Len() != 0 {
			t.Errorf("psych %q: exit %d, stdout %q, stderr %q; want %d, %q, %q", c.args, code, out.String(), errb.String(), c.code, c.stdout, c.stderr)
		}
	}
}
