"""The package against the real psych binaries and a real psych serve:
the same cases over the embedded transport (psych run --events, psych call
--events) and over the server (unix:// and tcp:// with a token)."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import unittest
from typing import Any, List

import psych_runtime
from psych_runtime import (CapacityError, ConfigurationError, Registry, Runtime, SandboxLimits, SandboxResult,
                           SubprocessSandbox)

from tests import harness


def tearDownModule() -> None:
    harness.stop_served()


class Cases:
    """Cases every transport runs; a subclass says how to make a sandbox."""

    def sandbox(self, **kw: Any) -> SubprocessSandbox:
        raise NotImplementedError

    def test_value_and_output(self) -> None:
        seen: List[str] = []
        r = self.sandbox().run("import sys\nprint('out')\nprint('err', file=sys.stderr)\n{'a': (1, 2)}", on_stdout=seen.append)
        self.assertIsInstance(r, SandboxResult)
        self.assertEqual((r.stdout, r.stderr, r.value, r.failure), ("out\n", "err\n", {"a": [1, 2]}, None))
        self.assertEqual("".join(seen), "out\n")
        self.assertTrue(r.network_denied)
        self.assertTrue(r.id)
        self.assertGreater(r.duration_seconds, 0)

    def test_failure_is_data(self) -> None:
        r = self.sandbox().run("x = 1\n1/0")
        self.assertEqual((r.failure.type, r.failure.exit_code), ("ZeroDivisionError", 1))
        self.assertIn('File "<program>", line 2', r.failure.traceback)
        r = self.sandbox().run("import time\ntime.sleep(30)", limits=SandboxLimits(wall_seconds=1))
        self.assertEqual(r.limit_hit, "wall_seconds")

    def test_files_in_and_out(self) -> None:
        """Files go into /work before the first line; what the run made
        or changed comes back with its hash, an unchanged input does not."""
        code = ("import os\ns = open('in/data.csv').read()\n"
                "open('out.txt', 'w').write(s.upper())\n[os.getcwd(), s]")
        r = self.sandbox().run(code, files={"in/data.csv": b"a,b\n", "same.txt": b"kept"})
        self.assertIsNone(r.failure, r.failure)
        self.assertEqual(r.value, ["/work", "a,b\n"])
        self.assertEqual([(f.path, f.data, f.size) for f in r.files], [("out.txt", b"A,B\n", 4)])
        self.assertEqual(r.files[0].sha256, hashlib.sha256(b"A,B\n").hexdigest())
        self.assertEqual((r.files_omitted, r.files_truncated), ([], False))

    def test_artifacts(self) -> None:
        """A figure plt.show() captured and one open at the end come back
        as PNGs with their sides; one the run forged is left out, with why."""
        if subprocess.run([harness.SANDBOX_PYTHON, "-c", "import matplotlib"], capture_output=True).returncode != 0:
            if os.environ.get("CI") == "true":
                self.fail("CI's interpreter has matplotlib")
            self.skipTest("the interpreter has no matplotlib")
        code = ("import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()\n"
                "plt.figure(figsize=(2, 1), dpi=100)\n"
                "open('/tmp/.psych-figures/figure-9.png', 'wb').write(b'forged')")
        r = self.sandbox().run(code)
        self.assertIsNone(r.failure, r.failure)
        self.assertEqual([(a.name, a.mime, a.width, a.height) for a in r.artifacts],
                         [("figure-1-2.png", "image/png", 200, 100), ("figure-1.png", "image/png", 640, 480)])
        for a in r.artifacts:
            self.assertTrue(a.data.startswith(b"\x89PNG\r\n\x1a\n"))
            self.assertEqual((a.size, a.sha256), (len(a.data), hashlib.sha256(a.data).hexdigest()))
        self.assertEqual([(o.path, o.size, o.reason) for o in r.artifacts_omitted], [("figure-9.png", 6, "invalid")])

    def test_bindings(self) -> None:
        """A mapping's callables and a Registry's tools are functions in
        the program; a tool's exception is the program's BindingError."""
        def boom() -> None:
            raise ValueError("no")
        r = self.sandbox().run("try:\n    boom()\nexcept Exception as e:\n    err = str(e)\n[add(2, b=3), err]",
                               bindings={"add": lambda a, b: a + b, "boom": boom})
        self.assertIsNone(r.failure, r.failure)
        self.assertEqual(r.value[0], 5)
        self.assertIn("ValueError: no", r.value[1])

    def test_schema_denial_approval(self) -> None:
        """Through the Runtime: a bad argument is refused by the schema
        before the tool runs, a destructive tool without approval is
        denied by the Policy, an approved one runs, and run_code's
        program calls the registry's tools through the same path."""
        calls: List[str] = []
        reg = Registry()

        @reg.tool(destructive=True)
        def remove(path: str) -> str:
            """Remove a file."""
            calls.append(path)
            return "removed " + path

        sb = self.sandbox()
        out = Runtime(registry=reg, sandbox=sb).call("remove", {"path": 3})
        self.assertEqual(out.outcome, "invalid")
        self.assertIn("schema", out.error)
        out = Runtime(registry=reg, sandbox=sb).call("remove", {"path": "a"})
        self.assertEqual((out.outcome, out.verdict), ("denied", "ask"))
        out = Runtime(registry=reg, sandbox=sb, approver=lambda tool, args: (False, "not today")).call("remove", {"path": "a"})
        self.assertEqual(out.outcome, "denied")
        self.assertIn("not today", out.error)
        self.assertEqual(calls, [])
        asked: List[Any] = []
        rt = Runtime(registry=reg, sandbox=sb, approver=lambda tool, args: asked.append((tool, args)) or True)
        out = rt.call("remove", {"path": "a"})
        self.assertEqual((out.outcome, out.value), ("ok", "removed a"))
        self.assertEqual(asked, [("remove", {"path": "a"})])
        out = rt.call("run_code", {"code": "remove('b')"})
        self.assertEqual(out.outcome, "ok", out.error)
        self.assertEqual(out.value["value"], "removed b")
        self.assertEqual(calls, ["a", "b"])
        self.assertEqual([t["name"] for t in rt.tools()], ["remove", "run_code"])
        self.assertEqual([t["name"] for t in Runtime(registry=reg).tools()], ["remove"])

    def test_turn(self) -> None:
        """Runtime.turn runs the model's loop: each tool call through
        call() (run_code's program calling a registry tool), its outcome a
        tool message, until the model answers without calling."""
        reg = Registry()
        reg.register(lambda a, b: a * b, name="mul")

        class Model:
            def __init__(self) -> None:
                self.seen: List[Any] = []

            def next(self, transcript: List[Any], tools: List[Any]) -> Any:
                self.seen.append([t["name"] for t in tools])
                if transcript[-1]["role"] == "user":
                    return {"content": "", "tool_calls": [{"id": "t1", "name": "run_code", "args": {"code": "mul(6, 7)"}},
                                                          {"id": "t2", "name": "mul", "args": {"a": "x"}}]}
                return {"content": "done"}

        m = Model()
        out = Runtime(registry=reg, sandbox=self.sandbox(), model=m).turn([{"role": "user", "content": "6*7?"}])
        self.assertEqual([x["role"] for x in out], ["user", "assistant", "tool", "tool", "assistant"])
        self.assertEqual(__import__("json").loads(out[2]["content"])["value"], 42)
        self.assertEqual(__import__("json").loads(out[3]["content"])["outcome"], "invalid")
        self.assertEqual((out[2]["tool_call_id"], out[3]["name"], out[4]["content"]), ("t1", "mul", "done"))
        self.assertEqual(m.seen, [["mul", "run_code"]] * 2)

    def test_refused_request(self) -> None:
        with self.assertRaises(ConfigurationError):
            self.sandbox().run("1", env={"PSYCH_NOT_ALLOWED": "x"})
        with self.assertRaises(ConfigurationError):
            self.sandbox().run("1", bindings={"run_code": lambda: 1})


