"""An ONNX backend on npurt (``onnx.backend.base.Backend``'s shape), so ONNX's own test
drivers (``onnx.backend.test.BackendTest``) and scripts written for other backends run
models on npurt::

    import npurt.model.backend as backend
    rep = backend.prepare(model_proto)        # an npurt.Model underneath
    outputs = rep.run([x])                    # numpy arrays, in the graph's output order

Devices are ONNX's strings: ``"CPU"`` (npurt's device 0, the host's cores), ``"NPU"`` or
``"NPU:i"`` (npurt device i).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .model import Model
from .onnx_io import require_onnx


def _device_id(device: str) -> int:
    d = str(device).upper()
    if d in ("CPU", "NPU"):
        return 0
    if d.startswith("NPU:") and d[4:].isdigit():
        return int(d[4:])
    raise ValueError(f"unknown device {device!r} (CPU, NPU or NPU:i)")


class NpurtRep:
    """A prepared model (``onnx.backend.base.BackendRep``'s shape): ``run(inputs)``."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> Tuple[np.ndarray, ...]:
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        outs = self.model.run(inputs if isinstance(inputs, dict) else list(inputs))
        return tuple(o.to_host() for o in outs)


def _base() -> Any:
    require_onnx()
    from onnx.backend.base import Backend

    return Backend


class NpurtBackend(_base()):  # type: ignore[misc]
    """``onnx.backend.base.Backend`` on npurt."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        try:
            cls.prepare(model, device, **kwargs)
        except Exception:
            return False
        return True

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> NpurtRep:
        return NpurtRep(Model.load(model, device=_device_id(device)))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> Tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Sequence[np.ndarray], device: str = "CPU", outputs_info: Optional[Sequence[Tuple[Any, Any]]] = None, **kwargs: Any) -> Tuple[np.ndarray, ...]:
        """One node on the given inputs (named after the node's inputs)."""
        from onnx import helper

        ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), np.shape(a)) for n, a in zip(node.input, inputs, strict=False) if n]
        outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        opset = kwargs.get("opset_version")
        imports = [helper.make_opsetid("", int(opset))] if opset else None
        m = helper.make_model(helper.make_graph([node], "node", ins, outs), opset_imports=imports)
        feeds: Dict[str, Any] = {n: a for n, a in zip(node.input, inputs, strict=False) if n}
        return cls.run_model(m, feeds, device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            _device_id(device)
        except ValueError:
            return False
        return True


prepare = NpurtBackend.prepare
run_model = NpurtBackend.run_model
run_node = NpurtBackend.run_node
supports_device = NpurtBackend.supports_device
is_compatible = NpurtBackend.is_compatible

__all__: List[str] = ["NpurtBackend", "NpurtRep", "prepare", "run_model", "run_node", "supports_device", "is_compatible"]
