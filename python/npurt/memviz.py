"""Draws a memory snapshot's allocated and reserved bytes over time, offline.

``python -m npurt.memviz snapshot.pickle -o mem.png`` reads a file written by
:func:`npurt.memory.dump_snapshot` (torch.cuda's snapshot format, so torch's own
snapshots work too) and plots, per device, the bytes allocated and reserved since
recording started. Needs matplotlib (``pip install 'npurt[viz]'``); :func:`timeline`
gives the curves without it. A leak shows as reserved rising with allocated; reuse as
allocated going up and down under a flat reserved line.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from typing import Any

__all__ = ["main", "plot", "timeline"]

_DELTA = {
    "alloc": (1, 0),
    "free_completed": (-1, 0),
    "segment_alloc": (0, 1),
    "segment_map": (0, 1),
    "segment_free": (0, -1),
    "segment_unmap": (0, -1),
}


def timeline(snapshot: dict[str, Any]) -> dict[int, dict[str, list[float]]]:
    """Per device with events: ``{"time_us": [...], "allocated": [...], "reserved":
    [...]}``, the bytes allocated and mapped since recording started (the trace's first
    event). A block or segment that existed before recording is not counted when it goes:
    the curves show what the recorded code did, never a negative figure from older memory."""
    out: dict[int, dict[str, list[float]]] = {}
    for dev, trace in enumerate(snapshot.get("device_traces", [])):
        if not trace:
            continue
        t: list[float] = []
        a_l: list[float] = []
        r_l: list[float] = []
        a = r = 0
        seen: dict[tuple[int, int], int] = {}  # (kind, addr) -> live count recorded
        for e in trace:
            da, dr = _DELTA.get(e["action"], (0, 0))
            key = (0 if da else 1, e.get("addr", 0))
            if da + dr > 0:
                seen[key] = seen.get(key, 0) + 1
            elif da + dr < 0:
                if not seen.get(key):
                    da = dr = 0  # allocated or mapped before recording started
                else:
                    seen[key] -= 1
            a += da * e["size"]
            r += dr * e["size"]
            t.append(float(e["time_us"]))
            a_l.append(float(a))
            r_l.append(float(r))
        out[dev] = {"time_us": t, "allocated": a_l, "reserved": r_l}
    return out


def plot(snapshot: dict[str, Any], path: str) -> None:
    """Writes the allocated/reserved curves of every device to ``path`` (PNG, SVG...)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "npurt.memviz needs matplotlib to draw: pip install 'npurt[viz]' "
            "(npurt.memviz.timeline() gives the curves without it)"
        ) from e
    curves = timeline(snapshot)
    fig, axes = plt.subplots(max(1, len(curves)), 1, figsize=(9, 3.2 * max(1, len(curves))), squeeze=False)
    for ax, (dev, c) in zip(axes[:, 0], sorted(curves.items()), strict=False):
        t0 = c["time_us"][0]
        ms = [(x - t0) / 1e3 for x in c["time_us"]]
        ax.step(ms, [x / 2**20 for x in c["reserved"]], where="post", label="reserved")
        ax.step(ms, [x / 2**20 for x in c["allocated"]], where="post", label="allocated")
        ax.set_title(f"device {dev}")
        ax.set_xlabel("time since recording started (ms)")
        ax.set_ylabel("MiB (relative)")
        ax.legend(loc="upper left")
    if not curves:
        axes[0, 0].set_title("no memory events recorded")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m npurt.memviz", description=__doc__.splitlines()[0])
    p.add_argument("snapshot", help="a pickle written by npurt.memory.dump_snapshot")
    p.add_argument("-o", "--output", default="mem.png", help="image to write (default mem.png)")
    args = p.parse_args(argv)
    with open(args.snapshot, "rb") as f:
        snap = pickle.load(f)
    try:
        plot(snap, args.output)
    except RuntimeError as e:
        print(f"npurt.memviz: {e}", file=sys.stderr)
        return 2
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
