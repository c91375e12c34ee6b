"""``npurt.DeviceArray``: an n-dimensional array in device memory (see the package docstring)."""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .. import _npurt
from .util import (
    _ITEMSIZE,
    _contig_strides,
    _dtype_name,
    _index,
    _is_scalar,
    _scalar,
    _stream_for,
    _type_error,
    _value_error,
    operator_index,
)

__all__ = ["DeviceArray"]


class DeviceArray:
    """An n-d array in device memory: a device buffer (or a view into one), dtype, shape and
    strides. Created by :func:`to_device`, :func:`empty`, :func:`zeros`... or by kernels.

    ``np.asarray(arr)`` / ``arr.to_host()`` wait for the writes queued on the array and copy
    it to a new numpy array. ``reshape``/``view``/``T``/``transpose``/``permute`` and basic
    indexing make views (no copy); ``copy()`` and ``astype()`` run kernels. Operators
    ``+ - * / @`` and unary ``-`` call the kernels on the current stream.
    """

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 1000  # ndarray <op> DeviceArray defers to DeviceArray

    def __init__(self, native: Any) -> None:
        if not isinstance(native, _npurt._Array):
            raise _type_error("use npurt.to_device / npurt.empty to create a DeviceArray")
        self._a = native

    # -- properties ------------------------------------------------------------------
    @property
    def shape(self) -> Tuple[int, ...]:
        return self._a.shape

    @property
    def dtype(self) -> Any:
        """numpy dtype (the string ``"bfloat16"`` for bfloat16, which numpy lacks)."""
        n = self._a.dtype
        return n if n == "bfloat16" else np.dtype(n)

    @property
    def dtype_name(self) -> str:
        return self._a.dtype

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self._a.dtype]

    @property
    def strides(self) -> Tuple[int, ...]:
        """Strides in bytes (numpy's convention)."""
        return tuple(s * self.itemsize for s in self._a.strides)

    @property
    def ndim(self) -> int:
        return len(self._a.shape)

    @property
    def size(self) -> int:
        return math.prod(self._a.shape)

    @property
    def nbytes(self) -> int:
        return self._a.nbytes

    @property
    def device(self) -> int:
        return self._a.device

    @property
    def is_contiguous(self) -> bool:
        return self._a.is_contiguous

    @property
    def T(self) -> "DeviceArray":
        return self.transpose()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<npurt.DeviceArray shape={self.shape} dtype={self._a.dtype} device={self.device}>"

    # -- sharing with other processes ---------------------------------------------------
    def ipc_export(self, pids: Any = None, *, open: Any = None) -> str:
        """A key another process passes to :func:`npurt.ipc_import_array` to map this array
        (its buffer, shape, dtype and strides). Waits for the array's queued writes first.
        Only ``pids`` (and this process) may import it unless ``open=True``; the array
        must be shareable (``npurt.empty(..., shareable=True)``...), else
        :class:`npurt.IpcNotShareableError`."""
        return _npurt._ipc_export_array(self._a, pids, open)

    # -- views -----------------------------------------------------------------------
    def _view(self, shape: Sequence[int], strides: Sequence[int], offset: Optional[int] = None) -> "DeviceArray":
        off = self._a.offset if offset is None else offset
        return DeviceArray(self._a.view(off, self._a.dtype, list(shape), list(strides)))

    def transpose(self, *axes: Any) -> "DeviceArray":
        """A view with the axes permuted (reversed by default), like numpy."""
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0] or ()
        nd = self.ndim
        if not axes:
            perm = list(range(nd))[::-1]
        else:
            perm = [operator_index(a) for a in axes]
            perm = [a + nd if a < 0 else a for a in perm]
            if sorted(perm) != list(range(nd)):
                raise _value_error(f"axes {tuple(axes)} do not match an array of {nd} dimension(s)")
        sh, st = self._a.shape, self._a.strides
        return self._view([sh[a] for a in perm], [st[a] for a in perm])

    def permute(self, *axes: Any) -> "DeviceArray":
        """torch's ``permute``: a view whose dim ``i`` is this array's dim ``axes[i]``."""
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if len(axes) != self.ndim:
            raise _value_error(f"permute: {len(axes)} axes for an array of {self.ndim} dimension(s)")
        return self.transpose(axes)

    def reshape(self, *shape: Any) -> "DeviceArray":
        """A view with a new shape (one dim may be -1). A non-contiguous array is reshaped
        without a copy when its strides allow it (numpy's rule, e.g. merging sliced rows);
        otherwise ``InvalidValueError`` (call ``copy()`` first)."""
        if len(shape) == 1 and not isinstance(shape[0], (numbers.Integral, np.integer)):
            if not isinstance(shape[0], (tuple, list)):
                raise _type_error(f"reshape: shape must be ints or a sequence of ints, not {type(shape[0]).__name__}")
            shape = tuple(shape[0])
        shape = [operator_index(s, "shape") for s in shape]
        n = self.size
        if shape.count(-1) > 1:
            raise _value_error("can only specify one unknown dimension")
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            if known == 0 or n % known:
                raise _value_error(f"cannot reshape array of size {n} into shape {tuple(shape)}")
            shape[shape.index(-1)] = n // known
        if any(s < 0 for s in shape) or math.prod(shape) != n:
            raise _value_error(f"cannot reshape array of size {n} into shape {tuple(shape)}")
        if self.is_contiguous:
            return self._view(shape, _contig_strides(shape))
        # numpy's no-copy rule: InvalidValueError when the strides cannot express it.
        return DeviceArray(self._a.reshape(shape))

    def view(self, dtype: Any = None) -> "DeviceArray":
        """A view of the same memory (a new array object); with ``dtype`` of the same item
        size, the bytes reinterpreted (contiguous arrays only for a different size)."""
        if dtype is None:
            return self._view(self._a.shape, self._a.strides)
        name = _dtype_name(dtype)
        if _ITEMSIZE[name] != self.itemsize:
            raise _value_error("view() with a dtype of another item size is not supported")
        return DeviceArray(self._a.view(self._a.offset, name, list(self._a.shape), list(self._a.strides)))

    def __getitem__(self, key: Any) -> "DeviceArray":
        """Basic indexing (ints, slices, ``...``, ``None``) as a view, like numpy's."""
        a = self._a
        return self._view(*_index(a.shape, a.strides, a.offset, self.itemsize, key))

    # -- copies ----------------------------------------------------------------------
    def copy(self, stream: Any = None) -> "DeviceArray":
        """A contiguous copy (a kernel on ``stream``)."""
        out = empty(self.shape, self._a.dtype, device=self.device)
        _npurt._copy(self._a, out._a, _stream_for(stream, self.device))
        return out

    def to(self, device: Any, stream: Any = None) -> "DeviceArray":
        """This array on ``device`` (an id, ``"npu:N"`` or an npurt.Device): itself if it is
        there already, else a peer copy (device memory to device memory, no host staging)
        after the array's pending writes. For now the copy runs on the calling thread
        (GIL released) and is done when ``to`` returns; ``stream`` orders a non-contiguous
        source's gather."""
        from ..device import Device
        from ..memory import memcpy

        if isinstance(device, str) and device.startswith("npu"):
            device = device.partition(":")[2] or 0
        dev = Device(int(device) if isinstance(device, str) and device.isdigit() else device).id
        if dev == self.device:
            return self
        src = self if self.is_contiguous else self.copy(stream=stream)
        out = empty(self.shape, self._a.dtype, device=dev)
        memcpy(out, src)
        return out

    def astype(self, dtype: Any, stream: Any = None) -> "DeviceArray":
        """A contiguous copy converted to ``dtype`` (numpy's casting: float→int truncates and
        saturates, NaN → 0)."""
        return cast(self, dtype, stream=stream)

    def copy_(self, src: Any, stream: Any = None) -> "DeviceArray":
        """Copies ``src`` into this array in place on ``stream`` (default: the current
        stream); returns self without waiting. A DeviceArray: a copy kernel (broadcast, cast).
        Host data: ONE copy on the stream's copy engine after the array's pending writes
        (kernels launched later wait for it); a HostBuffer or numpy view of one is pinned and
        read when the stream gets there, other host data is staged in pinned memory before
        returning (ACL). Host data follows ``np.copyto``'s rules (broadcasting, ``same_kind``
        casting, else ``InvalidTypeError``); a HostBuffer must hold ``nbytes``. bfloat16 or
        strided arrays take a temporary array and a copy kernel."""
        st = _stream_for(stream, self.device)
        if not isinstance(src, DeviceArray):
            if self._a.dtype != "bfloat16" and self.is_contiguous:
                return _hostcopy.copy_from_host(self, src, st)
            src = to_device(np.asarray(src), device=self.device, dtype=self._a.dtype, stream=st)
        if src._a.dtype != self._a.dtype:
            src = cast(src, self._a.dtype, stream=st)
        _npurt._copy(src._a, self._a, st)
        return self

    def fill(self, value: Any, stream: Any = None) -> None:
        """Sets every element to ``value`` (a kernel on ``stream``)."""
        _npurt._fill(self._a, _scalar(value), _stream_for(stream, self.device))

    def synchronize(self) -> None:
        """Waits for the writes queued on this array's buffer (its last-writer stream)."""
        self._a.synchronize()

    def to_host(self, stream: Any = None, out: Any = None) -> Any:
        """The contents on the host, once the writes queued on the array (and the work
        queued on ``stream``, if given) are done. bfloat16 comes back as float32.

        Without ``out``: a new numpy array. ``out`` copies into a given numpy array (same
        shape and dtype, C-contiguous, writable: ``InvalidValueError`` /
        ``InvalidTypeError`` otherwise) or HostBuffer (at least ``nbytes``) and returns it.
        With ``stream`` and a pinned ``out`` (a HostBuffer or a numpy view of one) the copy
        is queued on the stream after the array's pending writes and the call returns at
        once (synchronize it before reading ``out``); a pageable ``out`` is written first."""
        if stream is not None and not isinstance(stream, _npurt.Stream):
            raise _type_error(f"stream must be an npurt.Stream or None, not {type(stream).__name__}")
        src = self
        if not self.is_contiguous:
            src = self.copy(stream=stream)
        if out is not None:
            return _hostcopy.to_host_out(src, out, stream)
        if stream is not None:
            stream.synchronize()
        src._a.synchronize()
        name = src._a.dtype
        if src.size == 0:
            return np.empty(src.shape, dtype=np.float32 if name == "bfloat16" else name)
        raw = src._a._host_read()  # the array's bytes, read-only: a host read of them
        if name == "bfloat16":
            return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(src.shape)
        return raw.view(name).reshape(src.shape).copy()

    def _host_view(self) -> np.ndarray:
        """A zero-copy numpy view of the device memory (no synchronization)."""
        name = self._a.dtype
        if name == "bfloat16":
            raise _type_error("numpy has no bfloat16: use to_host() (float32) or astype() first")
        raw = self._a._host_bytes()
        if self.size == 0:
            return np.empty(self.shape, dtype=name)
        return np.ndarray(self.shape, dtype=name, buffer=raw, offset=self._a.offset, strides=self.strides)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        """DLPack export, zero-copy. npurt's device memory is host memory, so the tensor is
        exported as a CPU (kDLCPU) tensor once the writes queued on it are done (its
        last-writer stream is synchronized); the consumer must not use it while later npurt
        kernels write the array. bfloat16 is not exported (numpy has no bfloat16)."""
        if copy not in (None, True, False):
            raise _type_error(f"copy must be True, False or None, not {copy!r}")
        self._a.synchronize()
        v = self._host_view()
        kw = {}
        if max_version is not None:
            kw["max_version"] = max_version
        if copy is not None:
            kw["copy"] = copy
        try:
            return v.__dlpack__(**kw)
        except TypeError:
            return v.__dlpack__()

    def __dlpack_device__(self) -> Tuple[int, int]:
        """``(1, 0)``: kDLCPU (see ``__dlpack__``)."""
        return (1, 0)

    def numpy(self) -> np.ndarray:
        return self.to_host()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy not in (None, True, False):
            raise _type_error(f"copy must be True, False or None, not {copy!r}")
        a = self.to_host()
        if dtype is None:
            return a
        try:
            return a.astype(dtype, copy=False)
        except (TypeError, ValueError) as e:
            raise _type_error(f"__array__: bad dtype {dtype!r}: {e}") from None

    def tolist(self) -> Any:
        return self.to_host().tolist()

    def item(self) -> Any:
        if self.size != 1:
            raise _value_error("only arrays of one element can be converted to a Python scalar")
        return self.to_host().reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    # -- operators -------------------------------------------------------------------
    def __add__(self, o: Any) -> Any:
        return _binop("add", self, o)

    def __radd__(self, o: Any) -> Any:
        return _binop("add", o, self)

    def __sub__(self, o: Any) -> Any:
        return _binop("subtract", self, o)

    def __rsub__(self, o: Any) -> Any:
        return _binop("subtract", o, self)

    def __mul__(self, o: Any) -> Any:
        return _binop("multiply", self, o)

    def __rmul__(self, o: Any) -> Any:
        return _binop("multiply", o, self)

    def __truediv__(self, o: Any) -> Any:
        return _binop("divide", self, o)

    def __rtruediv__(self, o: Any) -> Any:
        return _binop("divide", o, self)

    def __matmul__(self, o: Any) -> Any:
        if not isinstance(o, DeviceArray):
            return NotImplemented
        return matmul(self, o)

    def __rmatmul__(self, o: Any) -> Any:
        if not isinstance(o, DeviceArray):
            return NotImplemented
        return matmul(o, self)

    def __iadd__(self, o: Any) -> "DeviceArray":
        return add(self, o, out=self)

    def __isub__(self, o: Any) -> "DeviceArray":
        return subtract(self, o, out=self)

    def __imul__(self, o: Any) -> "DeviceArray":
        return multiply(self, o, out=self)

    def __itruediv__(self, o: Any) -> "DeviceArray":
        return divide(self, o, out=self)

    def __neg__(self) -> "DeviceArray":
        return negative(self)

    def __pos__(self) -> "DeviceArray":
        return self

    def __abs__(self) -> "DeviceArray":
        return abs(self)

    __hash__ = None  # type: ignore[assignment]


def _binop(op: str, a: Any, b: Any) -> Any:
    for v in (a, b):
        if not isinstance(v, DeviceArray) and not _is_scalar(v):
            return NotImplemented
    return _binary(op, a, b, None, None)


# The functions live in their own modules (which import DeviceArray from here); the methods
# above use these at call time. The package's __init__ re-exports every public name.
from . import hostcopy as _hostcopy  # noqa: E402
from .creation import empty, to_device  # noqa: E402
from .linalg import matmul  # noqa: E402
from .ops import _binary, abs, add, cast, divide, multiply, negative, subtract  # noqa: E402
