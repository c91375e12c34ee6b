"""``python -m npurt.bench.collectives``: collective bandwidth in nccl-tests' terms for each
``npurt.distributed`` backend, against mpi4py's own calls on numpy arrays in the same run.

Per backend, collective and size (1 KiB … ``--max-size``, ×4 steps by default): the time
of one call (µs; the slowest rank's mean over back-to-back calls), ``algbw`` = bytes /
time and ``busbw`` = algbw × 2(n−1)/n (all_reduce), × (n−1)/n (all_gather, reduce_scatter,
all_to_all), × 1 (broadcast), and a correctness column (the first call's result against
numpy on every rank). The last column is the row's busbw over mpi4py's at the same
collective and size. Ranks: ``local`` runs ``--np`` threads on ``--np`` virtual devices of
one process; ``shm``, ``mpi`` and the ``mpi4py`` baseline run ``--np`` processes started by
``mpirun`` (the ``mpi`` extra), all in the same job, in ``--rounds`` rounds whose order
alternates (mpi4py first, then last...); each row keeps its best round. The first lines
name the CPU and the kernels' ISA path (``npurt.isa_info()``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any, Dict, List, Optional

from . import _coll_worker as w

BACKENDS = ("local", "shm", "mpi")


def parse_size(text: str) -> int:
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    try:
        v = int(float(t[:-1] if mult > 1 else t) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 1K, 16M, 256M)") from None
    if v < 4:
        raise argparse.ArgumentTypeError(f"size {text!r} is below one float32")
    return v


def sizes(lo: int, hi: int, step: int) -> List[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= step
    return out


def fmt_size(n: int) -> str:
    for unit, k in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k}{unit}"
    return str(n)


# -- workers ---------------------------------------------------------------------------
def _worker_mpi(args: argparse.Namespace) -> None:
    """Inside an mpirun job: the backends named by --worker (npurt's and mpi4py), in
    ``--rounds`` rounds that alternate their order; each row keeps its best round (a shared
    machine's hiccups hit one round, not every one)."""
    import npurt.distributed as dist
    from npurt.distributed._mpi_load import load_mpi

    MPI = load_mpi()
    c = MPI.COMM_WORLD
    r, n = c.Get_rank(), c.Get_size()
    out: Dict[str, Any] = {}
    allmax = lambda v: c.allreduce(v, op=MPI.MAX)  # noqa: E731
    names = args.worker.split(",")
    for rnd in range(args.rounds):
        for name in names if rnd % 2 == 0 else names[::-1]:
            if isinstance(out.get(name), dict):
                continue  # failed in an earlier round
            if name == "mpi4py":
                _merge(out, name, w.measure(w.mpi4py_ops(MPI), r, n, args.ops, args.sizes, args.budget))
                continue
            if name == "shm":
                tag = f"{os.environ.get('PMIX_NAMESPACE', os.getppid())}-{rnd}"
                url = f"file://{tempfile.gettempdir()}/npurt-bench-{tag}"
                dist.init_process_group("shm", rank=r, world_size=n, init_method=url, timeout=args.timeout)
            else:
                dist.init_process_group(name, timeout=args.timeout)
            try:
                _merge(out, name, w.measure(w.npurt_ops(allmax), r, n, args.ops, args.sizes, args.budget))
            except Exception as e:  # noqa: BLE001 - reported in the table, the run goes on
                out[name] = {"error": f"{type(e).__name__}: {e}"}
            dist.destroy_process_group()
            c.Barrier()
    if r == 0:
        print("ROWS " + json.dumps(out), flush=True)


def _merge(out: Dict[str, Any], name: str, rows: List[Dict[str, Any]]) -> None:
    """Adds one round's rows: per (collective, size) the fastest, correct only if every
    round was."""
    old = {(x["op"], x["size"]): x for x in out.get(name, [])}
    merged = []
    for x in rows:
        o = old.get((x["op"], x["size"]))
        best = x if o is None or x["time_us"] < o["time_us"] else o
        merged.append({**best, "correct": x["correct"] and (o is None or o["correct"])})
    out[name] = merged


def _worker_local(args: argparse.Namespace) -> None:
    """One process, --np threads on --np virtual devices."""
    import npurt.distributed as dist

    n = args.np
    gate = threading.Barrier(n)
    vals: List[float] = [0.0] * n
    res: List[Any] = [None] * n

    def allmax(r: int, v: float) -> float:
        vals[r] = v
        gate.wait()
        m = max(vals)
        gate.wait()
        return m

    def body(r: int) -> None:
        try:
            import npurt

            dist.init_process_group("local", rank=r, world_size=n, device=r, group_name="bench", timeout=args.timeout)
            with npurt.Device(r):
                res[r] = w.measure(w.npurt_ops(lambda v: allmax(r, v)), r, n, args.ops, args.sizes, args.budget)
            dist.destroy_process_group()
        except Exception as e:  # noqa: BLE001
            res[r] = {"error": f"{type(e).__name__}: {e}"}
            gate.abort()

    ts = [threading.Thread(target=body, args=(r,), name=f"rank{r}") for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("ROWS " + json.dumps({"local": res[0]}), flush=True)


# -- driver ----------------------------------------------------------------------------
def _child(args: argparse.Namespace, worker: str) -> List[str]:
    argv = [sys.executable, "-m", "npurt.bench.collectives", "--worker", worker, "--np", str(args.np),
            "--min-size", str(args.min_size), "--max-size", str(args.max_size), "--step", str(args.step),
            "--ops", ",".join(args.ops), "--budget", str(args.budget), "--timeout", str(args.timeout),
            "--rounds", str(args.rounds)]
    return argv


def _run(cmd: List[str], env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    from npurt.distributed import run_mpirun

    try:  # (the local job is one process; run_mpirun kills a job's whole process group)
        p = run_mpirun(cmd, env, timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    for line in p.stdout.splitlines():
        if line.startswith("ROWS "):
            return json.loads(line[5:])
    return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-800:]}"}


def collect(args: argparse.Namespace) -> Dict[str, Any]:
    from npurt.distributed import mpirun_command

    results: Dict[str, Any] = {}
    env = dict(os.environ, NPURT_DEVICE_COUNT=str(max(args.np, 1)))
    if "local" in args.backends:
        results.update(_run(_child(args, "local"), env, args.job_timeout))
    mp = ["mpi4py"] + [b for b in ("shm", "mpi") if b in args.backends]
    try:
        cmd, menv = mpirun_command(args.np, _child(args, ",".join(mp)), env={**env, "NPURT_DEVICE_COUNT": "1"})
    except FileNotFoundError as e:
        results.update({b: {"error": str(e)} for b in mp})
        return results
    got = _run(cmd, menv, args.job_timeout)
    if "error" in got:
        results.update({b: got for b in mp})
    else:
        results.update(got)
    return results


def table(results: Dict[str, Any], n: int) -> List[str]:
    base = {(r["op"], r["size"]): r for r in results.get("mpi4py", []) if isinstance(results.get("mpi4py"), list)}
    lines = [f"{'backend':8} {'collective':15} {'size':>6} {'count':>10} {'time us':>11} {'algbw GB/s':>11} "
             f"{'busbw GB/s':>11} {'correct':>7} {'vs mpi4py':>9}"]
    for name, rows in results.items():
        if not isinstance(rows, list):
            lines.append(f"{name:8} not run: {rows.get('error', rows)}")
            continue
        for r in rows:
            b = base.get((r["op"], r["size"]))
            ratio = f"{r['busbw_gbps'] / b['busbw_gbps']:8.2f}x" if b and name != "mpi4py" and b["busbw_gbps"] else ""
            lines.append(f"{name:8} {r['op']:15} {fmt_size(r['size']):>6} {r['count']:>10} {r['time_us']:11.1f} "
                         f"{r['algbw_gbps']:11.3f} {r['busbw_gbps']:11.3f} {'ok' if r['correct'] else 'WRONG':>7} {ratio:>9}")
    return lines


def header(n: int) -> List[str]:
    import npurt

    from .report import core_to_core_line

    info = npurt.isa_info()
    return [info.get("summary", "CPU: ?") if isinstance(info, dict) else str(info),
            core_to_core_line({"start": npurt._npurt._core_to_core_ns()}),
            f"ranks: {n}; cores: {os.cpu_count()}; sizes are nccl-tests' (bytes of the larger buffer), float32"]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m npurt.bench.collectives", description=__doc__.split("\n\n")[0])
    p.add_argument("--np", type=int, default=4, help="ranks (default 4)")
    p.add_argument("--backends", default=",".join(BACKENDS), help="local,shm,mpi (default all)")
    p.add_argument("--ops", default=",".join(w.OPS), help="collectives (default all five)")
    p.add_argument("--min-size", type=parse_size, default=1 << 10, help="smallest size (default 1K)")
    p.add_argument("--max-size", type=parse_size, default=16 << 20, help="largest size (default 16M; nccl-tests' 256M for the full table)")
    p.add_argument("--step", type=int, default=4, help="size factor between rows (default 4)")
    p.add_argument("--budget", type=parse_size, default=256 << 20, help="bytes moved per figure, sets the call count (3..500, after untimed warm-up calls)")
    p.add_argument("--timeout", type=float, default=120.0, help="collective deadline, s")
    p.add_argument("--rounds", type=int, default=2, help="rounds of every mpirun backend, order alternating; best kept (default 2)")
    p.add_argument("--job-timeout", type=float, default=1800.0, help="per backend job, s")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.ops = [o for o in args.ops.split(",") if o]
    bad = [o for o in args.ops if o not in w.OPS]
    args.backends = [b for b in args.backends.split(",") if b]
    badb = [b for b in args.backends if b not in BACKENDS]
    if bad or badb or args.np < 2 or args.step < 2 or args.min_size > args.max_size or args.rounds < 1:
        p.error(f"bad --ops {bad} / --backends {badb} / --np (>= 2) / --step (>= 2) / --rounds (>= 1) / sizes")
    args.sizes = sizes(args.min_size, args.max_size, args.step)
    if args.worker:
        (_worker_local if args.worker == "local" else _worker_mpi)(args)
        return 0
    for line in header(args.np):
        print(line, flush=True)
    results = collect(args)
    for line in table(results, args.np):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": args.np, "header": header(args.np), "results": results}, f, indent=1)
    return 0 if all(isinstance(v, list) and all(r["correct"] for r in v) for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
