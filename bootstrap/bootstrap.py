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
# collections, about 6 ms), and traceback and linecache are loaded only
# when a failure is formatted (see private_module and LinecacheSeeder).
# _ast (0.7 ms of types) only for a program whose last line is not an
# expression of its own (split_trailing), keyword only for bindings.
import _json
import _signal
import _thread
import _warnings
import atexit
import builtins
import math
import os
import sys

# The program may delete or replace builtins, module attributes and
# sys.modules entries: nothing the bootstrap uses once the program has
# started is looked up there. What it needs is bound here, before the
# program's first line, and its own functions find builtins in this copy
# (a function resolves builtins through its module's __builtins__; main()
# is entered from a frame of its own, so that 3.8 and 3.9 do too).
BUILTINS = dict(builtins.__dict__)
__builtins__ = BUILTINS
IMPORT = builtins.__import__
os_read, os_write, os_fstat, os_stat, os_exit = os.read, os.write, os.fstat, os.stat, os._exit
os_close, os_closerange, os_sysconf, os_listdir = os.close, os.closerange, os.sysconf, os.listdir
os_mkdir, os_open, os_unlink = os.mkdir, os.open, os.unlink
getpid = os.getpid  # also: a program mocking os.getpid must not fool the fork check
getrecursionlimit, setrecursionlimit = sys.getrecursionlimit, sys.setrecursionlimit
isfinite = math.isfinite
run_exitfuncs = atexit._run_exitfuncs
WARNING_FILTERS, filters_mutated = _warnings.filters, _warnings._filters_mutated
VERSION = tuple(sys.version_info[:2])
try:  # what loads the private copies of traceback and linecache (private_module)
    SourceFileLoader = sys.modules["_frozen_importlib_external"].SourceFileLoader
    STDLIB = os.path.dirname(os.__file__)
except Exception:
    SourceFileLoader = STDLIB = None

FILENAME = "<program>"
EXIT_BOOTSTRAP = 125  # the bootstrap itself failed; no result was sent
DEFAULT_MAX_FRAME = 16 << 20
MAX_DEPTH = 100  # containers nested deeper than this are sent as repr()
TB_LIMIT = 1000  # frames shown of one traceback: the last ones, as python's own printer shows
MAX_EXCEPTIONS = 100  # exceptions shown of one failure (its causes and contexts)
MAX_TRACEBACK = 1 << 20  # characters of a failure's traceback; past it, its head is cut
PID = getpid()
# The font lists the host built for this interpreter (bootstrap.FontsDir),
# read-only; seed_fonts copies them into matplotlib's cache directory.
FONTS_DIR = "/.psych/matplotlib"
MAX_FONT_LIST = 1 << 20  # bytes of one font list copied; past it, matplotlib builds its own
ModuleType = type(sys)
CodeType = type(sys._getframe().f_code)


class BindingError(Exception):
    """A host binding failed. str(e) is the host's message; e.type names the kind."""

    def __init__(self, message="", type="BindingError"):
        super().__init__(message)
        self.type = type


class ProtocolError(ValueError):
    """The host sent something that is not the expected frame."""


FINISHED = "bindings are not available after the program has finished"


# --- JSON, through the C accelerator ----------------------------------------


def _not_json(o):
    raise TypeError("%s is not JSON-serialisable" % type_name(type(o)))


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
    return utf8(dumps(obj))


# A surrogate code point (a lone one from surrogateescape'd bytes, or two
# making a UTF-16 pair) has no UTF-8 form: it is sent as U+FFFD, as the
# host decodes stray bytes on stdout. Only what involves no codec error
# handler (which a program can re-register) is used: "surrogatepass" has
# its own path in the UTF-8 encoder, and the encoded form of a surrogate,
# ED A0..BF, is what finds one.
SURROGATE_LEADS = tuple(bytes((0xED, b)) for b in range(0xA0, 0xC0))
SURROGATES = {}  # code point -> U+FFFD for every surrogate, made on first use


def utf8(text):
    """text as UTF-8, each surrogate in it replaced by U+FFFD."""
    if text.isascii():  # a flag of the str: no scan
        return text.encode()
    b = text.encode("utf-8", "surrogatepass")
    if b"\xed" not in b or not any(p in b for p in SURROGATE_LEADS):
        return b
    if not SURROGATES:
        SURROGATES.update(dict.fromkeys(range(0xD800, 0xE000), 0xFFFD))
    return text.translate(SURROGATES).encode("utf-8", "surrogatepass")


def clean(text):
    """text with each surrogate replaced by U+FFFD, as utf8 sends it."""
    return text if text.isascii() else utf8(text).decode("utf-8")


