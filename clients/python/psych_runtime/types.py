"""The contract's data: limits, results, failures, files and artifacts."""
from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional

from .errors import HostFault

MiB = 1 << 20


@dataclass(frozen=True)
class SandboxLimits:
    """The limits of one run (the contract's table, JSON names as fields).

    The seed's five keep their defaults; psych's own (``memory_bytes``,
    ``stack_bytes``, ``open_files``, ``approval_seconds``) are None, which
    keeps the host's default. Each is enforced by the kernel, never by the
    program: see psych's docs/limits-and-results.md."""

    cpu_seconds: float = 10.0
    address_space_bytes: int = 512 * MiB
    file_size_bytes: int = 10 * MiB
    process_count: int = 64
    wall_seconds: float = 30.0
    memory_bytes: Optional[int] = None
    stack_bytes: Optional[int] = None
    open_files: Optional[int] = None
    approval_seconds: Optional[float] = None

    def to_json(self) -> Dict[str, Any]:
        """The API's ``limits`` object: every field that is set."""
        out: Dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                from .errors import ConfigurationError

                raise ConfigurationError("SandboxLimits.%s: %r is not a non-negative number" % (f.name, v))
            out[f.name] = v
        return out


@dataclass(frozen=True)
class SandboxFailure:
    """Why a program failed: its exception's ``type`` and ``message``, the
    ``traceback`` with the program's own lines, and ``exit_code`` (int or
    None) and ``signal`` (a name such as ``"SIGKILL"``, or None)."""

    type: str
    message: str
    traceback: str
    exit_code: Optional[int]
    signal: Optional[str]


@dataclass(frozen=True)
class File:
    """A file the run created or changed in its working directory."""

    path: str
    size: int
    sha256: str
    mode: int
    data: bytes


@dataclass(frozen=True)
class FileOmitted:
    """A file a cap left out, with its ``reason`` (``too_large``,
    ``total_cap``, ``count_cap``, ``not_regular``, ``unreadable``,
    ``time_cap``)."""

    path: str
    size: int
    reason: str


@dataclass(frozen=True)
class Artifact:
    """A figure the run produced: a PNG of a matplotlib figure that
    ``plt.show()`` captured or that was still open at the end, named
    ``figure-N.png`` (``figure-N-K.png`` for its K-th capture), checked by
    the host; width and height are the PNG's own."""

    name: str
    mime: str
    width: int
    height: int
    sha256: str
    data: bytes
    size: int = 0


