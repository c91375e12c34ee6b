"""Tables and plots of the throughput-versus-stream-count results (``results["throughput"]``;
schema in ``docs/BENCH.md``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Dict, List, Optional

BASELINE_NAMES = {
    "python_threads": "py threads",
    "pocl": "PoCL",
    "numba_cudasim": "numba sim",
    "numpy": "numpy",
}


def _fmt(v: float) -> str:
    return f"{v:12,.0f}" if v >= 100 else f"{v:12.3g}"


def _sorted(d: Dict[str, Any]) -> List[str]:
    return sorted(d, key=int)


def _ideal(s: int, s1: int, cores: int) -> float:
    return min(s, cores) / min(s1, cores)


def tables(tp: Dict[str, Any], cores: int) -> List[str]:
    """One table per workload and batch: npurt's items/s by stream count, speed-up over the
    smallest stream count, the ideal min(S, cores) speed-up, and each baseline with the
    npurt/baseline ratio at the same stream count (pairs measured in the same run)."""
    lines: List[str] = []
    seen = set()
    for w in tp.values():
        for b, entry in w["batches"].items():
            per = entry["items_per_launch"]
            npr = entry.get("npurt", {})
            if not npr:
                continue
            bases = {k: v for k, v in entry.get("baselines", {}).items() if k != "numpy" and v}
            seen.update(k for k, v in entry.get("baselines", {}).items() if v)
            unit = w["item"] + "s/s"
            head = f"{w['label']}" + (f", batch {b}" if w.get("batched") else "")
            chk = entry.get("check", {}).get("npurt")
            if chk:
                err = chk.get("max_abs_err")
                head += (f"; checked vs numpy at S={chk['streams']}, max |err| {err:.2g}" if err is not None
                         else f"; completion checked at S={chk['streams']}")
            lines += ["", head]
            row = f"{'streams':>7} {'npurt ' + unit:>12} {'vs S=1':>7} {'ideal':>6}"
            for name in bases:
                row += f" {BASELINE_NAMES.get(name, name):>12} {'npurt/':>7}"
            lines.append(row)
            xs = _sorted(npr)
            first = npr[xs[0]]["median"]
            for s in xs:
                med = npr[s]["median"]
                row = f"{s:>7} {_fmt(med * per)} {med / first:6.2f}x {_ideal(int(s), int(xs[0]), cores):5.0f}x"
                for data in bases.values():
                    if s in data:
                        row += f" {_fmt(data[s]['median'] * per)} {med / data[s]['median']:6.2f}x"
                    else:
                        row += f" {'':12} {'':7}"
                lines.append(row)
            np_ = entry.get("baselines", {}).get("numpy")
            if np_:
                nv = np_["1"]["median"]
                best = max(xs, key=lambda s: npr[s]["median"])
                lines.append(f"  numpy on the calling thread (all BLAS threads): {_fmt(nv * per).strip()} {unit}; "
                             f"npurt at S={best} / numpy: {npr[best]['median'] / nv:.2f}x")
    notes = {"python_threads": "py threads: one Python thread per stream running the same numpy code, 1 BLAS thread each",
             "numba_cudasim": "numba sim: numba's CUDA simulator, runs every launch serially; few launches, S <= 4",
             "pocl": "PoCL: pyopencl, one in-order command queue per stream"}
    lines += [f"  ({text})" for name, text in notes.items() if name in seen]
    return lines


def _plt() -> Optional[Any]:
    if importlib.util.find_spec("matplotlib") is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


STYLE = {"python_threads": ("s", "-."), "pocl": ("^", ":"), "numba_cudasim": ("x", ":"), "numpy": (None, (0, (1, 1)))}


def plot_workload(w: Dict[str, Any], cores: int, path: Path) -> bool:
    """One PNG for a workload: a panel per batch size with npurt's throughput (items/s) by
    stream count (min-max band), the ideal min(S, cores) x S=1, and every baseline (those
    more than 20x away from npurt are listed in a note instead of squashing the axis)."""
    plt = _plt()
    if plt is None:
        return False
    from matplotlib.ticker import EngFormatter

    batches = [b for b in _sorted(w["batches"]) if w["batches"][b].get("npurt")]
    if not batches:
        return False
    ncols = min(3, len(batches))
    nrows = -(-len(batches) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, 4.6 * nrows), squeeze=False)
    for ax in axes.flat[len(batches):]:
        ax.set_visible(False)
    unit = w["item"] + "s/s"
    for ax, b in zip(axes.flat, batches, strict=False):
        entry = w["batches"][b]
        per = entry["items_per_launch"]
        npr = entry["npurt"]
        xs = [int(s) for s in _sorted(npr)]
        ys = [npr[str(s)]["median"] * per for s in xs]
        ax.plot(xs, ys, "o-", color="C0", lw=2, label="npurt")
        ax.fill_between(xs, [npr[str(s)]["min"] * per for s in xs], [npr[str(s)]["max"] * per for s in xs],
                        color="C0", alpha=0.15)
        ax.plot(xs, [ys[0] * _ideal(s, xs[0], cores) for s in xs], "--", color="grey",
                label=f"ideal: min(S, {cores}) x S={xs[0]}")
        values = list(ys) + [ys[0] * _ideal(s, xs[0], cores) for s in xs]
        # baselines more than 20x away from npurt are named in the legend, not drawn
        for i, (name, data) in enumerate(entry.get("baselines", {}).items()):
            if not data:
                continue
            marker, ls = STYLE.get(name, ("d", ":"))
            color = f"C{i + 1}"
            label = "numpy, calling thread" if name == "numpy" else BASELINE_NAMES.get(name, name)
            bx = [int(s) for s in _sorted(data)]
            by = [data[str(s)]["median"] * per for s in bx]
            if not max(ys) / 20 <= max(by) <= max(ys) * 20:
                lo, hi = _fmt(min(by)).strip(), _fmt(max(by)).strip()
                span = lo if lo == hi else f"{lo} to {hi}"
                ax.plot([], [], ls="none", marker=marker, color=color,
                        label=f"{label}: {span} {unit}, S={bx[0]}..{bx[-1]} (off scale)")
                continue
            values += by
            if name == "numpy":
                ax.axhline(by[0], color=color, ls=ls, label=label)
            else:
                ax.plot(bx, by, ls=ls, marker=marker, color=color, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(s) for s in xs])
        ax.set_ylim(0, max(values) * 1.08)
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))
        ax.set_xlabel("streams (S)")
        ax.set_ylabel(unit)
        ax.set_title(f"batch {b}" if w.get("batched") else w["label"], fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.suptitle(f"{w['label']}:\nthroughput vs stream count ({cores} AI-core workers)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_combined(tp: Dict[str, Any], cores: int, path: Path) -> bool:
    """Every workload (its first batch) as speed-up over the smallest stream count, with
    the ideal min(S, cores) line."""
    plt = _plt()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    xs_all: List[int] = []
    for w in tp.values():
        bs = [b for b in _sorted(w["batches"]) if w["batches"][b].get("npurt")]
        if not bs:
            continue
        b = bs[0]
        data = w["batches"][b]["npurt"]
        xs = [int(s) for s in _sorted(data)]
        base = data[str(xs[0])]["median"]
        ys = [data[str(x)]["median"] / base for x in xs]
        label = w["label"] + (f", batch {b}" if w.get("batched") else "")
        ax.plot(xs, ys, "o-", label=label)
        ax.fill_between(xs, [data[str(x)]["min"] / base for x in xs], [data[str(x)]["max"] / base for x in xs],
                        alpha=0.12)
        if len(xs) > len(xs_all):
            xs_all = xs
    if not xs_all:
        plt.close(fig)
        return False
    ax.plot(xs_all, [_ideal(x, xs_all[0], cores) for x in xs_all], "k--", label=f"ideal min(S, {cores})")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs_all)
    ax.set_xticklabels([str(s) for s in xs_all])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("streams (S)")
    ax.set_ylabel(f"throughput / throughput at S={xs_all[0]}")
    ax.set_title(f"npurt throughput versus stream count ({cores} AI-core workers)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_all(tp: Dict[str, Any], cores: int, out: Path) -> List[Path]:
    """``bench.png`` (combined) and ``bench-<workload>.png``; the paths written."""
    written = []
    if plot_combined(tp, cores, out / "bench.png"):
        written.append(out / "bench.png")
    for wl, w in tp.items():
        p = out / f"bench-{wl}.png"
        if plot_workload(w, cores, p):
            written.append(p)
    return written


def where(machine: Dict[str, Any]) -> str:
    """The first lines of every report: the CPU model and the ISA path each kernel family
    ran, then the BLAS kernels the numpy baselines ran (and what capped them)."""
    isa = machine.get("isa") or {}
    line = isa.get("summary") or f"CPU: {machine.get('platform', '?')} (no ISA report)"
    blas = machine.get("numpy_blas") or {}
    if blas.get("internal_api"):
        line += (f"\nnumpy baseline: {blas['internal_api']} {blas.get('version') or ''} "
                 f"{blas.get('architecture') or '?'} kernels, {blas.get('num_threads')} threads")
        env = blas.get("env") or {}
        if "OPENBLAS_CORETYPE" in env:
            line += (f" (OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} set: numpy runs those kernels; "
                     "unset it to compare against numpy's best)")
    c2c = machine.get("core_to_core_ns") or {}
    if c2c:
        line += "\n" + core_to_core_line(c2c)
    return line


def core_to_core_line(c2c: Dict[str, Optional[float]]) -> str:
    """How long a cache line took between two cores (``{"start": ns, "end": ns}``, None
    with one CPU): launches, event hops and collectives are a few such transfers, so their
    figures move with it (a VM's two vCPUs on one die: ~40-60 ns on a Zen 5; on two: ~190
    ns, at a third of the empty-kernel rate). Compare runs whose lines here agree."""
    def ns(v: Optional[float]) -> str:
        return "n/a (one CPU)" if v is None else f"{v:.0f} ns"

    text = f"core-to-core cache line: {ns(c2c.get('start'))}"
    if "end" in c2c:
        text += f" at the start, {ns(c2c.get('end'))} at the end"
    return text + " one-way (cross-core figures move with it)"


def runtime_lines(r: Dict[str, Any]) -> List[str]:
    """Launch, round-trip and event-hop lines (empty and tiny real kernels) with baselines."""
    lines = [f"{'metric':44} {'npurt':>12} {'baseline':>12} {'ratio':>8}"]
    lr, rt = r["launch_rate_per_s"]["median"], r["round_trip_us"]["median"]
    blr = r.get("baseline_python_threads_launch_rate_per_s", {}).get("median")
    brt = r.get("baseline_python_threads_round_trip_us", {}).get("median")
    lines += [
        f"{'empty-kernel launch+run, one stream (/s)':44} {lr:12,.0f}"
        + (f" {blr:12,.0f} {lr / blr:7.1f}x" if blr else ""),
        f"{'submit + synchronize round trip (us)':44} {rt:12.2f}" + (f" {brt:12.2f} {brt / rt:7.1f}x" if brt else ""),
        f"{'event record -> other stream waits (us)':44} {r['event_hop_us']['median']:12.2f}",
    ]
    if "tiny_launch_rate_per_s" in r:
        tl = r["tiny_launch_rate_per_s"]["median"]
        nt = r.get("baseline_numpy_tiny_rate_per_s", {}).get("median")
        lines.append(f"{'tiny add (1 elem, out=) launch+run (/s)':44} {tl:12,.0f}"
                     + (f" {nt:12,.0f} {tl / nt:7.1f}x  (numpy inline)" if nt else ""))
        lines.append(f"{'tiny op -> record -> wait -> tiny op (us)':44} {r['tiny_event_hop_us']['median']:12.2f}")
    if "baseline_pocl_launch_rate_per_s" in r:
        plr, prt = r["baseline_pocl_launch_rate_per_s"]["median"], r["baseline_pocl_round_trip_us"]["median"]
        lines += [
            f"{'  vs PoCL: launch+run (/s)':44} {lr:12,.0f} {plr:12,.0f} {lr / plr:7.1f}x",
            f"{'  vs PoCL: round trip (us)':44} {rt:12.2f} {prt:12.2f} {prt / rt:7.1f}x",
        ]
    return lines
