# psych CPython-suite runner: runs one module of CPython's own test suite
# (Debian's libpython3.11-testsuite) through test.libregrtest, as
# `python3 -m test -v MODULE` would, and reports every test's outcome as
# machine-readable lines. The Go harness (cpython_linux_test.go) appends
#     (main(CONFIG) if __name__ == "__main__" else None)
# and runs the result unchanged on the host (python3 -I -B FILE) and inside
# the sandbox (as the program), so both sides run the very same code.
#
# Output: one line per event on the stdout this process started with (a dup
# of fd 1 taken before any test runs), each "\x1ePSYCHCPY " + JSON:
#   {"t": "facts", ...}            the process's identity, limits, signals
#   {"t": "start", "id": ID}       a test is about to run
#   {"t": "result", "id": ID, "outcome": O, "detail": TEXT}
#                                  O is ok, fail, error, skip, xfail or upass;
#                                  subtests are folded into their test's id
#   {"t": "end", "state": S, "summary": {...}}
#                                  S is libregrtest's verdict for the module
#                                  (Passed, Failed, EnvChanged, Skipped, ...)
# A run that ends without "end" crashed or was killed; its last "start" with
# no "result" names the test it was in. Lines are single os.write calls, so
# output of the tests' own child processes cannot split one below PIPE_BUF.
# Python 3.11; standard library only.

import faulthandler
import json
import os
import sys
import traceback

MARK = "\x1ePSYCHCPY "
DETAIL_MAX = 3000
_out_fd = None
_seen = {}


def _emit(obj):
    line = MARK + json.dumps(obj, ensure_ascii=True) + "\n"
    data = line.encode("ascii")
    while data:
        n = os.write(_out_fd, data)
        data = data[n:]


def _trim(text, limit=DETAIL_MAX):
    text = text.strip()
    if len(text) <= limit:
        return text
    # Keep the end: the exception's type and message are there.
    return "..." + text[-limit:]


