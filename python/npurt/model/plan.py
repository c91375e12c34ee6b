"""Plans: a graph lowered for one input signature (shapes, dtypes, and the values of the
inputs used as shape parameters), with its memory plan, and the executor that runs it.

Building walks the nodes in order: a node whose inputs are all known is evaluated on the
host (shape arithmetic), any other is lowered to steps. Graph outputs get their own
arrays; intermediates share one workspace at the offsets of the memory plan. A plan is
immutable once built: many threads run it at once, each run with its own workspace and
outputs (from the caching pool) and the same weights.

Running: the first run on an idle plan executes the steps once with the kernel launches
*captured* (``npurt_kernels::replay``) into an instance: the launch list bound to its own
inputs, outputs and workspace. Later runs replay an idle instance in one native call (its
inputs copied in, the kernels pushed, its outputs copied into the run's), with no
per-step Python, shape work or allocation; when every instance is busy another is
recorded (at most ``MAX_INSTANCES``, then the steps run one by one). A plan whose steps
cannot be replayed (random draws) runs step by step; ``NPURT_MODEL_REPLAY=0`` turns
replay off.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from .. import _npurt
from ..array import DeviceArray, empty
from ..exceptions import InvalidTypeError, InvalidValueError
from . import dtypes, fuse, memplan, ops
from .graph import NEVER_FOLD, Graph, host_eval
from .ir import Ctx, Slot, Step, Val
from .ops import copy_into, need_dtype

# Instances per plan: each holds its own workspace, inputs and outputs (from the caching
# pool) while the model lives; more concurrent runs than this take the step-by-step path.
MAX_INSTANCES = 64
_REPLAY = os.environ.get("NPURT_MODEL_REPLAY", "1") != "0"


def _strides(shape: Sequence[int]) -> List[int]:
    out, n = [], 1
    for d in reversed(shape):
        out.append(n)
        n *= max(d, 1)
    return out[::-1]


class Plan:
    """An executable plan. ``memory``: the :class:`~npurt.model.memplan.MemoryPlan`;
    ``steps``: how many kernel steps a run queues; ``host_inputs``: indices of inputs whose
    values the plan was built for."""

    def __init__(self, slots: List[Slot], steps: List[Step], n_inputs: int, host_inputs: Set[int]) -> None:
        self.memory = memplan.plan(slots, steps)
        self.slots, self.step_list = slots, steps  # for inspection (the memory plan's inputs)
        self.host_inputs = frozenset(host_inputs)
        self._steps = [(s.fn, s.ins, s.outs) for s in steps]
        self._ops = [s.op for s in steps]
        self._template: List[Any] = [None] * len(slots)
        self._inputs = [-1] * n_inputs
        self._ws: List[Tuple[int, int, str, List[int], List[int]]] = []
        self._views: List[Tuple[int, int, Tuple[int, ...]]] = []
        self._outs: List[Tuple[int, Tuple[int, ...], str]] = []
        # Slots some step reads or writes (with their bases): a slot only dropped steps
        # used (a Transpose a MatMul reads through a view) gets no array.
        touched = {j for st in steps for i in st.ins + st.outs for j in (i, slots[i].base if slots[i].kind == "view" else i)}
        for i, s in enumerate(slots):
            if s.kind in ("ws", "view") and i not in touched:
                continue
            if s.kind == "const":
                self._template[i] = s.array
            elif s.kind == "input":
                self._inputs[s.index] = i
            elif s.kind == "ws":
                self._ws.append((i, self.memory.offsets[i], s.dtype, list(s.shape), _strides(s.shape)))
            elif s.kind == "view":
                self._views.append((i, s.base, s.shape))
            elif s.kind == "out":
                self._outs.append((i, s.shape, s.dtype))
        self._outs.sort(key=lambda o: slots[o[0]].index)
        self.output_shapes = [(o[1], o[2]) for o in self._outs]
        self._out_args = [([int(d) for d in o[1]], o[2]) for o in self._outs]
        # Recorded launch lists (None: replay is off, ``replay_off`` says why).
        self.replay_off: Optional[str] = None if _REPLAY else "NPURT_MODEL_REPLAY=0"
        self._replay: Any = _npurt._Replay() if _REPLAY else None

    @property
    def steps(self) -> int:
        return len(self._steps)

    def run(self, inputs: Sequence[Optional[DeviceArray]], outputs: Optional[Sequence[Optional[DeviceArray]]], stream: Any, device: int, replay: bool = True) -> List[DeviceArray]:
        """Queues one run on ``stream``. With ``replay`` (and a replayable plan) an idle
        recorded instance is replayed (one native call; a new instance is recorded when all
        are busy, up to ``MAX_INSTANCES``); otherwise the steps run one by one."""
        rp = self._replay if replay else None
        if rp is not None and outputs is None:
            # New outputs: allocated and the run queued in one native call.
            fresh = rp.run_fresh(stream, [a._a for a in inputs])
            if fresh is not None:
                return [DeviceArray(o) for o in fresh]
        res = self._outputs(outputs, device)
        if rp is not None:
            ins, outs = [a._a for a in inputs], [o._a for o in res]
            if rp.run(stream, ins, outs) or (self._record(rp, stream, device) and rp.run(stream, ins, outs)):
                return res
        self._execute(inputs, res, stream, device)
        return res

    @property
    def instances(self) -> int:
        """How many recorded instances (launch lists with their own workspace) exist."""
        rp = self._replay
        return 0 if rp is None else rp.instances

    def _outputs(self, outputs: Optional[Sequence[Optional[DeviceArray]]], device: int) -> List[DeviceArray]:
        if outputs is None:
            return [DeviceArray(_npurt._empty(shape, dt, device, None)) for shape, dt in self._out_args]
        res = []
        for j, (_slot, shape, dt) in enumerate(self._outs):
            given = outputs[j]
            if given is None:
                given = empty(shape, dt, device=device)
            elif not isinstance(given, DeviceArray):
                raise InvalidTypeError(f"output {j} must be an npurt.DeviceArray, not {type(given).__name__}")
            elif given.shape != tuple(shape) or given.dtype_name != dt or not given.is_contiguous:
                raise InvalidValueError(f"output {j}: expected a contiguous {dt} array of shape {tuple(shape)}, got {given.dtype_name} {given.shape}")
            res.append(given)
        return res

    def _record(self, rp: Any, stream: Any, device: int) -> bool:
        """Runs the steps once with launches captured into a new instance (its own inputs,
        outputs and workspace); False when at the cap or the plan cannot be replayed."""
        if rp.instances >= MAX_INSTANCES:
            return False
        ins: List[Optional[DeviceArray]] = [None if i < 0 else empty(self.slots[i].shape, self.slots[i].dtype, device=device) for i in self._inputs]
        outs = [empty(shape, dt, device=device) for _slot, shape, dt in self._outs]
        _npurt._replay_begin(stream)
        try:
            self._execute(ins, outs, stream, device)
        except BaseException:
            _npurt._replay_abort()
            raise
        why = rp.add([None if a is None else a._a for a in ins], [o._a for o in outs])
        if why is not None:
            self._replay, self.replay_off = None, why
            return False
        return True

    def _execute(self, inputs: Sequence[Optional[DeviceArray]], res: Sequence[DeviceArray], stream: Any, device: int) -> None:
        env = list(self._template)
        for slot, arr in zip(self._inputs, inputs, strict=False):
            if slot >= 0:
                env[slot] = arr
        if self.memory.workspace:
            ws = empty((self.memory.workspace,), "uint8", device=device)._a
            for slot, off, dt, shape, st in self._ws:
                env[slot] = DeviceArray(ws.view(off, dt, shape, st))
        else:
            for slot, _off, dt, shape, _st in self._ws:
                env[slot] = empty(shape, dt, device=device)
        for (slot, _shape, _dt), given in zip(self._outs, res, strict=False):
            env[slot] = given
        for slot, base, shape in self._views:
            env[slot] = env[base].reshape(shape)
        for fn, ins, outs in self._steps:
            fn([env[i] for i in ins], [env[o] for o in outs], stream)


def build(graph: Graph, shapes: Sequence[Tuple[int, ...]], in_dtypes: Sequence[str], input_value: Callable[[int], np.ndarray], upload: Callable[[np.ndarray, str], Any]) -> Plan:
    """Lowers ``graph`` for inputs of ``shapes`` / ``in_dtypes``; ``input_value(i)`` gives
    input i's host value (asked only for inputs used as shape parameters)."""
    asked: Set[int] = set()

    def value(i: int) -> np.ndarray:
        asked.add(i)
        return input_value(i)

    ctx = Ctx(graph.opset, upload, value, fuse=graph.fuse)
    vals: Dict[str, Val] = {}
    for i, (info, shape, dt) in enumerate(zip(graph.inputs, shapes, in_dtypes, strict=False)):
        slot = ctx._slot(Slot("input", tuple(shape), dt, index=i))
        vals[info.name] = Val(tuple(shape), dt, slot=slot, input_index=i, name=info.name)

    def get(name: str) -> Val:
        v = vals.get(name)
        if v is None:
            a = graph.consts[name]
            v = vals[name] = Val(tuple(a.shape), dtypes.from_numpy(a.dtype) or a.dtype.name, const=a, name=name)
        return v

    for key, node, attrs in graph.nodes:
        ins = [get(n) if n else None for n in node.input]
        ctx.node = f"{node.name} ({node.op_type})" if node.name else node.op_type
        if node.op_type not in NEVER_FOLD and not fuse.is_fused(attrs) and all(v is None or v.known for v in ins):
            arrays = [None if v is None else v.const for v in ins]
            outs = [Val(tuple(a.shape), dtypes.from_numpy(a.dtype) or a.dtype.name, const=a) for a in host_eval(node, arrays, graph.opsets, graph.fold_cache, key)]
        else:
            outs = ops.lower(node.op_type)(ctx, attrs, ins, len(node.output), op_type=node.op_type)
        for name, v in zip(node.output, outs, strict=False):
            if name:
                vals[name] = v
    used: Set[int] = set()
    for j, info in enumerate(graph.outputs):
        v = get(info.name)
        ctx.node = f"output {info.name!r}"
        slot = v.slot
        if not v.known:
            _root_at(ctx.slots, slot)
        if v.known or ctx.slots[slot].kind != "ws" or slot in used:
            need_dtype(ctx, v, what="the output")
            o = ctx.new(v.shape, v.dtype)
            if o.size:
                copy_into(ctx, v, o, op="output")
            slot = o.slot
        used.add(slot)
        ctx.slots[slot].kind = "out"
        ctx.slots[slot].index = j
    return Plan(ctx.slots, _live(ctx.slots, ctx.steps), len(graph.inputs), asked)


