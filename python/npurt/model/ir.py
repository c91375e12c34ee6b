"""Plan-time values and the lowering context the operator lowerings write into.

A value is either *known* (a host numpy array: an initializer, a folded constant, a shape
computed from input shapes) or *dynamic* (a device tensor of a known shape and dtype that
exists only while a run executes). Lowering a node turns its dynamic inputs into steps —
calls of public npurt kernels on the run's stream — and gives its outputs a storage slot.

Slots (indices into a run's environment list):

* ``const`` — a device copy of a known value, uploaded once (weights: once per model;
  plan-time constants: once per plan);
* ``input`` — the run's i-th input array (contiguous);
* ``ws`` — an intermediate, a view at an offset of the run's one workspace buffer
  (``memplan`` assigns the offsets by lifetime);
* ``out`` — a graph output, its own array (returned to the caller, or the caller's);
* ``view`` — a reshaped view of another slot's (contiguous) array, made when a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..exceptions import InvalidValueError, NotSupportedError


class Unsupported(NotSupportedError):
    """A node the planner cannot lower (an op, attribute, dtype or data-dependent shape)."""


class NeedHost(Exception):
    """Internal: a lowering needs the value of a graph input at plan time."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


@dataclass
class Val:
    """A plan-time value: ``shape``, ``dtype`` (npurt's name, or ONNX's for host-only
    types), ``const`` (the host array when known) and ``slot`` (its device slot, if any)."""

    shape: Tuple[int, ...]
    dtype: str
    const: Optional[np.ndarray] = None
    slot: Optional[int] = None
    input_index: Optional[int] = None  # a graph input (its value may be asked for)
    name: str = ""
    # A Transpose's output: (its input, the perm). A MatMul may read the input through a
    # strided view instead; the Transpose's copy is then dropped if nothing else reads it.
    perm_of: Optional[Tuple["Val", Tuple[int, ...]]] = None

    @property
    def known(self) -> bool:
        return self.const is not None

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class Slot:
    kind: str  # const | input | ws | out | view
    shape: Tuple[int, ...]
    dtype: str
    base: Optional[int] = None  # view: the slot viewed (a root, never a view)
    array: Any = None  # const: the DeviceArray
    index: int = -1  # input / out: position


@dataclass
class Step:
    fn: Callable[[List[Any], List[Any], Any], None]
    ins: List[int]
    outs: List[int]
    op: str


@dataclass
class Ctx:
    """What a lowering sees: the opset, the node's name, slot creation and step emission.
    ``upload(array)`` returns the device copy of a host array (the model caches weights)."""

    opset: int
    upload: Callable[[np.ndarray, str], Any]
    input_value: Callable[[int], np.ndarray]
    slots: List[Slot] = field(default_factory=list)
    steps: List[Step] = field(default_factory=list)
    node: str = ""
    fuse: bool = True  # the model's NPURT_MODEL_FUSE choice (read when it was loaded)
    _consts: Dict[Any, Tuple[int, Any]] = field(default_factory=dict)

    # -- slots ---------------------------------------------------------------------
    def _slot(self, s: Slot) -> int:
        self.slots.append(s)
        return len(self.slots) - 1

    def new(self, shape: Sequence[int], dtype: str) -> Val:
        """A new dynamic value in a workspace slot."""
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise InvalidValueError(f"{self.node}: negative dimension in output shape {shape}")
        return Val(shape, dtype, slot=self._slot(Slot("ws", shape, dtype)))

    def view(self, v: Val, shape: Sequence[int]) -> Val:
        """``v`` reshaped without a copy (every dynamic slot's array is contiguous)."""
        shape = tuple(int(d) for d in shape)
        if v.known:
            return Val(shape, v.dtype, const=v.const.reshape(shape), name=v.name)
        base = self.root(self.slot_of(v))
        return Val(shape, v.dtype, slot=self._slot(Slot("view", shape, v.dtype, base=base)))

    def root(self, slot: int) -> int:
        s = self.slots[slot]
        return s.base if s.kind == "view" else slot

    def slot_of(self, v: Val) -> int:
        """The device slot of a value (a known value is uploaded once per plan)."""
        if v.slot is not None:
            return v.slot
        key = (v.name, v.shape) if v.name else id(v.const)
        if key not in self._consts:
            arr = self.upload(v.const, v.name)
            # The array is kept with its slot: an id() key must not be reused meanwhile.
            self._consts[key] = (self._slot(Slot("const", v.shape, v.dtype, array=arr)), v.const)
        v.slot = self._consts[key][0]
        return v.slot

    # -- host values ---------------------------------------------------------------
    def host(self, v: Optional[Val], what: str) -> Optional[np.ndarray]:
        """The host value of an input the lowering needs at plan time (shapes, axes...).
        A graph input's value is read from the run's feed (it becomes part of the plan's
        key); a value computed by kernels cannot be: ``Unsupported``."""
        if v is None:
            return None
        if v.known:
            return v.const
        if v.input_index is not None:
            return self.input_value(v.input_index)
        raise Unsupported(f"{self.node}: {what} is computed on the device; npurt needs it when the model is planned (data-dependent shapes are not supported)")

    # -- steps ---------------------------------------------------------------------
    def emit(self, fn: Callable[[List[Any], List[Any], Any], None], ins: Sequence[Val], outs: Sequence[Val], op: str = "") -> None:
        """Queues ``fn(in_arrays, out_arrays, stream)`` as the next step of the plan."""
        self.steps.append(Step(fn, [self.slot_of(v) for v in ins], [self.slot_of(v) for v in outs], op or self.node))