class EmbeddedTests(Cases, unittest.TestCase):
    def setUp(self) -> None:
        self.bin = harness.require_psych(self)

    def sandbox(self, **kw: Any) -> SubprocessSandbox:
        return SubprocessSandbox(python_bin=harness.SANDBOX_PYTHON, psych_bin=self.bin, **kw)

    def test_env_allowlist_and_limits(self) -> None:
        os.environ["PSYCH_PY_CLIENT_A"] = "host"
        try:
            sb = self.sandbox(env_allowlist=["PSYCH_PY_CLIENT_A", "PSYCH_PY_CLIENT_B"], default_limits=SandboxLimits(process_count=7))
            r = sb.run("import os\n[os.environ.get('PSYCH_PY_CLIENT_A'), os.environ.get('PSYCH_PY_CLIENT_B')]")
            self.assertEqual(r.value, ["host", None])
            self.assertEqual(r.isolation["limits"]["nproc"].split()[0], str(7 + 2))  # psych's two of its own
            r = sb.run("import os\nos.environ.get('PSYCH_PY_CLIENT_B')", env={"PSYCH_PY_CLIENT_B": "mine"})
            self.assertEqual(r.value, "mine")
            # run_code through the Runtime: the same sandbox's flags.
            out = Runtime(sandbox=sb).call("run_code", {"code": "import os\nos.environ.get('PSYCH_PY_CLIENT_A')"})
            self.assertEqual((out.outcome, out.value["value"]), ("ok", "host"), out.error)
        finally:
            del os.environ["PSYCH_PY_CLIENT_A"]

    def test_run_as(self) -> None:
        r = self.sandbox(run_as=(43210, 43211)).run("1")
        self.assertIn(" 43210 ", r.isolation["uid_map"])
        with self.assertRaises(ConfigurationError):
            self.sandbox(run_as=0)

    def test_allow_same_uid(self) -> None:
        """Not root: a ConfigurationError at construction unless
        allow_same_uid=True; root needs neither."""
        from psych_runtime.sandbox import subprocess as sub
        real = sub.os.geteuid
        sub.os.geteuid = lambda: 1000  # type: ignore[assignment]
        try:
            with self.assertRaises(ConfigurationError):
                self.sandbox()
            self.sandbox(allow_same_uid=True)
        finally:
            sub.os.geteuid = real  # type: ignore[assignment]
        self.sandbox()

    def test_no_psych(self) -> None:
        with self.assertRaises(ConfigurationError):
            SubprocessSandbox(psych_bin="/nonexistent/psych").run("1")