def _facts():
    import resource
    import socket
    f = {
        "t": "facts",
        "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "egid": os.getegid(),
        "groups": sorted(os.getgroups()),
        "cwd": os.getcwd(),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "python": sys.version,
        "executable": sys.executable,
        "flags": {k: getattr(sys.flags, k) for k in ("isolated", "ignore_environment", "no_user_site", "dont_write_bytecode")},
        "env": sorted(os.environ),
        "rlimits": {},
    }
    umask = os.umask(0)
    os.umask(umask)
    f["umask"] = "%04o" % umask
    for name in sorted(dir(resource)):
        if name.startswith("RLIMIT_"):
            soft, hard = resource.getrlimit(getattr(resource, name))
            f["rlimits"][name[7:].lower()] = [soft, hard]
    try:
        with open("/proc/self/status") as st:
            for line in st:
                key, _, value = line.partition(":")
                if key in ("SigIgn", "SigBlk", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp", "Seccomp_filters"):
                    f[key] = value.strip()
    except OSError as e:
        f["status_error"] = str(e)
    try:
        import pwd
        pw = pwd.getpwuid(os.getuid())
        f["passwd"] = [pw.pw_name, pw.pw_dir, pw.pw_shell]
    except KeyError:
        f["passwd"] = None
    try:
        with open("/proc/self/mounts") as m:
            f["mounts"] = sorted(
                "%s %s %s" % (p[1], p[2], ",".join(o for o in p[3].split(",") if o in ("ro", "rw", "nosuid", "nodev", "noexec")))
                for p in (line.split() for line in m) if len(p) > 3)
    except OSError as e:
        f["mounts"] = [str(e)]
    return f


def _record(test_id, outcome, detail=""):
    # Folds subtests and repeated reports (an error in tearDown after a
    # failure) into one outcome per id: the worst wins.
    rank = {"ok": 0, "xfail": 0, "skip": 1, "upass": 2, "fail": 3, "error": 4}
    prev = _seen.get(test_id)
    if prev is not None and rank[prev[0]] >= rank[outcome]:
        return
    if prev is not None and prev[1] and detail:
        detail = prev[1] + "\n---\n" + detail
    _seen[test_id] = (outcome, _trim(detail))
    _emit({"t": "result", "id": test_id, "outcome": outcome, "detail": _trim(detail)})


def _recording_result(base):
    def test_id(test):
        try:
            return test.id()
        except Exception:
            return str(test)

    class Recording(base):
        def startTest(self, test):
            _emit({"t": "start", "id": test_id(test)})
            super().startTest(test)

        def _fmt(self, err, test):
            try:
                return self._exc_info_to_string(err, test)
            except Exception:
                return "".join(traceback.format_exception(*err))

        def addSuccess(self, test):
            super().addSuccess(test)
            if test_id(test) not in _seen:
                _record(test_id(test), "ok")

        def addFailure(self, test, err):
            _record(test_id(test), "fail", self._fmt(err, test))
            super().addFailure(test, err)

        def addError(self, test, err):
            # An error outside a test (setUpClass, setUpModule, a class's
            # cleanup) comes as an _ErrorHolder whose id is its description.
            _record(test_id(test), "error", self._fmt(err, test))
            super().addError(test, err)

        def addSkip(self, test, reason):
            _record(test_id(test), "skip", str(reason))
            super().addSkip(test, reason)

        def addExpectedFailure(self, test, err):
            _record(test_id(test), "xfail")
            super().addExpectedFailure(test, err)

        def addUnexpectedSuccess(self, test):
            _record(test_id(test), "upass", "unexpected success")
            super().addUnexpectedSuccess(test)

        def addSubTest(self, test, subtest, err):
            if err is not None:
                kind = "fail" if issubclass(err[0], test.failureException) else "error"
                desc = subtest._subDescription() if hasattr(subtest, "_subDescription") else str(subtest)
                _record(test_id(test), kind, "subtest %s:\n%s" % (desc, self._fmt(err, test)))
            super().addSubTest(test, subtest, err)

    return Recording


def main(config):
    """Runs config["module"] with libregrtest; returns a summary dict."""
    global _out_fd
    _out_fd = os.dup(1)  # close-on-exec: the tests' children do not inherit it
    module = config["module"]
    # The host baseline lowers soft limits to what an unprivileged login
    # gets where the harness's own parent has more (see README.md); the
    # sandbox's program gets none of this.
    if config.get("soft_rlimits"):
        import resource
        for name, soft in sorted(config["soft_rlimits"].items()):
            which = getattr(resource, "RLIMIT_" + name.upper())
            hard = resource.getrlimit(which)[1]
            if hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
            resource.setrlimit(which, (soft, hard))
    _emit(_facts())

    from test.support import testresult
    testresult.RegressionTestResult = _recording_result(testresult.RegressionTestResult)

    import importlib
    # test.libregrtest's package namespace binds "main" to the function.
    regrtest_main = importlib.import_module("test.libregrtest.main")

    states = []
    orig_accumulate = regrtest_main.Regrtest.accumulate_result

    def accumulate_result(self, result, rerun=False):
        states.append(result)
        return orig_accumulate(self, result, rerun)

    regrtest_main.Regrtest.accumulate_result = accumulate_result

    args = list(config.get("regrtest_args", ["-v"]))
    for m in config.get("match", ()):
        args += ["-m", m]
    saved_argv = sys.argv
    sys.argv = [saved_argv[0] if saved_argv else "runner"] + args
    code = None
    try:
        regrtest_main.Regrtest().main(tests=[module])
    except SystemExit as e:
        code = e.code
    except BaseException as e:  # a crash of regrtest itself
        code = "exception: " + "".join(traceback.format_exception(e))
    finally:
        sys.argv = saved_argv
        # Regrtest.main arms a 5-minute exit watchdog on its way out.
        faulthandler.cancel_dump_traceback_later()

    state = type(states[-1]).__name__ if states else "NoResult"
    detail = str(states[-1]) if states else ""
    counts = {}
    for outcome, _ in _seen.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    summary = {"module": module, "state": state, "state_detail": detail, "exit": code, "counts": counts}
    if isinstance(code, str):
        summary["exit"] = _trim(code)
    _emit({"t": "end", "state": state, "summary": summary})
    sys.stdout.flush()
    return summary
