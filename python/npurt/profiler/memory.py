"""``profile_memory``: allocated and reserved bytes per device over time, from the memory
event hook (``npurt_core::memory::events``): allocations and frees move "allocated" by the
block's pool size, segment maps and unmaps move "reserved"."""

from __future__ import annotations

from typing import Dict, Iterable, List, Sequence, Tuple

from .. import _npurt

Sample = Tuple[int, int, int, int]  # (t_ns, device, allocated, reserved)


class MemoryRecorder:
    """Subscribed to the memory hook from creation until :meth:`stop`."""

    def __init__(self, devices: Sequence[int]) -> None:
        from .. import memory_allocated, memory_reserved

        if not hasattr(_npurt, "_MemCollector"):
            from ..exceptions import NotSupportedError

            raise NotSupportedError("profile_memory needs the runtime's memory event hook, missing from this build")
        self.devices = list(devices)
        self.sub = _npurt._MemCollector()
        t = _npurt._clock_ns()
        self.start = {d: (t, memory_allocated(d), memory_reserved(d)) for d in self.devices}

    def stop(self) -> List[Sample]:
        events = self.sub.stop()  # [(t_ns, device, action, size, block_size)]
        level = {d: [a, r] for d, (_, a, r) in self.start.items()}
        out: List[Sample] = [(t, d, a, r) for d, (t, a, r) in self.start.items()]
        for t, dev, action, _size, block in sorted(events):
            if dev not in level:
                continue
            lv = level[dev]
            if action == "alloc":
                lv[0] += block
            elif action == "free_completed":
                lv[0] -= block
            elif action == "segment_alloc":
                lv[1] += block
            elif action == "segment_free":
                lv[1] -= block
            else:
                continue
            out.append((t, dev, lv[0], lv[1]))
        return out


class MemoryTimeline:
    """Samples ``(t_ns, device, allocated, reserved)`` in time order; per device:
    :meth:`times`, :meth:`allocated`, :meth:`reserved` (bytes)."""

    def __init__(self, samples: Iterable[Sample]) -> None:
        self.samples: List[Sample] = sorted(samples)

    def devices(self) -> List[int]:
        return sorted({s[1] for s in self.samples})

    def _col(self, device: int, i: int) -> List[int]:
        return [s[i] for s in self.samples if s[1] == device]

    def times(self, device: int = 0) -> List[int]:
        return self._col(device, 0)

    def allocated(self, device: int = 0) -> List[int]:
        return self._col(device, 2)

    def reserved(self, device: int = 0) -> List[int]:
        return self._col(device, 3)

    def as_dict(self) -> Dict[int, Dict[str, List[int]]]:
        return {d: {"t_ns": self.times(d), "allocated": self.allocated(d), "reserved": self.reserved(d)} for d in self.devices()}

    def __len__(self) -> int:
        return len(self.samples)
