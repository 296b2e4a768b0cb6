# psych bootstrap: runs one program as __main__ and reports how it went over
# the wire channel. Started as
#     python3 -I -B -c SOURCE --fd N          (an inherited socket)
#     python3 -I -B -c SOURCE --socket PATH   (a Unix socket to connect to)
# either followed by any number of "--rlimit NAME=SOFT:HARD" (NAME as in
# resource.RLIMIT_NAME), applied before the start frame is read.
# Python 3.8+, stdlib only. The contract is in bootstrap.go's package doc.
#
# Everything here lives in the -c module's namespace; the program gets a fresh
# module of its own, so none of these names are visible to it.

# Start-up cost matters (it is paid by every execution), so the bootstrap
# imports only C modules and what the interpreter has already loaded: JSON
# goes through _json directly (the json package pulls in re, enum and
# collections, about 6 ms), and traceback and linecache are imported only
# when a failure is formatted (see LinecacheSeeder).
import _ast
import _json
import _signal
import _thread
import atexit
import builtins
import keyword
import math
import os
import sys

FILENAME = "<program>"
EXIT_BOOTSTRAP = 125  # the bootstrap itself failed; no result was sent
DEFAULT_MAX_FRAME = 16 << 20
MAX_DEPTH = 100  # containers nested deeper than this are sent as repr()
PID = os.getpid()
ModuleType = type(sys)
CodeType = type(sys._getframe().f_code)
getpid = os.getpid  # captured: a program mocking os.getpid must not fool the fork check


class BindingError(Exception):
    """A host binding failed. str(e) is the host's message; e.type names the kind."""

    def __init__(self, message="", type="BindingError"):
        super().__init__(message)
        self.type = type


class ProtocolError(ValueError):
    """The host sent something that is not the expected frame."""


# --- JSON, through the C accelerator ----------------------------------------


def _not_json(o):
    raise TypeError("%s is not JSON-serialisable" % type(o).__name__)


# As json.dumps(ensure_ascii=False, allow_nan=False, separators=(",", ":")).
# No circular-reference markers: a cycle ends in RecursionError, which every
# caller handles, and no state survives a failed encode.
_encoder = _json.make_encoder(None, _not_json, _json.encode_basestring, None, ":", ",", False, False, False)


def dumps(obj):
    return "".join(_encoder(obj, 0))


