"""The two transports of psych's event protocol (api/events.md): the
embedded one (``psych run --events`` / ``psych call --events`` as a child
process) and a server's (``psych serve`` over unix://, tcp:// or tls://)."""
from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from typing import IO, Any, Callable, Dict, List, Optional, Tuple

from .errors import CapacityError, ConfigurationError, HostFault, PsychError, RefusedError, from_api

# Bounds on what psych sends (api.DefaultMaxEventBytes; stderr kept for
# the message of a failure).
MAX_EVENT_BYTES = 64 << 20
MAX_STDERR_BYTES = 64 << 10
MAX_ERROR_BYTES = 64 << 10

Answer = Tuple[str, Any]  # ("value", v) or ("error", "text")


class Handler:
    """What a transport calls as events come: output, a tool's call (its
    value or an error string), an approval (approve, reason)."""

    def __init__(self, on_stdout: Optional[Callable[[str], None]] = None,
                 on_stderr: Optional[Callable[[str], None]] = None,
                 call: Optional[Callable[[str, Any], Answer]] = None,
                 approve: Optional[Callable[[str, Any], Tuple[bool, str]]] = None) -> None:
        self.on_stdout, self.on_stderr, self.call, self.approve = on_stdout, on_stderr, call, approve

    def answer(self, ev: Dict[str, Any]) -> Dict[str, Any]:
        """The answer to a call or approval event (api.Answer's fields but
        call_id)."""
        tool, args = ev.get("tool"), ev.get("args")
        if ev.get("event") == "approval":
            if self.approve is None:
                return {"approve": False, "reason": "no approver is configured"}
            try:
                ok, reason = self.approve(str(tool), args)
            except Exception as e:  # an approver that fails denies
                return {"approve": False, "reason": "the approver failed: %s: %s" % (type(e).__name__, e)}
            return {"approve": bool(ok), "reason": str(reason or "")}
        if self.call is None:
            return {"error": "this client has no tool %s" % tool}
        kind, v = self.call(str(tool), args)
        if kind == "value":
            try:
                json.dumps(v)
            except (TypeError, ValueError) as e:
                return {"error": "tool %s returned a value that is not JSON: %s" % (tool, e)}
            return {"value": v}
        return {"error": str(v)}


def _event_loop(lines: Callable[[], Optional[bytes]], handler: Handler,
                send_answer: Callable[[Dict[str, Any], Dict[str, Any], str], None]) -> Dict[str, Any]:
    """Reads events until the terminal one and returns it. Calls and
    approvals are answered on threads of their own (output keeps flowing);
    send_answer(ev, answer, run_id) delivers one."""
    run_id = ""
    workers: List[threading.Thread] = []
    try:
        while True:
            line = lines()
            if line is None:
                raise HostFault("psych: the event stream ended without a terminal event")
            if len(line) > MAX_EVENT_BYTES or not line.endswith(b"\n") and len(line) >= MAX_EVENT_BYTES:
                raise HostFault("psych: an event longer than %d bytes" % MAX_EVENT_BYTES)
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError as e:
                raise HostFault("psych: a malformed event: %s" % e) from None
            if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
                raise HostFault("psych: an event that is not an object with a name")
            name = ev["event"]
            if name in ("result", "outcome", "error"):
                return ev
            if name == "started" and isinstance(ev.get("id"), str):
                run_id = ev["id"]
            elif name in ("stdout", "stderr"):
                cb = handler.on_stdout if name == "stdout" else handler.on_stderr
                data = ev.get("data")
                if cb is not None and isinstance(data, str):
                    cb(data)
            elif name in ("call", "approval"):
                if not isinstance(ev.get("call_id"), str) or not isinstance(ev.get("tool"), str):
                    raise HostFault("psych: a %s event without call_id or tool" % name)
                rid = run_id

                def work(ev: Dict[str, Any] = ev, rid: str = rid) -> None:
                    try:
                        send_answer(ev, handler.answer(ev), rid)
                    except Exception:  # the run ends without the answer; psych reports it
                        pass

                t = threading.Thread(target=work, name="psych-answer", daemon=True)
                t.start()
                workers.append(t)
                workers = [w for w in workers if w.is_alive()]
    finally:
        for t in workers:
            t.join(timeout=0)


