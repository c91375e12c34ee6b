"""npurt's exception tree.

Every error npurt raises is an :class:`npurt.Error` carrying the AscendCL error code
(``.code``, e.g. 107000) and its name (``.name``, e.g. ``"ACL_ERROR_RT_PARAM_INVALID"``).
Each subclass also derives from the Python builtin it corresponds to, so ``except
ValueError`` or ``except TimeoutError`` work as expected. The Rust side picks the class in
one place (``crates/npurt-py/src/errors.rs``).
"""

from __future__ import annotations

__all__ = [
    "Error",
    "InvalidValueError",
    "InvalidTypeError",
    "InvalidDeviceError",
    "InvalidHandleError",
    "NoContextError",
    "WrongContextError",
    "WaitTimeoutError",
    "OutOfMemoryError",
    "MemoryFreeError",
    "TaskFailedError",
    "StreamAbortedError",
    "NotSupportedError",
    "InternalError",
]


class Error(Exception):
    """Base class of npurt errors: ``.code`` (ACL error code) and ``.name`` (its name)."""

    code: int
    name: str

    def __init__(self, message: str = "", code: int = 507000, name: str = "ACL_ERROR_RT_INTERNAL_ERROR"):
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = name

    def __str__(self) -> str:
        return f"{self.message} [{self.code} {self.name}]"

    def __reduce__(self):
        return (type(self), (self.message, self.code, self.name))


class InvalidValueError(Error, ValueError):
    """An argument has a bad value (107000)."""


class InvalidTypeError(Error, TypeError):
    """An argument has the wrong type (107000)."""


class InvalidDeviceError(InvalidValueError):
    """A device id out of range (107001)."""


class InvalidHandleError(Error, ValueError):
    """A stream, event, context or buffer that was destroyed or whose device was reset (107017)."""


class NoContextError(Error, RuntimeError):
    """No device or context is set on this thread (107002)."""


class WrongContextError(Error, RuntimeError):
    """An object used outside its context or device (107003)."""


class WaitTimeoutError(Error, TimeoutError):
    """A wait timed out (107019, 507046 stream sync, 507047 event sync)."""


class OutOfMemoryError(Error, MemoryError):
    """Device memory could not be allocated (207001)."""


class MemoryFreeError(Error, ValueError):
    """A bad free: double free, unknown or interior pointer (207002)."""


class TaskFailedError(Error, RuntimeError):
    """A kernel, copy or host callback failed on a stream; sticky on that stream (507015 ...)."""


class StreamAbortedError(Error, RuntimeError):
    """The stream was force-destroyed and its queued work dropped (107023)."""


class NotSupportedError(Error, NotImplementedError):
    """The feature is not supported (207000)."""


class InternalError(Error, RuntimeError):
    """An internal runtime error (507000)."""
