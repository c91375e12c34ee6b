"""Device arrays and tensor kernels: ``npurt.DeviceArray``, ``npurt.to_device``,
``npurt.empty/zeros/ones/full`` and numpy-named kernels (``npurt.add``, ``npurt.matmul``,
``npurt.softmax``...).

Every kernel is asynchronous: it is checked (shapes, dtypes, devices) when called, raising a
typed npurt error (``InvalidValueError`` / ``InvalidTypeError`` 107000,
``WrongContextError`` for an array of another device) before anything is queued, then runs
on ``stream`` (default: the current stream). Outputs come from the device's caching pool;
queued kernels keep their operands alive.

Ordering: each buffer remembers the stream that last wrote it. A kernel reading or writing
an array last written on another stream first makes its stream wait for that stream (a
device-side wait, the host does not block); ``to_host`` / ``np.asarray`` synchronize the
last writer. Reads are not tracked: overwriting (``out=``) an array that another stream is
still reading is the caller's business (order it with events), as in CUDA/ACL.

Dtypes: float32, float16, bfloat16, int32, int64, int8, uint8, bool. numpy has no
bfloat16: ``dtype="bfloat16"`` is accepted, ``.dtype`` is then the string ``"bfloat16"``,
and ``to_host`` returns float32. ``to_device`` of float64 data stores float32 (there is no
float64 on the device). Promotion is deliberately simple: two arrays must have the same
dtype (``astype`` first); Python scalars are cast to the array's dtype (a float scalar with
an integer array is an ``InvalidTypeError``); ``divide`` of integer arrays casts them to
float32 first (numpy's true division).
"""

from __future__ import annotations

import builtins as _builtins
import math
import numbers
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _npurt
from .exceptions import InvalidTypeError, InvalidValueError

__all__ = [
    "DeviceArray",
    "to_device",
    "empty",
    "zeros",
    "ones",
    "full",
    "empty_like",
    "zeros_like",
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "relu",
    "gelu",
    "silu",
    "abs",
    "negative",
    "matmul",
    "sum",
    "mean",
    "max",
    "min",
    "argmax",
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    "axpy",
    "cast",
    "concat",
    "concatenate",
    "transpose",
]

_P = "ACL_ERROR_RT_PARAM_INVALID"
_DTYPES = ("float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool")
_FLOATS = ("float32", "float16", "bfloat16")
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8, "int8": 1, "uint8": 1, "bool": 1}


def _value_error(msg: str) -> InvalidValueError:
    return InvalidValueError(msg, 107000, _P)


def _type_error(msg: str) -> InvalidTypeError:
    return InvalidTypeError(msg, 107000, _P)


_DTYPE_SET = frozenset(_DTYPES)


def _dtype_name(dtype: Any) -> str:
    if dtype.__class__ is str and dtype in _DTYPE_SET:
        return dtype
    if dtype is None:
        return "float32"
    if isinstance(dtype, str) and dtype in ("bfloat16", "bf16"):
        return "bfloat16"
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise _type_error(f"unsupported dtype {dtype!r}") from None
    if name not in _DTYPES:
        raise _type_error(f"unsupported dtype {name!r}; npurt arrays hold {', '.join(_DTYPES)}")
    return name


