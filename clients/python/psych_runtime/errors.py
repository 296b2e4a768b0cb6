"""Typed errors for what is not a program failure.

A program's failure (an exception, a limit, a signal) is data: it is the
result's ``failure``, never raised. These are raised when psych could not run
the program at all.
"""
from __future__ import annotations

from typing import Optional


class PsychError(Exception):
    """Base of psych_runtime's errors. ``code`` is the API's error code
    (``invalid_request``, ``capacity_exhausted``, ...) where there is one."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class ConfigurationError(PsychError):
    """The configuration or the request cannot work: ``psych`` exit 2, HTTP
    400 (and 401, 403, 404, 409, 413). Nothing ran."""


class RefusedError(PsychError):
    """A ``require_*`` option asked for a protection this host cannot give
    (``psych`` exit 3). Nothing ran."""


class CapacityError(PsychError):
    """The host cannot take the run now (``psych`` exit 75, HTTP 429 or 503).
    Nothing ran. ``retry_after`` is the seconds the host asked to wait, or
    None. A sandbox made with ``capacity_retries=N`` retries N times with
    backoff before raising it."""

    def __init__(self, message: str, code: str = "", retry_after: Optional[float] = None) -> None:
        super().__init__(message, code)
        self.retry_after = retry_after


class HostFault(PsychError):
    """The sandbox or the transport failed: psych's own fault, a broken event
    stream, a cancelled run, an unreachable server."""


_CONFIG = {"invalid_request", "unauthorized", "forbidden", "not_found", "conflict", "too_large"}
_CAPACITY = {"capacity_exhausted", "draining", "not_ready"}


def from_api(err: object, retry_after: Optional[float] = None, prefix: str = "psych") -> PsychError:
    """The typed error for an API error object (``{code, message,
    retryable}``)."""
    code, message = "", ""
    if isinstance(err, dict):
        c, m = err.get("code"), err.get("message")
        code = c if isinstance(c, str) else ""
        message = m if isinstance(m, str) else ""
    text = "%s: %s: %s" % (prefix, code or "error", message)
    if code in _CONFIG:
        return ConfigurationError(text, code)
    if code == "refused":
        return RefusedError(text, code)
    if code in _CAPACITY:
        return CapacityError(text, code, retry_after)
    return HostFault(text, code)
