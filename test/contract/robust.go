package contract

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/demotools"
)

// What a program does to its own interpreter (its builtins, modules,
// signals, threads, strings) never costs it its result: the value, or the
// failure with its traceback, comes back, promptly, as valid UTF-8 JSON.

// recursionTraceback: a runaway recursion under a raised recursion limit
// is a RecursionError with a bounded traceback (repeats collapsed), never a
// limit. Before 3.11 every Python call also costs C stack, so there the
// limit stays within the default stack.
func (s *suite) recursionTraceback(t *testing.T) {
	code := "import sys\nsys.setrecursionlimit(10**6 if sys.version_info >= (3, 11) else 5000)\n" +
		"def f(n):\n    return f(n + 1)\nf(0)"
	// The default limits, stretched on a slow host (an emulated VM): the
	// recursion itself takes what python takes.
	res := s.run(t, code, sandbox.Limits{CPUSeconds: 10 * s.b.TimeScale, WallSeconds: 30 * s.b.TimeScale}, nil)
	f := wantFailure(t, res, "RecursionError")
	if res.LimitHit != "" {
		t.Fatalf("limit_hit %q: a RecursionError is no limit", res.LimitHit)
	}
	tb := f.Traceback
	if len(tb) > 64<<10 || strings.Count(tb, "\n") > 200 {
		t.Errorf("traceback of %d bytes, %d lines: want it bounded", len(tb), strings.Count(tb, "\n"))
	}
	for _, want := range []string{`File "<program>", line 4, in f`, "    return f(n + 1)\n", "more times]\n", "RecursionError: maximum recursion depth exceeded"} {
		if !strings.Contains(tb, want) {
			t.Errorf("traceback lacks %q:\n%.3000s", want, tb)
		}
	}
}

// badStreams makes sys.stdout and sys.stderr objects that raise SystemExit
// on any use: as under python, the exit flush then fails (status 120).
const badStreams = "class Bad:\n    def __getattr__(self, name):\n        raise SystemExit(9)\nsys.stdout = sys.stderr = Bad()"

// builtinPatches are programs' changes to the interpreter the bootstrap
// must not depend on, each run on its own.
var builtinPatches = []string{
	"del builtins.max",
	"builtins.len = lambda *a: 1/0",
	"builtins.repr = lambda *a: 1/0",
	"builtins.str = lambda *a: 1/0",
	"builtins.print = None",
	"builtins.isinstance = lambda *a: 1/0",
	"builtins.open = None",
	"builtins.__import__ = lambda *a, **k: 1/0",
	"builtins.getattr = builtins.type = builtins.id = builtins.dict = builtins.set = None",
	"builtins.Exception = builtins.BaseException = builtins.ValueError = builtins.TypeError = builtins.OSError = None",
	"d = vars(builtins)\nfor k in list(d):\n    del d[k]",
	"sys.modules['json'] = sys.modules['os'] = sys.modules['traceback'] = sys.modules['linecache'] = None",
	"import os\nos.write = os.read = os.fstat = os._exit = os.getpid = None",
	"sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = None",
	badStreams,
	"sys.getrecursionlimit = sys.setrecursionlimit = sys.version_info = sys._getframe = None",
	"sys.meta_path[:] = []\nsys.path_hooks[:] = []\nsys.path_importer_cache.clear()",
	"import math, _thread, _json, atexit\nmath.isfinite = _thread.allocate_lock = _thread.RLock = _thread.get_ident = _json.make_encoder = atexit._run_exitfuncs = None",
	"import traceback, linecache\ntraceback.format_exception = traceback.TracebackException = linecache.getline = None\nlinecache.cache.clear()",
	"import codecs\nfor n in ('strict', 'replace', 'surrogatepass', 'surrogateescape', 'backslashreplace'):\n    codecs.register_error(n, lambda e: 1/0)",
	"sys.setrecursionlimit(30)",
}

