"""ContainerSandbox: psych's container backend (containerd, podman or
docker), run by the psych executable or a psych serve."""
from __future__ import annotations

from typing import Optional, Sequence

from ..errors import ConfigurationError
from ..types import SandboxLimits
from ._base import RunAs, Sandbox, run_as_flag

DEFAULT_IMAGE = "python:3.12-slim"
DEFAULT_CONTAINER_PYTHON = "/usr/local/bin/python3"


class ContainerSandbox(Sandbox):
    """Runs each program in a fresh container of ``image`` (never pulled:
    a missing image is a ConfigurationError).

    ``runtime`` is the engine: "containerd", "podman" or "docker" (default:
    the first reachable). ``container_python_bin`` is the interpreter in the
    image; ``run_as`` the outside ``(uid, gid)``; ``extra_run_args`` go to
    ``podman run``/``docker run`` (only psych's allowlisted flags). Without
    ``host=`` each run is one ``psych run --events --backend container``;
    with it, every argument but the limits is the server's and a
    ConfigurationError."""

    _local_only = {"runtime": None, "image": DEFAULT_IMAGE, "container_python_bin": DEFAULT_CONTAINER_PYTHON,
                   "env_allowlist": None, "run_as": None, "extra_run_args": ()}

    def __init__(self, runtime: Optional[str] = None, image: str = DEFAULT_IMAGE,
                 container_python_bin: str = DEFAULT_CONTAINER_PYTHON, default_limits: Optional[SandboxLimits] = None,
                 env_allowlist: Optional[Sequence[str]] = None, run_as: Optional[RunAs] = None,
                 extra_run_args: Sequence[str] = (), *, require_network_denial: bool = False,
                 host: Optional[str] = None, psych_bin: Optional[str] = None, token: Optional[str] = None,
                 capacity_retries: int = 0) -> None:
        if runtime not in (None, "containerd", "podman", "docker"):
            raise ConfigurationError("runtime=%r: want containerd, podman or docker" % (runtime,))
        if run_as is not None and not isinstance(run_as, int) and len(tuple(run_as)) != 2:
            raise ConfigurationError("run_as=%r: the container backend takes a uid or (uid, gid)" % (run_as,))
        flags = ["--backend", "container", "--image", image, "--container-python", container_python_bin] + run_as_flag(run_as)
        if runtime:
            flags += ["--engine", runtime]
        for a in extra_run_args:
            flags += ["--extra-run-arg", str(a)]
        super().__init__(host=host, psych_bin=psych_bin, token=token, default_limits=default_limits,
                         env_allowlist=env_allowlist, require_network_denial=require_network_denial,
                         capacity_retries=capacity_retries, flags=flags,
                         local={"runtime": runtime, "image": image, "container_python_bin": container_python_bin,
                                "env_allowlist": env_allowlist, "run_as": run_as, "extra_run_args": tuple(extra_run_args)})
        self.runtime, self.image = runtime, image