@dataclass(frozen=True)
class SandboxResult:
    """What one run produced. A program's failure is ``failure``, never an
    exception; ``value`` is what its last expression evaluated to (JSON
    shaped; None for None and for nothing)."""

    stdout: str
    stderr: str
    value: Any
    failure: Optional[SandboxFailure]
    duration_seconds: float
    limit_hit: Optional[str]
    network_denied: bool
    stdout_truncated: bool
    stderr_truncated: bool
    usage: Optional[Dict[str, Any]] = None
    isolation: Optional[Dict[str, Any]] = None
    files: List[File] = field(default_factory=list)
    files_omitted: List[FileOmitted] = field(default_factory=list)
    files_truncated: bool = False
    artifacts: List[Artifact] = field(default_factory=list)
    id: str = ""
    #: Figures a cap or the host's check left out (``path`` is the name).
    artifacts_omitted: List[FileOmitted] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the program completed without a failure."""
        return self.failure is None


# Parsing: every byte from psych is checked; a wrong shape is a HostFault,
# never a TypeError far from here.


def _get(obj: Mapping[str, Any], key: str, kind: Any, default: Any = None, optional: bool = False) -> Any:
    v = obj.get(key, default)
    if v is None and optional:
        return None
    if kind is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if (kind in (int, float) and isinstance(v, bool)) or not isinstance(v, kind):
        raise HostFault("psych: a result's %r is %s, not %s" % (key, type(v).__name__, kind.__name__))
    return v


def _data(obj: Mapping[str, Any], what: str) -> bytes:
    raw = _get(obj, "data", str, "")
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise HostFault("psych: %s: data is not base64" % what) from None
    digest = _get(obj, "sha256", str, "")
    if digest and hashlib.sha256(data).hexdigest() != digest.lower().replace("sha256:", ""):
        raise HostFault("psych: %s: data does not match its sha256" % what)
    return data


def parse_result(obj: Any) -> SandboxResult:
    """A SandboxResult from the API's Result JSON (``psych run --json``)."""
    if not isinstance(obj, dict):
        raise HostFault("psych: a result that is not an object")
    failure = None
    f = obj.get("failure")
    if f is not None:
        if not isinstance(f, dict):
            raise HostFault("psych: a result's failure is not an object")
        failure = SandboxFailure(
            type=_get(f, "type", str, ""),
            message=_get(f, "message", str, ""),
            traceback=_get(f, "traceback", str, ""),
            exit_code=_get(f, "exit_code", int, optional=True),
            signal=_get(f, "signal", str, optional=True),
        )
    files = []
    for x in _get(obj, "files", list, []) or []:
        if not isinstance(x, dict):
            raise HostFault("psych: a result's file is not an object")
        path = _get(x, "path", str, "")
        data = _data(x, "file %r" % path)
        size = _get(x, "size", int, 0)
        if size != len(data):
            raise HostFault("psych: file %r: %d bytes of data, size says %d" % (path, len(data), size))
        files.append(File(path=path, size=size, sha256=_get(x, "sha256", str, ""), mode=_get(x, "mode", int, 0), data=data))
    omitted = []
    for x in _get(obj, "files_omitted", list, []) or []:
        if not isinstance(x, dict):
            raise HostFault("psych: a result's omitted file is not an object")
        omitted.append(FileOmitted(path=_get(x, "path", str, ""), size=_get(x, "size", int, 0), reason=_get(x, "reason", str, "")))
    artifacts = []
    for x in _get(obj, "artifacts", list, []) or []:
        if not isinstance(x, dict):
            raise HostFault("psych: a result's artifact is not an object")
        name = _get(x, "name", str, "")
        data = _data(x, "artifact %r" % name)
        size = _get(x, "size", int, len(data))
        if size != len(data):
            raise HostFault("psych: artifact %r: %d bytes of data, size says %d" % (name, len(data), size))
        artifacts.append(Artifact(name=name, mime=_get(x, "mime", str, ""), width=_get(x, "width", int, 0),
                                  height=_get(x, "height", int, 0), sha256=_get(x, "sha256", str, ""),
                                  data=data, size=size))
    artifacts_omitted = []
    for x in _get(obj, "artifacts_omitted", list, []) or []:
        if not isinstance(x, dict):
            raise HostFault("psych: a result's omitted artifact is not an object")
        artifacts_omitted.append(FileOmitted(path=_get(x, "path", str, ""), size=_get(x, "size", int, 0),
                                             reason=_get(x, "reason", str, "")))
    return SandboxResult(
        stdout=_get(obj, "stdout", str, ""),
        stderr=_get(obj, "stderr", str, ""),
        value=obj.get("value"),
        failure=failure,
        duration_seconds=_get(obj, "duration_seconds", float, 0.0),
        limit_hit=_get(obj, "limit_hit", str, optional=True),
        network_denied=_get(obj, "network_denied", bool, False),
        stdout_truncated=_get(obj, "stdout_truncated", bool, False),
        stderr_truncated=_get(obj, "stderr_truncated", bool, False),
        usage=_get(obj, "usage", dict, optional=True),
        isolation=_get(obj, "isolation", dict, optional=True),
        files=files,
        files_omitted=omitted,
        files_truncated=_get(obj, "files_truncated", bool, False),
        artifacts=artifacts,
        id=_get(obj, "id", str, ""),
        artifacts_omitted=artifacts_omitted,
    )


def encode_files(files: Optional[Mapping[str, bytes]]) -> Optional[List[Dict[str, Any]]]:
    """The API's ``files``: ``[{path, data (base64), mode}]`` from a mapping
    of relative path to bytes (mode 0o644). The host checks the paths."""
    if files is None:
        return None
    from .errors import ConfigurationError

    if not isinstance(files, Mapping):
        raise ConfigurationError("files: want a mapping of relative path to bytes")
    out = []
    for path, data in files.items():
        if not isinstance(path, str) or not isinstance(data, (bytes, bytearray, memoryview)):
            raise ConfigurationError("files: %r: want a str path and bytes" % (path,))
        out.append({"path": path, "data": base64.b64encode(bytes(data)).decode("ascii"), "mode": 0o644})
    return out