class ServerUnixTests(Cases, unittest.TestCase):
    def setUp(self) -> None:
        harness.require_psych(self)
        self.served = harness.served()

    def sandbox(self, **kw: Any) -> SubprocessSandbox:
        return SubprocessSandbox(host=self.served.unix, **kw)

    def test_local_arguments_refused(self) -> None:
        for kw in ({"python_bin": "/usr/bin/python3"}, {"env_allowlist": ["A"]}, {"run_as": 5}, {"allow_same_uid": True}, {"psych_bin": "psych"}):
            with self.subTest(kw=kw), self.assertRaises(ConfigurationError):
                self.sandbox(**kw)
        with self.assertRaises(ConfigurationError):
            Runtime(store="/tmp/x.db", sandbox=self.sandbox())

    def test_capacity(self) -> None:
        """A second run while one holds the server's only slot is a real 429:
        CapacityError with the server's Retry-After; with capacity_retries
        the client waits and retries until the slot is free."""
        self.served = harness.served("one")
        holding, release = threading.Event(), threading.Event()

        def hold() -> bool:
            holding.set()
            return release.wait(60)

        results: List[Any] = []
        t = threading.Thread(target=lambda: results.append(self.sandbox().run("hold()", bindings={"hold": hold})))
        t.start()
        try:
            self.assertTrue(holding.wait(60), "the first run never called hold")
            with self.assertRaises(CapacityError) as cm:
                self.sandbox().run("1")
            self.assertEqual(cm.exception.code, "capacity_exhausted")
            self.assertIsNotNone(cm.exception.retry_after)
            self.assertGreater(cm.exception.retry_after, 0)
        finally:
            release.set()
            t.join(60)
        self.assertEqual(results[0].value, True)

        # Retries: the slot is freed at the client's first backoff.
        holding.clear()
        release.clear()
        t = threading.Thread(target=lambda: results.append(self.sandbox().run("hold()", bindings={"hold": hold})))
        t.start()
        self.assertTrue(holding.wait(60))
        from psych_runtime import _transport
        slept: List[float] = []
        real = _transport.time.sleep

        def sleep(s: float) -> None:
            slept.append(s)
            if len(slept) == 1:
                release.set()
                t.join(60)
            else:  # the server frees the slot just after the holder's result
                real(0.05)

        _transport.time.sleep = sleep  # type: ignore[assignment]
        try:
            r = self.sandbox(capacity_retries=3).run("6 * 7")
        finally:
            _transport.time.sleep = real  # type: ignore[assignment]
            release.set()
            t.join(60)
        self.assertEqual(r.value, 42)
        self.assertGreaterEqual(len(slept), 1)
        self.assertGreaterEqual(slept[0], 1.0)  # the server's Retry-After, not the 0.1 s backoff


class ServerTCPTests(unittest.TestCase):
    def setUp(self) -> None:
        harness.require_psych(self)
        self.served = harness.served()

    def test_token(self) -> None:
        r = SubprocessSandbox(host=self.served.tcp, token=harness.TOKEN).run("print('tcp')\n1 + 1")
        self.assertEqual((r.stdout, r.value), ("tcp\n", 2))
        with self.assertRaises(ConfigurationError) as cm:
            SubprocessSandbox(host=self.served.tcp, token="wrong-token-but-long-enough").run("1")
        self.assertEqual(cm.exception.code, "unauthorized")


if __name__ == "__main__":
    unittest.main()
