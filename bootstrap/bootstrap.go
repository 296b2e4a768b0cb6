// Package bootstrap is the child side of an execution: a small Python program
// (bootstrap.py, embedded as Source) that both backends start verbatim as
//
//	python3 -I -B -c Source --fd N         (Args: an inherited socket, fd N)
//	python3 -I -B -c Source --socket PATH  (SocketArgs: a Unix socket to connect)
//
// It reads the start frame of sandbox/wire, runs the code as the __main__
// module, serves the program's binding calls over the channel, and sends
// exactly one result frame. Then it does what python's exit does that a
// program can observe (threads joined, atexit handlers, flushes), closes
// every descriptor but the channel, sends the exit frame with the status it
// exits with, and ends the process with os._exit.
//
// What it promises:
//   - The program runs in a fresh module registered as sys.modules["__main__"]
//     (so pickle and fork-based multiprocessing find its functions), with
//     sys.argv ["<program>"]. Its globals hold the standard module dunders,
//     BindingError and one plain function per declared binding; nothing of
//     the bootstrap. An undeclared name stays undefined (NameError).
//   - The program is read as `python prog.py` reads its file: a UTF-8
//     byte-order mark at its start is dropped, and its lines end at \n,
//     \r\n or \r alone.
//   - If the last statement is an expression, its value is the result value.
//   - Every exception, SyntaxError, SystemExit and KeyboardInterrupt included,
//     becomes a failure {type, message, traceback, errno}: the traceback reads
//     as under `python prog.py`, with the file "<program>", the program's own
//     line numbers and source lines, and no bootstrap frames. errno is set for
//     an OSError with an integer errno. A SystemExit's message is str(code).
//     One place differs on purpose: on Python 3.8 and 3.9, a SyntaxError at
//     the end of the input names the line compile() gives (the last one,
//     with its text), where `python prog.py` names the blank line after it
//     (those versions tokenize a file differently from a string; 3.10 on
//     agree with compile()).
//   - The traceback is bounded: each exception keeps its last 1000 frames
//     (as python's own printer does), repeats collapsed ("[Previous line
//     repeated N more times]"), at most 100 exceptions of a chain, and at
//     most 1 MiB (its head cut). Formatting it costs about what python
//     spends, so a deep RecursionError stays a RecursionError.
//   - Nothing the program does to the interpreter costs it its result:
//     the bootstrap binds what it uses (builtins, the os, sys, math, atexit
//     functions) before the program's first line and never looks it up in
//     builtins or sys.modules again. A failure is formatted by copies of
//     traceback and linecache of the bootstrap's own, loaded from the
//     standard library on the first failure and run with the builtins as
//     they were; where they cannot be had or fail, by a plain formatter of
//     the same frames and lines, without carets or exception groups'
//     members.
//   - Every string it sends is valid UTF-8: a surrogate code point (a lone
//     one from surrogateescape'd bytes, or half of a UTF-16 pair) becomes
//     U+FFFD, in values (dict keys first, so that keys it makes equal make
//     the dict its repr), failures and call arguments, without any codec
//     error handler (a program can re-register those).
//   - The exit status is python's: 0, 1 for an uncaught exception, SystemExit's
//     code (masked to 8 bits; None is 0; anything else is printed to stderr and
//     is 1). After sending the result the bootstrap joins non-daemon
//     threads, runs atexit handlers and flushes stdout and stderr (status 120
//     if that fails) as python's exit does, then ends by os._exit, skipping
//     the interpreter's teardown: __del__ of objects still alive and unflushed
//     buffers of files the program left open are lost (see bootstrap.py).
//     The traceback is not printed to stderr: it is in the failure.
//   - Bindings: calling one maps positional arguments to its params in order
//     (too many, or a name given twice, is a TypeError as in Python), encodes
//     the arguments as JSON (a non-JSON argument, NaN or infinity is a
//     TypeError naming the binding; tuples become lists) and blocks on the
//     reply. A host error raises BindingError(message) with .type set. Calls
//     from several threads are serialised: one call frame and its reply at a
//     time; ids are unique and increasing within a run. The result is sent
//     at once even while a thread waits for a reply (the host then cancels
//     that call and answers it with an error). In a forked child, after the
//     result was sent, for a call frame over the cap, and once the channel
//     failed (EOF, garbage, a call frame cut short), a binding raises
//     BindingError and the program goes on.
//   - Signals: a signal handler's exception (of any class, TimeoutError
//     too) that interrupts a call waiting for its reply propagates from the
//     call; the call is abandoned, its late reply skipped, and later calls
//     work. A binding called from a signal handler while a call of the same
//     thread is in flight raises RuntimeError at once (it could only wait
//     forever); called while no call is in flight, it works.
//   - The rlimits given after the channel (Args' rlimits) are applied
//     before the start frame is read, so no line of the program runs
//     without them; one that cannot be applied ends it with ExitBootstrap.
//   - Preload (a pooled interpreter's "--preload MODULE" options, after the
//     rlimits): the modules are imported after the channel is open and
//     before the start frame is read, with what they print sent to
//     /dev/null, and one "preloaded" frame tells the host what the imports
//     read from os.environ (os.getenv too), whether they iterated over it,
//     and the top-level packages they loaded (sandbox/internal/host reads
//     it). A failed import sends the frame with an error and ends with
//     ExitBootstrap.
//   - Figures (the start frame's "figures", a directory): when the program
//     imports matplotlib, it uses Agg; pyplot.show() writes every open
//     figure as a PNG into that directory and closes it (as non-interactive
//     Jupyter does), and after the program, before the result frame, every
//     figure still open is written too: "figure-N.png" for figure number
//     N, "figure-N-K.png" for its K-th capture. A figure that cannot be
//     written is named on stderr. Without "figures", or for a program that
//     never imports matplotlib, nothing of this runs but a meta-path
//     finder's name check per import. When matplotlib is imported, each
//     font list the host built for the interpreter (FontsDir,
//     "fontlist-vN.json", at most 1 MiB) is copied into matplotlib's cache
//     directory unless a file of that name is there, so that font_manager
//     loads it instead of building its own; anything that fails leaves
//     matplotlib to build it, as it would anyway.
//   - SIGXFSZ is ignored, so a write past RLIMIT_FSIZE is an OSError (EFBIG).
//   - The channel fd is close-on-exec: programs the program runs never get it.
//   - A forked child that runs off the end of the program exits with its own
//     status (printing its traceback to stderr, as python would) and never
//     touches the channel.
//
// What it refuses: a first frame that is not a valid version-1 start frame
// (bad JSON, wrong type or version, a binding name that sandbox.CheckName
// refuses: not an ASCII identifier, a keyword, run_code, BindingError or a
// __dunder__ name; a parameter that is not an identifier) ends the interpreter with
// ExitBootstrap and a message on stderr, before any program code runs. If
// the result cannot be sent (the channel is gone, or the program closed the
// channel fd and reopened another file on it), the exit status is also
// ExitBootstrap. A host must go by the result frame, not the status: a
// program can exit with 125 too.
//
// The value → JSON conversion: None, bool, int and str pass through, a
// subclass converted to its base type (an IntEnum becomes an int); a finite
// float passes and NaN or ±inf becomes its repr() string ("nan", "inf");
// a list or tuple (namedtuple included) becomes an array of the base
// type's contents (a subclass's own __iter__ never runs); a dict whose keys
// are all str, int, float, bool or None becomes an object, the keys turned
// into strings as json.dumps does (True → "true", 1.5 → "1.5"), unless two
// keys then collide. Anything else, a dict with other keys included, becomes
// its repr() string, or "<unrepresentable TYPE>" if repr raises. A cycle, or
// a container nested deeper than 100 levels, becomes the repr() of that
// sub-value. An element whose conversion fails becomes its own repr(),
// not its container's. An int too large for Python's int-to-str limit is sent as its
// repr(), or "<unrepresentable int>" when that fails too. If the result
// frame would exceed the start frame's max_frame, the bootstrap sends instead
// a failure of type "ValueTooLarge" ("the result value encodes to N bytes;
// the frame cap is M", N being the frame's size); an oversized failure has
// its message and traceback clipped. No frame it sends exceeds the cap.
//
// Start-up is paid by every execution, so the bootstrap imports only C
// modules at start (JSON goes through _json), imports traceback and
// linecache only to format a failure, and seeds linecache with the program's
// source through a meta-path hook the moment anything imports it. Prepare
// compiles it once per interpreter; Launcher passes the code object on argv.
// NewLauncher rebuilds a Launcher from code compiled earlier (a cache keyed
// on the interpreter and on SourceHash).
//
// Python 3.8 or later, standard library only. On Python 3.14 and later the
// default multiprocessing start method on Linux is forkserver, which cannot
// find functions the program defines (the program has no file); such a
// program must call multiprocessing.set_start_method("fork").
package bootstrap

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Source is the bootstrap program, passed to the interpreter with -c. It is
// well under the kernel's 128 KiB limit on one argument.
//
//go:embed bootstrap.py
var Source string

