package bootstrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/bootstrap"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/wire"
)

// python is the interpreter under test (testutil.RequirePython).
func python(t *testing.T) string {
	t.Helper()
	return testutil.RequirePython(t)
}

// program is one execution: the code, what the host declares and how it
// answers calls (nil: any call fails the test).
type program struct {
	code     string
	bindings []sandbox.Binding
	maxFrame int
	serve    func(*wire.Call) *wire.Reply
	figures  string // the start frame's figures directory
}

// outcome is everything the host saw.
type outcome struct {
	result   *wire.Result
	exit     *wire.Exit
	calls    []*wire.Call
	exitCode int
	stdout   string
	stderr   string
}

func echoReply(c *wire.Call) *wire.Reply { return &wire.Reply{ID: c.ID, Value: c.Args} }

var echoBinding = []sandbox.Binding{{Name: "echo", Params: []string{"a", "b"}, Doc: "Echo the arguments."}}

// socketpair returns the host end (non-blocking, so deadlines work) and the
// child end (blocking, for the interpreter), both close-on-exec.
func socketpair(t *testing.T) (hostEnd, childEnd *os.File) {
	t.Helper()
	fds, err := streamPair()
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatalf("set nonblock: %v", err)
	}
	hostEnd = os.NewFile(uintptr(fds[0]), "host")
	childEnd = os.NewFile(uintptr(fds[1]), "child")
	t.Cleanup(func() { hostEnd.Close() })
	return hostEnd, childEnd
}

// child is a started interpreter.
type child struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func startChild(t *testing.T, args []string, extra *os.File) *child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	c := &child{cmd: exec.CommandContext(ctx, python(t), args...)}
	c.cmd.Stdin = nil // /dev/null
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	c.cmd.WaitDelay = 5 * time.Second
	if extra != nil {
		c.cmd.ExtraFiles = []*os.File{extra} // fd 3
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start interpreter: %v", err)
	}
	if extra != nil {
		extra.Close()
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	return c
}

func (c *child) wait(t *testing.T, o *outcome) {
	t.Helper()
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait: %v", err)
	}
	o.exitCode = c.cmd.ProcessState.ExitCode()
	o.stdout, o.stderr = c.stdout.String(), c.stderr.String()
}

// converse plays the host: sends start, answers calls, and reads until EOF,
// failing on anything but calls and exactly one result.
func converse(t *testing.T, rw io.ReadWriter, p program) *outcome {
	t.Helper()
	if d, ok := rw.(interface{ SetDeadline(time.Time) error }); ok {
		d.SetDeadline(time.Now().Add(60 * time.Second))
	}
	enc, dec := wire.NewEncoder(rw, p.maxFrame), wire.NewDecoder(rw, p.maxFrame)
	start := &wire.Start{V: wire.Version, Code: p.code, Bindings: p.bindings, MaxFrame: p.maxFrame, Figures: p.figures}
	if err := enc.Encode(start); err != nil {
		t.Fatalf("send start: %v", err)
	}
	o := &outcome{}
	for {
		m, ok := nextFrame(t, dec)
		if !ok {
			return o
		}
		switch m := m.(type) {
		case *wire.Call:
			if o.result != nil {
				t.Fatalf("call frame after the result: %+v", m)
			}
			if p.serve == nil {
				t.Fatalf("unexpected call %s(%s)", m.Name, m.Args)
			}
			o.calls = append(o.calls, m)
			if err := enc.Encode(p.serve(m)); err != nil {
				t.Fatalf("send reply: %v", err)
			}
		case *wire.Result:
			if o.result != nil {
				t.Fatalf("second result frame: %+v", m)
			}
			o.result = m
		case *wire.Exit:
			if o.result == nil || o.exit != nil {
				t.Fatalf("exit frame %+v not right after the one result", m)
			}
			o.exit = m
		default:
			t.Fatalf("unexpected frame %T", m)
		}
	}
}

// nextFrame reads the next frame, false at the channel's end; anything else
// that is not a frame fails tb.
func nextFrame(tb testing.TB, dec *wire.Decoder) (any, bool) {
	tb.Helper()
	m, err := dec.Next()
	if errors.Is(err, io.EOF) {
		return nil, false
	}
	if err != nil {
		tb.Fatalf("read frame: %v", err)
	}
	return m, true
}

// launcher is the precompiled bootstrap, as the backends run it.
var launcher struct {
	once sync.Once
	l    *bootstrap.Launcher
	err  error
}

// launchArgs are the interpreter arguments for fd 3: the precompiled
// bootstrap the backends use (TestSourceArgs covers the plain source).
func launchArgs(t *testing.T) []string {
	t.Helper()
	launcher.once.Do(func() { launcher.l, launcher.err = bootstrap.Prepare(python(t)) })
	if launcher.err != nil {
		t.Fatalf("Prepare: %v", launcher.err)
	}
	return launcher.l.Args(3)
}

func run(t *testing.T, p program) *outcome {
	t.Helper()
	return runArgs(t, launchArgs(t), p)
}

func runArgs(t *testing.T, args []string, p program) *outcome {
	t.Helper()
	hostEnd, childEnd := socketpair(t)
	c := startChild(t, args, childEnd)
	o := converse(t, hostEnd, p)
	c.wait(t, o)
	if o.result == nil {
		t.Fatalf("no result frame; exit %d, stderr:\n%s", o.exitCode, o.stderr)
	}
	// The exit frame's word is the kernel's, where the process did not end
	// otherwise (os._exit in a handler, a signal).
	if o.exit != nil && o.exit.Code != o.exitCode {
		t.Errorf("the exit frame says %d; the interpreter exited %d", o.exit.Code, o.exitCode)
	}
	return o
}

// mustSucceed runs p and checks it succeeded with status 0.
func mustSucceed(t *testing.T, p program) *outcome {
	t.Helper()
	o := run(t, p)
	if f := o.result.Failure; f != nil {
		t.Fatalf("failure %s: %s\n%s\nstderr:\n%s", f.Type, f.Message, f.Traceback, o.stderr)
	}
	if o.exitCode != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", o.exitCode, o.stderr)
	}
	return o
}

// mustFail runs p and checks it failed with the exception type and status.
func mustFail(t *testing.T, p program, typ string, exit int) *wire.Failure {
	t.Helper()
	o := run(t, p)
	f := o.result.Failure
	if f == nil {
		t.Fatalf("succeeded with %s, want a %s failure", o.result.Value, typ)
	}
	if f.Type != typ {
		t.Fatalf("failure %s (%s), want %s\n%s", f.Type, f.Message, typ, f.Traceback)
	}
	if o.result.Value != nil {
		t.Errorf("failure carries a value: %s", o.result.Value)
	}
	if o.exitCode != exit {
		t.Errorf("exit %d, want %d; stderr:\n%s", o.exitCode, exit, o.stderr)
	}
	return f
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if got == nil {
		got = json.RawMessage("null")
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("value %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("value %s, want %s", got, want)
	}
}

func TestSourceFitsOneArgument(t *testing.T) {
	// MAX_ARG_STRLEN: the kernel refuses a single argv string over 128 KiB.
	if n := len(bootstrap.Source); n == 0 || n >= 128<<10 {
		t.Fatalf("Source is %d bytes", n)
	}
	args := bootstrap.Args(7)
	want := []string{"-I", "-B", "-c", bootstrap.Source, "--fd", "7"}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("Args(7) = %q", args[4:])
	}
	if got := bootstrap.SocketArgs("/run/w.sock"); got[4] != "--socket" || got[5] != "/run/w.sock" {
		t.Errorf("SocketArgs = %q", got[4:])
	}
}