class Reader:
    """Reads frames from fd, a read of at least 64 KiB at a time: a small
    reply arrives in one system call, header and body together.

    A signal handler's exception can end a read at any point: what was read
    stays in self.chunks, and a frame is taken from it whole or not at all,
    so the stream stays in step. (list.extend stores what os_read returns
    before any handler can run.)"""

    def __init__(self, fd):
        self.fd, self.chunks = fd, []

    def frame(self, cap):
        chunks, have, need = self.chunks, 0, 4
        if not chunks:
            # The common case: one read brings one whole frame.
            chunks.extend(map(os_read, (self.fd,), (1 << 16,)))
            data = chunks[0]
            n = len(data) - 4
            if 0 < n <= cap and int.from_bytes(data[:4], "big") == n:
                chunks.clear()
                return checked(loads(data[4:].decode("utf-8")))
            if not data:
                chunks.clear()
                raise EOFError("the host closed the channel")
        while True:
            if chunks:
                head = chunks[0]
                have = len(head) if len(chunks) == 1 else sum(map(len, chunks))
                if have >= 4:
                    n = int.from_bytes((head if len(head) >= 4 else b"".join(chunks))[:4], "big")
                    if n == 0 or n > cap:
                        raise ProtocolError("frame of %d bytes, cap %d" % (n, cap))
                    need = n + 4
                    if have >= need:
                        data = head if len(chunks) == 1 else b"".join(chunks)
                        chunks[:] = [data[need:]] if have > need else ()
                        return checked(loads(data[4:need].decode("utf-8")))
            chunks.extend(map(os_read, (self.fd,), (max(need - have, 1 << 16),)))
            if not chunks[-1]:
                chunks.pop()
                raise EOFError("the channel ended inside a frame" if have else "the host closed the channel")


def checked(msg):
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ProtocolError("frame is not a JSON object with a type")
    return msg


def write_frame(fd, body):
    data = len(body).to_bytes(4, "big") + body
    n = os_write(fd, data)  # all of it, but for a large frame
    if n < len(data):
        data = memoryview(data)[n:]
        while data:
            data = data[os_write(fd, data):]


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


def preload_args(argv):
    """Strips the "--preload MODULE" options; returns (the rest, the modules)."""
    rest, modules = [], []
    i = 0
    while i < len(argv):
        if argv[i] == "--preload" and i + 1 < len(argv):
            modules.append(argv[i + 1])
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    return rest, modules


def preload(fd, modules):
    """Imports modules for a pooled interpreter, before its start frame, and
    tells the host what the imports read from the environment: a
    "preloaded" frame with the names read through os.environ (os.getenv
    too), whether they iterated over all of it, and the top-level packages
    they loaded. What they print goes to /dev/null: it is no program's
    output. A failed import sends the frame with "error" and ends here.
    """
    environ = os.environ
    plain = type(environ)
    reads, whole, recording = set(), [False], [True]

    class Recording(plain):
        __slots__ = ()

        def __getitem__(self, key):
            if recording[0]:
                reads.add(key)
            return plain.__getitem__(self, key)

        def __contains__(self, key):
            if recording[0]:
                reads.add(key)
            return plain.__contains__(self, key)

        def __iter__(self):
            if recording[0]:
                whole[0] = True
            return plain.__iter__(self)

    before = set(sys.modules)
    error = None
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os_close(null)
    environ.__class__ = Recording
    try:
        for name in modules:
            try:
                IMPORT(name)
            except BaseException as e:
                error = "import %s: %s: %s" % (name, type_name(type(e)), safe_str(e))
                break
    finally:
        environ.__class__ = plain
        recording[0] = False
        flush_std()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os_close(saved[0])
        os_close(saved[1])
    if error is not None:
        write_frame(fd, encode({"type": "preloaded", "error": error[:4096]}))
        say("psych bootstrap: preload: %s\n" % error)
        os_exit(EXIT_BOOTSTRAP)
    names = set()
    for key in reads:
        if isinstance(key, bytes):
            key = os.fsdecode(key)
        if isinstance(key, str) and key and "=" not in key and "\0" not in key:
            names.add(key)
    loaded = set(name.partition(".")[0] for name in sys.modules if name not in before)
    write_frame(fd, encode({"type": "preloaded", "env": sorted(names), "all": whole[0], "modules": sorted(loaded)}))


def set_environment(env):
    """Makes os.environ (and the C environment) exactly env, "NAME=value" each.

    A pooled interpreter was started before its request: what the request
    sets comes in the start frame, before the program's first line.
    """
    if env is None:
        return
    if not isinstance(env, list):
        raise ProtocolError("start: env is not a list")
    want = {}
    for kv in env:
        name, eq, value = kv.partition("=") if isinstance(kv, str) else ("", "", "")
        if not name or not eq or "\0" in kv:
            raise ProtocolError("start: bad env entry %.100r" % (kv,))
        want[name] = value
    environ = os.environ
    for name in [k for k in environ if k not in want]:
        del environ[name]
    for name, value in want.items():
        if environ.get(name) != value:
            environ[name] = value
    time = sys.modules.get("time")
    if time is not None and hasattr(time, "tzset"):
        time.tzset()  # TZ may have changed


def read_start(fd):
    """Reads and checks the start frame; returns (code, bindings, max_frame,
    figures: the directory figures go to, or None).

    The environment it carries is in force when it returns.
    """
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
    figures = msg.get("figures")
    if not isinstance(figures, (str, type(None))):
        raise ProtocolError("start: figures is not a string")
    set_environment(msg.get("env"))
    return code, bindings, max_frame, figures


