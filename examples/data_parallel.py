"""Data-parallel training on 4 ranks with npurt arrays and npurt.distributed.

A least-squares model ``y ≈ X @ w``: every rank holds its own shard of the data, computes
the gradient of its shard with npurt kernels (``X.T @ (X @ w - y)``), the gradients are
all-reduced (summed) over the ranks, and every rank applies the same update. After every
step the ranks check that their weights are bitwise identical (an all_gather of ``w``) and
at the end that the loss fell.

    python examples/data_parallel.py                   # --backend local: 4 threads, 4 virtual devices
    python examples/data_parallel.py --backend shm     # 4 processes on this host (started here)
    python examples/data_parallel.py --backend mpi     # 4 MPI ranks (started here with mpirun)
    mpirun -np 4 --oversubscribe python examples/data_parallel.py --backend mpi   # the same, by hand

(as root, Open MPI also wants ``OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1``;
``npurt.distributed.mpirun_command`` builds the whole command.)
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading

import numpy as np

RANKS, DIM, ROWS = 4, 32, 256  # ROWS per rank


def shard(rank: int):
    """Rank ``rank``'s data: rows of one global problem with known weights."""
    w_true = np.random.default_rng(0).standard_normal((DIM, 1)).astype(np.float32)
    rng = np.random.default_rng(100 + rank)
    x = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    y = x @ w_true + 0.01 * rng.standard_normal((ROWS, 1)).astype(np.float32)
    return x, y


def train(rank: int, world: int, steps: int, lr: float, device: int = 0) -> float:
    import npurt
    import npurt.distributed as dist

    xs, ys = shard(rank)
    x, y = npurt.to_device(xs, device=device), npurt.to_device(ys, device=device)
    w = npurt.zeros((DIM, 1), device=device)
    gathered = npurt.empty((world * DIM,), device=device)
    scale = 2.0 / (ROWS * world)
    losses = []
    for step in range(steps):
        r = x @ w - y                                   # residual, npurt kernels
        g = (x.T @ r) * scale                           # this shard's gradient
        loss = npurt.sum(r * r).reshape(1) * (1.0 / (ROWS * world))
        dist.all_reduce(g)                              # sum of the shards' gradients
        dist.all_reduce(loss)
        w = w - g * lr                                  # the same update on every rank
        dist.all_gather_into_tensor(gathered, w.reshape(-1))
        mine = w.to_host().reshape(-1).view(np.uint32)
        every = gathered.to_host().view(np.uint32).reshape(world, DIM)
        assert (every == mine).all(), f"rank {rank}: weights differ across ranks after step {step}"
        losses.append(float(loss.to_host()[0]))
    assert losses[-1] < 0.1 * losses[0], f"loss did not fall: {losses[0]:.4f} -> {losses[-1]:.4f}"
    return losses[-1]


def run_local(steps: int, lr: float) -> None:
    import npurt
    import npurt.distributed as dist

    errors: list = []

    def body(r: int) -> None:
        try:
            dist.init_process_group("local", rank=r, world_size=RANKS, device=r % npurt.device_count(), group_name="dp")
            try:
                last = train(r, RANKS, steps, lr, device=r % npurt.device_count())
                if r == 0:
                    print(f"local: {RANKS} ranks, {steps} steps, final loss {last:.5f}")
            finally:
                dist.destroy_process_group()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"rank {r}: {type(e).__name__}: {e}")

    ts = [threading.Thread(target=body, args=(r,)) for r in range(RANKS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise SystemExit("\n".join(errors))


def rank_main(backend: str, steps: int, lr: float) -> None:
    """One process of a shm or mpi job."""
    import npurt.distributed as dist

    dist.init_process_group(backend, timeout=120.0)
    r, n = dist.get_rank(), dist.get_world_size()
    last = train(r, n, steps, lr)
    if r == 0:
        print(f"{backend}: {n} ranks, {steps} steps, final loss {last:.5f}", flush=True)
        print("data_parallel: OK", flush=True)
    dist.destroy_process_group()


def launch(backend: str, steps: int, lr: float) -> None:
    """Starts the 4 processes of a shm job (torchrun's environment) or an mpi job (mpirun)."""
    me = [sys.executable, os.path.abspath(__file__), "--backend", backend, "--steps", str(steps), "--lr", str(lr), "--rank-process"]
    env = dict(os.environ, NPURT_DEVICE_COUNT="1")
    if backend == "mpi":
        from npurt.distributed import mpirun_command, run_mpirun

        cmd, env = mpirun_command(RANKS, me, env=env)
        p = run_mpirun(cmd, env, timeout=300)  # a hung job is killed whole, ranks included
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr)
        if p.returncode:
            raise SystemExit(f"mpirun exited with {p.returncode}")
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen(me, env=dict(env, RANK=str(r), WORLD_SIZE=str(RANKS), MASTER_ADDR="127.0.0.1",
                                           MASTER_PORT=str(port))) for r in range(RANKS)]
    codes = [p.wait(timeout=300) for p in procs]
    if any(codes):
        raise SystemExit(f"rank exit codes {codes}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["local", "shm", "mpi"], default="local")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--rank-process", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    under_mpirun = "OMPI_COMM_WORLD_RANK" in os.environ
    if a.backend == "local":
        os.environ.setdefault("NPURT_DEVICE_COUNT", str(RANKS))
        run_local(a.steps, a.lr)
        print("data_parallel: OK")
    elif a.rank_process or (a.backend == "mpi" and under_mpirun):
        rank_main(a.backend, a.steps, a.lr)  # rank 0 prints the OK line
    else:
        launch(a.backend, a.steps, a.lr)


if __name__ == "__main__":
    main()
