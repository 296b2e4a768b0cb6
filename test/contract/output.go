package contract

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// outputLog records a run's Request.Output calls, and what breaks its
// promises: a call for a stream that is not one, an empty one, two calls
// for one stream at once, a call after Run returned.
type outputLog struct {
	returned atomic.Bool // Run has returned
	busy     [3]atomic.Int32

	mu       sync.Mutex
	text     [3]strings.Builder
	first    [3]time.Time // the first call's time, per stream
	calls    [3]int
	problems []string
}

func (l *outputLog) output(s sandbox.Stream, data string) {
	if l.returned.Load() {
		l.problem("a call after Run returned: %s %q", s, data)
	}
	if s != sandbox.Stdout && s != sandbox.Stderr {
		l.problem("a call for stream %s", s)
		return
	}
	if l.busy[s].Add(1) != 1 {
		l.problem("two calls for %s at once", s)
	}
	defer l.busy[s].Add(-1)
	if data == "" {
		l.problem("an empty call for %s", s)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls[s] == 0 {
		l.first[s] = time.Now()
	}
	l.calls[s]++
	l.text[s].WriteString(data)
}

func (l *outputLog) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.problems) < 10 {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

// run runs code on sb with l as its Output; l notes Run's return at once.
func (l *outputLog) run(t *testing.T, s *suite, sb sandbox.Sandbox, req sandbox.Request) (*sandbox.Result, time.Time) {
	t.Helper()
	req.Output = l.output
	ctx, cancel := context.WithTimeout(context.Background(), s.scaled(2*time.Minute))
	defer cancel()
	res, err := sb.Run(ctx, req)
	l.returned.Store(true)
	returned := time.Now()
	if err != nil {
		t.Fatalf("Run returned a Go error for a program's outcome: %v", err)
	}
	s.checkWarm(t, res)
	return res, returned
}

// check fails t on a broken promise, and where the streamed text is not
// the Result's, after a pause in which a late call would show.
func (l *outputLog) check(t *testing.T, s *suite, res *sandbox.Result) {
	t.Helper()
	time.Sleep(s.scaled(200 * time.Millisecond))
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.problems {
		t.Error(p)
	}
	for _, st := range []sandbox.Stream{sandbox.Stdout, sandbox.Stderr} {
		want := res.Stdout
		if st == sandbox.Stderr {
			want = res.Stderr
		}
		if got := l.text[st].String(); got != want {
			t.Errorf("the %s calls concatenate to %d bytes %.100q...%q, the Result's %s is %d bytes %.100q...%q", st, len(got), got, tail(got), st, len(want), want, tail(want))
		}
	}
}

// outputLive: Request.Output gets the output as the program writes it: a
// program that writes, flushes and then sleeps 2 s has had its first
// stdout and stderr calls well before Run returns (at least 1 s: half the
// sleep, the margin), and its later output after them.
func (s *suite) outputLive(t *testing.T) {
	sb := s.b.New(t, Options{})
	var l outputLog
	code := "import sys, time\nprint('first', flush=True)\nsys.stderr.write('err first\\n'); sys.stderr.flush()\n" +
		"time.sleep(2)\nprint('last')\nsys.stderr.write('err last\\n')\n'done'"
	res, returned := l.run(t, s, sb, sandbox.Request{Code: code})
	wantSuccess(t, res)
	l.check(t, s, res)
	if res.Stdout != "first\nlast\n" || res.Stderr != "err first\nerr last\n" {
		t.Fatalf("Result stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range []sandbox.Stream{sandbox.Stdout, sandbox.Stderr} {
		if ahead := returned.Sub(l.first[st]); ahead < time.Second {
			t.Errorf("the first %s call came %v before Run returned; want the flushed output during the program's 2 s sleep (at least 1 s ahead)", st, ahead)
		}
		if l.calls[st] < 2 {
			t.Errorf("%d %s calls; want the output before the sleep and after it apart", l.calls[st], st)
		}
	}
}

// outputMatchesResult: the calls of each stream concatenate to exactly
// the Result's text: a UTF-8 sequence cut between writes whole, a run of
// invalid bytes cut between writes one U+FFFD, a sequence cut at the end
// one U+FFFD, and nothing past the output cap (1 MiB), which cuts a
// sequence too.
func (s *suite) outputMatchesResult(t *testing.T) {
	sb := s.b.New(t, Options{})
	var l outputLog
	code := `import sys, time
def parts(f, ps):
    for p in ps:
        f.write(p)
        f.flush()
        time.sleep(0.05)
parts(sys.stdout.buffer, [b'a\xe2\x82', b'\xacb\xff', b'\xfe', b'c'])
parts(sys.stderr.buffer, [b'err\xf0\x9f', b'\x98\x80', b'\xc3'])
sys.stdout.buffer.write(b'x' * ((1 << 20) - 9) + '\u20ac'.encode() + b'y' * 100000)
'done'`
	res, _ := l.run(t, s, sb, sandbox.Request{Code: code})
	wantSuccess(t, res)
	l.check(t, s, res)
	want := "a€b\uFFFDc" + strings.Repeat("x", 1<<20-9) + "\uFFFD"
	if res.Stdout != want || !res.StdoutTruncated {
		t.Errorf("Result stdout %d bytes ending %q, truncated %v; want %d bytes ending %q, truncated", len(res.Stdout), tail(res.Stdout), res.StdoutTruncated, len(want), tail(want))
	}
	if res.Stderr != "err😀\uFFFD" || res.StderrTruncated {
		t.Errorf("Result stderr %q, truncated %v", res.Stderr, res.StderrTruncated)
	}
}

// outputNothingAfterRun: no Output call comes after Run returned, even
// when something of the program still writes as the run ends: a thread and
// a forked child writing in a loop when the program ends, and a program
// writing in a loop until its wall limit.
func (s *suite) outputNothingAfterRun(t *testing.T) {
	sb := s.b.New(t, Options{})
	for _, c := range []struct {
		name, code string
		limits     sandbox.Limits
		limit      sandbox.LimitName
	}{
		{"writers left", `import os, sys, threading
def loop(f):
    while True:
        f.write('x' * 1000 + '\n')
        f.flush()
if os.fork() == 0:
    loop(sys.stderr)
threading.Thread(target=loop, args=(sys.stdout,), daemon=True).start()
import time
time.sleep(0.3)
'done'`, sandbox.Limits{}, ""},
		{"wall limit", "import sys\nwhile True:\n    sys.stdout.write('y' * 1000 + '\\n')\n    sys.stdout.flush()", sandbox.Limits{WallSeconds: 1}, sandbox.LimitWallSeconds},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l outputLog
			res, _ := l.run(t, s, sb, sandbox.Request{Code: c.code, Limits: c.limits})
			if res.LimitHit != c.limit {
				t.Errorf("limit_hit %q, want %q", res.LimitHit, c.limit)
			}
			l.check(t, s, res)
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.calls[sandbox.Stdout] == 0 {
				t.Error("no stdout call for a program that wrote to its stdout")
			}
		})
	}
}

func tail(s string) string { return s[max(len(s)-8, 0):] }

// outputPanics: an Output that panics is called no more, and the run goes
// on: its Result holds the whole output.
func (s *suite) outputPanics(t *testing.T) {
	sb := s.b.New(t, Options{})
	var calls atomic.Int32
	req := sandbox.Request{Code: "import time\nprint('one', flush=True)\ntime.sleep(0.5)\nprint('two', flush=True)\ntime.sleep(0.5)\nprint('three')\n'done'",
		Output: func(sandbox.Stream, string) {
			calls.Add(1)
			panic("a caller's bug")
		}}
	ctx, cancel := context.WithTimeout(context.Background(), s.scaled(time.Minute))
	defer cancel()
	res, err := sb.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantSuccess(t, res)
	if res.Stdout != "one\ntwo\nthree\n" {
		t.Errorf("stdout %q, want all three lines", res.Stdout)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("Output was called %d times; want once, then no more after its panic", n)
	}
}