def terminal(ev: Dict[str, Any], want: str) -> Dict[str, Any]:
    """The payload of a terminal event, or its typed error raised."""
    if ev["event"] == "error":
        raise from_api(ev.get("error"))
    payload = ev.get(want)
    if ev["event"] != want or not isinstance(payload, dict):
        raise HostFault("psych: the stream ended with %r, not %s" % (ev["event"], want))
    return payload


class Embedded:
    """The embedded transport: the ``psych`` executable (``psych_bin``, else
    ``psych`` on PATH) runs each request, events on its stdout."""

    def __init__(self, psych_bin: Optional[str], flags: List[str], run_flags: List[str]) -> None:
        exe = psych_bin or shutil.which("psych")
        if not exe:
            raise ConfigurationError("psych: no psych executable on PATH (pass psych_bin=, or host= for a server)")
        self.exe, self.flags, self.run_flags = exe, flags, run_flags

    def _session(self, cmd: str, request: Dict[str, Any], handler: Handler, extra: List[str]) -> Dict[str, Any]:
        argv = [self.exe, cmd, "--events"] + self.flags + extra
        env = dict(os.environ)
        env.pop("PSYCH_HOST", None)  # the embedded transport runs here
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        except OSError as e:
            raise ConfigurationError("psych: start %s: %s" % (self.exe, e)) from None
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdin, stdout = proc.stdin, proc.stdout
        errbuf = bytearray()

        def drain(f: IO[bytes] = proc.stderr) -> None:
            for chunk in iter(lambda: f.read(4096), b""):
                errbuf.extend(chunk)
                if len(errbuf) > MAX_STDERR_BYTES:
                    del errbuf[: len(errbuf) - MAX_STDERR_BYTES]

        errt = threading.Thread(target=drain, name="psych-stderr", daemon=True)
        errt.start()
        lock = threading.Lock()

        def send_answer(ev: Dict[str, Any], answer: Dict[str, Any], run_id: str) -> None:
            line = json.dumps(dict(answer, call_id=ev["call_id"])).encode() + b"\n"
            with lock:
                stdin.write(line)
                stdin.flush()

        ok = False
        try:
            try:
                stdin.write(json.dumps(request).encode() + b"\n")
                stdin.flush()
            except BrokenPipeError:
                pass  # psych ended at once: its exit says why
            try:
                ev: Optional[Dict[str, Any]] = _event_loop(lambda: stdout.readline(MAX_EVENT_BYTES + 1) or None, handler, send_answer)
            except HostFault:
                ev = None
                if proc.poll() is None:
                    raise
            ok = ev is not None
        finally:
            with lock:
                try:
                    stdin.close()
                except OSError:
                    pass
            if not ok and proc.poll() is None:
                proc.terminate()  # psych cancels the run and removes it
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            errt.join(timeout=5)
            stdout.close()
            proc.stderr.close()
        if ev is None:
            msg = "psych: %s exited %d: %s" % (cmd, rc, bytes(errbuf).decode("utf-8", "replace").strip())
            if rc == 2:
                raise ConfigurationError(msg)
            if rc == 3:
                raise RefusedError(msg)
            if rc == 75:
                raise CapacityError(msg)
            raise HostFault(msg)
        return ev

    def run(self, request: Dict[str, Any], handler: Handler) -> Dict[str, Any]:
        return terminal(self._session("run", request, handler, self.run_flags), "result")

    def call(self, request: Dict[str, Any], handler: Handler, extra: List[str]) -> Dict[str, Any]:
        return terminal(self._session("call", request, handler, extra), "outcome")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if self.timeout is not None:
                s.settimeout(self.timeout)
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Server:
    """A psych serve at ``host``: ``unix:///PATH``, ``tcp://HOST:PORT`` or
    ``tls://HOST:PORT``, with a bearer ``token`` (else ``PSYCH_TOKEN``)."""

    def __init__(self, host: str, token: Optional[str] = None, timeout: Optional[float] = 30.0) -> None:
        u = urllib.parse.urlsplit(host)
        self.timeout = timeout
        if u.scheme == "unix":
            if u.netloc or not u.path.startswith("/"):
                raise ConfigurationError("host %r: want unix:///absolute/path" % host)
            self._new = lambda: _UnixConnection(u.path, timeout)
        elif u.scheme in ("tcp", "tls") and u.hostname and u.port:
            hostname, port = u.hostname, u.port
            if u.scheme == "tcp":
                self._new = lambda: http.client.HTTPConnection(hostname, port, timeout=timeout)
            else:
                ctx = ssl.create_default_context()
                self._new = lambda: http.client.HTTPSConnection(hostname, port, timeout=timeout, context=ctx)
        else:
            raise ConfigurationError("host %r: want unix:///PATH, tcp://HOST:PORT or tls://HOST:PORT" % host)
        self.token = token if token is not None else os.environ.get("PSYCH_TOKEN", "").strip()

    def _headers(self, stream: bool) -> Dict[str, str]:
        h = {"Content-Type": "application/json", "User-Agent": "psych-runtime-python"}
        if stream:
            h["Accept"] = "application/x-ndjson"
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def _refusal(self, resp: http.client.HTTPResponse) -> PsychError:
        body = resp.read(MAX_ERROR_BYTES)
        retry: Optional[float] = None
        ra = resp.getheader("Retry-After")
        if ra is not None:
            try:
                retry = float(ra)
            except ValueError:
                retry = None
        try:
            err = json.loads(body).get("error")
        except (ValueError, AttributeError):
            err = {"code": "host_fault" if resp.status >= 500 else "invalid_request",
                   "message": "HTTP %d: %s" % (resp.status, body[:200].decode("utf-8", "replace"))}
        if resp.status == 429 and not isinstance(err, dict):
            err = {"code": "capacity_exhausted", "message": "HTTP 429"}
        return from_api(err, retry, "psych serve: %d" % resp.status)

    def post(self, path: str, body: Dict[str, Any]) -> None:
        conn = self._new()
        try:
            conn.request("POST", path, json.dumps(body).encode(), self._headers(False))
            resp = conn.getresponse()
            if resp.status // 100 != 2:
                raise self._refusal(resp)
            resp.read(MAX_ERROR_BYTES)
        finally:
            conn.close()

    def _stream(self, path: str, request: Dict[str, Any], handler: Handler) -> Dict[str, Any]:
        conn = self._new()
        try:
            try:
                conn.request("POST", path, json.dumps(request).encode(), self._headers(True))
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise HostFault("psych serve: %s" % e) from None
            if resp.status != 200:
                raise self._refusal(resp)
            # A stream is quiet while a program computes: keepalives come
            # every 15 s, so a read waits at most a little longer.
            if conn.sock is not None:
                conn.sock.settimeout(None if self.timeout is None else max(self.timeout, 60.0))

            def send_answer(ev: Dict[str, Any], answer: Dict[str, Any], run_id: str) -> None:
                kind = "approvals" if ev["event"] == "approval" else "calls"
                q = urllib.parse.quote
                self.post("/v1/runs/%s/%s/%s" % (q(run_id, safe=""), kind, q(ev["call_id"], safe="")), answer)

            def lines() -> Optional[bytes]:
                try:
                    return resp.readline(MAX_EVENT_BYTES + 1) or None
                except (OSError, http.client.HTTPException) as e:
                    raise HostFault("psych serve: read the events: %s" % e) from None

            return _event_loop(lines, handler, send_answer)
        finally:
            conn.close()

    def run(self, request: Dict[str, Any], handler: Handler) -> Dict[str, Any]:
        return terminal(self._stream("/v1/runs", request, handler), "result")

    def call(self, request: Dict[str, Any], handler: Handler, extra: List[str]) -> Dict[str, Any]:
        return terminal(self._stream("/v1/calls", request, handler), "outcome")


def with_retries(fn: Callable[[], Any], retries: int, max_backoff: float = 30.0) -> Any:
    """fn, retried up to retries times on a CapacityError (nothing ran), each
    wait the host's retry_after or an exponential backoff from 0.1 s, at most
    max_backoff."""
    attempt = 0
    while True:
        try:
            return fn()
        except CapacityError as e:
            if attempt >= retries:
                raise
            wait = min(max(e.retry_after or 0.0, 0.1 * (2 ** attempt)), max_backoff)
            attempt += 1
            time.sleep(wait)