func TestValues(t *testing.T) {
	cases := []struct{ name, code, want string }{
		{"int", "x = 40\nx + 2", `42`},
		{"none", "None", `null`},
		{"no expression", "x = 1", `null`},
		{"nested", `{"a": [1, 2.5, {"b": None, "c": True}], "d": "é"}`, `{"a":[1,2.5,{"b":null,"c":true}],"d":"é"}`},
		{"tuple", `(1, "a", (2, [3]))`, `[1,"a",[2,[3]]]`},
		{"namedtuple", "import collections\nP = collections.namedtuple('P', 'x y')\nP(1, 2)", `[1,2]`},
		{"intenum", "import enum\nclass E(enum.IntEnum):\n    A = 7\n[E.A, {E.A: 1}]", `[7,{"7":1}]`},
		{"non-json", "class C:\n    def __repr__(self):\n        return 'C!'\n[C(), {1, 2}]", `["C!","{1, 2}"]`},
		{"bad repr", "class C:\n    def __repr__(self):\n        raise ValueError\nC()", `"<unrepresentable C>"`},
		{"nan", `[float("nan"), float("inf"), -float("inf"), 0.5]`, `["nan","inf","-inf",0.5]`},
		{"tuple keys", `{(1, 2): 3}`, `"{(1, 2): 3}"`},
		{"scalar keys", `{1: "a", None: "b", False: "c", 1.5: "d"}`, `{"1":"a","null":"b","false":"c","1.5":"d"}`},
		{"colliding keys", `{1: "a", "1": "b"}`, `"{1: 'a', '1': 'b'}"`},
		{"cycle", "x = [1]\nx.append(x)\nx", `[1,"[1, [...]]"]`},
		{"deep", "x = 0\nfor _ in range(150):\n    x = [x]\nx", ""},
		// A subclass's own __iter__ is never run: its contents are the
		// base type's, and one element that cannot be converted is its
		// own fallback, not its siblings'.
		{"raising iter", "class L(list):\n    def __iter__(self):\n        raise RuntimeError('no')\nclass T(tuple):\n    def __iter__(self):\n        raise RuntimeError('no')\n[L([1, 2]), T((3, 4)), 'sibling']", `[[1,2],[3,4],"sibling"]`},
		{"lying iter", "class L(list):\n    def __iter__(self):\n        return iter(['lie'])\nL([1, 2])", `[1,2]`},
		{"bad element", "class B:\n    __class__ = property(lambda self: 1/0)\n    def __repr__(self):\n        return 'B!'\n[1, B(), 'sibling']", `[1,"B!","sibling"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := mustSucceed(t, program{code: c.code})
			if c.name == "deep" {
				// 100 levels of arrays, then the repr of the rest.
				s := string(o.result.Value)
				if !strings.HasPrefix(s, strings.Repeat("[", 100)+`"[[`) {
					t.Errorf("deep value %.200s", s)
				}
				return
			}
			jsonEqual(t, o.result.Value, c.want)
		})
	}
}

func TestTracebackLineAndSource(t *testing.T) {
	f := mustFail(t, program{code: "x = 1\ny = 2\n1/0"}, "ZeroDivisionError", 1)
	if f.Message != "division by zero" {
		t.Errorf("message %q", f.Message)
	}
	tb := f.Traceback
	if !strings.HasPrefix(tb, "Traceback (most recent call last):\n  File \"<program>\", line 3, in <module>\n    1/0\n") {
		t.Errorf("traceback:\n%s", tb)
	}
	if !strings.HasSuffix(tb, "ZeroDivisionError: division by zero\n") {
		t.Errorf("traceback:\n%s", tb)
	}
	if strings.Count(tb, "File ") != 1 || strings.Contains(tb, "bootstrap") || strings.Contains(tb, "<string>") {
		t.Errorf("traceback has foreign frames:\n%s", tb)
	}
}

// TestTracebackMatchesPython compares the failure's traceback and the exit
// status with what `python prog.py` prints and returns.
func TestTracebackMatchesPython(t *testing.T) {
	programs := map[string]string{
		"zero":        "x = 1\ny = 2\n1/0\n",
		"chained":     "def f():\n    try:\n        {}['k']\n    except KeyError as e:\n        raise ValueError('bad') from e\nf()\n",
		"context":     "try:\n    1/0\nexcept ZeroDivisionError:\n    undefined_name\n",
		"exec":        "exec('def g():\\n    raise RuntimeError(\"in exec\")\\ng()')\n",
		"last":        "import os\nos.listdir('/nonexistent-dir')",
		"library":     "import json\njson.loads('{')\n",
		"syntax":      "x = 1\ny = (\n",
		"indent":      "if True:\nprint(1)\n",
		"compile":     "x = 1\nreturn x\n",
		"nested":      "def a():\n    b()\ndef b():\n    raise KeyError('k')\na()\n",
		"unicode":     "s = 'é'\nraise ValueError(s * 3)\n",
		"no final":    "raise RuntimeError('x')",
		"bom":         "\ufeffx = 1\nraise ValueError(x)\n",
		"bom value":   "\ufeff1/0",
		"crlf":        "a = 1\r\nb = 0\r\nc = a / b\r\n",
		"crlf call":   "def f(x):\r\n    return x[\r\n        'k']\r\nf({})\r\n",
		"cr":          "a = 1\rb = 0\rc = a / b\r",
		"crlf syntax": "x = 1\r\ny = 1 +\r\nz = 2\r\n",
		"form feed":   "x = 1\n\f\ny = 0\nx / y\n",
	}
	dir := t.TempDir()
	for name, code := range programs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".py")
			if err := os.WriteFile(path, []byte(code), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(python(t), "-I", "-B", path)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("python %s: %v", name, err)
			}
			want := strings.ReplaceAll(stderr.String(), path, "<program>")
			if name == "syntax" && oldTokenizer(t) {
				// 3.8 and 3.9 read a file through another tokenizer than
				// a string: at the end of the input it names the line
				// after the last, blank. psych reports what compile()
				// says (the last line, with its text), as 3.10 on do for
				// both.
				want = compiledSyntaxError(t, path)
			}
			o := run(t, program{code: code})
			if o.result.Failure == nil {
				t.Fatalf("succeeded, python said:\n%s", want)
			}
			got := o.result.Failure.Traceback
			if strings.HasPrefix(name, "bom") {
				// python prog.py's C printer quotes line 1 with its mark
				// (and so gives up on the span); its reader, and psych,
				// drop the mark.
				want = strings.ReplaceAll(want, "\ufeff", "")
				got, want = dropCarets(got), dropCarets(want)
			}
			if name == "indent" {
				// Python 3.11's C printer draws one caret for an
				// IndentationError where the traceback module draws the
				// exception's whole span; accept either.
				got, want = dropCarets(got), dropCarets(want)
			}
			if got != want {
				t.Errorf("traceback:\n%s\npython prog.py:\n%s", got, want)
			}
			if o.exitCode != ee.ExitCode() {
				t.Errorf("exit %d, python %d", o.exitCode, ee.ExitCode())
			}
		})
	}
}

