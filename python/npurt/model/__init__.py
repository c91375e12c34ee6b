"""``npurt.model``: ONNX models planned as npurt kernel calls (``npurt.Model``).

Modules: ``onnx_io`` (parsing, inputs/outputs, the optional ``onnx`` dependency),
``dtypes`` (the one ONNX / npurt / ACL element-type table), ``graph`` (load-time folding
and the support check, host evaluation of known values), ``ir`` (plan-time
values, slots, steps), ``ops/`` (one lowering per ONNX op), ``plan`` (per-signature plans
and the executor), ``memplan`` (workspace offsets by lifetime), ``model`` (``Model``),
``backend`` (``onnx.backend.base.Backend`` for ONNX's conformance tests).
"""

from __future__ import annotations

from .ir import Unsupported
from .model import Model
from .onnx_io import TensorInfo
from .ops import supported_ops

__all__ = ["Model", "TensorInfo", "Unsupported", "supported_ops"]
