"""Tools: Python functions offered to programs (as bindings) and to a model
(through Runtime.call), each with a JSON Schema for its parameters."""
from __future__ import annotations

import inspect
import json
import keyword
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

from .errors import ConfigurationError

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object",
               "str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array", "dict": "object"}


@dataclass
class Tool:
    """One tool: ``fn`` called with the arguments as keywords. ``parameters``
    is a JSON Schema object; ``params`` the positional order a program's
    call maps; a ``destructive`` tool asks for approval before each call."""

    name: str
    fn: Callable[..., Any]
    description: str = ""
    parameters: Dict[str, Any] = field(default_factory=dict)
    params: List[str] = field(default_factory=list)
    destructive: bool = False

    def declaration(self) -> Dict[str, Any]:
        """The API's tool declaration."""
        d: Dict[str, Any] = {"name": self.name, "parameters": self.parameters, "params": self.params}
        if self.description:
            d["description"] = self.description
        if self.destructive:
            d["destructive"] = True
        return d


def _schema_of(fn: Callable[..., Any]) -> "tuple[Dict[str, Any], List[str]]":
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise ConfigurationError("tool %r: no signature to derive a schema from: %s" % (fn, e)) from None
    props: Dict[str, Any] = {}
    required: List[str] = []
    params: List[str] = []
    extra = False
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            raise ConfigurationError("tool %s: *%s cannot be called with named arguments" % (fn.__name__, p.name))
        if p.kind == p.VAR_KEYWORD:
            extra = True
            continue
        if p.kind == p.POSITIONAL_ONLY:
            raise ConfigurationError("tool %s: %s is positional-only; a tool is called with named arguments" % (fn.__name__, p.name))
        t = _JSON_TYPES.get(p.annotation) if p.annotation is not p.empty else None
        props[p.name] = {"type": t} if t else {}
        if p.default is p.empty:
            required.append(p.name)
        if p.kind == p.POSITIONAL_OR_KEYWORD:
            params.append(p.name)
    schema: Dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    if not extra:
        schema["additionalProperties"] = False
    return schema, params


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise ConfigurationError("tool name %r: want a Python identifier, not a keyword, not starting with _" % (name,))
    if name == "run_code":
        raise ConfigurationError("tool name run_code is reserved")


class Registry:
    """The tools a Runtime offers and a program may call.

    ``register(fn)`` (or ``@registry.tool``) adds a function; its parameters'
    schema is derived from its signature (str, int, float, bool, list, dict
    annotations; a default makes a parameter optional) unless ``parameters``
    gives one. A name given twice is a ConfigurationError."""

    def __init__(self) -> None:
        self._tools: Dict[str, Tool] = {}

    def register(self, fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None,
                 description: Optional[str] = None, parameters: Optional[Mapping[str, Any]] = None,
                 destructive: bool = False) -> Any:
        """Add fn as a tool (or, without fn, return a decorator that does)."""
        if fn is None:
            return lambda f: self.register(f, name=name, description=description, parameters=parameters, destructive=destructive)
        tname = name or fn.__name__
        _check_name(tname)
        if tname in self._tools:
            raise ConfigurationError("tool %s is registered already" % tname)
        schema, params = _schema_of(fn)
        if parameters is not None:
            schema = dict(parameters)
            if not isinstance(schema.get("properties", {}), dict):
                raise ConfigurationError("tool %s: parameters.properties is not an object" % tname)
            try:
                json.dumps(schema)
            except (TypeError, ValueError) as e:
                raise ConfigurationError("tool %s: parameters is not JSON: %s" % (tname, e)) from None
            params = [p for p in params if p in schema.get("properties", {})]
        desc = description if description is not None else inspect.getdoc(fn) or ""
        self._tools[tname] = Tool(name=tname, fn=fn, description=desc, parameters=schema, params=params, destructive=destructive)
        return fn

    tool = register

    def get(self, name: str) -> Optional[Tool]:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def declarations(self) -> List[Dict[str, Any]]:
        return [t.declaration() for t in self]


def as_registry(bindings: Union[None, Registry, Mapping[str, Callable[..., Any]]]) -> Registry:
    """A Registry from run()'s ``bindings``: a Registry, or a mapping of name
    to callable (its parameters from its signature)."""
    if bindings is None:
        return Registry()
    if isinstance(bindings, Registry):
        return bindings
    if not isinstance(bindings, Mapping):
        raise ConfigurationError("bindings: want a Registry or a mapping of name to callable")
    reg = Registry()
    for name, fn in bindings.items():
        if not callable(fn):
            raise ConfigurationError("bindings: %r is not callable" % (name,))
        reg.register(fn, name=name)
    return reg