# The binding-name rule, the same as Go's (sandbox.IsIdentifier and
# sandbox.IsReservedName; a test holds the two to it).
def usable_name(s):
    """An ASCII identifier that is not a keyword."""
    return isinstance(s, str) and s.isascii() and s.isidentifier() and not iskeyword(s)


KEYWORD = []  # keyword.iskeyword, imported for the first binding (before the program)


def iskeyword(s):
    if not KEYWORD:
        KEYWORD.append(IMPORT("keyword").iskeyword)
    return KEYWORD[0](s)


def reserved_name(s):
    """run_code, BindingError, and every name that starts and ends with "__"."""
    return s in ("run_code", "BindingError") or (s.startswith("__") and s.endswith("__"))


# --- the host side of the channel ------------------------------------------


class Host:
    """The channel after start, shared by every binding call and the result.

    One call at a time: a call holds call_lock from its frame to its reply.
    A frame is written whole under write_lock; the result takes only that,
    so it never waits for another thread's reply (the host cancels the call
    when the result arrives). A signal handler's exception that ends a call
    propagates; the call is then abandoned (its reply, when it comes, is
    skipped) unless its frame was cut short, which breaks the channel."""

    def __init__(self, fd, max_frame):
        self.fd, self.max_frame = fd, max_frame
        self.reader = Reader(fd)  # after start, only replies arrive
        st = os_fstat(fd)
        self.identity = (st.st_dev, st.st_ino)
        self.call_lock = _thread.RLock()  # re-entered only by a signal handler (see call)
        self.write_lock = _thread.allocate_lock()
        self.busy = False  # a call holds call_lock
        self.last_id = 0
        self.abandoned = set()  # ids of interrupted calls whose replies are still due
        self.broken = None  # why the channel is out of step, once it is
        self.closed = False  # the result is sent, or being sent: no more calls

    def check_fd(self):
        # A program may close fd N and open something else on it: never write
        # the result into the program's own file. (A binding call on such an
        # fd fails on the garbage it reads back.)
        st = os_fstat(self.fd)
        if (st.st_dev, st.st_ino) != self.identity:
            raise OSError("the channel fd was closed by the program")

    def call(self, name, head, args):
        """Calls binding name; head is its call frame's text between the id
        and the arguments, ',"name":NAME,"args":' (see make_binding)."""
        if getpid() != PID:
            raise BindingError("bindings are not available in a forked child process")
        if self.closed:
            raise BindingError(FINISHED)
        try:
            args = dumps(args)
        except (TypeError, ValueError, RecursionError) as e:
            raise TypeError("%s(): arguments must be JSON-serialisable: %s" % (name, e)) from None
        with self.call_lock:
            if self.busy:
                # Held by this very thread: a signal handler called a
                # binding during a call, whose reply it would wait for
                # forever.
                raise RuntimeError(
                    "%s(): called while another binding call of this thread is in flight"
                    " (from a signal handler?); binding calls do not nest" % name
                )
            self.busy = True
            stage = 0  # 1: the frame is being written; 2: it was, the reply is due
            try:
                with self.write_lock:
                    if self.closed:
                        raise BindingError(FINISHED)
                    if self.broken:
                        raise BindingError("the channel to the host is broken: " + self.broken)
                    self.last_id = call_id = self.last_id + 1
                    frame = utf8('{"type":"call","id":%d%s%s}' % (call_id, head, args))
                    if len(frame) > self.max_frame:
                        raise BindingError(
                            "%s(): the call encodes to %d bytes; the frame cap is %d"
                            % (name, len(frame), self.max_frame)
                        )
                    stage = 1
                    write_frame(self.fd, frame)
                    stage = 2
                reply = self.reader.frame(self.max_frame)
                if type(reply.get("id")) is not int or reply["id"] != call_id or reply["type"] != "reply":
                    reply = self.reply_to(call_id, reply)
            except BaseException as e:
                if not stage:
                    raise
                if isinstance(e, (OSError, EOFError, ValueError)) and not raised_by_program(e):
                    self.broken = safe_str(e) or type_name(type(e))
                    raise BindingError("%s(): the channel to the host failed: %s" % (name, self.broken)) from None
                # Interrupted: a signal handler raised (or the stack ran out).
                if stage == 1:
                    self.broken = "a call was interrupted while its frame was written"
                else:
                    self.abandoned.add(call_id)
                raise
            finally:
                self.busy = False
        err = reply.get("error")
        if err is not None:
            if not isinstance(err, dict):
                raise BindingError(str(err))
            raise BindingError(str(err.get("message", "")), str(err.get("type") or "BindingError"))
        return reply.get("value")

    def reply_to(self, call_id, reply):
        """The reply to call_id, from reply on, past the replies to abandoned calls."""
        while True:
            rid = reply.get("id")
            if reply["type"] == "reply" and type(rid) is int:
                if rid == call_id:
                    return reply
                if rid in self.abandoned:
                    self.abandoned.discard(rid)
                    reply = self.reader.frame(self.max_frame)
                    continue
            raise ProtocolError("expected the reply to call %d, got %.100r" % (call_id, reply))

    def send_result(self, body):
        self.closed = True  # first: no call starts from here on, not even in a signal handler
        with self.write_lock:  # a call frame being written, never a reply
            self.check_fd()
            write_frame(self.fd, body)


