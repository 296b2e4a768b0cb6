"""psych_runtime: run a language model's Python program in psych's hardened
Linux sandbox and get the result back as data.

The names are the contract's: ``SandboxLimits``, ``SandboxResult``,
``SandboxFailure``, ``SubprocessSandbox``, ``ContainerSandbox``,
``Registry`` and ``Runtime``, with typed errors for what is not a program
failure. Each sandbox speaks psych's event protocol either to the ``psych``
executable (the embedded transport, by default) or to a ``psych serve``
(``host=``). Standard library only; see psych's docs/python.md.
"""
from .errors import CapacityError, ConfigurationError, HostFault, PsychError, RefusedError
from .registry import Registry, Tool
from .runtime import Outcome, Runtime
from .sandbox.container import ContainerSandbox
from .sandbox.subprocess import SubprocessSandbox
from .types import Artifact, File, FileOmitted, SandboxFailure, SandboxLimits, SandboxResult

__version__ = "0.1.0"

__all__ = [
    "Artifact", "CapacityError", "ConfigurationError", "ContainerSandbox", "File", "FileOmitted", "HostFault",
    "Outcome", "PsychError", "RefusedError", "Registry", "Runtime", "SandboxFailure", "SandboxLimits",
    "SandboxResult", "SubprocessSandbox", "Tool",
]