// patchedBuiltins: after each patch, a program's value and a binding's
// reply still come back, and a failing program's traceback still shows its
// line, its source and its exception.
func (s *suite) patchedBuiltins(t *testing.T) {
	sb := s.b.New(t, Options{})
	for _, patch := range builtinPatches {
		head := "import builtins, sys\n" + patch + "\n"
		line := strconv.Itoa(strings.Count(head, "\n") + 1)
		res := s.runWith(t, sb, head+"[echo(x=1), 'end', 1.5, 1e999 - 1e999]", sandbox.Limits{}, demotools.Bindings{})
		if f := res.Failure; f != nil && !(patch == badStreams && f.Type == sandbox.FailureExit && f.ExitCode != nil && *f.ExitCode == 120) {
			t.Errorf("after %q: failure %+v\nstderr: %.2000s", patch, *res.Failure, res.Stderr)
		}
		if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, []any{map[string]any{"x": 1.0}, "end", 1.5, "nan"}) {
			t.Errorf("after %q: value %s", patch, res.Value)
		}
		res = s.runWith(t, sb, head+"1/0", sandbox.Limits{}, demotools.Bindings{})
		f := res.Failure
		if f == nil || f.Type != "ZeroDivisionError" || f.Message != "division by zero" {
			t.Errorf("after %q, 1/0: failure %+v, value %s\nstderr: %.2000s", patch, f, res.Value, res.Stderr)
			continue
		}
		for _, want := range []string{"Traceback (most recent call last):\n", `File "<program>", line ` + line + ", in <module>\n", "    1/0\n", "ZeroDivisionError: division by zero\n"} {
			if !strings.Contains(f.Traceback, want) {
				t.Errorf("after %q, 1/0: traceback lacks %q:\n%s", patch, want, f.Traceback)
			}
		}
	}
}

// loneSurrogates: a string no UTF-8 can hold (a lone surrogate, from
// surrogateescape'd bytes or an escape) comes back with U+FFFD in its
// place, wherever it is: the value, a dict key, a repr, a failure's message
// and traceback, stdout, stderr, a binding's arguments, and a result frame
// a program forged. The Result is strictly valid JSON.
func (s *suite) loneSurrogates(t *testing.T) {
	sb := s.b.New(t, Options{})
	rec := &recordBindings{}
	cases := []struct {
		code string
		want any // the value; a string with "Error" names a failure's type
	}{
		{`'\udcff'`, "\ufffd"},
		{`{'k\udcff': ['x\udcffy', '\ud800', '\ud83d\ude00']}`, map[string]any{"k\ufffd": []any{"x\ufffdy", "\ufffd", "\ufffd\ufffd"}}},
		{`{'\udcfe': 1, '\udcff': 2}`, `{'\udcfe': 1, '\udcff': 2}`}, // the keys collide as U+FFFD: the repr
		{"class C:\n    def __repr__(self):\n        return 'C\\udcff'\nC()", "C\ufffd"},
		{"import sys\nsys.stdout.buffer.write(b'out\\xff\\n')\nsys.stdout.flush()\nsys.stderr.buffer.write(b'err\\xfe\\n')\nrecord(a='\\udcff', b={'\\udcfe': 'x'})", map[string]any{"a": "\ufffd", "b": map[string]any{"\ufffd": "x"}}},
		{`raise ValueError('bad \udcff')`, "ValueError"},
		{ChannelPrelude + "send_raw(len(b'{\"type\":\"result\",\"value\":[\"\\\\udcff\",\"\\xff\"],\"failure\":null}').to_bytes(4, 'big') + " +
			"b'{\"type\":\"result\",\"value\":[\"\\\\udcff\",\"\\xff\"],\"failure\":null}')\nsys.stdout.flush()\nos._exit(0)", []any{"\ufffd", "\ufffd"}},
	}
	for _, c := range cases {
		res := s.runWith(t, sb, c.code, sandbox.Limits{}, rec)
		raw, err := json.Marshal(res)
		if err != nil {
			t.Fatalf("%q: marshal the result: %v", c.code, err)
		}
		if msg := strictJSON(raw); msg != "" {
			t.Errorf("%q: the Result is not strictly valid JSON: %s\n%s", c.code, msg, raw)
		}
		if typ, ok := c.want.(string); ok && strings.HasSuffix(typ, "Error") {
			f := wantFailure(t, res, typ)
			if f.Message != "bad \ufffd" || !strings.Contains(f.Traceback, "ValueError: bad \ufffd\n") {
				t.Errorf("%q: failure %+v", c.code, *f)
			}
			continue
		}
		if res.Failure != nil {
			t.Errorf("%q: failure %+v", c.code, *res.Failure)
			continue
		}
		if msg := strictJSON(res.Value); msg != "" {
			t.Errorf("%q: the value is not strictly valid JSON: %s: %s", c.code, msg, res.Value)
		}
		if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: value %#v, want %#v", c.code, got, c.want)
		}
		if strings.Contains(c.code, "record(") {
			if res.Stdout != "out\ufffd\n" || res.Stderr != "err\ufffd\n" {
				t.Errorf("stdout %q, stderr %q", res.Stdout, res.Stderr)
			}
			if args := rec.last(); strictJSON(args) != "" {
				t.Errorf("the binding got arguments that are not strictly valid JSON: %s: %s", strictJSON(args), args)
			}
		}
	}
}

