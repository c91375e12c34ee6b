"""Steady-state cost of small collectives: ``python benches/coll_steady.py [--np 4] [--calls 5000]``.

Starts one ``mpirun`` job of ``--np`` ranks; in it, per collective (1 KiB float32
``broadcast`` from rank 0 and in-place ``all_reduce``) and per pass, ``--calls``
back-to-back blocking calls of ``npurt.distributed`` (``shm`` backend, DeviceArrays) and of
mpi4py's own ``Bcast`` / ``Allreduce(MPI.IN_PLACE)`` on numpy arrays, after ``--warmup``
untimed calls and a barrier. Prints the CPU model and, per case, µs per call of the
slowest rank for each pass, and npurt's time over mpi4py's (below 1: npurt faster). Passes
alternate the order of npurt and mpi4py. Figures compare only within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

OPS = ("broadcast", "all_reduce")


def _rank(args: argparse.Namespace) -> None:
    import npurt
    import npurt.distributed as dist
    import numpy as np
    from npurt.distributed._mpi_load import load_mpi

    MPI = load_mpi()
    c = MPI.COMM_WORLD
    r = c.Get_rank()
    tag = os.environ.get("PMIX_NAMESPACE", str(os.getppid()))
    dist.init_process_group("shm", rank=r, world_size=c.Get_size(), init_method=f"file://{tempfile.gettempdir()}/npurt-steady-{tag}")
    n = args.bytes // 4
    host = np.arange(n, dtype=np.float32) % 7
    dev = npurt.to_device(host)
    calls = {
        ("npurt", "broadcast"): lambda: dist.broadcast(dev, 0),
        ("npurt", "all_reduce"): lambda: dist.all_reduce(dev),
        ("mpi4py", "broadcast"): lambda: c.Bcast(host, root=0),
        ("mpi4py", "all_reduce"): lambda: c.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM),
    }
    out = {}
    for p in range(args.passes):
        for op in OPS:
            for who in ("npurt", "mpi4py") if p % 2 == 0 else ("mpi4py", "npurt"):
                f = calls[(who, op)]
                for _ in range(args.warmup):
                    f()
                npurt.current_stream().synchronize()
                c.Barrier()
                t0 = time.perf_counter_ns()
                for _ in range(args.calls):
                    f()
                npurt.current_stream().synchronize()
                us = (time.perf_counter_ns() - t0) / 1e3 / args.calls
                out.setdefault(f"{op} {who}", []).append(c.allreduce(us, op=MPI.MAX))
    dist.destroy_process_group()
    if r == 0:
        print("STEADY " + json.dumps(out), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--bytes", type=int, default=1024)
    p.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank:
        _rank(args)
        return 0
    from npurt.distributed import mpirun_command, run_mpirun

    argv = [sys.executable, __file__, "--rank", "--calls", str(args.calls), "--warmup", str(args.warmup),
            "--passes", str(args.passes), "--bytes", str(args.bytes)]
    cmd, env = mpirun_command(args.np, argv, env={**os.environ, "NPURT_DEVICE_COUNT": "1"})
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print(f"CPU: {model}; cores: {os.cpu_count()}; ranks: {args.np}; {args.bytes} B float32, {args.calls} calls a pass")
    try:
        res = run_mpirun(cmd, env, 600.0)
    except subprocess.TimeoutExpired:
        print("timed out")
        return 1
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("STEADY ")), None)
    if line is None:
        print(res.stdout[-2000:], res.stderr[-2000:])
        return 1
    got = json.loads(line[7:])
    for op in OPS:
        a, b = got[f"{op} npurt"], got[f"{op} mpi4py"]
        ratio = " / ".join(f"{x / y:.2f}" for x, y in zip(a, b, strict=True))
        print(f"{op:10} npurt {' / '.join(f'{x:6.1f}' for x in a)} us   mpi4py {' / '.join(f'{x:6.1f}' for x in b)} us"
              f"   npurt/mpi4py time {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