class _Decoding:
    """The context _json's scanner reads: json.loads' defaults, NaN refused."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    memo = {}

    @staticmethod
    def parse_constant(name):
        raise ValueError("JSON constant %s is not allowed" % name)


_scan = _json.make_scanner(_Decoding)


def loads(text):
    # The common case first: a value that fills the text. The scanner stops
    # at once on leading whitespace, so any other error it raises here is
    # the one the general case below would raise.
    try:
        obj, end = _scan(text, 0)
        if end == len(text):
            return obj
    except StopIteration:
        pass
    text = text.lstrip(" \t\n\r")
    try:
        obj, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("not a JSON value") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError("extra data after the JSON value")
    return obj


# --- frames ---------------------------------------------------------------


def encode(obj):
    # Lone surrogates (from surrogateescape'd bytes) cannot be UTF-8; they only
    # occur inside JSON strings, where backslashreplace turns them into valid
    # \udcXX escapes.
    return dumps(obj).encode("utf-8", "backslashreplace")


class Reader:
    """Reads frames from fd, a read of up to 64 KiB at a time: a small reply
    arrives in one system call, header and body together."""

    def __init__(self, fd):
        self.fd, self.buf = fd, bytearray()

    def frame(self, cap):
        if not self.buf:
            # The common case: one read returns exactly one whole frame,
            # parsed straight from it.
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EOFError("the host closed the channel")
            n = int.from_bytes(chunk[:4], "big")
            if len(chunk) == n + 4 and 0 < n <= cap:
                return checked(loads(chunk[4:].decode("utf-8")))
            self.buf += chunk
        n = int.from_bytes(self.exact(4), "big")
        if n == 0 or n > cap:
            raise ProtocolError("frame of %d bytes, cap %d" % (n, cap))
        return checked(loads(self.exact(n).decode("utf-8")))

    def exact(self, n):
        while len(self.buf) < n:  # a bytearray grows in place: a large frame costs linear time
            chunk = os.read(self.fd, max(n - len(self.buf), 1 << 16))
            if not chunk:
                raise EOFError("the channel ended inside a frame" if self.buf else "the host closed the channel")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


def checked(msg):
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ProtocolError("frame is not a JSON object with a type")
    return msg


def write_frame(fd, body):
    data = len(body).to_bytes(4, "big") + body
    n = os.write(fd, data)  # all of it, but for a large frame
    if n < len(data):
        data = memoryview(data)[n:]
        while data:
            data = data[os.write(fd, data):]


def apply_rlimits(argv):
    """Applies and strips the trailing "--rlimit NAME=SOFT:HARD" options.

    They run before the start frame is read, so no line of the program runs
    without them; lowering a limit needs no privilege, and the program,
    unprivileged, cannot raise a hard limit again.
    """
    rest = []
    i = 0
    while i < len(argv):
        if argv[i] == "--rlimit" and i + 1 < len(argv):
            import resource

            name, _, pair = argv[i + 1].partition("=")
            soft, _, hard = pair.partition(":")
            resource.setrlimit(getattr(resource, "RLIMIT_" + name), (int(soft), int(hard)))
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    return rest


def open_channel(argv):
    if len(argv) == 2 and argv[0] == "--fd" and argv[1].isdigit():
        fd = int(argv[1])
    elif len(argv) == 2 and argv[0] == "--socket":
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(argv[1])
        fd = sock.detach()
    else:
        raise ValueError("usage: bootstrap (--fd N | --socket PATH)")
    os.set_inheritable(fd, False)  # programs the program execs never get it
    return fd


def read_start(fd):
    """Reads and checks the start frame; returns (code, bindings, max_frame)."""
    msg = Reader(fd).frame(1 << 32)  # the host's encoder already enforced its cap
    if msg["type"] != "start" or type(msg.get("v")) is not int or msg["v"] != 1:
        raise ProtocolError("the first frame is not a version 1 start frame")
    code, max_frame = msg.get("code"), msg.get("max_frame") or DEFAULT_MAX_FRAME
    if not isinstance(code, str):
        raise ProtocolError("start: code is not a string")
    if type(max_frame) is not int or max_frame <= 0:
        raise ProtocolError("start: max_frame is not a positive integer")
    bindings, names = [], set()
    for b in msg.get("bindings") or []:
        name, params, doc = b.get("name"), b.get("params") or [], b.get("doc") or None
        ok = usable_name(name) and not reserved_name(name) and name not in names
        ok = ok and isinstance(params, list) and all(usable_name(p) for p in params)
        if not ok or len(set(params)) != len(params) or not isinstance(doc, (str, type(None))):
            raise ProtocolError("start: bad binding declaration %.100r" % (b,))
        names.add(name)
        bindings.append((name, params, doc))
    return code, bindings, max_frame


# The binding-name rule, the same as Go's (sandbox.IsIdentifier and
# sandbox.IsReservedName; a test holds the two to it).
def usable_name(s):
    """An ASCII identifier that is not a keyword."""
    return isinstance(s, str) and s.isascii() and s.isidentifier() and not keyword.iskeyword(s)


def reserved_name(s):
    """run_code, BindingError, and every name that starts and ends with "__"."""
    return s in ("run_code", "BindingError") or (s.startswith("__") and s.endswith("__"))


# --- the host side of the channel ------------------------------------------


class Host:
    """The channel after start, shared by every binding call and the result."""

    def __init__(self, fd, max_frame):
        self.fd, self.max_frame = fd, max_frame
        self.reader = Reader(fd)  # after start, only replies arrive: one at a time
        st = os.fstat(fd)
        self.identity = (st.st_dev, st.st_ino)
        self.lock = _thread.allocate_lock()  # one call (send + reply) at a time
        self.last_id = 0
        self.broken = None  # why the channel is out of step, once it is
        self.closed = False  # the result was sent: no more frames

    def check_fd(self):
        # A program may close fd N and open something else on it: never write
        # the result into the program's own file. (A binding call on such an
        # fd fails on the garbage it reads back.)
        st = os.fstat(self.fd)
        if (st.st_dev, st.st_ino) != self.identity:
            raise OSError("the channel fd was closed by the program")

    def call(self, name, head, args):
        """Calls binding name; head is its call frame's text between the id
        and the arguments, ',"name":NAME,"args":' (see make_binding)."""
        if getpid() != PID:
            raise BindingError("bindings are not available in a forked child process")
        try:
            args = dumps(args)
        except (TypeError, ValueError, RecursionError) as e:
            raise TypeError("%s(): arguments must be JSON-serialisable: %s" % (name, e)) from None
        with self.lock:
            if self.closed:
                raise BindingError("bindings are not available after the program has finished")
            if self.broken:
                raise BindingError("the channel to the host is broken: " + self.broken)
            self.last_id = call_id = self.last_id + 1
            frame = ('{"type":"call","id":%d%s%s}' % (call_id, head, args)).encode("utf-8", "backslashreplace")
            if len(frame) > self.max_frame:
                raise BindingError(
                    "%s(): the call encodes to %d bytes; the frame cap is %d" % (name, len(frame), self.max_frame)
                )
            try:
                write_frame(self.fd, frame)
                reply = self.reader.frame(self.max_frame)
                if reply["type"] != "reply" or reply.get("id") != call_id:
                    raise ProtocolError("expected the reply to call %d, got %.100r" % (call_id, reply))
            except (OSError, EOFError, ValueError, RecursionError) as e:
                self.broken = str(e) or type(e).__name__
                raise BindingError("%s(): the channel to the host failed: %s" % (name, self.broken)) from None
            except BaseException:
                # A signal handler (or ^C) raised mid-frame: the stream is out of step.
                self.broken = "a call was interrupted"
                raise
        err = reply.get("error")
        if err is not None:
            if not isinstance(err, dict):
                raise BindingError(str(err))
            raise BindingError(str(err.get("message", "")), str(err.get("type") or "BindingError"))
        return reply.get("value")

    def send_result(self, body):
        with self.lock:  # waits for a call in flight on another thread
            self.closed = True
            self.check_fd()
            write_frame(self.fd, body)


def make_binding(host, name, params, doc, signature):
    """Returns the plain function the program calls as `name`."""
    params = tuple(params)
    head = ',"name":%s,"args":' % dumps(name)
    call = host.call

    def binding(*args, **kwargs):
        if not args:
            return call(name, head, kwargs)  # a dict of its own, in the caller's order
        if len(args) > len(params):
            raise TypeError(
                "%s() takes %d positional argument%s but %d were given"
                % (name, len(params), "" if len(params) == 1 else "s", len(args))
            )
        call_args = dict(zip(params, args))
        for k, v in kwargs.items():
            if k in call_args:
                raise TypeError("%s() got multiple values for argument '%s'" % (name, k))
            call_args[k] = v
        return call(name, head, call_args)

    binding.__name__ = binding.__qualname__ = name
    binding.__doc__ = doc
    binding.__module__ = "__main__"
    binding.__wrapped__ = signature  # inspect.signature() follows it
    return binding


def signature_of(name, params):
    """A never-called stub whose signature is the binding's: (params..., **kwargs).
    Generated instead of an inspect.Signature, which costs ~4 ms of imports."""
    rest = "kwargs"
    while rest in params:
        rest += "_"
    ns = {}
    exec("def %s(%s):\n    pass\n" % (name, ", ".join(list(params) + ["**" + rest])), ns)
    return ns[name]


class LinecacheSeeder:
    """Registers the program's source with linecache, so tracebacks and
    warnings quote its lines as under `python prog.py`, without importing
    linecache (and, through tokenize, re) up front: a meta-path finder that
    seeds linecache.cache the moment anything imports it."""

    def __init__(self, code):
        self.entry = (len(code), None, code.splitlines(True), FILENAME)

    @classmethod
    def install(cls, code):
        seeder = cls(code)
        if "linecache" in sys.modules:
            seeder.seed(sys.modules["linecache"])
        else:
            sys.meta_path.insert(0, seeder)

    def seed(self, linecache):
        linecache.cache[FILENAME] = self.entry

    def find_spec(self, name, path=None, target=None):
        if name != "linecache":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find and find(name, path, target)
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        if isinstance(spec.loader, type):
            return spec  # a class-level loader (frozen, builtin): not ours to patch
        exec_module = spec.loader.exec_module

        def seeded(module):
            exec_module(module)
            self.seed(module)

        spec.loader.exec_module = seeded
        return spec


# --- running the program ------------------------------------------------------


def new_main(host, bindings):
    """The program's module: standard dunders, BindingError and the bindings only."""
    module = ModuleType("__main__")
    ns = module.__dict__
    ns["__builtins__"] = builtins
    ns["BindingError"] = BindingError
    for name, params, doc in bindings:
        ns[name] = make_binding(host, name, params, doc, signature_of(name, params))
    return module


