"""The one table of tensor element types for models: ONNX's ``TensorProto.DataType`` codes,
npurt's dtype names (``npurt.array``'s) and ACL's ``aclDataType`` values (``acl_base.h``).

``npurt.model`` (the ONNX loader and planner) and ``npurt.acl.mdl`` (``get_input_data_type``
and the byte sizes of ``get_input_size_by_index``) both read it; nothing else spells these
codes. An ONNX type npurt has no device dtype for (double, uint16/32/64, int16, strings,
complex, the 8-bit and 4-bit float formats) maps to ``None``: a model using it at run time
is an unsupported-dtype error when it is planned.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

# ONNX TensorProto.DataType code -> (name ONNX uses, npurt dtype or None, aclDataType or None)
_TABLE: Dict[int, Tuple[str, Optional[str], Optional[int]]] = {
    1: ("float", "float32", 0),  # ACL_FLOAT
    2: ("uint8", "uint8", 4),  # ACL_UINT8
    3: ("int8", "int8", 2),  # ACL_INT8
    4: ("uint16", None, 7),  # ACL_UINT16
    5: ("int16", None, 6),  # ACL_INT16
    6: ("int32", "int32", 3),  # ACL_INT32
    7: ("int64", "int64", 9),  # ACL_INT64
    8: ("string", None, 13),  # ACL_STRING
    9: ("bool", "bool", 12),  # ACL_BOOL
    10: ("float16", "float16", 1),  # ACL_FLOAT16
    11: ("double", None, 11),  # ACL_DOUBLE
    12: ("uint32", None, 8),  # ACL_UINT32
    13: ("uint64", None, 10),  # ACL_UINT64
    16: ("bfloat16", "bfloat16", 27),  # ACL_BF16
}

#: aclDataType of an unknown type (``ACL_DT_UNDEFINED``).
ACL_DT_UNDEFINED = -1

_BY_NPURT = {v[1]: k for k, v in _TABLE.items() if v[1] is not None}
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8, "int8": 1, "uint8": 1, "bool": 1}


def onnx_name(elem_type: int) -> str:
    """ONNX's name of a ``TensorProto`` element type (``"float"``, ``"int64"``...)."""
    entry = _TABLE.get(elem_type)
    return entry[0] if entry else f"type {elem_type}"


def npurt_dtype(elem_type: int) -> Optional[str]:
    """npurt's dtype name for an ONNX element type, or None if the device has none."""
    entry = _TABLE.get(elem_type)
    return entry[1] if entry else None


def onnx_type(dtype: str) -> int:
    """The ONNX element type of an npurt dtype name."""
    return _BY_NPURT[dtype]


def acl_type(elem_type: int) -> int:
    """ACL's ``aclDataType`` for an ONNX element type (``ACL_DT_UNDEFINED`` if unknown)."""
    entry = _TABLE.get(elem_type)
    return entry[2] if entry and entry[2] is not None else ACL_DT_UNDEFINED


def itemsize(dtype: str) -> int:
    """Bytes per element of an npurt dtype."""
    return _ITEMSIZE[dtype]


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype host data of an npurt dtype is given in (bfloat16: float32)."""
    return np.dtype("float32" if dtype == "bfloat16" else dtype)


def from_numpy(dt: np.dtype) -> Optional[str]:
    """npurt's dtype name for a numpy dtype, or None (float64 has no device dtype)."""
    name = np.dtype(dt).name
    return name if name in _ITEMSIZE else None
