"""npurt's exception tree.

Every error npurt raises is an :class:`npurt.Error` carrying the AscendCL error code
(``.code``, e.g. 107000) and its name (``.name``, e.g. ``"ACL_ERROR_RT_PARAM_INVALID"``).
Each subclass also derives from the Python builtin it corresponds to, so ``except
ValueError`` or ``except TimeoutError`` work as expected. The Rust side picks the class in
one place (``crates/npurt-py/src/errors.rs``); the codes come from the Rust table
(``npurt_core::AclCode::ALL``): a class built without a code gets its default one.
"""

from __future__ import annotations

from typing import Optional

from . import _npurt

_CODES = _npurt._acl_error_codes()

__all__ = [
    "Error",
    "InvalidValueError",
    "InvalidTypeError",
    "InvalidIndexError",
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
    "EventStateError",
    "InternalError",
    "UnavailableError",
    "ForkedProcessError",
    "ShutdownError",
    "IpcError",
    "IpcNotShareableError",
    "IpcInvalidKeyError",
    "IpcPermissionError",
    "IpcStaleKeyError",
    "IpcClosedKeyError",
    "CollectiveError",
    "CollectiveTimeoutError",
    "CollectiveDesyncError",
    "RankFailedError",
]


class Error(Exception):
    """Base class of npurt errors: ``.code`` (ACL error code) and ``.name`` (its name)."""

    code: int
    name: str
    _default = "ACL_ERROR_RT_INTERNAL_ERROR"

    def __init__(self, message: str = "", code: Optional[int] = None, name: Optional[str] = None):
        super().__init__(message)
        if code is None:
            code, name = _CODES[self._default], self._default
        self.message = message
        self.code = code
        self.name = name or ""

    def __str__(self) -> str:
        return f"{self.message} [{self.code} {self.name}]"

    def __reduce__(self):
        return (type(self), (self.message, self.code, self.name))


class InvalidValueError(Error, ValueError):
    """An argument has a bad value (107000)."""

    _default = "ACL_ERROR_RT_PARAM_INVALID"


class InvalidTypeError(Error, TypeError):
    """An argument has the wrong type (107000)."""

    _default = "ACL_ERROR_RT_PARAM_INVALID"


class InvalidIndexError(Error, IndexError):
    """An index out of bounds or of a kind basic indexing does not take (107000)."""

    _default = "ACL_ERROR_RT_PARAM_INVALID"


class InvalidDeviceError(InvalidValueError):
    """A device id out of range (107001)."""

    _default = "ACL_ERROR_RT_INVALID_DEVICEID"


class InvalidHandleError(Error, ValueError):
    """A stream, event, context or buffer that was destroyed or whose device was reset (107017)."""

    _default = "ACL_ERROR_RT_INVALID_HANDLE"


class NoContextError(Error, RuntimeError):
    """No device or context is set on this thread (107002)."""

    _default = "ACL_ERROR_RT_CONTEXT_NULL"


class WrongContextError(Error, RuntimeError):
    """An object used outside its context or device (107003)."""

    _default = "ACL_ERROR_RT_STREAM_CONTEXT"


class WaitTimeoutError(Error, TimeoutError):
    """A wait timed out (107019, 507046 stream sync, 507047 event sync)."""

    _default = "ACL_ERROR_RT_WAIT_TIMEOUT"


class OutOfMemoryError(Error, MemoryError):
    """Device memory could not be allocated (207001)."""

    _default = "ACL_ERROR_RT_MEMORY_ALLOCATION"


class MemoryFreeError(Error, ValueError):
    """A bad free: double free, unknown or interior pointer (207002)."""

    _default = "ACL_ERROR_RT_MEMORY_FREE"


class TaskFailedError(Error, RuntimeError):
    """A kernel, copy or host callback failed on a stream; sticky on that stream (507015 ...)."""

    _default = "ACL_ERROR_RT_AICORE_EXCEPTION"


class StreamAbortedError(Error, RuntimeError):
    """The stream was force-destroyed and its queued work dropped (107023)."""

    _default = "ACL_ERROR_RT_STREAM_ABORT"


class EventStateError(Error, RuntimeError):
    """An event is not in the state the call needs: ``elapsed_time`` on an event without
    timing or never recorded (107006), or not complete yet (507006). A RuntimeError, as
    torch's."""

    _default = "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID"


class NotSupportedError(Error, NotImplementedError):
    """The feature is not supported (207000)."""

    _default = "ACL_ERROR_RT_FEATURE_NOT_SUPPORT"


class InternalError(Error, RuntimeError):
    """An internal runtime error (507000)."""

    _default = "ACL_ERROR_RT_INTERNAL_ERROR"

class UnavailableError(Error, RuntimeError):
    """npurt cannot be used in this process any more (507000): see the two subclasses."""


class ForkedProcessError(UnavailableError):
    """Used in a child process created by ``fork()`` after npurt started: the runtime's
    threads do not survive a fork. Start worker processes with ``spawn`` (507000)."""


class ShutdownError(UnavailableError):
    """Used after npurt's own teardown at interpreter exit (507000)."""


class IpcError(Error, RuntimeError):
    """Sharing with another process failed (507022): device memory (see the subclasses), or an
    interprocess event (a stale handle, or its process exited or destroyed it before its
    record completed)."""

    _default = "ACL_ERROR_RT_IPC_ERROR"


class IpcNotShareableError(IpcError, ValueError):
    """The memory is not from a shareable pool: allocate with ``shareable=True`` (or set
    ``NPURT_IPC_SHAREABLE=1``) to export it (507022)."""


class IpcInvalidKeyError(IpcError, ValueError):
    """A malformed key, or one its exporter never issued (a forged key) (507022)."""


class IpcPermissionError(IpcError, PermissionError):
    """This process is not on the key's whitelist (507022)."""


class IpcStaleKeyError(IpcError):
    """The exporter freed the memory, reset its device or exited (507022)."""


class IpcClosedKeyError(IpcError):
    """The exporter closed the key (507022)."""


_HCCL = _npurt._hccl_result_codes()


class CollectiveError(Error, RuntimeError):
    """A collective failed (``npurt.distributed``, ``npurt.hccl``). ``.code`` / ``.name`` are
    HCCL's result code (``HcclResult``: 4 ``HCCL_E_INTERNAL``, 1 ``HCCL_E_PARA``...)."""

    _hccl = "HCCL_E_INTERNAL"

    def __init__(self, message: str = "", code: Optional[int] = None, name: Optional[str] = None):
        if code is None:
            code, name = _HCCL[self._hccl], self._hccl
        super().__init__(message, code, name)


class CollectiveTimeoutError(CollectiveError, TimeoutError):
    """A collective's deadline passed: names the collective, its sequence number and the
    ranks that never arrived (HCCL_E_TIMEOUT, 9)."""

    _hccl = "HCCL_E_TIMEOUT"


class CollectiveDesyncError(CollectiveError):
    """Ranks called different collectives (or sizes, dtypes, ops, roots) at the same
    sequence number (HCCL_E_PARA, 1)."""

    _hccl = "HCCL_E_PARA"


class RankFailedError(CollectiveError):
    """A rank died (its process is gone), left the group or could not run its part while
    the others waited (HCCL_E_REMOTE, 21)."""

    _hccl = "HCCL_E_REMOTE"