def run(code, ns):
    """Runs code in ns like `python prog.py`; returns the value of a trailing expression."""
    tree = compile(code, FILENAME, "exec", _ast.PyCF_ONLY_AST)  # = ast.parse, without importing ast
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = _ast.Expression(tree.body.pop().value)
    exec(compile(tree, FILENAME, "exec"), ns)
    if last is not None:
        return eval(compile(last, FILENAME, "eval"), ns)
    return None


# --- reporting -------------------------------------------------------------


def to_json(v, depth=0, active=None):
    """Converts v to plain JSON data by the rule in bootstrap.go's doc."""
    if v is None or v is True or v is False:
        return v
    if isinstance(v, str):
        return str.__str__(v)  # exact str, also for subclasses
    if isinstance(v, int):
        i = int.__int__(v)
        try:
            int.__repr__(i)  # over sys.get_int_max_str_digits() it has no decimal form
        except ValueError:
            return safe_repr(v)
        return i
    if isinstance(v, float):
        f = float.__float__(v)
        return f if math.isfinite(f) else repr(f)
    if not isinstance(v, (list, tuple, dict)):
        return safe_repr(v)
    active = set() if active is None else active
    if depth >= MAX_DEPTH or id(v) in active:
        return safe_repr(v)
    active.add(id(v))
    try:
        if not isinstance(v, dict):
            return [to_json(x, depth + 1, active) for x in v]
        out = {}
        for k, x in dict.items(v):
            key = json_key(k)
            if key is None:
                return safe_repr(v)
            out[key] = to_json(x, depth + 1, active)
        return out if len(out) == len(v) else safe_repr(v)  # keys collided as strings
    finally:
        active.discard(id(v))