// strictJSON says what makes b something a strict parser refuses: invalid
// UTF-8, invalid JSON, or a \u escape of a lone surrogate; "" if nothing.
func strictJSON(b []byte) string {
	if !utf8.Valid(b) {
		return "invalid UTF-8"
	}
	if !json.Valid(b) {
		return "invalid JSON"
	}
	hex := func(i int) rune {
		if i+4 > len(b) {
			return -1
		}
		r, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(r)
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		r := hex(i + 1)
		i += 4
		switch {
		case 0xD800 <= r && r < 0xDC00:
			if i+2 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if lo := hex(i + 3); 0xDC00 <= lo && lo < 0xE000 {
					i += 6
					continue
				}
			}
			return "a lone high surrogate escape"
		case 0xDC00 <= r && r < 0xE000:
			return "a lone low surrogate escape"
		}
	}
	return ""
}

// recordBindings' record(**kw) returns kw and keeps the arguments as the
// host received them.
type recordBindings struct {
	mu   sync.Mutex
	args json.RawMessage
}

func (b *recordBindings) List() []sandbox.Binding { return []sandbox.Binding{{Name: "record"}} }
func (b *recordBindings) Call(_ context.Context, _ string, args json.RawMessage) (json.RawMessage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.args = append(json.RawMessage(nil), args...)
	return args, nil
}

func (b *recordBindings) last() json.RawMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.args
}

// blockBindings' block() waits until its context ends and says whether it
// did; echo(**kw) returns kw, sleep(seconds) sleeps on the host.
type blockBindings struct {
	mu        sync.Mutex
	entered   int
	cancelled int
}

func (b *blockBindings) List() []sandbox.Binding {
	return append([]sandbox.Binding{{Name: "block"}}, demotools.Bindings{}.List()...)
}

func (b *blockBindings) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	if name != "block" {
		return demotools.Bindings{}.Call(ctx, name, args)
	}
	b.mu.Lock()
	b.entered++
	b.mu.Unlock()
	select {
	case <-ctx.Done():
		b.mu.Lock()
		b.cancelled++
		b.mu.Unlock()
		return nil, ctx.Err()
	case <-time.After(10 * time.Minute):
		return json.RawMessage(`"not cancelled"`), nil
	}
}

func (b *blockBindings) counts() (entered, cancelled int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.entered, b.cancelled
}