def _root_at(slots: List[Slot], slot: int) -> None:
    """Makes view ``slot`` of a workspace slot the root of that memory (the old root and its
    other views become views of it), so a graph output that is a reshape of a kernel's
    result is written by that kernel instead of copied after it. Nothing for any other slot
    (a root already, or a view of an input, a constant or another output's memory)."""
    s = slots[slot]
    base = s.base
    if s.kind != "view" or base is None or slots[base].kind != "ws":
        return
    for t in slots:
        if t.kind == "view" and t.base == base:
            t.base = slot
    old = slots[base]
    slots[base] = Slot("view", old.shape, old.dtype, base=slot)
    s.kind, s.base = "ws", None


def _live(slots: Sequence[Slot], steps: Sequence[Step]) -> List[Step]:
    """The steps whose results something reads: a later kept step or a graph output
    (a Transpose whose only reader takes its input through a view has none)."""

    def root(i: int) -> int:
        return slots[i].base if slots[i].kind == "view" else i  # type: ignore[return-value]

    needed = {i for i, s in enumerate(slots) if s.kind == "out"}
    keep: List[Step] = []
    for st in reversed(steps):
        outs = {root(i) for i in st.outs}
        if not outs or outs & needed:
            keep.append(st)
            needed |= {root(i) for i in st.ins}
    return keep[::-1]


