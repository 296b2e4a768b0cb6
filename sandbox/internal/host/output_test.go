package host

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// emitted drains chunks through a Capture capped at max, one Write per
// chunk and then the drain's end, and returns what Emit was handed.
func emitted(t *testing.T, max int, chunks []string) (*Capture, []string) {
	t.Helper()
	var got []string
	c := &Capture{Max: max, Emit: func(text string) { got = append(got, text) }}
	for _, ch := range chunks {
		c.Write([]byte(ch))
	}
	c.Drain(strings.NewReader(""))
	return c, got
}

// TestCaptureEmit: Emit is handed the output as it comes, decoded as Text
// decodes the whole: a sequence cut by a read waits for its end, a run of
// invalid bytes cut by a read is one U+FFFD, and the tail at the cap or at
// the end is handed at once.
func TestCaptureEmit(t *testing.T) {
	for _, c := range []struct {
		name   string
		max    int
		chunks []string
		want   []string
	}{
		{"plain", 100, []string{"ab", "cd"}, []string{"ab", "cd"}},
		{"split euro", 100, []string{"a\xe2\x82", "\xacb"}, []string{"a", "€b"}},
		{"split four bytes", 100, []string{"\xf0", "\x9f", "\x98", "\x80!"}, []string{"😀!"}},
		{"invalid run split", 100, []string{"a\xff", "\xfeb"}, []string{"a\uFFFD", "b"}},
		{"invalid run split thrice", 100, []string{"\xff", "\xfe", "\x80x"}, []string{"\uFFFD", "x"}},
		{"cut prefix at end", 100, []string{"a\xe2\x82"}, []string{"a", "\uFFFD"}},
		{"prefix then not a continuation", 100, []string{"\xe2", "x"}, []string{"\uFFFDx"}},
		{"prefix after an invalid run", 100, []string{"\xff\xe2", "\x82"}, []string{"\uFFFD"}},
		{"valid U+FFFD between runs", 100, []string{"\xff\xef\xbf", "\xbd\xff"}, []string{"\uFFFD", "\uFFFD\uFFFD"}},
		{"cap inside a sequence", 3, []string{"ab\xe2\x82\xac"}, []string{"ab\uFFFD"}},
		{"cap at a read's end", 3, []string{"ab\xe2", "\x82\xac"}, []string{"ab", "\uFFFD"}},
		{"cap drops the rest", 4, []string{"ab", "cdef", "gh"}, []string{"ab", "cd"}},
		{"nothing kept", 0, []string{"abc"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			capt, got := emitted(t, c.max, c.chunks)
			if !slices.Equal(got, c.want) {
				t.Errorf("emitted %q, want %q", got, c.want)
			}
			if all := strings.Join(got, ""); all != capt.Text() {
				t.Errorf("emitted %q in all, Text %q", all, capt.Text())
			}
		})
	}
}

// FuzzCaptureEmit: any bytes, cut into any reads, under any cap: what Emit
// is handed concatenates to exactly Text, each text is non-empty valid
// UTF-8, and after each read no more than an incomplete sequence (3 bytes)
// waits, nothing once the cap is reached.
func FuzzCaptureEmit(f *testing.F) {
	f.Add([]byte("a\xe2\x82\xacb\xff\xfe"), []byte{2, 3, 1}, uint16(100))
	f.Add([]byte("ab\xe2\x82\xac"), []byte{1}, uint16(3))
	f.Add([]byte("\xf0\x9f\x98\x80\xff\xef\xbf\xbd\xff"), []byte{1, 1, 1, 1, 2, 1}, uint16(9))
	f.Fuzz(func(t *testing.T, data, cuts []byte, max uint16) {
		var got []string
		c := &Capture{Max: int(max) % (len(data) + 8), Emit: func(text string) {
			if text == "" || !utf8.ValidString(text) {
				t.Fatalf("emitted %q: want non-empty valid UTF-8", text)
			}
			got = append(got, text)
		}}
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(int(cuts[i]), n) // 0: an empty write
			}
			c.Write(rest[:n])
			rest = rest[n:]
			switch waiting := len(c.buf) - c.done; {
			case c.truncated && waiting > 0:
				t.Fatalf("%d kept bytes wait at the cap", waiting)
			case waiting > utf8.UTFMax-1:
				t.Fatalf("%d kept bytes wait after a read: more than an incomplete sequence", waiting)
			}
		}
		c.Drain(strings.NewReader(""))
		if all, want := strings.Join(got, ""), c.Text(); all != want {
			t.Fatalf("emitted %q, Text %q", all, want)
		}
	})
}

