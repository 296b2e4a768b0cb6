"""Runtime: psych's tool path from Python (schema, Policy, approval,
recording), run by the psych executable or a psych serve."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from ._transport import Embedded, Handler, Server
from .errors import ConfigurationError, HostFault
from .registry import Registry
from .sandbox._base import Approver, Sandbox, approve_with, call_tool

RUN_CODE = "run_code"

_RUN_CODE_SCHEMA = {"type": "object", "properties": {"code": {"type": "string", "description": "The Python program. Its last expression is its value."}},
                    "required": ["code"], "additionalProperties": False}


@dataclass(frozen=True)
class Outcome:
    """What one call produced: ``outcome`` is ``ok`` (``value`` set),
    ``error`` (the tool failed), ``denied`` (the Policy or the approver
    refused) or ``invalid`` (the arguments failed the schema, or no such
    tool); ``error`` says why; ``verdict`` and ``reason`` are the Policy's
    decision. A call's failure is data here, never raised."""

    call_id: str
    outcome: str
    value: Any = None
    error: str = ""
    verdict: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


def parse_outcome(obj: Dict[str, Any]) -> Outcome:
    dec = obj.get("decision") if isinstance(obj.get("decision"), dict) else {}
    kind = obj.get("outcome")
    if not isinstance(kind, str) or not kind:
        raise HostFault("psych: an outcome without its kind")

    def s(d: Dict[str, Any], k: str) -> str:
        v = d.get(k, "")
        return v if isinstance(v, str) else ""

    return Outcome(call_id=s(obj, "call_id"), outcome=kind, value=obj.get("value"), error=s(obj, "error"),
                   verdict=s(dec, "verdict"), reason=s(dec, "reason"))


class Runtime:
    """The tool path: ``registry``'s tools, and ``run_code`` when a
    ``sandbox`` is set, each call through psych's schema check, Policy
    (a destructive tool asks ``approver(tool, args)``, which returns a bool
    or (bool, reason); none denies) and recording (in the SQLite ledger at
    ``store``, a path; the server's own with host=).

    ``call(name, args)`` is ``psych call --events`` (or ``POST /v1/calls``
    on the sandbox's server); a run_code program calls the registry's tools
    as bindings through the same path. ``model`` is an object with
    ``next(transcript, tools)`` returning an assistant message (a dict:
    ``content``, and ``tool_calls`` ``[{id, name, args}]`` to call tools);
    ``turn(messages)`` runs the loop Go's Runtime.Turn runs."""

    def __init__(self, store: Optional[str] = None, model: Any = None, registry: Optional[Registry] = None,
                 sandbox: Optional[Sandbox] = None, approver: Optional[Approver] = None, *,
                 psych_bin: Optional[str] = None, max_steps: int = 16) -> None:
        if registry is not None and not isinstance(registry, Registry):
            raise ConfigurationError("registry: want a Registry")
        if sandbox is not None and not isinstance(sandbox, Sandbox):
            raise ConfigurationError("sandbox: want a SubprocessSandbox or ContainerSandbox")
        self.store, self.model, self.registry, self.sandbox, self.approver = store, model, registry or Registry(), sandbox, approver
        self.max_steps = max_steps
        if sandbox is not None and sandbox.host:
            if store is not None:
                raise ConfigurationError("store with a server's sandbox: the server records into its own ledger (psych serve --store)")
            self._transport: Any = sandbox._transport
            self._extra: List[str] = []
        elif sandbox is not None:
            self._transport = sandbox._transport
            self._extra = ["--store", store] if store else []
        else:
            self._transport = None  # made at the first call: tools() needs no psych
            self._extra = ["--store", store] if store else []
        self._psych_bin = psych_bin

    def tools(self) -> List[Dict[str, Any]]:
        """The tools a model is offered: the registry's, and run_code only
        when a sandbox is set."""
        out = [{"name": t.name, "description": t.description, "parameters": t.parameters, "destructive": t.destructive}
               for t in self.registry]
        if self.sandbox is not None:
            out.append({"name": RUN_CODE, "description": "Run a Python program in a fresh, isolated sandbox and return its result as JSON.",
                        "parameters": _RUN_CODE_SCHEMA, "destructive": False})
        return out

    def call(self, name: str, args: Optional[Mapping[str, Any]] = None, *, call_id: Optional[str] = None) -> Outcome:
        """Call a tool through psych's tool path and return its Outcome."""
        if name == RUN_CODE and self.sandbox is None:
            return Outcome(call_id=call_id or "", outcome="invalid", error="no tool run_code: this Runtime has no sandbox")
        req: Dict[str, Any] = {"tool": name, "args": dict(args or {})}
        if call_id:
            req["id"] = call_id
        if len(self.registry):
            req["bindings"] = self.registry.declarations()
        handler = Handler(call=call_tool(self.registry), approve=approve_with(self.approver))
        if self.sandbox is not None:
            out = self.sandbox._call(req, handler, self._extra)
        else:
            if self._transport is None:
                self._transport = Embedded(self._psych_bin, [], [])
            out = self._transport.call(req, handler, self._extra)
        return parse_outcome(out)

    def turn(self, messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Runs the model until it answers without calling a tool: each
        tool call goes through call(), its outcome appended as a tool
        message (the value's JSON, or {"error", "outcome"}). Returns the
        transcript; past max_steps a HostFault."""
        if self.model is None:
            raise ConfigurationError("turn: this Runtime has no model")
        transcript = list(messages)
        for _ in range(self.max_steps):
            msg = dict(self.model.next(transcript, self.tools()))
            msg.setdefault("role", "assistant")
            transcript.append(msg)
            calls = msg.get("tool_calls") or []
            if not calls:
                return transcript
            for tc in calls:
                out = self.call(tc["name"], tc.get("args") or {}, call_id=tc.get("id"))
                content = json.dumps(out.value) if out.ok else json.dumps({"error": out.error, "outcome": out.outcome})
                transcript.append({"role": "tool", "tool_call_id": out.call_id, "name": tc["name"], "content": content})
        raise HostFault("turn: the model took more than %d steps" % self.max_steps)