func TestStdoutBeforeFailureKept(t *testing.T) {
	// stdout goes to a pipe we read as soon as the result frame arrives: the
	// bootstrap flushes before it reports, while a non-daemon thread keeps
	// the interpreter (and its exit-time flush) a second away.
	code := `import sys, threading, time
threading.Thread(target=time.sleep, args=(1,)).start()
print('hello')
sys.stderr.write('warn\n')
raise ValueError('boom')`
	hostEnd, childEnd := socketpair(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(python(t), bootstrap.Args(3)...)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = pw, &stderr, []*os.File{childEnd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	childEnd.Close()
	defer cmd.Wait()
	defer cmd.Process.Kill()

	hostEnd.SetDeadline(time.Now().Add(30 * time.Second))
	wire.NewEncoder(hostEnd, 0).Encode(&wire.Start{V: wire.Version, Code: code})
	m, err := wire.NewDecoder(hostEnd, 0).Next()
	if err != nil {
		t.Fatalf("read result: %v", err)
	}
	r, ok := m.(*wire.Result)
	if !ok || r.Failure == nil || r.Failure.Type != "ValueError" || r.Failure.Message != "boom" {
		t.Fatalf("frame %+v", m)
	}
	pr.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 100)
	n, err := pr.Read(buf)
	if string(buf[:n]) != "hello\n" {
		t.Errorf("stdout at the result: %q (%v)", buf[:n], err)
	}
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("exit: %v", err)
	}
	// The traceback is in the failure, not repeated on stderr.
	if stderr.String() != "warn\n" {
		t.Errorf("stderr %q", stderr.String())
	}
}

func TestSyntaxErrorIsData(t *testing.T) {
	f := mustFail(t, program{code: "x = 1\ny = (\n"}, "SyntaxError", 1)
	// Where the caret stands differs between Pythons (under the "(" from
	// 3.10 on, after it before).
	if !strings.Contains(dropCarets(f.Traceback), "File \"<program>\", line 2\n    y = (\nSyntaxError: ") || !strings.Contains(f.Traceback, "^") {
		t.Errorf("traceback:\n%s", f.Traceback)
	}
	if strings.Contains(f.Traceback, "Traceback (most recent call last)") {
		t.Errorf("a SyntaxError has no frames to show:\n%s", f.Traceback)
	}
}

func TestSystemExit(t *testing.T) {
	cases := []struct {
		code, message, stderr string
		exit                  int
	}{
		{"import sys\nsys.exit(3)", "3", "", 3},
		{"import sys\nsys.exit(None)", "None", "", 0},
		{"import sys\nsys.exit(256 + 4)", "260", "", 4},
		{"import sys\nsys.exit('bye')", "bye", "bye\n", 1},
		{"raise SystemExit", "None", "", 0},
	}
	for _, c := range cases {
		t.Run(c.message, func(t *testing.T) {
			o := run(t, program{code: c.code})
			f := o.result.Failure
			if f == nil || f.Type != "SystemExit" || f.Message != c.message {
				t.Fatalf("failure %+v", f)
			}
			if o.exitCode != c.exit || o.stderr != c.stderr {
				t.Errorf("exit %d stderr %q, want %d %q", o.exitCode, o.stderr, c.exit, c.stderr)
			}
		})
	}
}

func TestKeyboardInterruptCaught(t *testing.T) {
	f := mustFail(t, program{code: "x = 1\nraise KeyboardInterrupt"}, "KeyboardInterrupt", 1)
	if !strings.Contains(f.Traceback, "line 2, in <module>") {
		t.Errorf("traceback:\n%s", f.Traceback)
	}
}

func TestOSErrorErrno(t *testing.T) {
	f := mustFail(t, program{code: "open('/nonexistent')"}, "FileNotFoundError", 1)
	if f.Errno != 2 {
		t.Errorf("errno %d, want 2", f.Errno)
	}
	if g := mustFail(t, program{code: "raise OSError('no errno')"}, "OSError", 1); g.Errno != 0 {
		t.Errorf("errno %d for an OSError without one", g.Errno)
	}
}

func TestFileSizeLimitIsEFBIG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	code := fmt.Sprintf(`import resource
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
with open(%q, "wb", buffering=0) as f:
    f.write(b"x" * 1000)
    f.write(b"x")
`, path)
	if f := mustFail(t, program{code: code}, "OSError", 1); f.Errno != int(unix.EFBIG) {
		t.Errorf("errno %d, want EFBIG", f.Errno)
	}
}

func TestBindingMapsArguments(t *testing.T) {
	code := `import inspect
errs = []
for f in (lambda: echo(1, 2, 3), lambda: echo(1, a=2), lambda: echo(object()), lambda: echo(float("nan"))):
    try:
        f()
        errs.append("no error")
    except TypeError as e:
        errs.append(str(e))
r = echo(1, b=[2, (3,)], c="x")
[r, echo(b="only"), echo(), echo.__name__, echo.__doc__, str(inspect.signature(echo)), errs]`
	o := mustSucceed(t, program{code: code, bindings: echoBinding, serve: echoReply})
	var v []json.RawMessage
	if err := json.Unmarshal(o.result.Value, &v); err != nil || len(v) != 7 {
		t.Fatalf("value %s", o.result.Value)
	}
	jsonEqual(t, v[0], `{"a":1,"b":[2,[3]],"c":"x"}`)
	jsonEqual(t, v[1], `{"b":"only"}`)
	jsonEqual(t, v[2], `{}`)
	jsonEqual(t, v[3], `"echo"`)
	jsonEqual(t, v[4], `"Echo the arguments."`)
	jsonEqual(t, v[5], `"(a, b, **kwargs)"`)
	var errs []string
	json.Unmarshal(v[6], &errs)
	for i, e := range errs {
		if !strings.Contains(e, "echo()") {
			t.Errorf("TypeError %d does not name the binding: %q", i, e)
		}
	}
	if len(errs) != 4 || !strings.Contains(errs[0], "takes 2 positional arguments but 3 were given") ||
		!strings.Contains(errs[1], "multiple values for argument 'a'") {
		t.Errorf("TypeErrors %q", errs)
	}
	if len(o.calls) != 3 {
		t.Fatalf("%d calls, want 3 (bad calls must send nothing)", len(o.calls))
	}
	for i, c := range o.calls {
		if c.Name != "echo" || c.ID != uint64(i+1) {
			t.Errorf("call %d: %s id %d", i, c.Name, c.ID)
		}
	}
}