// outputCall is one call of a Request.Output.
type outputCall struct {
	stream sandbox.Stream
	data   string
}

// beginOutput begins a run whose Output is out, with stdout and stderr the
// read ends of two pipes the test writes.
func beginOutput(t *testing.T, out sandbox.Output, max int) (e *Execution, f *fakeRun, stdout, stderr *io.PipeWriter) {
	t.Helper()
	req, err := Prepare(sandbox.Request{Code: "x", Output: out}, sandbox.DefaultLimits(), wire.DefaultMaxFrame, nil)
	if err != nil {
		t.Fatal(err)
	}
	hostEnd, child := net.Pipe()
	f = &fakeRun{exited: make(chan struct{}), child: child}
	go func() { wire.NewDecoder(child, 0).Next() }()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	e = Begin(context.Background(), Setup{Request: req, Wire: hostEnd, MaxFrame: wire.DefaultMaxFrame, MaxOutput: max,
		Stdout: outR, Stderr: errR, Exited: f.exited, Kill: f.kill, Started: time.Now()})
	return e, f, outW, errW
}

// end ends a beginOutput run and returns its Result.
func end(t *testing.T, e *Execution, f *fakeRun, stdout, stderr *io.PipeWriter) *sandbox.Result {
	t.Helper()
	stdout.Close()
	stderr.Close()
	f.kill()
	if err := e.Supervise(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Finish()
	return e.Result(Outcome{})
}

// TestOutputDelivered: Request.Output is called as the output comes, each
// stream in order, and its data concatenate to the Result's, capped; every
// call is made before Finish returns.
func TestOutputDelivered(t *testing.T) {
	var mu sync.Mutex
	var calls []outputCall
	e, f, stdout, stderr := beginOutput(t, func(s sandbox.Stream, data string) {
		mu.Lock()
		calls = append(calls, outputCall{s, data})
		mu.Unlock()
	}, 16)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	stdout.Write([]byte("one\xe2\x82"))
	waitCalls(t, count, 1)
	stdout.Write([]byte("\xac two"))
	stderr.Write([]byte("err\xff"))
	waitCalls(t, count, 3)
	stdout.Write([]byte(" three and past the cap"))
	res := end(t, e, f, stdout, stderr)
	mu.Lock()
	defer mu.Unlock()
	var got [3]string
	for _, c := range calls {
		got[c.stream] += c.data
	}
	if calls[0] != (outputCall{sandbox.Stdout, "one"}) {
		t.Errorf("first call %+v, want stdout's first complete text before the rest was written", calls[0])
	}
	if got[sandbox.Stdout] != res.Stdout || got[sandbox.Stderr] != res.Stderr || !res.StdoutTruncated {
		t.Errorf("streamed stdout %q, stderr %q; Result %q (truncated %v), %q", got[1], got[2], res.Stdout, res.StdoutTruncated, res.Stderr)
	}
	if res.Stdout != "one€ two three" || res.Stderr != "err\uFFFD" {
		t.Errorf("Result stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

// TestOutputPanics: an Output that panics ends the delivery, on both
// streams, and the host goes on: the Result holds the whole output.
func TestOutputPanics(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	e, f, stdout, stderr := beginOutput(t, func(s sandbox.Stream, data string) {
		mu.Lock()
		calls++
		mu.Unlock()
		panic("the caller's bug")
	}, 1<<10)
	count := func() int { mu.Lock(); defer mu.Unlock(); return calls }
	stdout.Write([]byte("a"))
	waitCalls(t, count, 1)
	stdout.Write([]byte("b"))
	stderr.Write([]byte("c"))
	res := end(t, e, f, stdout, stderr)
	if n := count(); n != 1 {
		t.Errorf("%d calls; want none after the one that panicked", n)
	}
	if res.Stdout != "ab" || res.Stderr != "c" {
		t.Errorf("Result stdout %q, stderr %q; want all of it", res.Stdout, res.Stderr)
	}
}

func waitCalls(t *testing.T, count func() int, n int) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d calls of Output", n), func() bool { return count() >= n })
}