def raised_by_program(e):
    """Whether e passed through code that is not the bootstrap's: a signal
    handler's exception, raised inside a read or a write."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code not in own_code():
            return True
        tb = tb.tb_next
    return False


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

    def __init__(self, entry):
        self.entry = entry

    @classmethod
    def install(cls, entry):
        seeder = cls(entry)
        if "linecache" in sys.modules:
            seeder.seed(sys.modules["linecache"])
        else:
            sys.meta_path.insert(0, seeder)

    def seed(self, linecache):
        linecache.cache[FILENAME] = self.entry

    def find_spec(self, name, path=None, target=None):
        if name != "linecache":
            return None
        try:
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
        except Exception:  # whatever the program did to the import system
            return None

        def seeded(module):
            exec_module(module)
            self.seed(module)

        spec.loader.exec_module = seeded
        return spec


class Figures:
    """Captures matplotlib's figures as PNGs into a directory the host
    collects (the start frame's "figures"), at no cost to a program that
    never imports matplotlib: a meta-path finder that waits for the import.
    Once matplotlib is imported it uses Agg; pyplot.show() captures every
    open figure and closes it (as non-interactive Jupyter does), and
    capture() at the end takes those still open. A figure numbered N is
    "figure-N.png", its K-th capture (K > 1) "figure-N-K.png"."""

    def __init__(self, directory):
        self.dir = directory
        self.counts = {}

    def install(self):
        mods = sys.modules
        if "matplotlib" in mods:  # a pooled interpreter's preload
            self.loaded("matplotlib", mods["matplotlib"])
        if "matplotlib.pyplot" in mods:
            self.loaded("matplotlib.pyplot", mods["matplotlib.pyplot"])
        else:
            sys.meta_path.insert(0, self)

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib" and name != "matplotlib.pyplot":
            return None
        try:
            if name == "matplotlib.pyplot":
                sys.meta_path.remove(self)
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                spec = finder is not self and find and find(name, path, target)
                if spec and spec.loader is not None:
                    break
            else:
                return None
            if isinstance(spec.loader, type):
                return spec
            exec_module = spec.loader.exec_module
        except Exception:  # whatever the program did to the import system
            return None

        def hooked(module):
            exec_module(module)
            self.loaded(name, module)

        spec.loader.exec_module = hooked
        return spec

    def loaded(self, name, module):
        try:
            if name == "matplotlib":
                module.use("agg")
                seed_fonts(module)
            else:
                capture = self.capture

                def show(*args, **kwargs):
                    """Captures every open figure as a PNG for the run's result, and closes it."""
                    capture(close=True)

                module.show = show  # a function: pyplot's switch_backend sets its __signature__
        except Exception as e:
            say("psych: figures: %s: %s\n" % (name, safe_str(e)))

    def capture(self, close=False):
        """Writes every open pyplot figure as a PNG; says on stderr why one could not be."""
        helpers = sys.modules.get("matplotlib._pylab_helpers")
        if helpers is None or "matplotlib.pyplot" not in sys.modules:
            return
        try:
            managers = list(helpers.Gcf.get_all_fig_managers())
        except Exception as e:
            say("psych: figures: %s\n" % safe_str(e))
            return
        for m in managers:
            num = getattr(m, "num", "?")
            try:
                fig = m.canvas.figure
                if type(num) is not int or num < 0:
                    raise ValueError("figure number %.40r" % (num,))
                k = self.counts[num] = self.counts.get(num, 0) + 1
                name = "figure-%d.png" % num if k == 1 else "figure-%d-%d.png" % (num, k)
                try:
                    os_mkdir(self.dir, 0o700)
                except FileExistsError:
                    pass
                fig.savefig(self.dir + "/" + name, format="png")
                if close:
                    sys.modules["matplotlib.pyplot"].close(fig)
            except Exception as e:
                say("psych: figure %s not captured: %s\n" % (num, safe_str(e)))


def seed_fonts(mpl):
    """Copies each font list the host built (FONTS_DIR, "fontlist-vN.json")
    into matplotlib's cache directory, where font_manager looks for its own,
    unless a file of that name is there already. Whatever fails leaves
    matplotlib to build its list itself, as it would anyway."""
    try:
        names = [n for n in os_listdir(FONTS_DIR) if n[:10] == "fontlist-v" and n[-5:] == ".json"]
    except OSError:
        return  # none built: no matplotlib on the host's side, or another view
    if not names:
        return
    cache = mpl.get_cachedir()
    for name in names:
        src = dst = -1
        path = cache + "/" + name
        try:
            src = os_open(FONTS_DIR + "/" + name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            data = os_read(src, MAX_FONT_LIST + 1)
            if len(data) > MAX_FONT_LIST:
                continue
            dst = os_open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            while data:
                data = data[os_write(dst, data):]
        except OSError:
            if dst >= 0:  # cut short (file_size_bytes, a full tmpfs): not left half written
                try:
                    os_unlink(path)
                except OSError:
                    pass
        finally:
            for fd in (src, dst):
                if fd >= 0:
                    os_close(fd)


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
    split = split_trailing(code)
    if split is not None:
        body, last = split
        exec(body, ns)
        return eval(last, ns)
    _ast = IMPORT("_ast")
    tree = compile(code, FILENAME, "exec", _ast.PyCF_ONLY_AST)  # = ast.parse, without importing ast
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = _ast.Expression(tree.body.pop().value)
    exec(compile(tree, FILENAME, "exec"), ns)
    if last is not None:
        return eval(compile(last, FILENAME, "eval"), ns)
    return None


def split_trailing(code):
    """(the program less its last line, that line as an expression), compiled,
    when the last line that is not blank or a comment starts at the margin,
    compiles as an expression on its own, and the rest compiles without it,
    neither with a warning: then the parse of the whole is the rest's
    statements and that expression (the rest ends complete, and an
    expression line at the margin is a statement of its own). Else None, and
    run takes the AST's way, which gives the program's SyntaxError and each
    warning once. Runs nothing."""
    if "\r" in code or "__future__" in code:
        return None  # other line ends; a future import changes the parse
    end = len(code)
    while True:
        start = code.rfind("\n", 0, end) + 1
        bare = code[start:end].lstrip(" \t\f")
        if bare and not bare.startswith("#"):
            break
        if start == 0:
            return None
        end = start - 1
    if code[start] in " \t\f":
        return None  # inside a block, or a continued line
    saved = WARNING_FILTERS[:]
    try:
        WARNING_FILTERS[:] = [("error", None, Warning, None, 0)]
        filters_mutated()
        last = compile("\n" * code.count("\n", 0, start) + code[start:], FILENAME, "eval")
        body = compile(code[:start], FILENAME, "exec")
    except Exception:
        return None
    finally:
        WARNING_FILTERS[:] = saved
        filters_mutated()
    return body, last


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
        return f if isfinite(f) else repr(f)
    if not isinstance(v, (list, tuple, dict)):
        return safe_repr(v)
    active = set() if active is None else active
    if depth >= MAX_DEPTH or id(v) in active:
        return safe_repr(v)
    active.add(id(v))
    try:  # through the base type's contents: a subclass's __iter__ never runs
        if not isinstance(v, dict):
            return [element(x, depth + 1, active) for x in (list if isinstance(v, list) else tuple).__iter__(v)]
        out = {}
        for k, x in dict.items(v):
            key = json_key(k)
            if key is None:
                return safe_repr(v)
            out[key] = element(x, depth + 1, active)
        return out if len(out) == len(v) else safe_repr(v)  # keys collided as strings
    finally:
        active.discard(id(v))


def element(x, depth, active):
    """to_json of a container's element, or its repr where that fails: one
    element's failure is not its siblings'."""
    try:
        return to_json(x, depth, active)
    except BaseException:
        return safe_repr(x)


def json_key(k):
    """The string json.dumps makes of a dict key, or None if it refuses the key;
    surrogates replaced already, so that keys they make collide are seen to."""
    if isinstance(k, str):
        return clean(str.__str__(k))
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
        return float.__repr__(f) if isfinite(f) else ("Infinity" if f > 0 else "-Infinity")
    return None


def safe_repr(v):
    return safe_text(repr, v, "unrepresentable")


def safe_str(v):
    return safe_text(str, v, "unprintable")


def safe_text(conv, v, failed):
    """conv(v) as a plain str, or "<failed TYPE>" where conv raises or
    returns anything but a str."""
    try:
        r = conv(v)
        if isinstance(r, str):
            return str.__str__(r)
    except BaseException:
        pass
    return "<%s %s>" % (failed, type_name(type(v)))


def type_name(t):
    """t.__name__, as type itself holds it: a metaclass cannot change it."""
    return type.__dict__["__name__"].__get__(t)


MODULE_CODE = sys._getframe().f_code
OWN_CODE = set()  # every frame the bootstrap can run (own_code)


def own_code():
    """The bootstrap's code objects (functions, classes, closures, ENTRY),
    gathered on first use: only a failure or an interrupted call needs them."""
    if not OWN_CODE:
        found, todo = set(), [MODULE_CODE, ENTRY]
        while todo:
            code = todo.pop()
            if code not in found:
                found.add(code)
                todo += [c for c in code.co_consts if isinstance(c, CodeType)]
        OWN_CODE.update(found)  # at once: a signal handler's call sees all or nothing
    return OWN_CODE


def strip_frames(exc):
    """Rebuilds the tracebacks of exc and everything chained to it without the
    bootstrap's frames; exc's own starts at the program's first frame (a
    SyntaxError has none, so it has no traceback, as under python). Each
    keeps its last TB_LIMIT frames, and the chain is cut after MAX_EXCEPTIONS
    exceptions: a runaway recursion's million frames cost no more to show
    than python's own printer spends on them."""
    todo, seen = [(exc, True, None)], set()
    while todo:
        e, top, parent = todo.pop()
        if e is None or id(e) in seen:
            continue
        if len(seen) >= MAX_EXCEPTIONS:
            if parent is not None:  # the chain ends here
                parent.__cause__ = parent.__context__ = None
            continue
        seen.add(id(e))
        kept, tb = [], e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if not (code in own_code() or (top and not kept and code.co_filename != FILENAME)):
                kept.append(tb)
            tb = tb.tb_next
        new = None
        TracebackType = type(e.__traceback__)
        for tb in reversed(kept[-TB_LIMIT:]):
            new = TracebackType(new, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
        e.__traceback__ = new
        todo += [(e.__cause__, False, e), (e.__context__, False, e)]
        try:
            group = e.exceptions if isinstance(e, BaseException) and hasattr(e, "exceptions") else None
        except BaseException:
            group = None
        if isinstance(group, tuple):  # an exception group's members
            todo += [(x, False, None) for x in group if isinstance(x, BaseException)]


def format_exception(exc):
    """exc's traceback as `python prog.py` prints it, less the bootstrap's
    frames and bounded (strip_frames, MAX_TRACEBACK). Formatted by a private
    copy of the traceback module, run with the builtins as they were before
    the program (private_module); where that cannot be had or fails, by
    plain_traceback. Never raises; "" only if both fail."""
    try:
        strip_frames(exc)
    except BaseException:
        pass
    try:
        if isinstance(exc, SyntaxError) and exc.text is None and exc.filename == FILENAME:
            # Raised by compile() from the AST, which has no source text to quote.
            exc.text = program_line(exc.lineno) or None
    except BaseException:
        pass
    text = render(exc)
    if len(text) > MAX_TRACEBACK:
        text = "[truncated] " + text[len(text) - MAX_TRACEBACK :]
    return text


def render(exc):
    """exc and its traceback, formatted as they are; never raises."""
    try:
        traceback = private_module("traceback")
        if traceback is not None:
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            if type(text) is str:
                return text
    except BaseException:
        pass
    try:
        return plain_traceback(exc)
    except BaseException:
        return ""


# --- private copies of traceback and linecache --------------------------------
#
# Formatting a failure must not depend on what the program did to the
# interpreter (a patched len, a deleted builtin, traceback or linecache
# replaced in sys.modules or patched themselves). So the bootstrap runs
# copies of its own of those two modules, loaded from the standard library
# on the first failure (importing them up front would cost every run ~3 ms),
# with the builtins as they were before the program; the copy of traceback
# imports the copy of linecache, which holds the program's source. Their
# other imports are the ordinary ones.

PRIVATE = {}  # name -> the module, or None if it could not be had
PROGRAM_ENTRY = []  # the program's linecache entry, once known (main)


def private_import(name, globals=None, locals=None, fromlist=(), level=0):
    if name == "linecache" and not level:
        mod = private_module("linecache")
        if mod is not None:
            return mod
    return IMPORT(name, globals, locals, fromlist, level)


PRIVATE_BUILTINS = dict(BUILTINS, __import__=private_import)


def private_module(name):
    """A copy of the standard library's module name, never in sys.modules; None if it cannot be had."""
    if name in PRIVATE:
        return PRIVATE[name]
    PRIVATE[name] = None  # also while it loads: no second attempt
    if SourceFileLoader is None:
        return None
    path = STDLIB + "/" + name + ".py"
    mod = ModuleType(name)
    mod.__file__ = path
    mod.__builtins__ = PRIVATE_BUILTINS
    try:
        exec(SourceFileLoader(name, path).get_code(name), mod.__dict__)
        if name == "linecache" and PROGRAM_ENTRY:
            mod.cache[FILENAME] = PROGRAM_ENTRY[0]
    except BaseException:
        return None
    PRIVATE[name] = mod
    return mod


# --- the last resort: a traceback without the traceback module ---------------

CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
RECURSIVE_CUTOFF = 3  # repeats of a frame shown before they are counted, as traceback does
SOURCES = {}  # file name -> its lines, for plain_traceback


def plain_traceback(exc):
    """exc formatted as the traceback module formats it, less what only it
    draws: carets, and an exception group's members."""
    chain, seen, e, link = [], set(), exc, None
    while e is not None and id(e) not in seen and len(chain) < MAX_EXCEPTIONS:
        seen.add(id(e))
        chain.append((e, link))
        if e.__cause__ is not None:
            e, link = e.__cause__, CAUSE
        elif e.__context__ is not None and not e.__suppress_context__:
            e, link = e.__context__, CONTEXT
        else:
            e = None
    out = []
    for e, link in reversed(chain):
        plain_frames(out, e.__traceback__)
        plain_exception(out, e)
        if link:
            out.append(link)
    return "".join(out)


def plain_frames(out, tb):
    if tb is None:
        return
    out.append("Traceback (most recent call last):\n")
    last, count = None, 0
    while tb is not None:
        code = tb.tb_frame.f_code
        here = (code.co_filename, tb.tb_lineno, code.co_name)
        if here != last:
            repeated(out, count)
            last, count = here, 0
        count += 1
        if count <= RECURSIVE_CUTOFF:
            out.append('  File "%s", line %s, in %s\n' % here)
            line = source_line(here[0], here[1])
            if line:
                out.append("    %s\n" % line)
        tb = tb.tb_next
    repeated(out, count)


def repeated(out, count):
    count -= RECURSIVE_CUTOFF
    if count > 0:
        out.append("  [Previous line repeated %d more time%s]\n" % (count, "s" if count > 1 else ""))


def plain_exception(out, e):
    t = type(e)
    name = type.__dict__["__qualname__"].__get__(t)
    mod = getattr(t, "__module__", None)
    if type(mod) is not str:
        name = "<unknown>." + name
    elif mod not in ("__main__", "builtins"):
        name = mod + "." + name
    if isinstance(e, SyntaxError):
        plain_syntax_error(out, e, name)
    else:
        try:
            msg = str(e)
        except BaseException:
            msg = "<exception str() failed>"
        out.append("%s: %s\n" % (name, msg) if msg else name + "\n")
    notes = getattr(e, "__notes__", None)
    if isinstance(notes, (list, tuple)):
        out += [safe_str(n) + "\n" for n in notes]


def plain_syntax_error(out, e, name):
    suffix = ""
    if e.lineno is not None:
        out.append('  File "%s", line %s\n' % (e.filename or "<string>", e.lineno))
    elif e.filename is not None:
        suffix = " (%s)" % e.filename
    text, offset, end = e.text, e.offset, getattr(e, "end_offset", None)
    if isinstance(text, str):
        rtext = text.rstrip("\n")
        ltext = rtext.lstrip(" \n\f")
        spaces = len(rtext) - len(ltext)
        out.append("    %s\n" % ltext)
        if type(offset) is int:
            if type(end) is not int or end == 0:
                end = offset
            if end in (offset, -1):
                end = offset + 1
            col = offset - 1 - spaces
            if col >= 0:
                pad = "".join(c if c.isspace() else " " for c in ltext[:col])
                out.append("    %s%s\n" % (pad, "^" * (end - offset)))
    out.append("%s: %s%s\n" % (name, e.msg or "<no detail available>", suffix))


def source_lines(code):
    """The program's lines as python prog.py reads them back for a traceback:
    \r\n and \r read as \n, and split at \n alone (not at \f, \v or the other
    ends str.splitlines knows, which the compiler takes for none)."""
    if "\r" in code:
        code = code.replace("\r\n", "\n").replace("\r", "\n")
    lines = code.split("\n")
    last = lines.pop()
    lines = [line + "\n" for line in lines]
    if last:
        lines.append(last + "\n")
    return lines


def program_line(lineno):
    """Line lineno of the program, stripped; "" if there is none."""
    lines = PROGRAM_ENTRY[0][2] if PROGRAM_ENTRY else []
    return lines[lineno - 1].strip() if type(lineno) is int and 0 < lineno <= len(lines) else ""


def source_line(filename, lineno):
    """Line lineno of a file, stripped; "" if there is none. Only regular files are read."""
    if filename == FILENAME:
        return program_line(lineno)
    lines = SOURCES.get(filename)
    if lines is None:
        lines = SOURCES[filename] = []
        try:
            if os_stat(filename).st_mode & 0o170000 == 0o100000:
                with open(filename, "rb") as f:
                    lines += f.read(1 << 22).decode("utf-8", "replace").splitlines()
        except BaseException:
            pass
    return lines[lineno - 1].strip() if type(lineno) is int and 0 < lineno <= len(lines) else ""


def describe(exc):
    """The failure object for an exception that ended the program, whatever
    the exception does when asked for its message or errno."""
    failure = {"type": type_name(type(exc))[:200], "message": ""}
    try:
        failure["message"] = safe_str(exc.code if isinstance(exc, SystemExit) else exc)
    except BaseException:
        failure["message"] = "<unprintable %s>" % failure["type"]
    failure["traceback"] = format_exception(exc)
    try:
        errno = exc.errno if isinstance(exc, OSError) else None
        if isinstance(errno, int) and not isinstance(errno, bool):
            failure["errno"] = int.__int__(errno)
    except BaseException:
        pass
    return failure


def exit_status(exc):
    """The status `python prog.py` exits with; prints a non-int SystemExit code as it does."""
    if exc is None:
        return 0
    if not isinstance(exc, SystemExit):
        return 1
    try:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return int.__int__(code) & 0xFF
        print(code, file=sys.stderr)
    except BaseException:
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
    for name in ("stdout", "stderr", "__stdout__", "__stderr__"):
        try:
            getattr(sys, name).flush()
        except BaseException:
            pass


def say(text):
    """Writes the bootstrap's own message to fd 2, whatever sys.stderr is now."""
    try:
        data = utf8(text)
        while data:
            data = data[os_write(2, data) :]
    except BaseException:
        pass


# --- exiting --------------------------------------------------------------
#
# After the result is sent, the bootstrap does what python's exit does that
# a program can observe (exit_like_python), closes every descriptor but the
# channel, sends the exit frame with the status, closes the channel and ends
# the process itself instead of raising SystemExit: Py_FinalizeEx's module
# teardown and final collections cost ~2 ms of every execution, and the
# host sees nothing of them. Nothing of the program runs after the exit
# frame, so a host may end the run there, before the interpreter's own
# teardown. exit_like_python keeps, in Py_FinalizeEx's order:
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
        if VERSION >= (3, 13):
            head = "Exception ignored on %s:\n" % what
        else:
            head = "Exception ignored in: %s\n" % safe_repr(obj)
        tb = exc.__traceback__
        exc.__traceback__ = tb and tb.tb_next  # not our own frame
        sys.stderr.write(head + render(exc))
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
        run_exitfuncs()
        return

    def hook(u):
        tb = u.exc_traceback
        while tb is not None and tb.tb_frame.f_code in own_code():
            tb = tb.tb_next
        if tb is not u.exc_traceback:
            u = type(u)((u.exc_type, u.exc_value, tb, u.err_msg, u.object))
        program_hook(u)

    sys.unraisablehook = hook
    try:
        run_exitfuncs()
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


def close_all_but(keep):
    """Closes every descriptor of the process but keep: the host then sees
    the end of stdout and stderr at once (unless a child holds them),
    instead of after the interpreter's own teardown."""
    if VERSION < (3, 10):  # closerange closes one by one up to its bound
        try:
            for name in os_listdir("/proc/self/fd"):
                if int(name) != keep:
                    try:
                        os_close(int(name))
                    except OSError:
                        pass  # the listing's own fd, closed already
            return
        except BaseException:
            pass
    top = os_sysconf("SC_OPEN_MAX")
    if top < 0:
        top = 1 << 20
    os_closerange(0, keep)
    os_closerange(keep + 1, top)


def exit_like_python(status):
    """Does what python's exit does that a program can see, less the
    teardown (see above), and returns the exit status."""
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
        pass  # whatever the program did to sys, the process ends next
    return status


def main():
    # A write past RLIMIT_FSIZE then fails with EFBIG instead of killing us.
    _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)
    try:
        argv, modules = preload_args(apply_rlimits(sys.argv[1:]))
        fd = open_channel(argv)
        if modules:
            preload(fd, modules)
        code, bindings, max_frame, figures = read_start(fd)
        host = Host(fd, max_frame)
        module = new_main(host, bindings)
        if figures:
            figures = Figures(figures)
            figures.install()
    except Exception as e:
        say("psych bootstrap: %s\n" % (safe_str(e) or type_name(type(e))))
        os_exit(EXIT_BOOTSTRAP)

    if code[:1] == "\ufeff":
        code = code[1:]  # a UTF-8 byte-order mark, which python prog.py's reader drops
    PROGRAM_ENTRY.append((len(code), None, source_lines(code), FILENAME))
    LinecacheSeeder.install(PROGRAM_ENTRY[0])
    sys.argv = [FILENAME]
    sys.modules["__main__"] = module  # the program is __main__: pickle, multiprocessing find its functions

    value = exc = None
    try:
        value = run(code, module.__dict__)
    except BaseException as e:  # SyntaxError, SystemExit, KeyboardInterrupt too
        exc = e

    try:
        setrecursionlimit(max(getrecursionlimit(), 1000))  # the program may have lowered it
    except BaseException:
        pass
    status = exit_status(exc)
    if getpid() != PID:
        # A forked child fell through to the end of the program: it exits as
        # python would, and never touches the channel it shares with us.
        if exc is not None and not isinstance(exc, SystemExit):
            try:
                sys.stderr.write(format_exception(exc))
            except BaseException:
                pass
        flush_std()
        os_exit(status)
    if figures:
        try:
            figures.capture()
        except BaseException:
            pass
    flush_std()

    failure = None
    if exc is not None:
        failure = describe(exc)
    else:
        try:
            value = to_json(value)
        except BaseException:
            value = "<unrepresentable %s>" % type_name(type(value))
    try:
        body = result_frame(value, failure, max_frame)
        if body is None:
            raise ProtocolError("the frame cap is too small for any result")
        host.send_result(body)
    except BaseException as e:
        say("psych bootstrap: sending the result: %s\n" % safe_str(e))
        flush_std()
        os_exit(EXIT_BOOTSTRAP)
    del exc, value
    status = exit_like_python(status) & 0xFF  # as the kernel keeps it
    try:
        close_all_but(fd)
        write_frame(fd, encode({"type": "exit", "code": status}))
        os_close(fd)
    except BaseException:
        pass  # the host then has the kernel's word alone
    os_exit(status)


# main's frame is entered from this one, whose builtins are BUILTINS: on 3.8
# and 3.9 a frame takes its builtins from the frame that calls it when both
# share their globals.
ENTRY = compile("main()", "<psych-bootstrap>", "exec")
exec(ENTRY, {"main": main, "__builtins__": BUILTINS})
