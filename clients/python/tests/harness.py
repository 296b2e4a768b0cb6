"""What the package's tests share: the psych binaries under test and a real
psych serve. scripts/python-client-test.sh sets PSYCH_BIN (psych, with
psych-full beside it) and PSYCH_SANDBOX_PYTHON; without PSYCH_BIN the
tests that need psych skip, and fail where CI is set."""
from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
from typing import Dict, List, Optional

PSYCH_BIN = os.environ.get("PSYCH_BIN", "")
SANDBOX_PYTHON = os.environ.get("PSYCH_SANDBOX_PYTHON", "/usr/bin/python3")
IN_CI = bool(os.environ.get("CI"))
TOKEN = "psych-python-client-test-token"


def require_psych(case: unittest.TestCase) -> str:
    if not PSYCH_BIN or not os.path.exists(PSYCH_BIN):
        if IN_CI:
            case.fail("PSYCH_BIN=%r: no psych binary; CI builds one (scripts/python-client-test.sh)" % PSYCH_BIN)
        case.skipTest("needs PSYCH_BIN, a psych binary (scripts/python-client-test.sh builds one)")
    if os.geteuid() != 0:
        if IN_CI:
            case.fail("CI runs as root")
        case.skipTest("needs root: the sandbox's runs get ids of their own")
    return PSYCH_BIN


class Served:
    """A real psych serve on a Unix socket and a loopback TCP port (with
    TOKEN), started with args; stop() ends it."""

    def __init__(self, args: List[str]) -> None:
        self.dir = tempfile.mkdtemp(prefix="psych-py-serve-")
        self.sock = os.path.join(self.dir, "api.sock")
        tokfile = os.path.join(self.dir, "token")
        with os.fdopen(os.open(tokfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(TOKEN)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.unix = "unix://" + self.sock
        self.tcp = "tcp://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(self.dir, "serve.log"), "w+b")
        self.proc = subprocess.Popen([PSYCH_BIN, "serve", "--listen", self.unix, "--listen", self.tcp, "--token-file", tokfile,
                                      "--python", SANDBOX_PYTHON] + args, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("psych serve did not become ready: %s" % self.output())
            time.sleep(0.05)

    def _ready(self) -> bool:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.sock)
        except OSError:
            return False
        conn = http.client.HTTPConnection("psych")
        conn.sock = s
        try:
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_served: Dict[str, Served] = {}


def served(name: str = "main") -> Served:
    """A psych serve of the tests, started once: "main" with the defaults,
    "one" with one run at a time and no queue, so that a second run while
    one holds the slot is a real 429."""
    if name not in _served:
        _served[name] = Served(["--max-runs", "1", "--queue", "0"] if name == "one" else [])
    return _served[name]


def stop_served() -> None:
    for s in _served.values():
        s.stop()
    _served.clear()