func TestBindingHostError(t *testing.T) {
	deny := func(c *wire.Call) *wire.Reply {
		return &wire.Reply{ID: c.ID, Error: &wire.ReplyError{Type: "PermissionDenied", Message: "nope"}}
	}
	o := mustSucceed(t, program{
		code:     "try:\n    echo(1)\nexcept BindingError as e:\n    r = [str(e), e.type, type(e).__name__]\nr",
		bindings: echoBinding, serve: deny,
	})
	jsonEqual(t, o.result.Value, `["nope","PermissionDenied","BindingError"]`)

	f := mustFail(t, program{code: "x = 0\necho(1)", bindings: echoBinding, serve: deny}, "BindingError", 1)
	if f.Message != "nope" {
		t.Errorf("message %q", f.Message)
	}
	// Python 3.13 marks the call's span (~~~~^^^) where 3.11 draws none.
	want := "Traceback (most recent call last):\n  File \"<program>\", line 2, in <module>\n    echo(1)\nBindingError: nope\n"
	if dropCarets(f.Traceback) != want {
		t.Errorf("traceback:\n%s\nwant:\n%s", f.Traceback, want)
	}
}

// TestUnprintableFailure: an exception whose message cannot be had (its
// __str__ raises, or returns no str) fails the run with a stand-in message.
func TestUnprintableFailure(t *testing.T) {
	for name, str := range map[string]string{"raises": "raise ValueError", "not a str": "return 1"} {
		t.Run(name, func(t *testing.T) {
			f := mustFail(t, program{code: "class E(Exception):\n    def __str__(self):\n        " + str + "\nraise E()"}, "E", 1)
			if f.Message != "<unprintable E>" {
				t.Errorf("message %q", f.Message)
			}
		})
	}
}

func TestGlobalsHoldOnlyBindings(t *testing.T) {
	o := mustSucceed(t, program{code: "sorted(globals())", bindings: echoBinding})
	jsonEqual(t, o.result.Value,
		`["BindingError","__builtins__","__doc__","__loader__","__name__","__package__","__spec__","echo"]`)
	f := mustFail(t, program{code: "search('x')", bindings: echoBinding}, "NameError", 1)
	if !strings.Contains(f.Message, "'search'") {
		t.Errorf("message %q", f.Message)
	}
	o = mustSucceed(t, program{code: "import sys\n[__name__, sys.argv, sys.modules['__main__'].echo is echo]", bindings: echoBinding})
	jsonEqual(t, o.result.Value, `["__main__",["<program>"],true]`)
}

func TestThousandCalls(t *testing.T) {
	plus := func(c *wire.Call) *wire.Reply {
		var a struct{ A int }
		json.Unmarshal(c.Args, &a)
		return &wire.Reply{ID: c.ID, Value: json.RawMessage(fmt.Sprint(a.A + 1))}
	}
	o := mustSucceed(t, program{
		code:     "s = 0\nfor i in range(1000):\n    s += echo(i)\ns",
		bindings: echoBinding, serve: plus,
	})
	jsonEqual(t, o.result.Value, `500500`)
	if len(o.calls) != 1000 {
		t.Errorf("%d calls", len(o.calls))
	}
}

func TestConcurrentCalls(t *testing.T) {
	code := `import threading
bad = []
def worker(t):
    for i in range(50):
        r = echo(t, i)
        if r != {"a": t, "b": i}:
            bad.append((t, i, r))
ts = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
for x in ts: x.start()
for x in ts: x.join()
[len(bad), bad[:3]]`
	o := mustSucceed(t, program{code: code, bindings: echoBinding, serve: echoReply})
	jsonEqual(t, o.result.Value, `[0, []]`)
	if len(o.calls) != 400 {
		t.Errorf("%d calls, want 400", len(o.calls))
	}
	for i := 1; i < len(o.calls); i++ {
		if o.calls[i].ID <= o.calls[i-1].ID {
			t.Fatalf("call ids not increasing: %d after %d", o.calls[i].ID, o.calls[i-1].ID)
		}
	}
}

func TestForkedChildGetsBindingError(t *testing.T) {
	code := `import os
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    try:
        echo(1)
        msg = "called"
    except BindingError as e:
        msg = str(e)
    os.write(w, msg.encode())
    os._exit(0)
os.close(w)
out = os.read(r, 1000).decode()
os.waitpid(pid, 0)
out`
	o := mustSucceed(t, program{code: code, bindings: echoBinding, serve: echoReply})
	jsonEqual(t, o.result.Value, `"bindings are not available in a forked child process"`)
	if len(o.calls) != 0 {
		t.Errorf("the forked child reached the host: %d calls", len(o.calls))
	}
}

func TestForkedChildFallsThrough(t *testing.T) {
	// The child runs off the end of the program: it must exit with its own
	// status and send no second result (converse fails on one).
	code := `import os, sys
pid = os.fork()
if pid == 0:
    print("child out", flush=True)
    sys.exit(7)
_, status = os.waitpid(pid, 0)
os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1`
	o := mustSucceed(t, program{code: code})
	jsonEqual(t, o.result.Value, `7`)
	if o.stdout != "child out\n" {
		t.Errorf("stdout %q", o.stdout)
	}
}

func TestMultiprocessingPool(t *testing.T) {
	code := "from multiprocessing import Pool\ndef sq(x): return x*x\nwith Pool(2) as p: r = p.map(sq, range(5))\nr"
	o := mustSucceed(t, program{code: code})
	jsonEqual(t, o.result.Value, `[0,1,4,9,16]`)
}

func TestValueTooLarge(t *testing.T) {
	// converse's decoder has the same cap: a bigger frame fails the test.
	f := mustFail(t, program{code: `"x" * 10000`, maxFrame: 4096}, "ValueTooLarge", 0)
	if !strings.Contains(f.Message, "the frame cap is 4096") {
		t.Errorf("message %q", f.Message)
	}
	// An oversized failure is clipped, not dropped.
	f = mustFail(t, program{code: `raise ValueError("y" * 10000)`, maxFrame: 4096}, "ValueError", 1)
	if !strings.HasPrefix(f.Message, "yyy") || !strings.HasSuffix(f.Message, "[truncated]") {
		t.Errorf("message %.50q…", f.Message)
	}
	// A call over the cap is refused in the child, nothing sent.
	o := mustSucceed(t, program{
		code:     "try:\n    echo('z' * 10000)\nexcept BindingError as e:\n    r = str(e)\nr",
		bindings: echoBinding, serve: echoReply, maxFrame: 4096,
	})
	if !strings.Contains(string(o.result.Value), "the frame cap is 4096") || len(o.calls) != 0 {
		t.Errorf("value %s, %d calls", o.result.Value, len(o.calls))
	}
}

func TestChannelFailureIsBindingError(t *testing.T) {
	// The host answers with a reply for another id: the call fails, the
	// program goes on, and later calls fail fast.
	wrong := func(c *wire.Call) *wire.Reply { return &wire.Reply{ID: c.ID + 100} }
	code := "out = []\nfor _ in range(2):\n    try:\n        echo(1)\n    except BindingError as e:\n        out.append(str(e))\nout"
	o := mustSucceed(t, program{code: code, bindings: echoBinding, serve: wrong})
	var out []string
	if err := json.Unmarshal(o.result.Value, &out); err != nil || len(out) != 2 {
		t.Fatalf("value %s", o.result.Value)
	}
	if !strings.Contains(out[0], "expected the reply to call 1") || !strings.Contains(out[1], "broken") {
		t.Errorf("errors %q", out)
	}
	if len(o.calls) != 1 {
		t.Errorf("%d calls, want 1", len(o.calls))
	}
}

