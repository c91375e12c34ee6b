"""Per-call cost of a small blocking collective on the ``mpi`` backend (issue 18).

``python benches/mpi_percall.py --np 4`` starts an mpirun job (``npurt.distributed.run_mpirun``'s
command line) in which every rank times ``--calls`` blocking ``all_reduce`` calls of
``--size`` bytes (float32) one by one and mpi4py's blocking ``Allreduce`` on the same data,
in ``--rounds`` alternating blocks (20 untimed calls each), and prints each rank's p50 / p90
per call in µs of both.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def _worker(args: argparse.Namespace) -> None:
    import npurt
    import npurt.distributed as dist
    import numpy as np
    from npurt.distributed._mpi_load import load_mpi

    MPI = load_mpi()
    c = MPI.COMM_WORLD
    dist.init_process_group("mpi", timeout=60)
    r = dist.get_rank()
    n = args.size // 4
    t = npurt.to_device(np.full(n, 1.0, np.float32))
    ns = time.perf_counter_ns
    a = np.full(n, 1.0, np.float32)
    b = np.empty_like(a)
    calls = {"npurt": lambda: dist.all_reduce(t), "mpi4py": lambda: c.Allreduce(a, b)}
    lat: dict = {"npurt": [], "mpi4py": []}
    per = max(1, args.calls // args.rounds)
    for rnd in range(args.rounds):  # alternating blocks: both see the same machine state
        for name in ("npurt", "mpi4py") if rnd % 2 == 0 else ("mpi4py", "npurt"):
            f = calls[name]
            c.Barrier()
            for _ in range(20):  # untimed
                f()
            for _ in range(per):
                t0 = ns()
                f()
                lat[name].append(ns() - t0)
    res = {}
    for name, v in lat.items():
        v.sort()
        res[name] = (v[len(v) // 2] / 1e3, v[len(v) * 9 // 10] / 1e3)
    dist.destroy_process_group()
    print("ROW " + json.dumps({"rank": r, **res}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=10, help="alternating blocks of calls per library")
    p.add_argument("--worker", action="store_true")
    args = p.parse_args()
    if args.worker:
        _worker(args)
        return
    from npurt.distributed import mpirun_command

    argv, env = mpirun_command(args.np, [sys.executable, __file__, "--worker", "--calls", str(args.calls),
                                         "--size", str(args.size), "--rounds", str(args.rounds)])
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    rows = sorted((json.loads(line[4:]) for line in out.stdout.splitlines() if line.startswith("ROW ")),
                  key=lambda x: x["rank"])
    if len(rows) != args.np:
        print(out.stdout, out.stderr)
        raise SystemExit("the job failed")
    for x in rows:
        print(f"rank {x['rank']}: npurt p50 {x['npurt'][0]:7.1f} us p90 {x['npurt'][1]:7.1f} us | "
              f"mpi4py p50 {x['mpi4py'][0]:6.1f} us p90 {x['mpi4py'][1]:6.1f} us")


if __name__ == "__main__":
    main()
