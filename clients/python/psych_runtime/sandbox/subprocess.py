"""SubprocessSandbox: psych's subprocess backend (namespaces, seccomp,
cgroups) run by the psych executable or a psych serve."""
from __future__ import annotations

import os
from typing import Optional, Sequence

from ..errors import ConfigurationError
from ..types import SandboxLimits
from ._base import RunAs, Sandbox, run_as_flag


class SubprocessSandbox(Sandbox):
    """Runs each program in a fresh process tree in new namespaces.

    ``python_bin`` is the interpreter (default: python3 on PATH);
    ``env_allowlist`` the host variables a program gets, with the host's
    values (``run(env=)`` sets values for names on it); ``run_as`` the
    outside uid, ``(uid, gid)`` or ``(uid, gid, count)`` (default: each run
    its own id as root); ``require_network_denial`` refuses a run whose
    empty network namespace was not verified (RefusedError).
    ``allow_same_uid=False`` means a caller that is not root gets a
    ConfigurationError here unless it passes True: its programs would run
    under its own uid (mapped in their user namespace).

    Without ``host=`` (or ``PSYCH_HOST``) each run is one ``psych run
    --events`` (``psych_bin``, else psych on PATH); with it, a psych serve
    runs it and owns the sandbox: python_bin, env_allowlist, run_as and
    allow_same_uid are then a ConfigurationError. ``capacity_retries``
    retries a CapacityError with backoff."""

    _local_only = {"python_bin": None, "env_allowlist": None, "run_as": None, "allow_same_uid": False}

    def __init__(self, python_bin: Optional[str] = None, default_limits: Optional[SandboxLimits] = None,
                 env_allowlist: Optional[Sequence[str]] = None, run_as: Optional[RunAs] = None,
                 allow_same_uid: bool = False, require_network_denial: bool = False, *,
                 host: Optional[str] = None, psych_bin: Optional[str] = None, token: Optional[str] = None,
                 capacity_retries: int = 0) -> None:
        flags = run_as_flag(run_as)
        if python_bin is not None:
            flags += ["--python", python_bin]
        super().__init__(host=host, psych_bin=psych_bin, token=token, default_limits=default_limits,
                         env_allowlist=env_allowlist, require_network_denial=require_network_denial,
                         capacity_retries=capacity_retries, flags=flags,
                         local={"python_bin": python_bin, "env_allowlist": env_allowlist, "run_as": run_as, "allow_same_uid": allow_same_uid})
        if not self.host and os.geteuid() != 0 and not allow_same_uid:
            raise ConfigurationError("SubprocessSandbox: not root, so programs would run under your own uid; pass allow_same_uid=True to accept that")
        self.python_bin = python_bin