// ExitBootstrap is the exit status of a bootstrap that could not start the
// program (a bad start frame or channel) or could not send its result.
const ExitBootstrap = 125

// FontsDir is where a run finds, read-only, the matplotlib font lists the
// host built for its interpreter ("fontlist-vN.json", N being
// font_manager.FontManager.__version__); see Figures above.
const FontsDir = "/.psych/matplotlib"

// Rlimit is one resource limit the bootstrap applies to itself before it
// reads the start frame. Name is the suffix of resource.RLIMIT_NAME ("CPU",
// "AS", "FSIZE", "NPROC", "NOFILE", "STACK", "CORE").
type Rlimit struct {
	Name      string
	Soft, Max uint64
}

// Args returns the interpreter arguments, after the interpreter path, for a
// bootstrap that talks to the host over the inherited stream socket fd and
// first lowers its own limits to rlimits. -I isolates the interpreter from
// PYTHON* variables, the user site and the current directory; -B writes no
// bytecode.
func Args(fd int, rlimits ...Rlimit) []string {
	return withRlimits([]string{"-I", "-B", "-c", Source, "--fd", strconv.Itoa(fd)}, rlimits)
}

// SocketArgs is Args for a bootstrap that connects to the Unix stream socket
// at path (the container backend).
func SocketArgs(path string, rlimits ...Rlimit) []string {
	return withRlimits([]string{"-I", "-B", "-c", Source, "--socket", path}, rlimits)
}