func TestBadStartExits125(t *testing.T) {
	cases := map[string]func(io.Writer) error{
		"reply first": func(w io.Writer) error { return wire.NewEncoder(w, 0).Encode(&wire.Reply{ID: 1}) },
		"garbage":     func(w io.Writer) error { _, err := w.Write([]byte("\x00\x00\x00\x05hello")); return err },
		"eof":         func(io.Writer) error { return nil },
		"not start": func(w io.Writer) error {
			_, err := w.Write([]byte("\x00\x00\x00\x26" + `{"type":"result","v":1,"code":"1"}    `))
			return err
		},
		"version 2": func(w io.Writer) error { return wire.NewEncoder(w, 0).Encode(&wire.Start{V: 2, Code: "1"}) },
		"bad binding": func(w io.Writer) error {
			return wire.NewEncoder(w, 0).Encode(&wire.Start{V: 1, Code: "1", Bindings: []sandbox.Binding{{Name: "BindingError"}}})
		},
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			hostEnd, childEnd := socketpair(t)
			c := startChild(t, bootstrap.Args(3), childEnd)
			if err := send(hostEnd); err != nil {
				t.Fatal(err)
			}
			unix.Shutdown(int(hostEnd.Fd()), unix.SHUT_WR)
			rest, _ := io.ReadAll(hostEnd)
			o := &outcome{}
			c.wait(t, o)
			if o.exitCode != bootstrap.ExitBootstrap || !strings.Contains(o.stderr, "psych bootstrap:") {
				t.Errorf("exit %d, stderr %q", o.exitCode, o.stderr)
			}
			if len(rest) != 0 {
				t.Errorf("the bootstrap wrote %q", rest)
			}
		})
	}
	t.Run("no channel", func(t *testing.T) {
		c := startChild(t, bootstrap.Args(9), nil)
		o := &outcome{}
		c.wait(t, o)
		if o.exitCode != bootstrap.ExitBootstrap {
			t.Errorf("exit %d, stderr %q", o.exitCode, o.stderr)
		}
	})
}

func TestChannelNotInherited(t *testing.T) {
	code := "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'import os; os.fstat(3)'], close_fds=False).returncode"
	o := mustSucceed(t, program{code: code})
	jsonEqual(t, o.result.Value, `1`) // fstat(3) failed in the grandchild
}

func TestSocketArgs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wire.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := startChild(t, bootstrap.SocketArgs(path), nil)
	l.(*net.UnixListener).SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := l.Accept()
	if err != nil {
		t.Fatalf("accept: %v; stderr %q", err, c.stderr.String())
	}
	defer conn.Close()
	o := converse(t, conn, program{code: "echo(2, b=3)", bindings: echoBinding, serve: echoReply})
	c.wait(t, o)
	if o.result == nil || o.result.Failure != nil || o.exitCode != 0 {
		t.Fatalf("result %+v exit %d stderr %q", o.result, o.exitCode, o.stderr)
	}
	jsonEqual(t, o.result.Value, `{"a":2,"b":3}`)
}

// oldTokenizer reports whether the interpreter is 3.8 or 3.9.
func oldTokenizer(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command(python(t), "-I", "-c", "import sys; print(sys.version_info[:2] < (3, 10))").Output()
	if err != nil {
		t.Fatalf("python version: %v", err)
	}
	return strings.TrimSpace(string(out)) == "True"
}

// compiledSyntaxError is the SyntaxError of compiling the file at path
// as "<program>", formatted as Python prints it.
func compiledSyntaxError(t *testing.T, path string) string {
	t.Helper()
	script := "import sys, traceback\n" +
		"try:\n compile(open(sys.argv[1], 'rb').read(), '<program>', 'exec')\n" +
		"except SyntaxError as e:\n sys.stdout.write(''.join(traceback.format_exception_only(type(e), e)))\n"
	out, err := exec.Command(python(t), "-I", "-c", script, path).Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("compile %s: %v (%q)", path, err, out)
	}
	return string(out)
}

// dropCarets drops the lines that only mark a span (^ and ~), whose
// drawing differs between Python versions.
func dropCarets(s string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	for _, l := range lines {
		if strings.Trim(l, " ^~") != "" || !strings.Contains(l, "^") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSourceArgs runs the plain-source form (no Prepare) on programs that
// exercise values, tracebacks and bindings.
func TestSourceArgs(t *testing.T) {
	o := runArgs(t, bootstrap.Args(3), program{code: "x = 1\n1/0"})
	if f := o.result.Failure; f == nil || !strings.Contains(f.Traceback, "line 2") || !strings.Contains(f.Traceback, "    1/0") {
		t.Fatalf("failure %+v", o.result.Failure)
	}
	o = runArgs(t, bootstrap.Args(3), program{code: "(1, 2)"})
	jsonEqual(t, o.result.Value, "[1, 2]")
}

// TestPreparedMatchesSource checks that both forms give the same traceback.
func TestPreparedMatchesSource(t *testing.T) {
	code := "def f():\n    raise KeyError('k')\nf()"
	a := runArgs(t, bootstrap.Args(3), program{code: code})
	b := run(t, program{code: code})
	if a.result.Failure == nil || b.result.Failure == nil || a.result.Failure.Traceback != b.result.Failure.Traceback {
		t.Fatalf("source %+v\nprepared %+v", a.result.Failure, b.result.Failure)
	}
}

// TestProgramTracebackQuotesSource: the program's own use of traceback and
// warnings finds its source lines, though the bootstrap imports linecache
// only lazily.
func TestProgramTracebackQuotesSource(t *testing.T) {
	code := "import traceback, warnings, sys\ntry:\n    1/0\nexcept Exception:\n    traceback.print_exc()\n" +
		"warnings.warn('careful')\n'ok'"
	o := mustSucceed(t, program{code: code})
	for _, want := range []string{`File "<program>", line 3`, "    1/0", "<program>:6: UserWarning: careful", "warnings.warn('careful')"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, o.stderr)
		}
	}
}

func TestPrepareRefusesBadInterpreter(t *testing.T) {
	if _, err := bootstrap.Prepare("/nonexistent/python3"); err == nil {
		t.Fatal("Prepare with a missing interpreter succeeded")
	}
}

