"""The sandboxes: ``psych_runtime.sandbox.subprocess.SubprocessSandbox`` and
``psych_runtime.sandbox.container.ContainerSandbox``."""
from ._base import Sandbox

__all__ = ["Sandbox"]
