"""The memory plan: every workspace slot of a plan gets an offset in one buffer, so slots
whose lifetimes do not overlap share memory.

Lifetime of a slot = [the first step writing it, the last step reading it or a view of it].
Placement is greedy by size (largest first), each slot at the lowest aligned offset where
it overlaps no placed slot alive at the same time: the classic offset-assignment heuristic
for static tensor lifetimes. The report compares the workspace with the sum of every
intermediate (what allocating each separately would hold at once, at worst).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from . import dtypes
from .ir import Slot, Step

ALIGN = 64


@dataclass(frozen=True)
class MemoryPlan:
    offsets: Dict[int, int]  # ws slot -> byte offset
    workspace: int  # bytes of the one workspace buffer
    intermediates: int  # sum of every workspace slot's bytes
    peak_live: int  # the largest sum of slots alive at one step (a lower bound)


def _nbytes(s: Slot) -> int:
    n = dtypes.itemsize(s.dtype)
    for d in s.shape:
        n *= d
    return n


def lifetimes(slots: Sequence[Slot], steps: Sequence[Step]) -> Dict[int, Tuple[int, int]]:
    """[first, last] step index of every workspace slot (views count for their base)."""
    life: Dict[int, List[int]] = {}

    def touch(slot: int, i: int) -> None:
        s = slots[slot]
        root = s.base if s.kind == "view" else slot
        if slots[root].kind != "ws":
            return
        span = life.setdefault(root, [i, i])
        span[0], span[1] = min(span[0], i), max(span[1], i)

    for i, st in enumerate(steps):
        for j in st.outs:
            touch(j, i)
        for j in st.ins:
            touch(j, i)
    return {k: (v[0], v[1]) for k, v in life.items()}


def plan(slots: Sequence[Slot], steps: Sequence[Step]) -> MemoryPlan:
    life = lifetimes(slots, steps)
    sizes = {k: _nbytes(slots[k]) for k in life}
    order = sorted(life, key=lambda k: (-sizes[k], life[k][0]))
    placed: List[Tuple[int, int, int, int]] = []  # (offset, end, first, last)
    offsets: Dict[int, int] = {}
    top = 0
    for k in order:
        size = -(-sizes[k] // ALIGN) * ALIGN
        first, last = life[k]
        busy = sorted((o, e) for o, e, f, la in placed if f <= last and first <= la)
        at = 0
        for o, e in busy:
            if at + size <= o:
                break
            at = max(at, -(-e // ALIGN) * ALIGN)
        offsets[k] = at
        placed.append((at, at + size, first, last))
        top = max(top, at + size)
    # Workspace slots no step touches (zero-size outputs of skipped steps) sit at 0.
    for i, s in enumerate(slots):
        if s.kind == "ws" and i not in offsets:
            offsets[i] = 0
            sizes[i] = _nbytes(s)
    peak = 0
    for i in range(len(steps)):
        peak = max(peak, sum(sizes[k] for k, (f, la) in life.items() if f <= i <= la))
    return MemoryPlan(offsets, top, sum(sizes.values()), peak)