// TestNameRuleMatchesGo holds the bootstrap's binding-name check to Go's
// (sandbox.CheckName): every name Go accepts starts, every name it refuses
// ends the bootstrap before the program, as a refused start frame.
func TestNameRuleMatchesGo(t *testing.T) {
	names := []string{
		"search", "_x2", "_", "match", "case", "type", "print", "len", "BindingErrors", "run_code2",
		"x__", "__x", "_x_", "a__b__",
		"run_code", "BindingError", "__spec__", "__name__", "__builtins__", "__", "___", "____", "__a__",
		"class", "None", "True", "async", "await", "lambda", "nonlocal",
		"", "1x", "a-b", "a b", "é", "naïve", "x\u200b", "ＡＢ",
	}
	for _, name := range names {
		goOK := sandbox.CheckName(name) == nil
		hostEnd, childEnd := socketpair(t)
		c := startChild(t, launchArgs(t), childEnd)
		err := wire.NewEncoder(hostEnd, 0).Encode(&wire.Start{V: 1, Code: "1", MaxFrame: wire.DefaultMaxFrame,
			Bindings: []sandbox.Binding{{Name: name, Params: []string{"q"}}}})
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(hostEnd)
		o := &outcome{}
		c.wait(t, o)
		pyOK := o.exitCode == 0
		if !pyOK && o.exitCode != bootstrap.ExitBootstrap {
			t.Fatalf("%q: exit %d, stderr %q", name, o.exitCode, o.stderr)
		}
		if goOK != pyOK {
			t.Errorf("binding name %q: Go accepts %v, the bootstrap %v (stderr %q)", name, goOK, pyOK, o.stderr)
		}
	}
	// The parameters too.
	for _, p := range []string{"q", "class", "é", "__x__"} {
		goOK := sandbox.ValidateBindings([]sandbox.Binding{{Name: "f", Params: []string{p}}}) == nil
		hostEnd, childEnd := socketpair(t)
		c := startChild(t, launchArgs(t), childEnd)
		wire.NewEncoder(hostEnd, 0).Encode(&wire.Start{V: 1, Code: "1", MaxFrame: wire.DefaultMaxFrame,
			Bindings: []sandbox.Binding{{Name: "f", Params: []string{p}}}})
		io.ReadAll(hostEnd)
		o := &outcome{}
		c.wait(t, o)
		if pyOK := o.exitCode == 0; goOK != pyOK {
			t.Errorf("parameter %q: Go accepts %v, the bootstrap %v (stderr %q)", p, goOK, pyOK, o.stderr)
		}
	}
}

// TestNewLauncher: code Prepare made, handed back as a cache would, runs
// the same bootstrap; what is not such code is refused.
func TestNewLauncher(t *testing.T) {
	prepared, err := bootstrap.Prepare(python(t))
	if err != nil {
		t.Fatal(err)
	}
	args := prepared.Args(3)
	code := args[4] // -I -B -c STUB CODE --fd 3
	l, err := bootstrap.NewLauncher(code)
	if err != nil {
		t.Fatalf("NewLauncher(Prepare's code): %v", err)
	}
	if !reflect.DeepEqual(l.Args(3), args) {
		t.Fatalf("Args differ: %q", l.Args(3)[:4])
	}
	o := runArgs(t, l.Args(3), program{code: "print('hi')\n6 * 7"})
	if o.result.Failure != nil || string(o.result.Value) != "42" || o.stdout != "hi\n" {
		t.Fatalf("result %+v, stdout %q, stderr %s", o.result, o.stdout, o.stderr)
	}
	for name, bad := range map[string]string{
		"empty":        "",
		"too long":     strings.Repeat("QUFB", 40<<10),
		"not base64":   "a b",
		"unpadded":     "YWE",
		"with newline": code[:8] + "\n" + code[8:],
	} {
		if _, err := bootstrap.NewLauncher(bad); err == nil {
			t.Errorf("NewLauncher(%s) succeeded", name)
		}
	}
}

func TestLauncherSourceHash(t *testing.T) {
	h := bootstrap.SourceHash()
	out, err := exec.Command("sha256sum", "bootstrap.py").Output()
	if err != nil {
		testutil.Unavailable(t, "needs sha256sum: %v", err)
	}
	if want := strings.Fields(string(out))[0]; h != want {
		t.Fatalf("SourceHash %s, want sha256 of bootstrap.py %s", h, want)
	}
}

// asPython runs code as `python prog.py` and returns its stdout, stderr (the
// file's path written "<program>") and exit status.
func asPython(t *testing.T, code string) (stdout, stderr string, exit int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prog.py")
	if err := os.WriteFile(path, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python(t), "-I", "-B", path)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("python prog.py: %v", err)
	}
	return out.String(), strings.ReplaceAll(errOut.String(), path, "<program>"), cmd.ProcessState.ExitCode()
}

// addresses are the 0x… of reprs, which differ from run to run.
var addresses = regexp.MustCompile(`0x[0-9a-f]+`)

// TestExitMatchesPython: after the result the bootstrap ends the process
// without python's teardown, yet what a program sees of its exit is
// python's: non-daemon threads finish, atexit handlers and weakref.finalize
// callbacks run, buffered output is flushed, the status is kept, and a
// failed flush of sys.stdout is status 120.
func TestExitMatchesPython(t *testing.T) {
	cases := map[string]string{
		"atexit":           "import atexit\natexit.register(print, 'second')\natexit.register(print, 'first')\nprint('main')\n",
		"no newline":       "import sys\nprint('partial', end='')\nsys.stdout.write(' and more')\nsys.stderr.write('err')\n",
		"weakref.finalize": "import weakref\nclass C:\n    pass\nc = C()\nweakref.finalize(c, print, 'finalized')\n",
		"thread after the end": "import threading, time\ndef late():\n    time.sleep(0.3)\n    print('thread', end='')\n" +
			"threading.Thread(target=late).start()\nprint('main done')\n",
		"thread then atexit": "import atexit, threading, time\natexit.register(print, 'atexit')\n" +
			"threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n",
		"executor": "from concurrent.futures import ThreadPoolExecutor\nimport time\n" +
			"ex = ThreadPoolExecutor(2)\nex.submit(lambda: (time.sleep(0.2), print('task', flush=True)))\n",
		"daemon thread":            "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\nprint('main')\n",
		"exit 3":                   "import atexit, sys\natexit.register(print, 'bye')\nsys.exit(3)\n",
		"exit 0":                   "import sys, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.1), print('t'))).start()\nsys.exit(0)\n",
		"exception":                "import atexit\natexit.register(print, 'bye')\nraise ValueError('v')\n",
		"handler raises":           "import atexit\ndef bad():\n    1/0\natexit.register(print, 'still runs')\natexit.register(bad)\n",
		"builtin handler raises":   "import atexit, os\natexit.register(os.remove, '/nonexistent/file')\n",
		"threading shutdown fails": "import threading\ndef bad():\n    raise RuntimeError('no')\nthreading._shutdown = bad\nprint('main')\n",
		"no unraisablehook":        "import atexit, os, sys\ndel sys.unraisablehook\natexit.register(print, 'ran')\n",
		"program's unraisablehook": "import atexit, os, sys\nsys.unraisablehook = lambda u: print('hook', u.exc_type.__name__, u.exc_traceback)\n" +
			"atexit.register(os.remove, '/nonexistent/file')\n",
		"handler exits": "import atexit, sys\natexit.register(print, 'still runs')\natexit.register(sys.exit, 9)\nprint('main')\n",
		"logging":       "import logging\nh = logging.StreamHandler(open(1, 'w', closefd=False))\nlogging.getLogger().addHandler(h)\nlogging.warning('logged')\n",
		// multiprocessing's own atexit hook joins the child before this one runs.
		"multiprocessing": "import atexit\natexit.register(lambda: print('exitcode', p.exitcode))\nimport multiprocessing, time\n" +
			"def child():\n    time.sleep(0.2)\n    print('child', flush=True)\n" +
			"p = multiprocessing.get_context('fork').Process(target=child)\np.start()\n",
		"stdout flush fails": "import sys\nclass W:\n    def write(self, s):\n        return len(s)\n    def flush(self):\n" +
			"        raise OSError(28, 'No space left on device')\nsys.stdout = W()\nprint('x')\n",
		"stderr flush fails": "import sys\nclass W:\n    def write(self, s):\n        return len(s)\n    def flush(self):\n" +
			"        raise OSError(28, 'No space left on device')\nsys.stderr = W()\nprint('x')\n",
		"stdout closed": "import sys\nprint('x')\nsys.stdout.close()\n",
		"ctypes printf": "import ctypes\nprint('python')\nctypes.CDLL(None).printf(b'C stdio\\n')\n",
	}
	for name, code := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantOut, wantErr, wantExit := asPython(t, code)
			o := run(t, program{code: code})
			gotErr := o.stderr
			if f := o.result.Failure; f != nil && f.Type != "SystemExit" {
				// The bootstrap sends the traceback instead of printing it.
				gotErr = f.Traceback + gotErr
			}
			switch name {
			case "handler raises":
				// Python prints the handler's traceback from C, which cannot
				// quote the lines of a program that has no file.
				if !strings.Contains(gotErr, `File "<program>", line 3, in bad`) ||
					!strings.HasSuffix(gotErr, "ZeroDivisionError: division by zero\n") {
					t.Errorf("stderr:\n%s\npython prog.py:\n%s", gotErr, wantErr)
				}
				gotErr, wantErr = "", ""
			case "stdout flush fails", "threading shutdown fails":
				gotErr, wantErr = dropCarets(gotErr), dropCarets(wantErr)
			}
			if o.stdout != wantOut || addresses.ReplaceAllString(gotErr, "0x") != addresses.ReplaceAllString(wantErr, "0x") {
				t.Errorf("stdout %q stderr %q\npython prog.py: stdout %q stderr %q", o.stdout, gotErr, wantOut, wantErr)
			}
			if o.exitCode != wantExit {
				t.Errorf("exit %d, python prog.py %d", o.exitCode, wantExit)
			}
		})
	}
}