def _shape_arg(shape: Any) -> Tuple[int, ...]:
    if shape.__class__ is tuple and all(s.__class__ is int and s >= 0 for s in shape):
        return shape
    if isinstance(shape, (numbers.Integral, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(int(operator_index(s)) for s in shape)
    except TypeError:
        raise _type_error(f"shape must be an int or a sequence of ints, not {shape!r}") from None
    if any(s < 0 for s in out):
        raise _value_error(f"negative dimensions are not allowed: {out}")
    return out


def operator_index(v: Any) -> int:
    import operator

    if isinstance(v, bool):
        raise TypeError
    return operator.index(v)


def _contig_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= _builtins.max(s, 1)
    return tuple(reversed(st))


def _stream_for(stream: Any, device: Any):
    if stream is not None:
        return stream
    if device is None:
        return None  # the current stream (resolved natively)
    return _npurt.current_stream(device)


class DeviceArray:
    """An n-d array in device memory: a device buffer (or a view into one), dtype, shape and
    strides. Created by :func:`to_device`, :func:`empty`, :func:`zeros`... or by kernels.

    ``np.asarray(arr)`` / ``arr.to_host()`` wait for the writes queued on the array and copy
    it to a new numpy array. ``reshape``/``view``/``T``/``transpose`` make views (no copy);
    ``copy()`` and ``astype()`` run kernels. Operators ``+ - * / @`` and unary ``-`` call the
    kernels on the current stream.
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

    def reshape(self, *shape: Any) -> "DeviceArray":
        """A view with a new shape (one dim may be -1). Non-contiguous arrays cannot be
        reshaped without a copy: ``InvalidValueError`` (call ``copy()`` first)."""
        if len(shape) == 1 and not isinstance(shape[0], (numbers.Integral, np.integer)):
            shape = tuple(shape[0])
        shape = [operator_index(s) for s in shape]
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
        if not self.is_contiguous:
            raise _value_error("reshape of a non-contiguous array needs a copy: call .copy() first")
        return self._view(shape, _contig_strides(shape))

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
        """Basic indexing (ints, slices, ``...``) as a view."""
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1 :]
        if len(key) > self.ndim:
            raise IndexError(f"too many indices for array of {self.ndim} dimension(s)")
        sh, st = list(self._a.shape), list(self._a.strides)
        off = self._a.offset
        new_sh, new_st = [], []
        for d, k in enumerate(key):
            if isinstance(k, slice):
                start, stop, step = k.indices(sh[d])
                cnt = len(range(start, stop, step))
                if cnt:
                    off += start * st[d] * self.itemsize
                new_sh.append(cnt)
                new_st.append(st[d] * step)
            else:
                try:
                    i = operator_index(k)
                except TypeError:
                    raise IndexError(f"only integers, slices and ... are valid indices, not {k!r}") from None
                if i < 0:
                    i += sh[d]
                if not 0 <= i < sh[d]:
                    raise IndexError(f"index {k} is out of bounds for axis {d} with size {sh[d]}")
                off += i * st[d] * self.itemsize
        new_sh += sh[len(key) :]
        new_st += st[len(key) :]
        return self._view(new_sh, new_st, off)

    # -- copies ----------------------------------------------------------------------
    def copy(self, stream: Any = None) -> "DeviceArray":
        """A contiguous copy (a kernel on ``stream``)."""
        out = empty(self.shape, self._a.dtype, device=self.device)
        _npurt._copy(self._a, out._a, _stream_for(stream, self.device))
        return out

    def astype(self, dtype: Any, stream: Any = None) -> "DeviceArray":
        """A contiguous copy converted to ``dtype`` (numpy's casting: float→int truncates and
        saturates, NaN → 0)."""
        return cast(self, dtype, stream=stream)

    def copy_(self, src: Any, stream: Any = None) -> "DeviceArray":
        """Copies ``src`` (a DeviceArray, broadcast to this shape, or host data) into this
        array in place; returns self."""
        if not isinstance(src, DeviceArray):
            src = to_device(np.asarray(src), device=self.device, dtype=self._a.dtype)
        if src._a.dtype != self._a.dtype:
            src = cast(src, self._a.dtype, stream=stream)
        _npurt._copy(src._a, self._a, _stream_for(stream, self.device))
        return self

    def fill(self, value: Any, stream: Any = None) -> None:
        """Sets every element to ``value`` (a kernel on ``stream``)."""
        _npurt._fill(self._a, _scalar(value), _stream_for(stream, self.device))

    def synchronize(self) -> None:
        """Waits for the writes queued on this array's buffer (its last-writer stream)."""
        self._a.synchronize()

    def to_host(self, stream: Any = None) -> np.ndarray:
        """A new numpy array with the contents, once the writes queued on the array (and the
        work queued on ``stream``, if given) are done. bfloat16 comes back as float32."""
        src = self
        if not self.is_contiguous:
            src = self.copy(stream=stream)
        elif stream is not None:
            stream.synchronize()
        src._a.synchronize()
        name = src._a.dtype
        if src.size == 0:
            return np.empty(src.shape, dtype=np.float32 if name == "bfloat16" else name)
        off = src._a.offset
        raw = src._a._host_bytes()[off : off + src.nbytes]
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
        a = self.to_host()
        return a if dtype is None else a.astype(dtype, copy=False)

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


# -- creation ------------------------------------------------------------------------


def empty(shape: Any, dtype: Any = "float32", device: Any = None, stream: Any = None) -> DeviceArray:
    """A new array (contents unspecified) from the device's caching pool (``device``: an id
    or Device, default the current device)."""
    return DeviceArray(_npurt._empty(list(_shape_arg(shape)), _dtype_name(dtype), device))


def full(shape: Any, fill_value: Any, dtype: Any = "float32", device: Any = None, stream: Any = None) -> DeviceArray:
    """A new array filled with ``fill_value`` (a fill kernel on ``stream``)."""
    a = empty(shape, dtype, device=device)
    if a.size:
        _npurt._fill(a._a, _scalar(fill_value), _stream_for(stream, device))
    return a


def zeros(shape: Any, dtype: Any = "float32", device: Any = None, stream: Any = None) -> DeviceArray:
    return full(shape, 0, dtype, device=device, stream=stream)


def ones(shape: Any, dtype: Any = "float32", device: Any = None, stream: Any = None) -> DeviceArray:
    return full(shape, 1, dtype, device=device, stream=stream)


def empty_like(a: DeviceArray, dtype: Any = None) -> DeviceArray:
    return empty(a.shape, a.dtype_name if dtype is None else dtype, device=a.device)


def zeros_like(a: DeviceArray, dtype: Any = None, stream: Any = None) -> DeviceArray:
    return zeros(a.shape, a.dtype_name if dtype is None else dtype, device=a.device, stream=stream)


def to_device(x: Any, stream: Any = None, dtype: Any = None, device: Any = None) -> DeviceArray:
    """Copies host data (a numpy array or anything ``np.asarray`` takes) to a new device
    array. The bytes are in device memory when the call returns (ACL's rule for pageable
    memory); float64 becomes float32; ``dtype`` converts (``"bfloat16"`` rounds on the
    device, on ``stream``)."""
    if isinstance(x, DeviceArray):
        if device is not None and _npurt.current_stream(device).device != x.device:
            want = x.dtype_name if dtype is None else dtype
            return to_device(x.to_host(), stream=stream, dtype=want, device=device)  # through the host
        out = x.copy(stream=stream)
        return out if dtype is None or _dtype_name(dtype) == out.dtype_name else cast(out, dtype, stream=stream)
    a = np.asarray(x)
    want = _dtype_name(dtype) if dtype is not None else None
    if a.dtype == np.float64 and want is None:
        want = "float32"
    if want is None:
        want = _dtype_name(a.dtype)
    host_dtype = "float32" if want == "bfloat16" else want
    a = np.asarray(a, dtype=host_dtype, order="C")
    out = empty(a.shape, host_dtype, device=device)
    if a.size:
        # A fresh block from the pool is idle for every stream: write it now.
        out._a._host_bytes()[: a.nbytes] = a.reshape(-1).view(np.uint8)
    if want == "bfloat16":
        return cast(out, "bfloat16", stream=_stream_for(stream, out.device))
    return out


# -- helpers -------------------------------------------------------------------------


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


def _scalar(v: Any) -> Any:
    if isinstance(v, (np.bool_, np.integer, np.floating)):
        return v.item()
    if isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v.item()
    raise _type_error(f"expected a number, not {type(v).__name__}")


def _arr(v: Any, what: str) -> DeviceArray:
    if not isinstance(v, DeviceArray):
        raise _type_error(f"{what} must be an npurt.DeviceArray, not {type(v).__name__}")
    return v


def _out(out: Any, shape: Sequence[int], dtype: str, device: int) -> DeviceArray:
    if out is None:
        return empty(shape, dtype, device=device)
    return _arr(out, "out")


def _bshape(op: str, *shapes: Sequence[int]) -> Tuple[int, ...]:
    if len(shapes) == 1 or (len(shapes) == 2 and shapes[0] == shapes[1]):
        return tuple(shapes[0])
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise _value_error(f"{op}: shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together") from None


# -- elementwise ---------------------------------------------------------------------


def _binary(op: str, x1: Any, x2: Any, out: Any, stream: Any) -> DeviceArray:
    t1, t2 = x1.__class__ is DeviceArray or isinstance(x1, DeviceArray), x2.__class__ is DeviceArray or isinstance(x2, DeviceArray)
    if t1 and t2:
        dt = x1._a.dtype
        if x2._a.dtype != dt:
            raise _type_error(f"{op}: dtypes {dt} and {x2._a.dtype} differ; convert one with astype()")
        dev = x1
    elif t1 or t2:
        dev = x1 if t1 else x2
        dt = dev._a.dtype
        sc = x2 if t1 else x1
        if not _is_scalar(sc):
            raise _type_error(f"{op}: operands must be DeviceArrays or Python numbers, not {type(sc).__name__}")
    else:
        raise _type_error(f"{op}: at least one operand must be an npurt.DeviceArray")
    if op == "divide" and dt not in _FLOATS:
        x1 = cast(x1, "float32", stream=stream) if t1 else x1
        x2 = cast(x2, "float32", stream=stream) if t2 else x2
        dt = "float32"
    a = x1._a if t1 else _scalar(x1)
    b = x2._a if t2 else _scalar(x2)
    if dt not in _FLOATS and (a.__class__ is float or b.__class__ is float):
        s = a if a.__class__ is float else b
        raise _type_error(f"{op}: float scalar {s!r} with a {dt} array; convert the array with astype() first")
    if out is None:
        if t1 and t2:
            s1, s2 = x1._a.shape, x2._a.shape
            shape = s1 if s1 == s2 else _bshape(op, s1, s2)
        else:
            shape = dev._a.shape
        out = empty(shape, dt, device=dev._a.device)
    elif not isinstance(out, DeviceArray):
        raise _type_error(f"out must be an npurt.DeviceArray, not {type(out).__name__}")
    _npurt._binary(op, a, b, out._a, stream)
    return out


def add(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``x1 + x2`` with numpy broadcasting (a kernel on ``stream``)."""
    return _binary("add", x1, x2, out, stream)


def subtract(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _binary("subtract", x1, x2, out, stream)


def multiply(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _binary("multiply", x1, x2, out, stream)


def divide(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """True division; integer arrays are cast to float32 first."""
    return _binary("divide", x1, x2, out, stream)


def maximum(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _binary("maximum", x1, x2, out, stream)


def minimum(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _binary("minimum", x1, x2, out, stream)


def _unary(op: str, x: Any, out: Any, stream: Any) -> DeviceArray:
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._unary(op, x._a, o._a, stream)
    return o


def exp(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("exp", x, out, stream)


def log(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("log", x, out, stream)


def sqrt(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("sqrt", x, out, stream)


def rsqrt(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("rsqrt", x, out, stream)


def tanh(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("tanh", x, out, stream)


def sigmoid(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("sigmoid", x, out, stream)


def relu(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("relu", x, out, stream)


def gelu(x: DeviceArray, approximate: str = "none", out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """GELU: exact (erf) by default, ``approximate="tanh"`` for the tanh form."""
    if approximate not in ("none", "tanh"):
        raise _value_error(f"approximate must be 'none' or 'tanh', not {approximate!r}")
    return _unary("gelu" if approximate == "none" else "gelu_tanh", x, out, stream)


def silu(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("silu", x, out, stream)


def abs(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:  # noqa: A001
    return _unary("abs", x, out, stream)


def negative(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("neg", x, out, stream)


def cast(x: DeviceArray, dtype: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``x`` converted to ``dtype`` (numpy's rules; float→int truncates and saturates)."""
    x = _arr(x, "x")
    o = _out(out, x.shape, _dtype_name(dtype), x.device)
    _npurt._cast(x._a, o._a, stream)
    return o


def axpy(alpha: Any, x: DeviceArray, y: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``alpha * x + y`` in one pass (fused)."""
    x, y = _arr(x, "x"), _arr(y, "y")
    o = _out(out, _bshape("axpy", x.shape, y.shape), x.dtype_name, x.device)
    _npurt._axpy(_scalar(alpha), x._a, y._a, o._a, stream)
    return o


# -- reductions ----------------------------------------------------------------------


def _axes(axis: Any, ndim: int) -> Optional[Tuple[int, ...]]:
    if axis is None:
        return None
    ax = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    out = []
    for a in ax:
        a = operator_index(a)
        if not -ndim <= a < ndim:
            raise _value_error(f"axis {a} is out of bounds for an array of {ndim} dimension(s)")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise _value_error(f"repeated axis in {ax}")
    return tuple(out)


def _reduce(op: str, x: Any, axis: Any, keepdims: bool, dtype: Optional[str], out: Any, stream: Any) -> DeviceArray:
    x = _arr(x, "x")
    ax = _axes(axis, x.ndim)
    red = set(range(x.ndim)) if ax is None else set(ax)
    if keepdims:
        shape = tuple(1 if d in red else s for d, s in enumerate(x.shape))
    else:
        shape = tuple(s for d, s in enumerate(x.shape) if d not in red)
    o = _out(out, shape, dtype or x.dtype_name, x.device)
    _npurt._reduce(op, x._a, None if ax is None else list(ax), o._a, stream)
    return o


def sum(x: DeviceArray, axis: Any = None, dtype: Any = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:  # noqa: A001
    """Sum over ``axis`` (None: all). Integer/bool inputs sum to int64 (numpy), floats keep
    their dtype; accumulation in f64 / i64."""
    x = _arr(x, "x")
    if dtype is None:
        dtype = x.dtype_name if x.dtype_name in _FLOATS else "int64"
    return _reduce("sum", x, axis, keepdims, _dtype_name(dtype), out, stream)


def mean(x: DeviceArray, axis: Any = None, dtype: Any = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:
    """Mean over ``axis``; integer inputs give float32 (numpy gives float64)."""
    x = _arr(x, "x")
    if dtype is None:
        dtype = x.dtype_name if x.dtype_name in _FLOATS else "float32"
    return _reduce("mean", x, axis, keepdims, _dtype_name(dtype), out, stream)


def max(x: DeviceArray, axis: Any = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:  # noqa: A001
    return _reduce("max", x, axis, keepdims, None, out, stream)


def min(x: DeviceArray, axis: Any = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:  # noqa: A001
    return _reduce("min", x, axis, keepdims, None, out, stream)


def argmax(x: DeviceArray, axis: Optional[int] = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:
    """Index of the first maximum (int64) along one axis, or of the flattened array."""
    if axis is not None and isinstance(axis, (tuple, list)):
        raise _type_error("argmax takes one axis or None")
    return _reduce("argmax", x, axis, keepdims, "int64", out, stream)


# -- rows ------------------------------------------------------------------------------


def softmax(x: DeviceArray, axis: int = -1, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._softmax(x._a, operator_index(axis), o._a, False, stream)
    return o


def log_softmax(x: DeviceArray, axis: int = -1, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._softmax(x._a, operator_index(axis), o._a, True, stream)
    return o


def layer_norm(
    x: DeviceArray,
    weight: Optional[DeviceArray] = None,
    bias: Optional[DeviceArray] = None,
    eps: float = 1e-5,
    out: Optional[DeviceArray] = None,
    stream: Any = None,
) -> DeviceArray:
    """Layer normalisation over the last axis (biased variance), then ``* weight + bias``."""
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._norm(x._a, None if weight is None else _arr(weight, "weight")._a, None if bias is None else _arr(bias, "bias")._a, float(eps), o._a, False, stream)
    return o


def rms_norm(x: DeviceArray, weight: Optional[DeviceArray] = None, eps: float = 1e-6, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._norm(x._a, None if weight is None else _arr(weight, "weight")._a, None, float(eps), o._a, True, stream)
    return o


# -- matmul / movement ---------------------------------------------------------------


def matmul(
    x1: DeviceArray,
    x2: DeviceArray,
    out: Optional[DeviceArray] = None,
    stream: Any = None,
    blocks: Optional[int] = None,
) -> DeviceArray:
    """numpy's matmul for 1-D, 2-D and 3-D operands (a batch of 1 broadcasts). Floats
    multiply in f32, integers accumulate in i64. ``blocks`` overrides the launch's block
    count (default: the planner's, which splits large products over the AI cores); the
    result is the same for any block count."""
    a, b = _arr(x1, "x1"), _arr(x2, "x2")
    if a.dtype_name != b.dtype_name:
        raise _type_error(f"matmul: dtypes {a.dtype_name} and {b.dtype_name} differ; convert one with astype()")
    if a.ndim == 0 or b.ndim == 0:
        raise _value_error("matmul: operands must have at least one dimension")
    if a.ndim > 3 or b.ndim > 3:
        raise _value_error("matmul: operands of more than 3 dimensions are not supported")
    squeeze = []
    if a.ndim == 1:
        a = a.reshape(1, a.shape[0])
        squeeze.append(-2)
    if b.ndim == 1:
        b = b.reshape(b.shape[0], 1)
        squeeze.append(-1)
    shape = tuple(_npurt._matmul_shape(list(a.shape), list(b.shape)))
    final = list(shape)
    for d in squeeze:
        final[d] = None
    final = tuple(s for s in final if s is not None)
    if out is None:
        o = empty(shape, a.dtype_name, device=a.device)
        _npurt._matmul(a._a, b._a, o._a, False, False, stream, blocks)
        return o.reshape(final) if squeeze else o
    o = _arr(out, "out")
    if o.shape != final:
        raise _value_error(f"matmul: out has shape {o.shape}, expected {final}")
    _npurt._matmul(a._a, b._a, (o.reshape(shape) if squeeze else o)._a, False, False, stream, blocks)
    return o


def transpose(x: DeviceArray, axes: Optional[Sequence[int]] = None) -> DeviceArray:
    """A transposed view (no copy); ``.copy()`` materialises it."""
    return _arr(x, "x").transpose(axes)


def concat(arrays: Sequence[DeviceArray], axis: int = 0, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """Joins arrays (same dtype, same shape except along ``axis``)."""
    xs = [_arr(a, "arrays") for a in arrays]
    if not xs:
        raise _value_error("concat needs at least one array")
    nd = xs[0].ndim
    ax = _axes(axis, nd)[0] if nd else 0
    shape = list(xs[0].shape)
    shape[ax] = _builtins.sum(a.shape[ax] if a.ndim == nd else 0 for a in xs)
    o = _out(out, shape, xs[0].dtype_name, xs[0].device)
    _npurt._concat([a._a for a in xs], operator_index(axis), o._a, stream)
    return o


concatenate = concat

