"""Reading ONNX models: the optional ``onnx`` dependency, parsing a path or bytes,
shape inference, the graph's inputs and outputs (names, shapes with symbolic dims, dtypes)
and initializers as host arrays. Nothing here touches the device.

``onnx`` is an optional dependency (``pip install 'npurt[onnx]'``): ``npurt`` imports
without it, and ``npurt.Model.load`` raises ``ImportError`` naming the extra when it is
missing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from ..exceptions import InvalidTypeError, InvalidValueError
from . import dtypes

Dim = Union[int, str, None]


def require_onnx() -> Any:
    """The ``onnx`` module, or ImportError telling how to install it."""
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - exercised in a bare venv only
        raise ImportError(
            "npurt.Model needs the 'onnx' package to read ONNX models: pip install 'npurt[onnx]' (or pip install onnx)"
        ) from e
    return onnx


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: ``name``, ``shape`` (ints for static dims, the symbol as a
    string for named dynamic dims, None for unnamed ones; None for an unknown rank),
    ``dtype`` (npurt's dtype name, or ONNX's name when the device has no such dtype) and
    ``elem_type`` (ONNX's ``TensorProto`` code)."""

    name: str
    shape: Optional[Tuple[Dim, ...]]
    dtype: str
    elem_type: int

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of a static tensor (0 when a dim is dynamic or the dtype unknown), as
        ``aclmdlGetInputSizeByIndex`` reports."""
        if not self.is_static or npurt_dtype_or_none(self.elem_type) is None:
            return 0
        n = dtypes.itemsize(self.dtype)
        for d in self.shape or ():
            n *= int(d)
        return n


def npurt_dtype_or_none(elem_type: int) -> Optional[str]:
    return dtypes.npurt_dtype(elem_type)


def _info(vi: Any) -> TensorInfo:
    t = vi.type
    if not t.HasField("tensor_type"):
        raise InvalidValueError(f"model value {vi.name!r} is not a tensor (sequences, maps and optionals are not supported)")
    tt = t.tensor_type
    shape: Optional[Tuple[Dim, ...]] = None
    if tt.HasField("shape"):
        dims: List[Dim] = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param"):
                dims.append(str(d.dim_param))
            else:
                dims.append(None)
        shape = tuple(dims)
    et = int(tt.elem_type)
    return TensorInfo(vi.name, shape, dtypes.npurt_dtype(et) or dtypes.onnx_name(et), et)


def parse(src: Any) -> Any:
    """A ``ModelProto`` from a path (str / PathLike), bytes-like data or a ModelProto.
    Typed errors: a missing file is ``InvalidValueError`` (``FileNotFoundError`` is
    chained), data that is not an ONNX model ``InvalidValueError``."""
    onnx = require_onnx()
    if isinstance(src, onnx.ModelProto):
        return src
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        if path.endswith(".om"):
            raise InvalidValueError(
                f"{path}: an .om (offline model) file; npurt loads ONNX models (.onnx), the format .om files are built from"
            )
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InvalidValueError(f"cannot read model file {path!r}: {e}") from e
        where = path
    elif isinstance(src, (bytes, bytearray, memoryview)):
        data, where = bytes(src), "model bytes"
    else:
        raise InvalidTypeError(f"Model.load takes a path, bytes or an onnx.ModelProto, not {type(src).__name__}")
    try:
        m = onnx.ModelProto()
        m.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError and friends
        raise InvalidValueError(f"{where}: not an ONNX model ({type(e).__name__}: {e}); npurt loads ONNX models") from None
    if not m.HasField("graph") or len(m.graph.node) == 0 and len(m.graph.output) == 0:
        raise InvalidValueError(f"{where}: not an ONNX model (no graph); npurt loads ONNX models")
    return m


def infer_shapes(model: Any) -> Any:
    """``onnx.shape_inference`` over the model (the original when inference fails: the
    planner computes every shape itself; inference only names symbolic output dims)."""
    onnx = require_onnx()
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:
        return model


def opset_of(model: Any) -> int:
    """The default-domain opset version the model imports (1 if absent)."""
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 1


def graph_io(model: Any) -> Tuple[List[TensorInfo], List[TensorInfo]]:
    """The real inputs (initializers listed as inputs excluded) and the outputs."""
    g = model.graph
    inits = {t.name for t in g.initializer}
    ins = [_info(v) for v in g.input if v.name not in inits]
    outs = [_info(v) for v in g.output]
    return ins, outs


def initializers(model: Any) -> Dict[str, np.ndarray]:
    """Every initializer as a host numpy array (external data is read by onnx)."""
    from onnx import numpy_helper

    out = {}
    for t in model.graph.initializer:
        try:
            out[t.name] = numpy_helper.to_array(t)
        except Exception as e:
            raise InvalidValueError(f"initializer {t.name!r} cannot be read: {e}") from None
    return out


def attributes(node: Any) -> Dict[str, Any]:
    """A node's attributes as Python values (tensors as numpy arrays)."""
    from onnx import helper, numpy_helper

    out: Dict[str, Any] = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.type == a.TENSOR:
            v = numpy_helper.to_array(v)
        elif isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        out[a.name] = v
    return out