// TestResultBeforeThreadsEnd: the result frame is sent before the
// non-daemon threads are joined, and their output still arrives; the exit
// frame comes after them, with the status, and the channel ends with it.
func TestResultBeforeThreadsEnd(t *testing.T) {
	code := "import threading, time\nthreading.Thread(target=lambda: (time.sleep(1), print('late', end=''))).start()\nraise SystemExit(3)"
	hostEnd, childEnd := socketpair(t)
	c := startChild(t, launchArgs(t), childEnd)
	hostEnd.SetDeadline(time.Now().Add(30 * time.Second))
	if err := wire.NewEncoder(hostEnd, 0).Encode(&wire.Start{V: wire.Version, Code: code}); err != nil {
		t.Fatal(err)
	}
	dec := wire.NewDecoder(hostEnd, 0)
	m, err := dec.Next()
	if err != nil {
		t.Fatalf("read result: %v", err)
	}
	if r, ok := m.(*wire.Result); !ok || r.Failure == nil || r.Failure.Type != "SystemExit" {
		t.Fatalf("frame %+v, want SystemExit", m)
	}
	// The thread sleeps on: the interpreter has not exited (nor is it a zombie).
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid)); err != nil || strings.Contains(string(stat), ") Z ") {
		t.Fatalf("the interpreter ended before its thread: %q %v", stat, err)
	}
	if m, err = dec.Next(); err != nil {
		t.Fatalf("read the exit frame: %v", err)
	}
	if x, ok := m.(*wire.Exit); !ok || x.Code != 3 {
		t.Fatalf("frame %+v, want the exit frame with code 3", m)
	}
	if m, err = dec.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the exit frame: %+v, %v; want the channel's end", m, err)
	}
	o := &outcome{}
	c.wait(t, o)
	if o.stdout != "late" || o.exitCode != 3 {
		t.Errorf("stdout %q exit %d, stderr %q", o.stdout, o.exitCode, o.stderr)
	}
}

// rawReplies runs code with echoBinding and answers the i-th call (ids
// count from 1) with the pieces replies[i] returns, written as they are, a
// pause between two: the host's side of the framing, byte by byte. With
// shut, the host then shuts its end for writing.
func rawReplies(t *testing.T, code string, shut bool, replies ...func(id uint64) []string) *outcome {
	t.Helper()
	hostEnd, childEnd := socketpair(t)
	c := startChild(t, launchArgs(t), childEnd)
	hostEnd.SetDeadline(time.Now().Add(20 * time.Second))
	start := &wire.Start{V: wire.Version, Code: code, Bindings: echoBinding, MaxFrame: 1 << 16}
	if err := wire.NewEncoder(hostEnd, 0).Encode(start); err != nil {
		t.Fatal(err)
	}
	dec := wire.NewDecoder(hostEnd, 0)
	o := &outcome{}
	for {
		m, ok := nextFrame(t, dec)
		if !ok {
			break
		}
		switch m := m.(type) {
		case *wire.Call:
			if len(o.calls) >= len(replies) {
				t.Fatalf("call %d unexpected", m.ID)
			}
			for i, piece := range replies[len(o.calls)](m.ID) {
				if i > 0 {
					time.Sleep(20 * time.Millisecond)
				}
				if _, err := hostEnd.Write([]byte(piece)); err != nil {
					t.Fatalf("write reply: %v", err)
				}
			}
			if shut {
				unix.Shutdown(int(hostEnd.Fd()), unix.SHUT_WR)
			}
			o.calls = append(o.calls, m)
		case *wire.Result:
			o.result = m
		}
	}
	c.wait(t, o)
	if o.result == nil {
		t.Fatalf("no result frame; exit %d, stderr:\n%s", o.exitCode, o.stderr)
	}
	return o
}