def json_key(k):
    """The string json.dumps makes of a dict key, or None if it refuses the key."""
    if isinstance(k, str):
        return str.__str__(k)
    if k is None or k is True or k is False:
        return "null" if k is None else "true" if k else "false"
    if isinstance(k, int):
        try:
            return int.__repr__(int.__int__(k))
        except ValueError:
            return None
    if isinstance(k, float):
        f = float.__float__(k)  # NaN, Infinity as json.dumps writes them
        if f != f:
            return "NaN"
        return float.__repr__(f) if math.isfinite(f) else ("Infinity" if f > 0 else "-Infinity")
    return None


def safe_repr(v):
    try:
        r = repr(v)
        if isinstance(r, str):
            return str.__str__(r)
    except Exception:
        pass
    return "<unrepresentable %s>" % type(v).__name__


def safe_str(v):
    try:
        return str(v)
    except Exception:
        return "<unprintable %s>" % type(v).__name__


def code_objects(code):
    """code and every code object nested in it (functions, classes, closures)."""
    found = {code}
    for c in code.co_consts:
        if isinstance(c, CodeType):
            found |= code_objects(c)
    return found


OWN_CODE = code_objects(sys._getframe().f_code)  # every frame the bootstrap can run


def strip_frames(exc):
    """Rebuilds the tracebacks of exc and everything chained to it without the
    bootstrap's frames; exc's own starts at the program's first frame (a
    SyntaxError has none, so it has no traceback, as under python)."""
    todo, seen = [(exc, True)], set()
    while todo:
        e, top = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        kept, tb = [], e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if not (code in OWN_CODE or (top and not kept and code.co_filename != FILENAME)):
                kept.append(tb)
            tb = tb.tb_next
        new = None
        TracebackType = type(e.__traceback__)
        for tb in reversed(kept):
            new = TracebackType(new, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
        e.__traceback__ = new
        todo += [(e.__cause__, False), (e.__context__, False)]
        group = getattr(e, "exceptions", None)
        if isinstance(group, tuple):  # an exception group's members
            todo += [(x, False) for x in group if isinstance(x, BaseException)]


def format_exception(exc):
    try:
        import linecache  # seeded with the program's source on import
        import traceback

        strip_frames(exc)
        if isinstance(exc, SyntaxError) and exc.text is None and exc.filename == FILENAME:
            # Raised by compile() from the AST, which has no source text to quote.
            exc.text = linecache.getline(FILENAME, exc.lineno or 0) or None
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except BaseException:
        return ""


def describe(exc):
    """The failure object for an exception that ended the program."""
    if isinstance(exc, SystemExit):
        message = safe_str(exc.code)
    else:
        message = safe_str(exc)
    failure = {"type": type(exc).__name__[:200], "message": message, "traceback": format_exception(exc)}
    errno = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    if isinstance(errno, int) and not isinstance(errno, bool):
        failure["errno"] = int.__int__(errno)
    return failure


def exit_status(exc):
    """The status `python prog.py` exits with; prints a non-int SystemExit code as it does."""
    if exc is None:
        return 0
    if not isinstance(exc, SystemExit):
        return 1
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def result_frame(value, failure, cap):
    """The result frame's body, never over cap (None if even a bare failure is)."""
    body = encode({"type": "result", "value": value, "failure": failure})
    if len(body) <= cap:
        return body
    if failure is None:
        message = "the result value encodes to %d bytes; the frame cap is %d" % (len(body), cap)
        failure = {"type": "ValueTooLarge", "message": message, "traceback": ""}
    # An oversized failure: keep the head of the message and the tail of the
    # traceback (where the error is), halving until the frame fits.
    msg, tb = failure["message"], failure["traceback"]
    keep = max(len(msg), len(tb)) * 2
    while keep:
        keep //= 2
        clipped = dict(
            failure,
            message=msg if len(msg) <= keep else msg[:keep] + " [truncated]",
            traceback=tb if len(tb) <= keep else "[truncated] " + tb[len(tb) - keep :],
        )
        body = encode({"type": "result", "value": None, "failure": clipped})
        if len(body) <= cap:
            return body
    return None


def flush_std():
    for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            f.flush()
        except Exception:
            pass


# --- exiting --------------------------------------------------------------
#
# After the result is sent, the bootstrap ends the process itself instead of
# raising SystemExit: Py_FinalizeEx's module teardown and final collections
# cost ~2 ms of every execution, and the host sees nothing of them.
# exit_like_python keeps what a program can observe of python's exit, in
# Py_FinalizeEx's order:
#   1. non-daemon threads are joined: threading._shutdown(), if the program
#      imported threading (3.9+ first run threading's own exit hooks, such
#      as concurrent.futures' executors);
#   2. atexit handlers run, last registered first (logging.shutdown,
#      weakref.finalize callbacks, multiprocessing joining its children); a
#      failing handler's traceback goes to stderr as python prints it, and
#      the status stays;
#   3. sys.stdout and sys.stderr are flushed; a failed flush makes the
#      status 120, as python's does. sys.__stdout__ and sys.__stderr__ are
#      flushed too, quietly, as their destruction would;
#   4. if the program loaded ctypes, C stdio is flushed, as C's exit() would.
# What is given up, by design: the __del__ methods (and weakref callbacks)
# of objects still alive at teardown, that is, what the program's globals
# and modules still hold; other module-teardown side effects; the buffers of
# files the program left open (an unclosed open(path, "w") loses what it had
# not flushed yet; the kernel still closes the fd); C-level exit handlers of
# extension modules. A forked child that runs off the end of the program
# already exited by os._exit, without atexit handlers.


def unraisable(exc, what, obj):
    """Prints exc as python's default sys.unraisablehook does when
    Py_FinalizeEx ignores it (3.13 names what it was doing, before it the
    object)."""
    try:
        import traceback

        if sys.version_info >= (3, 13):
            head = "Exception ignored on %s:\n" % what
        else:
            head = "Exception ignored in: %s\n" % safe_repr(obj)
        tb = exc.__traceback__
        tb = tb and tb.tb_next  # not our own frame
        sys.stderr.write(head + "".join(traceback.format_exception(type(exc), exc, tb)))
        sys.stderr.flush()
    except BaseException:
        pass


def run_atexit():
    """Runs the atexit handlers; each failure is printed as python prints it."""
    # A failing handler goes to sys.unraisablehook (3.10+), which python
    # calls with the traceback of the handler's own frames. A handler that
    # is no Python function (os.remove) has none, and CPython then puts the
    # caller's frame in it: ours, which `python prog.py` would not show.
    program_hook = getattr(sys, "unraisablehook", None)
    if program_hook is None:  # deleted: python then prints failures itself
        atexit._run_exitfuncs()
        return

    def hook(u):
        tb = u.exc_traceback
        while tb is not None and tb.tb_frame.f_code in OWN_CODE:
            tb = tb.tb_next
        if tb is not u.exc_traceback:
            u = type(u)((u.exc_type, u.exc_value, tb, u.err_msg, u.object))
        program_hook(u)

    sys.unraisablehook = hook
    try:
        atexit._run_exitfuncs()
    finally:
        if sys.unraisablehook is hook:
            sys.unraisablehook = program_hook


def flush_at_exit():
    """Flushes sys.stdout and sys.stderr as Py_FinalizeEx does; False if that failed."""
    ok = True
    for name in ("stdout", "stderr"):
        f = getattr(sys, name, None)
        if f is None:
            continue
        try:
            if getattr(f, "closed", False):
                continue
        except BaseException:
            pass
        try:
            f.flush()
        except BaseException as e:
            ok = False
            if name == "stdout":  # python says nothing of a failed stderr
                unraisable(e, "flushing sys.stdout", f)
    for f in (sys.__stdout__, sys.__stderr__):
        try:
            f.flush()
        except BaseException:
            pass
    return ok


def exit_like_python(status):
    """Ends the process as python's exit would, less the teardown (see above)."""
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            try:
                threading._shutdown()
            except BaseException as e:
                unraisable(e, "threading shutdown", threading)
        try:
            run_atexit()
        except BaseException:
            pass  # 3.8 and 3.9 raise the last failure again, printed already
        if not flush_at_exit():
            status = 120
        ctypes = sys.modules.get("ctypes")
        if ctypes is not None:
            ctypes.CDLL(None).fflush(None)
    except BaseException:
        pass  # whatever the program did to sys, the process ends here
    os._exit(status)


def main():
    # A write past RLIMIT_FSIZE then fails with EFBIG instead of killing us.
    _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)
    try:
        fd = open_channel(apply_rlimits(sys.argv[1:]))
        code, bindings, max_frame = read_start(fd)
        host = Host(fd, max_frame)
        module = new_main(host, bindings)
    except Exception as e:
        sys.stderr.write("psych bootstrap: %s\n" % (safe_str(e) or type(e).__name__))
        sys.stderr.flush()
        os._exit(EXIT_BOOTSTRAP)

    LinecacheSeeder.install(code)
    sys.argv = [FILENAME]
    sys.modules["__main__"] = module  # the program is __main__: pickle, multiprocessing find its functions

    value = exc = None
    try:
        value = run(code, module.__dict__)
    except BaseException as e:  # SyntaxError, SystemExit, KeyboardInterrupt too
        exc = e

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))  # the program may have lowered it
    status = exit_status(exc)
    if getpid() != PID:
        # A forked child fell through to the end of the program: it exits as
        # python would, and never touches the channel it shares with us.
        if exc is not None and not isinstance(exc, SystemExit):
            try:
                sys.stderr.write(format_exception(exc))
            except Exception:
                pass
        flush_std()
        os._exit(status)
    flush_std()

    failure = None
    if exc is not None:
        failure = describe(exc)
    else:
        try:
            value = to_json(value)
        except BaseException:
            value = "<unrepresentable %s>" % type(value).__name__
    try:
        body = result_frame(value, None if exc is None else failure, max_frame)
        if body is None:
            raise ProtocolError("the frame cap is too small for any result")
        host.send_result(body)
    except BaseException as e:
        sys.stderr.write("psych bootstrap: sending the result: %s\n" % safe_str(e))
        flush_std()
        os._exit(EXIT_BOOTSTRAP)
    del exc, value
    exit_like_python(status)


main()
