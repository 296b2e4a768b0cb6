from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .._transport import Embedded, Handler, Server, with_retries
from ..errors import ConfigurationError, RefusedError
from ..registry import Registry, as_registry
from ..types import SandboxLimits, SandboxResult, encode_files, parse_result

RunAs = Union[int, Tuple[int, int], Tuple[int, int, int]]
Approver = Callable[[str, Any], Any]


def run_as_flag(run_as: Optional[RunAs]) -> List[str]:
    if run_as is None:
        return []
    ids = (run_as, run_as) if isinstance(run_as, int) else tuple(run_as)
    if len(ids) not in (2, 3) or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in ids):
        raise ConfigurationError("run_as=%r: want a uid, (uid, gid) or (uid, gid, count), never 0" % (run_as,))
    return ["--run-as", ":".join(str(i) for i in ids)]


def call_tool(registry: Registry) -> Callable[[str, Any], Tuple[str, Any]]:
    """Answers a call event with the registry's function: its value, or
    its exception as the error the program's BindingError carries."""

    def call(name: str, args: Any) -> Tuple[str, Any]:
        tool = registry.get(name)
        if tool is None:
            return ("error", "no tool %s in this client's registry" % name)
        if not isinstance(args, dict):
            args = {}
        try:
            return ("value", tool.fn(**args))
        except Exception as e:
            return ("error", "%s: %s" % (type(e).__name__, e))

    return call


def approve_with(approver: Optional[Approver]) -> Optional[Callable[[str, Any], Tuple[bool, str]]]:
    """An approver as a transport's: approver(tool, args) returns a bool or
    (bool, reason)."""
    if approver is None:
        return None

    def approve(tool: str, args: Any) -> Tuple[bool, str]:
        v = approver(tool, args)
        if isinstance(v, tuple):
            return bool(v[0]), str(v[1]) if len(v) > 1 else ""
        return bool(v), ""

    return approve


class Sandbox:
    """What both sandboxes share: the transport, limits, run()."""

    #: constructor arguments a server refuses (it owns its sandbox), with
    #: their defaults
    _local_only: Dict[str, Any] = {}

    def __init__(self, *, host: Optional[str], psych_bin: Optional[str], token: Optional[str],
                 default_limits: Optional[SandboxLimits], env_allowlist: Optional[Sequence[str]],
                 require_network_denial: bool, capacity_retries: int, local: Dict[str, Any],
                 flags: List[str]) -> None:
        if default_limits is not None and not isinstance(default_limits, SandboxLimits):
            raise ConfigurationError("default_limits: want a SandboxLimits")
        if capacity_retries < 0:
            raise ConfigurationError("capacity_retries: must not be negative")
        self.default_limits = default_limits or SandboxLimits()
        self.default_limits.to_json()  # checked at construction
        self.env_allowlist = list(env_allowlist or [])
        self.require_network_denial = require_network_denial
        self.capacity_retries = capacity_retries
        host = host if host is not None else os.environ.get("PSYCH_HOST") or None
        self.host = host
        if host:
            for name, value in local.items():
                if value != self._local_only[name]:
                    raise ConfigurationError("%s=%r with host=: the server's sandbox is its own (psych serve's flags set it)" % (name, value))
            if psych_bin is not None:
                raise ConfigurationError("psych_bin with host=: a server needs no psych executable")
            self._transport: Any = Server(host, token)
        else:
            if token is not None:
                raise ConfigurationError("token is for host=")
            for name in self.env_allowlist:
                if not isinstance(name, str) or not name or "=" in name or "\0" in name:
                    raise ConfigurationError("env_allowlist: %r is not a variable's name" % (name,))
                flags += ["--env", name]
            if require_network_denial:
                flags.append("--require-network-denial")
            self._transport = Embedded(psych_bin, flags, [])

    def run(self, code: str, limits: Optional[SandboxLimits] = None, env: Optional[Mapping[str, str]] = None,
            files: Optional[Mapping[str, bytes]] = None, bindings: Union[None, Registry, Mapping[str, Callable[..., Any]]] = None,
            on_stdout: Optional[Callable[[str], None]] = None, on_stderr: Optional[Callable[[str], None]] = None,
            *, approver: Optional[Approver] = None) -> SandboxResult:
        """Run code in a fresh sandbox and return its result.

        A program's failure (an exception, a limit, a signal) is the
        result's ``failure``, never raised; what raises is the host's
        refusal or fault (ConfigurationError, RefusedError, CapacityError
        after ``capacity_retries`` retries, HostFault). ``limits`` replace
        ``default_limits`` whole; ``env`` sets variables named in
        ``env_allowlist`` (a server's allowlist with host=); ``files`` are
        written into the working directory before the first line;
        ``bindings`` are callable from the program as functions, each call
        through psych's tool path (schema, Policy, approval by
        ``approver(tool, args)``, which returns a bool or (bool, reason);
        without one a destructive tool is denied). ``on_stdout`` and
        ``on_stderr`` get the output as it comes."""
        if not isinstance(code, str):
            raise ConfigurationError("code: want a str")
        lim = limits if limits is not None else self.default_limits
        if not isinstance(lim, SandboxLimits):
            raise ConfigurationError("limits: want a SandboxLimits")
        req: Dict[str, Any] = {"code": code, "limits": lim.to_json()}
        if env:
            req["env"] = {str(k): str(v) for k, v in env.items()}
        reg = as_registry(bindings)
        if len(reg):
            req["bindings"] = reg.declarations()
        encoded = encode_files(files)
        if encoded is not None:
            req["files"] = encoded
        handler = Handler(on_stdout, on_stderr, call_tool(reg), approve_with(approver))
        res = parse_result(with_retries(lambda: self._transport.run(req, handler), self.capacity_retries))
        if self.host and self.require_network_denial:
            net = (res.isolation or {}).get("network") or {}
            if not (isinstance(net, dict) and net.get("verified") is True):
                raise RefusedError("psych serve: run %s: network denial not verified (require_network_denial)" % res.id)
        return res

    def _call(self, request: Dict[str, Any], handler: Handler, extra: List[str]) -> Dict[str, Any]:
        # The embedded transport adds the sandbox's own flags itself.
        return with_retries(lambda: self._transport.call(request, handler, [] if self.host else extra), self.capacity_retries)