func frameOf(body string) string {
	n := len(body)
	return string([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) + body
}

// TestReplyFraming: a reply is a reply however it arrives (in pieces, with
// whitespace around its JSON, as large as the cap, with the next one), and
// a reply that breaks the framing breaks the channel, whichever read it
// arrives in.
func TestReplyFraming(t *testing.T) {
	const code = "out = []\nfor _ in range(2):\n    try:\n        v = echo(1)\n        out.append(len(v) if isinstance(v, str) else v)\n" +
		"    except BindingError as e:\n        out.append(str(e))\nout"
	reply := func(id uint64, v string) string { return fmt.Sprintf(`{"type":"reply","id":%d,"value":%s}`, id, v) }
	whole := func(v string) func(uint64) []string {
		return func(id uint64) []string { return []string{frameOf(reply(id, v))} }
	}
	cut := func(v string, at ...int) func(uint64) []string {
		return func(id uint64) []string {
			f, pieces, last := frameOf(reply(id, v)), []string{}, 0
			for _, a := range at {
				pieces, last = append(pieces, f[last:a]), a
			}
			return append(pieces, f[last:])
		}
	}
	raw := func(s string) func(uint64) []string { return func(uint64) []string { return []string{s} } }
	big := `"` + strings.Repeat("x", 1<<16-34) + `"` // the reply to call 1 is the cap: more than one read
	cases := []struct {
		name    string
		shut    bool
		replies []func(uint64) []string
		want    []string // a value as JSON, or what the BindingError says
	}{
		{"one read", false, []func(uint64) []string{whole(`1`), whole(`2`)}, []string{`1`, `2`}},
		{"header apart", false, []func(uint64) []string{cut(`1`, 2, 4), whole(`2`)}, []string{`1`, `2`}},
		{"body in pieces", false, []func(uint64) []string{cut(`[1,2]`, 10), whole(`3`)}, []string{`[1,2]`, `3`}},
		{"whitespace", false, []func(uint64) []string{
			func(id uint64) []string { return []string{frameOf(" \n" + reply(id, `{"a": 1}`) + " \t")} }, whole(`2`),
		}, []string{`{"a":1}`, `2`}},
		{"large", false, []func(uint64) []string{whole(big), whole(`2`)}, []string{fmt.Sprint(len(big) - 2), `2`}},
		{"two at once", false, []func(uint64) []string{
			func(id uint64) []string { return []string{frameOf(reply(id, `1`)) + frameOf(reply(id+1, `2`))} },
			func(uint64) []string { return nil },
		}, []string{`1`, `2`}},
		{"over the cap", false, []func(uint64) []string{raw("\x00\x01\x00\x01{}")}, []string{"frame of 65537 bytes, cap 65536", "broken"}},
		{"empty frame", false, []func(uint64) []string{raw("\x00\x00\x00\x00")}, []string{"frame of 0 bytes", "broken"}},
		{"not json", false, []func(uint64) []string{whole(`1} x`)}, []string{"extra data", "broken"}},
		{"not utf-8", false, []func(uint64) []string{whole("\"\xff\"")}, []string{"codec can't decode", "broken"}},
		{"not an object", false, []func(uint64) []string{raw(frameOf(`[1]`))}, []string{"not a JSON object with a type", "broken"}},
		{"another id", false, []func(uint64) []string{raw(frameOf(reply(7, `1`)))}, []string{"expected the reply to call 1", "broken"}},
		{"cut short", true, []func(uint64) []string{func(id uint64) []string { return []string{frameOf(reply(id, `1`))[:9]} }},
			[]string{"the channel ended inside a frame", "broken"}},
		{"closed", true, []func(uint64) []string{func(uint64) []string { return nil }}, []string{"the host closed the channel", "broken"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := rawReplies(t, code, c.shut, c.replies...)
			var got []json.RawMessage
			if err := json.Unmarshal(o.result.Value, &got); err != nil || len(got) != 2 {
				t.Fatalf("value %s (failure %+v)", o.result.Value, o.result.Failure)
			}
			for i, w := range c.want {
				var s string
				if json.Unmarshal(got[i], &s) == nil && !strings.HasPrefix(w, `"`) {
					if !strings.Contains(s, w) {
						t.Errorf("call %d: %q, want it to say %q", i+1, s, w)
					}
					continue
				}
				jsonEqual(t, got[i], w)
			}
		})
	}
}

// TestFramesAreValidUTF8: a surrogate (lone, or half of a UTF-16 pair) in a
// call's arguments, a value, a dict key or a failure is sent as U+FFFD,
// never as an escape a strict parser refuses, and keys that then collide
// make the dict its repr.
func TestFramesAreValidUTF8(t *testing.T) {
	cases := []struct{ code, want string }{
		{`echo('\udcff', {'\ud800k': '\ud83d\ude00'})`, `{"a":"\ufffd","b":{"\ufffdk":"\ufffd\ufffd"}}`},
		{`{'\udcfe': 1, '\udcff': 2}`, `"{'\\udcfe': 1, '\\udcff': 2}"`},
		{`raise ValueError('\udcff')`, ``},
	}
	for _, c := range cases {
		hostEnd, childEnd := socketpair(t)
		cmd := startChild(t, launchArgs(t), childEnd)
		hostEnd.SetDeadline(time.Now().Add(30 * time.Second))
		if err := wire.NewEncoder(hostEnd, 0).Encode(&wire.Start{V: wire.Version, Code: c.code, Bindings: echoBinding}); err != nil {
			t.Fatal(err)
		}
		var result []byte
		for result == nil {
			var head [4]byte
			if _, err := io.ReadFull(hostEnd, head[:]); err != nil {
				t.Fatalf("%s: read: %v", c.code, err)
			}
			body := make([]byte, int(head[0])<<24|int(head[1])<<16|int(head[2])<<8|int(head[3]))
			if _, err := io.ReadFull(hostEnd, body); err != nil {
				t.Fatalf("%s: read: %v", c.code, err)
			}
			if !utf8.Valid(body) || surrogateEscape(body) {
				t.Errorf("%s: frame %q: invalid UTF-8, or a surrogate escape", c.code, body)
			}
			m, err := wire.Unmarshal(body)
			if err != nil {
				t.Fatalf("%s: %v", c.code, err)
			}
			switch m := m.(type) {
			case *wire.Call:
				wire.NewEncoder(hostEnd, 0).Encode(echoReply(m))
			case *wire.Result:
				result = body
				if c.want != "" {
					jsonEqual(t, m.Value, c.want)
				} else if m.Failure == nil || m.Failure.Message != "\ufffd" || !strings.HasSuffix(m.Failure.Traceback, "ValueError: \ufffd\n") {
					t.Errorf("%s: failure %+v", c.code, m.Failure)
				}
			}
		}
		cmd.wait(t, &outcome{})
	}
}

// TestInterruptedCallIsAbandoned: a signal handler's exception ends a call
// waiting for its reply (an OSError such as TimeoutError too, which is no
// channel failure); the late reply is skipped, and the next call works.
func TestInterruptedCallIsAbandoned(t *testing.T) {
	code := `import signal
def alarm(signum, frame):
    raise TimeoutError('alarm')
signal.signal(signal.SIGALRM, alarm)
signal.setitimer(signal.ITIMER_REAL, 0.1)
try:
    r = echo('slow')
except TimeoutError as e:
    r = 'interrupted: %s' % e
[r, echo('next')]`
	serve := func(c *wire.Call) *wire.Reply {
		if c.ID == 1 {
			time.Sleep(500 * time.Millisecond)
		}
		return echoReply(c)
	}
	o := mustSucceed(t, program{code: code, bindings: echoBinding, serve: serve})
	jsonEqual(t, o.result.Value, `["interrupted: alarm", {"a": "next"}]`)
}

// surrogateEscape reports whether the JSON text b has a \u escape of a
// surrogate.
func surrogateEscape(b []byte) bool {
	for i := 0; i+3 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] == 'u' && (b[i+2] == 'd' || b[i+2] == 'D') && strings.IndexByte("89abcdefABCDEF", b[i+3]) >= 0 {
			return true
		}
		i++ // the escaped character
	}
	return false
}