// PreloadArgs are the options, appended to Args, FileArgs or SocketArgs,
// that make the bootstrap import modules before its start frame (a pooled
// interpreter's preload). The caller validates the names
// (sandbox.CheckPreload).
func PreloadArgs(modules []string) []string {
	args := make([]string, 0, 2*len(modules))
	for _, m := range modules {
		args = append(args, "--preload", m)
	}
	return args
}

func withRlimits(args []string, rlimits []Rlimit) []string {
	for _, r := range rlimits {
		args = append(args, "--rlimit", r.Name+"="+strconv.FormatUint(r.Soft, 10)+":"+strconv.FormatUint(r.Max, 10))
	}
	return args
}

// Launcher starts the bootstrap precompiled for one interpreter: its code
// object, marshalled and base64-encoded, rides on argv behind a one-line -c
// stub, so no execution pays for compiling Source again (about 2.5 ms each).
type Launcher struct {
	raw []byte // marshal.dumps(compile(Source, "<psych-bootstrap>", "exec"))
	// code is raw in base64, made when Args first needs it.
	code     string
	codeOnce sync.Once
}

// encoded is the code in base64, for argv.
func (l *Launcher) encoded() string {
	l.codeOnce.Do(func() {
		if l.code == "" {
			l.code = base64.StdEncoding.EncodeToString(l.raw)
		}
	})
	return l.code
}

// launchStub loads the precompiled bootstrap from argv[1] and runs it with
// the remaining arguments.
const launchStub = "import marshal,binascii,sys;exec(marshal.loads(binascii.a2b_base64(sys.argv.pop(1))))"

// maxArg is the kernel's limit on one argv string (MAX_ARG_STRLEN), less a margin.
const maxArg = 120 << 10