// bindingInSignalHandler: a binding called from a signal handler works
// when no call is in flight, and while one is, it fails at once with a
// RuntimeError that says so; neither hangs, and the call in flight
// completes.
func (s *suite) bindingInSignalHandler(t *testing.T) {
	code := `import signal, time
out = []
def handler(signum, frame):
    try:
        out.append(echo(n=len(out)))
    except RuntimeError as e:
        out.append(['RuntimeError', str(e)])
signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.05)
time.sleep(1)
signal.setitimer(signal.ITIMER_REAL, 0.3)
out.append(sleep(2))
out`
	res := s.run(t, code, sandbox.Limits{WallSeconds: 30}, demotools.Bindings{})
	wantSuccess(t, res)
	var got []any
	if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 3 {
		t.Fatalf("value %s, want three entries", res.Value)
	}
	if !reflect.DeepEqual(got[0], map[string]any{"n": 0.0}) || got[2] != 2.0 {
		t.Errorf("value %s: want the handler's call to work outside a call, and the call it interrupted to complete", res.Value)
	}
	if e, ok := got[1].([]any); !ok || len(e) != 2 || e[0] != "RuntimeError" || !strings.Contains(e[1].(string), "in flight") {
		t.Errorf("the handler's call during a call came back as %v, want a RuntimeError saying a call is in flight", got[1])
	}
	if res.Duration > s.scaled(20*time.Second) {
		t.Errorf("the run took %v", res.Duration)
	}
}

// resultWhileCallPending: a program that finishes while a thread of it
// waits in a binding call has its result back at once; the host cancels
// the call's context. A non-daemon thread then gets a BindingError and
// ends, so the interpreter exits too.
func (s *suite) resultWhileCallPending(t *testing.T) {
	sb := s.b.New(t, Options{})
	for _, daemon := range []string{"True", "False"} {
		b := &blockBindings{}
		code := "import threading, time\nout = []\n" +
			"def bg():\n    try:\n        block()\n    except BindingError as e:\n        out.append(str(e))\n" +
			"threading.Thread(target=bg, daemon=" + daemon + ").start()\ntime.sleep(1)\n'done'"
		res := s.runWith(t, sb, code, sandbox.Limits{WallSeconds: 60}, b)
		wantSuccess(t, res)
		if got := mustJSON(t, res.Value); got != "done" {
			t.Errorf("daemon=%s: value %#v", daemon, got)
		}
		if entered, cancelled := b.counts(); entered != 1 || cancelled != 1 {
			t.Errorf("daemon=%s: the call was entered %d times and cancelled %d times; want 1 and 1", daemon, entered, cancelled)
		}
		if res.Duration > s.scaled(20*time.Second) {
			t.Errorf("daemon=%s: the run took %v: the pending call held the result back", daemon, res.Duration)
		}
	}
}

// interruptedCall: a signal handler that raises during a binding call
// interrupts it with the handler's exception, whatever its class (an
// OSError such as TimeoutError too); the program catches it and goes on.
// Its result comes back whether it finishes at once, while the host still
// serves the interrupted call, or calls a binding again first, which works.
func (s *suite) interruptedCall(t *testing.T) {
	sb := s.b.New(t, Options{})
	for _, exc := range []string{"TimeoutError", "Alarm"} {
		head := "import signal\nclass Alarm(Exception):\n    pass\ndef handler(signum, frame):\n    raise " + exc + "('alarm')\n" +
			"signal.signal(signal.SIGALRM, handler)\nsignal.setitimer(signal.ITIMER_REAL, 0.2)\n" +
			"try:\n    r = sleep(3)\nexcept " + exc + " as e:\n    r = 'interrupted: %s' % e\n"
		for i := 0; i < 3; i++ {
			res := s.runWith(t, sb, head+"r", sandbox.Limits{WallSeconds: 60}, demotools.Bindings{})
			wantSuccess(t, res)
			if got := mustJSON(t, res.Value); got != "interrupted: alarm" {
				t.Fatalf("%s, run %d: value %#v", exc, i, got)
			}
		}
		res := s.runWith(t, sb, head+"[r, echo(x=2), sleep(0.01)]", sandbox.Limits{WallSeconds: 60}, demotools.Bindings{})
		wantSuccess(t, res)
		if got := mustJSON(t, res.Value); !reflect.DeepEqual(got, []any{"interrupted: alarm", map[string]any{"x": 2.0}, 0.01}) {
			t.Fatalf("%s: value %#v: want the calls after the interrupted one to work", exc, got)
		}
	}
}
