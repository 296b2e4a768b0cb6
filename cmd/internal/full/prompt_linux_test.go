//go:build linux

package full

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/internal/testutil"
)

// openPTY opens a pseudo-terminal pair: the master (what a terminal
// emulator reads and types into) and the slave (the program's /dev/tty).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testutil.Unavailable(t, "no pseudo-terminals on this host: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// screen collects what the terminal shows.
type screen struct {
	ch  chan []byte
	buf bytes.Buffer
}

func watch(m *os.File) *screen {
	sc := &screen{ch: make(chan []byte, 64)}
	go func() {
		for {
			b := make([]byte, 64<<10)
			n, err := m.Read(b)
			if n > 0 {
				sc.ch <- b[:n]
			}
			if err != nil {
				close(sc.ch)
				return
			}
		}
	}()
	return sc
}

// until waits for s on the screen and returns all shown so far.
func (sc *screen) until(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !strings.Contains(sc.buf.String(), s) {
		select {
		case b, ok := <-sc.ch:
			if !ok {
				t.Fatalf("the terminal closed before %q; it showed %q", s, sc.buf.String())
			}
			sc.buf.Write(b)
		case <-deadline:
			t.Fatalf("no %q on the terminal; it showed %q", s, sc.buf.String())
		}
	}
	out := sc.buf.String()
	sc.buf.Reset()
	return out
}

// TestPromptOnTerminal: --approve ask's question, read from a real
// pseudo-terminal, shows the canonical arguments the tool gets, escapes
// every control and bidi character, and caps the arguments, saying how
// much more there is. A person's "n" denies the call.
func TestPromptOnTerminal(t *testing.T) {
	m, s := openPTY(t)
	sc := watch(m)
	a := newTTYApprover(s, s)
	defer a.close()
	reg, err := demoRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := psych.New(psych.Config{Registry: reg, Approver: a})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 100_000)
	for _, c := range []struct {
		args  string
		want  []string // shown
		never []string // never shown raw
	}{
		// The canonical form: \u006e is the n the tool gets.
		{`{ "path" : "\u006eotes.txt" }`, []string{`remove_file({"path":"notes.txt"})`}, nil},
		{`{"path":"notes.txt\u202e\u2066gnp.exe\u009b31m\u0085x\u2028"}`,
			[]string{`notes.txt\u202e\u2066gnp.exe\u009b31m\u0085x\u2028`},
			[]string{"\u202e", "\u2066", "\u009b", "\u0085", "\u2028"}},
		{`{"path":"` + long + `"}`, []string{`{"path":"aaaa`, fmt.Sprintf("… (%d more bytes)", len(long)+len(`{"path":""}`)-promptArgsRunes)}, nil},
	} {
		done := make(chan *psych.Outcome, 1)
		go func() {
			out, err := rt.Call(context.Background(), psych.Call{Tool: "remove_file", Args: json.RawMessage(c.args)})
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
		shownText := sc.until(t, "Allow? [y/N] ")
		for _, w := range c.want {
			if !strings.Contains(shownText, w) {
				t.Errorf("the prompt for %.60s… is %.300q; want it to show %q", c.args, shownText, w)
			}
		}
		for _, n := range c.never {
			if strings.Contains(shownText, n) {
				t.Errorf("the prompt for %.60s… shows %q raw: %q", c.args, n, shownText)
			}
		}
		if len(shownText) > promptArgsRunes+200 {
			t.Errorf("the prompt is %d bytes; want the arguments capped at %d runes", len(shownText), promptArgsRunes)
		}
		m.WriteString("n\n")
		if out := <-done; out.Kind != psych.OutcomeDenied {
			t.Errorf("answered n: %+v; want denied", out)
		}
	}
}