// Prepare compiles Source with python, once. The marshal format is private
// to one interpreter version, so the Launcher serves only that interpreter.
func Prepare(python string) (*Launcher, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-B", "-c",
		"import marshal,binascii,sys;"+
			"sys.stdout.write(binascii.b2a_base64(marshal.dumps(compile(sys.stdin.read(),'<psych-bootstrap>','exec')),newline=False).decode())")
	cmd.Stdin = strings.NewReader(Source)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("precompile bootstrap with %s: %w: %s", python, err, bytes.TrimSpace(stderr.Bytes()))
	}
	l, err := NewLauncher(string(out))
	if err != nil {
		return nil, fmt.Errorf("precompile bootstrap with %s: %w", python, err)
	}
	return l, nil
}

var (
	errCodeSize   = errors.New("compiled bootstrap does not fit one argument")
	errCodeBase64 = errors.New("compiled bootstrap is not base64")
)

// NewLauncher is a Launcher for code that Prepare (or the same compilation
// elsewhere: base64 of marshal.dumps(compile(Source, "<psych-bootstrap>",
// "exec")), standard alphabet, padded, no newline) produced earlier for the
// interpreter it will serve, such as a cached one. It refuses code that is
// empty, does not fit one argument, or is not strict base64; it cannot tell
// the marshal format apart from another interpreter's, so the caller keys
// the code on the interpreter (and on SourceHash).
func NewLauncher(code string) (*Launcher, error) {
	if len(code) == 0 || len(code) > maxArg {
		return nil, fmt.Errorf("load precompiled bootstrap: %w (%d bytes)", errCodeSize, len(code))
	}
	// Strict decoding still skips CR and LF: refuse them first.
	if strings.ContainsAny(code, "\r\n") {
		return nil, fmt.Errorf("load precompiled bootstrap: %w: a line break", errCodeBase64)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(code)
	if err != nil {
		return nil, fmt.Errorf("load precompiled bootstrap: %w: %w", errCodeBase64, err)
	}
	return &Launcher{code: code, raw: raw}, nil
}

// NewLauncherCode is NewLauncher for the marshal bytes themselves (Code),
// as a cache keeps them. It refuses code that is empty or would not fit
// one argument in base64; like NewLauncher it cannot tell one
// interpreter's marshal format from another's.
func NewLauncherCode(raw []byte) (*Launcher, error) {
	if n := base64.StdEncoding.EncodedLen(len(raw)); len(raw) == 0 || n > maxArg {
		return nil, fmt.Errorf("load precompiled bootstrap: %w (%d bytes in base64)", errCodeSize, n)
	}
	return &Launcher{raw: raw}, nil
}

// fileStub loads the precompiled bootstrap from the file argv[1] names.
const fileStub = "import marshal,sys;f=open(sys.argv.pop(1),'rb');c=f.read();f.close();exec(marshal.loads(c))"

// Code is the compiled bootstrap's marshal bytes, for a file FileArgs
// names. The caller must not change them.
func (l *Launcher) Code() []byte { return l.raw }

// FileArgs is Args for the compiled bootstrap read from path, a file
// holding Code: it spares the interpreter a 50 KB argument to copy and
// decode.
func (l *Launcher) FileArgs(path string, fd int, rlimits ...Rlimit) []string {
	return withRlimits([]string{"-I", "-B", "-c", fileStub, path, "--fd", strconv.Itoa(fd)}, rlimits)
}

// SourceHash is the hex SHA-256 of Source: what a cache of compiled
// bootstraps keys its entries on, so a changed bootstrap is never served
// another's code.
func SourceHash() string { return sourceHash() }

var sourceHash = sync.OnceValue(func() string {
	sum := sha256.Sum256([]byte(Source))
	return hex.EncodeToString(sum[:])
})

// Args is Args for the precompiled bootstrap.
func (l *Launcher) Args(fd int, rlimits ...Rlimit) []string {
	return withRlimits([]string{"-I", "-B", "-c", launchStub, l.encoded(), "--fd", strconv.Itoa(fd)}, rlimits)
}

// SocketArgs is SocketArgs for the precompiled bootstrap.
func (l *Launcher) SocketArgs(path string, rlimits ...Rlimit) []string {
	return withRlimits([]string{"-I", "-B", "-c", launchStub, l.encoded(), "--socket", path}, rlimits)
}