def check_dtype(info: Any, got: str, where: str) -> None:
    if got != info.dtype:
        raise InvalidTypeError(f"{where} {info.name!r}: expected {info.dtype}, got {got}")


def as_input(info: Any, x: Any, device: int, stream: Any, where: str) -> DeviceArray:
    """A run's input as a contiguous DeviceArray of the model's dtype (host data is copied
    to the device before the call returns; device arrays are used as they are)."""
    if isinstance(x, DeviceArray):
        check_dtype(info, x.dtype_name, where)
        if x.device != device:
            raise InvalidValueError(f"{where} {info.name!r} is on device {x.device}, the model on device {device}")
        return x if x.is_contiguous else x.copy(stream=stream)
    if dtypes.npurt_dtype(info.elem_type) is None:
        raise InvalidTypeError(f"{where} {info.name!r} has ONNX type {info.dtype}, which npurt devices do not hold")
    try:
        a = np.asarray(x)
    except Exception as e:
        raise InvalidTypeError(f"{where} {info.name!r}: cannot convert {type(x).__name__} to an array: {e}") from None
    want = dtypes.numpy_dtype(info.dtype)
    if a.dtype != want:
        if isinstance(x, np.ndarray) or a.dtype.kind not in "biuf" or not np.can_cast(a.dtype, want, "same_kind"):
            raise InvalidTypeError(f"{where} {info.name!r}: expected {info.dtype}, got {a.dtype}")
        a = a.astype(want)
    from ..array import to_device

    return to_device(a if a.flags.c_contiguous else np.array(a, order="C"), dtype=info.dtype, device=device)

