"""``npurt.Model``: an ONNX model loaded once, run from any number of threads and streams.

    model = npurt.Model.load("net.onnx")        # parse, fold, check ops, upload weights
    y = model(x)                                # numpy or DeviceArray in, DeviceArray out
    outs = model.run({"x": x})                  # list of outputs (waits for them)
    outs = model.run_async([x], stream=s)       # queued on s; returns at once

Plans are cached per input signature (shapes, dtypes, and the values of inputs the graph
uses as shape parameters); a model whose inputs are all static is planned at load time, so
a shape or op error shows there. Weights are uploaded once per model and shared by every
plan and run; each run takes its own workspace and outputs from the device's caching pool.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _npurt
from ..array import DeviceArray, to_device
from ..exceptions import InvalidTypeError, InvalidValueError
from . import onnx_io
from .graph import Graph
from .ir import NeedHost, Unsupported
from .onnx_io import TensorInfo
from .plan import Plan, as_input, build

Feeds = Union[Sequence[Any], Mapping[str, Any]]


class Model:
    """A loaded ONNX model (use :meth:`load`). ``inputs`` / ``outputs``: TensorInfo lists
    (name, shape with symbolic dims as strings, dtype)."""

    def __init__(self, graph: Graph, device: int) -> None:
        if not isinstance(graph, Graph):
            raise InvalidTypeError("use npurt.Model.load(path_or_bytes) to load a model")
        self._graph = graph
        self.device = device
        self.inputs: List[TensorInfo] = list(graph.inputs)
        self.outputs: List[TensorInfo] = list(graph.outputs)
        self._lock = threading.RLock()
        self._weights: Dict[Tuple[str, Tuple[int, ...]], DeviceArray] = {}
        self._plans: Dict[Tuple[Any, ...], Plan] = {}
        self._host_inputs: Tuple[int, ...] = ()
        # (signature, plan) of the last run whose inputs were all device arrays: the same
        # signature again skips feed checks and the plan lookup (``run_async``).
        self._fast: Optional[Tuple[Tuple[Any, ...], Plan]] = None
        if all(i.is_static for i in self.inputs):
            try:
                self._plan_for([tuple(int(d) for d in i.shape) for i in self.inputs], [i.dtype for i in self.inputs], None)
            except NeedHost:
                pass  # an input is a shape parameter: planned at the first run, for its value

    @classmethod
    def load(cls, path_or_bytes: Any, device: Any = None) -> "Model":
        """Parses an ONNX model (a path, bytes or an ``onnx.ModelProto``), folds its
        initializer-only subgraphs, checks every op (one ``NotSupportedError`` naming each
        node npurt cannot run) and, for static input shapes, plans it and uploads the
        weights to ``device`` (default: the current device)."""
        dev = _npurt.current_stream(device).device if device is not None else _npurt.current_stream().device
        return cls(Graph(onnx_io.parse(path_or_bytes)), dev)

    # -- introspection -----------------------------------------------------------------
    @property
    def op_types(self) -> List[str]:
        return self._graph.op_types()

    def plan(self, *inputs: Any) -> Plan:
        """The plan for these inputs (built and cached if new): its ``memory`` report
        (workspace bytes against the sum of intermediates), ``steps``..."""
        feeds = self._feeds(inputs[0] if len(inputs) == 1 and isinstance(inputs[0], Mapping) else list(inputs))
        shapes = [tuple(np.shape(x)) if not isinstance(x, DeviceArray) else x.shape for x in feeds]
        dts = [self._dtype_of(info, x) for info, x in zip(self.inputs, feeds, strict=False)]
        return self._plan_for(shapes, dts, feeds)

    def static_output_shapes(self) -> Optional[List[Tuple[int, ...]]]:
        """The output shapes when every input is static (from the load-time plan), else None."""
        if not all(i.is_static for i in self.inputs):
            return None
        for key, plan in list(self._plans.items()):
            if key[0] == tuple(tuple(int(d) for d in i.shape) for i in self.inputs):
                return [tuple(s) for s, _ in plan.output_shapes]
        return None

    # -- running -----------------------------------------------------------------------
    def __call__(self, *inputs: Any, stream: Any = None) -> Any:
        outs = self.run(list(inputs), stream=stream)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(self, inputs: Feeds, stream: Any = None) -> List[DeviceArray]:
        """Runs the model and waits for it (``stream``: default the current stream);
        returns the outputs in ``outputs`` order."""
        s = self._stream(stream)
        outs = self.run_async(inputs, stream=s)
        s.synchronize()
        return outs

    def run_async(self, inputs: Feeds, outputs: Optional[Sequence[Optional[DeviceArray]]] = None, stream: Any = None) -> List[DeviceArray]:
        """Queues a run on ``stream`` and returns its outputs at once (``outputs``: arrays
        to write instead of new ones). Host inputs are on the device when this returns;
        kernels reading device inputs wait for their writers."""
        s = self._stream(stream)
        fast = self._fast
        if fast is not None and outputs is None and type(inputs) in (list, tuple):
            # The serving loop's case: device arrays of the signature of the last such run
            # (so already checked and planned), no shape parameters: straight to the plan.
            # (A plain loop: a generator in all() cost as much as the checks.)
            sig, plan = fast
            if len(inputs) == len(sig):
                for x, k in zip(inputs, sig, strict=True):
                    if type(x) is not DeviceArray:
                        break
                    a = x._a
                    if (a.shape, a.dtype, a.device, a.is_contiguous) != k:
                        break
                else:
                    return plan.run(inputs, None, s, self.device)
        feeds = self._feeds(inputs)
        arrays = [as_input(info, x, self.device, s, "input") for info, x in zip(self.inputs, feeds, strict=False)]
        self._check_shapes(arrays)
        plan = self._plan_for([a.shape for a in arrays], [a.dtype_name for a in arrays], feeds)
        if outputs is not None:
            if not isinstance(outputs, (list, tuple)) or len(outputs) != len(self.outputs):
                raise InvalidValueError(f"outputs must be a list of {len(self.outputs)} DeviceArrays (or None entries)")
        if not self._host_inputs and all(type(x) is DeviceArray for x in feeds):
            self._fast = (tuple((a.shape, a.dtype_name, self.device, True) for a in arrays), plan)
        return plan.run(arrays, outputs, s, self.device)

    # -- internals ---------------------------------------------------------------------
    def _stream(self, stream: Any) -> Any:
        if stream is None:
            return _npurt.current_stream(self.device)
        if not isinstance(stream, _npurt.Stream):
            raise InvalidTypeError(f"stream must be an npurt.Stream or None, not {type(stream).__name__}")
        if stream.device != self.device:
            raise InvalidValueError(f"stream of device {stream.device} for a model on device {self.device}")
        return stream

    def _feeds(self, inputs: Feeds) -> List[Any]:
        if isinstance(inputs, Mapping):
            names = [i.name for i in self.inputs]
            extra = [k for k in inputs if k not in names]
            missing = [n for n in names if n not in inputs]
            if extra or missing:
                raise InvalidValueError(f"inputs: missing {missing}, unknown {extra}; the model takes {names}")
            return [inputs[n] for n in names]
        if isinstance(inputs, (DeviceArray, np.ndarray)) or not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        if len(inputs) != len(self.inputs):
            raise InvalidValueError(f"the model takes {len(self.inputs)} input(s) {[i.name for i in self.inputs]}, got {len(inputs)}")
        return list(inputs)

    def _dtype_of(self, info: TensorInfo, x: Any) -> str:
        return x.dtype_name if isinstance(x, DeviceArray) else info.dtype

    def _check_shapes(self, arrays: Sequence[DeviceArray]) -> None:
        dims: Dict[str, int] = {}
        for info, a in zip(self.inputs, arrays, strict=False):
            if info.shape is None:
                continue
            if len(a.shape) != len(info.shape):
                raise InvalidValueError(f"input {info.name!r}: expected rank {len(info.shape)} {info.shape}, got shape {a.shape}")
            for want, got in zip(info.shape, a.shape, strict=False):
                if isinstance(want, int) and want != got:
                    raise InvalidValueError(f"input {info.name!r}: expected shape {info.shape}, got {a.shape}")
                if isinstance(want, str) and dims.setdefault(want, got) != got:
                    raise InvalidValueError(f"input {info.name!r}: dim {want!r} is {got} here but {dims[want]} in another input")

    def _host_value(self, feeds: Optional[List[Any]], i: int) -> np.ndarray:
        if feeds is None:
            raise NeedHost(i)
        x = feeds[i]
        return x.to_host() if isinstance(x, DeviceArray) else np.asarray(x, dtype=np.dtype(self.inputs[i].dtype) if self.inputs[i].dtype != "bfloat16" else np.float32)

    def _upload(self, a: np.ndarray, name: str) -> DeviceArray:
        from . import dtypes
        from .ops import DEVICE_DTYPES

        dt = dtypes.from_numpy(a.dtype)
        if dt is None or dt not in DEVICE_DTYPES:
            raise Unsupported(f"constant {name or '(folded)'} of dtype {a.dtype} is used on the device, which has no such dtype")
        if not name:
            return to_device(np.array(a, order="C"), device=self.device, dtype=dt)
        key = (name, a.shape)
        with self._lock:
            w = self._weights.get(key)
            if w is None:
                w = self._weights[key] = to_device(np.array(a, order="C"), device=self.device, dtype=dt)
            return w

    def _key(self, shapes: Sequence[Tuple[int, ...]], dts: Sequence[str], feeds: Optional[List[Any]], host: Tuple[int, ...]) -> Tuple[Any, ...]:
        vals = tuple(self._host_value(feeds, i).tobytes() for i in host) if host else ()
        return (tuple(tuple(s) for s in shapes), tuple(dts), host, vals)

    def _plan_for(self, shapes: Sequence[Tuple[int, ...]], dts: Sequence[str], feeds: Optional[List[Any]]) -> Plan:
        host = self._host_inputs
        key = self._key(shapes, dts, feeds, host)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                plan = build(self._graph, shapes, dts, lambda i: self._host_value(feeds, i), self._upload)
                if not plan.host_inputs <= set(host):
                    self._host_inputs = tuple(sorted(set(host) | plan.host_inputs))
                    key = self._key(shapes, dts, feeds, self._host_inputs)
                self._plans[key] = plan
            return plan

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}:{i.dtype}{list(i.shape or [])}" for i in self.inputs)
        outs = ", ".join(f"{o.name}:{o.dtype}{list(o.shape or [])}" for o in self.outputs)
        return f"<npurt.Model ({ins}) -> ({outs}), {len(self._graph.nodes)} nodes, device {self.device}>"
