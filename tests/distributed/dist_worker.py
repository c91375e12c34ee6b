"""One rank of an ``shm`` test group, started by the tests with ``subprocess``.

Usage: ``python dist_worker.py SCENARIO`` with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
(and SLOW_RANK / TIMEOUT where the scenario needs them; NONDUMPABLE=1: the process marks
itself non-dumpable first) in the environment. Prints one JSON
line: ``{"ok": ...}`` or ``{"err": class name, "msg": message, "code": code}``.

Scenarios: ``matrix`` (every collective, checked against numpy; ``matrix_general``: a
part of it on the general path, above the eager limit), ``sleep`` (SLOW_RANK
sleeps past the deadline before its all_reduce), ``exit`` (SLOW_RANK exits without
calling), ``hold`` (SLOW_RANK prints ``ready`` and waits to be SIGKILLed), ``desync``
(SLOW_RANK calls broadcast instead of all_reduce), ``bits`` (a float32 all_reduce: the
result's bytes as hex; ``bits_large``: above the eager limit, the sha256 of an all_reduce's
and a reduce_scatter's results), ``hccl`` (HcclGetRootInfo through a file, HcclCommInitRootInfo,
HcclAllReduce), ``chunks`` (collectives larger than a slot), ``barriers`` (barriers back to
back with small all_reduces between), ``loop_big`` (large collectives, the single copy, or
with LOOP=all_reduce 1 MiB all_reduces on the slots' ring, until the test kills a rank).
"""

import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import npurt  # noqa: E402
import npurt.distributed as dist  # noqa: E402
import numpy as np  # noqa: E402


def main(scenario: str) -> object:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    slow = int(os.environ.get("SLOW_RANK", "-1"))
    timeout = float(os.environ.get("TIMEOUT", "60"))
    if scenario == "hccl":
        return hccl(rank, world)
    if os.environ.get("NONDUMPABLE") == "1":  # peers without CAP_SYS_PTRACE may not read this process
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    dist.init_process_group("shm", timeout=timeout)
    assert dist.get_rank() == rank and dist.get_world_size() == world and dist.get_backend() == "shm"
    if scenario == "matrix":
        from matrix import run_matrix

        return run_matrix(rank, world)
    if scenario == "matrix_general":
        from matrix import N_GENERAL, OPS, run_matrix

        return run_matrix(rank, world, dtypes=["float32", "float16", "int8"], ops=[OPS[0], OPS[2]], n=N_GENERAL)
    if scenario == "chunks":
        # Above the eager limit (general path); with NPURT_SHM_SLOT_BYTES=4096: many pieces.
        n = npurt._npurt.COLLECTIVE_EAGER_BYTES // 4 + 3000
        x = np.arange(n, dtype=np.float32) * (rank + 1)
        t = npurt.to_device(x)
        dist.all_reduce(t)
        o = npurt.empty((n * world,), "float32")
        dist.all_gather_into_tensor(o, npurt.to_device(x))
        big = npurt.to_device(np.arange(n * world, dtype=np.float32) + rank)
        rs = npurt.empty((n,), "float32")
        dist.reduce_scatter_tensor(rs, big)
        a2a = npurt.empty((n * world,), "float32")
        dist.all_to_all_single(a2a, big)
        bc = npurt.to_device(x)
        dist.broadcast(bc, src=world - 1)
        g = npurt.to_device(np.zeros(n * world, np.float32))  # in place: the input is this rank's part
        g[rank * n:(rank + 1) * n].copy_(npurt.to_device(x))
        dist.all_gather_into_tensor(g, g[rank * n:(rank + 1) * n])
        tot = sum(range(1, world + 1))
        ok = np.array_equal(t.to_host(), np.arange(n, dtype=np.float32) * tot)
        ok &= np.array_equal(o.to_host(), np.concatenate([np.arange(n, dtype=np.float32) * (r + 1) for r in range(world)]))
        base = np.arange(n * world, dtype=np.float32)[rank * n:(rank + 1) * n]
        ok &= np.array_equal(rs.to_host(), sum(base + r for r in range(world)).astype(np.float32))
        ok &= np.array_equal(a2a.to_host(), np.concatenate([base + r for r in range(world)]))
        ok &= np.array_equal(bc.to_host(), np.arange(n, dtype=np.float32) * world)
        ok &= np.array_equal(g.to_host(), o.to_host())
        if world > 1:
            p = npurt.to_device(x)
            if rank == 0:
                dist.send(p, dst=1)
            elif rank == 1:
                dist.recv(p, src=0)
                ok &= np.array_equal(p.to_host(), np.arange(n, dtype=np.float32))
        dist.barrier()
        return bool(ok)
    if scenario == "loop_big":  # large all_to_all / all_gather (the single copy) until a peer is killed
        x = npurt.to_device(np.full(1 << 20, rank, np.float32))  # 4 MiB: 2 MiB per peer on 2 ranks
        y = npurt.empty((1 << 20,), "float32")
        g = npurt.empty((world << 20,), "float32")
        z = npurt.to_device(np.ones(1 << 18, np.float32))  # 1 MiB all_reduce: the ring through the slots
        ring = os.environ.get("LOOP") == "all_reduce"
        for k in range(100_000):
            if ring:
                dist.all_reduce(z)
                dist.all_reduce(z, op=dist.ReduceOp.MAX)
            else:
                dist.all_to_all_single(y, x)
                dist.all_gather_into_tensor(g, x)
            if k == 20:
                npurt.current_stream().synchronize()
                print(json.dumps({"ready": os.getpid()}), flush=True)
        return "the loop ended"
    if scenario == "large":
        return large(rank, world)
    if scenario == "barriers":  # barriers back to back with small collectives between
        for k in range(300):
            dist.barrier()
            if k % 3 == 0:
                t = npurt.to_device(np.full(2, rank, np.float32))
                dist.all_reduce(t)
                if t.to_host().tolist() != [float(sum(range(world)))] * 2:
                    return f"all_reduce {k}: {t.to_host().tolist()}"
        return True
    if scenario in ("bits", "bits_large"):  # bits_large: above the eager limit, reduce_scatter too
        x = np.random.default_rng(rank).uniform(-1e4, 1e4, 4096 if scenario == "bits" else 300_001).astype(np.float32)
        if scenario == "bits_large":
            rs = npurt.empty((len(x) // world,), "float32")
            dist.reduce_scatter_tensor(rs, npurt.to_device(x[: len(x) // world * world]))
            t = npurt.to_device(x)
            dist.all_reduce(t)
            digest = lambda a: hashlib.sha256(a.to_host().tobytes()).hexdigest()  # noqa: E731
            return [digest(t), digest(rs)]
        t = npurt.to_device(x)
        dist.all_reduce(t)
        return t.to_host().tobytes().hex()
    t = npurt.to_device(np.ones(8, np.float32))
    if rank == slow:
        if scenario == "sleep":
            time.sleep(timeout + 1.5)
        elif scenario == "exit":
            os._exit(3)
        elif scenario == "hold":
            print(json.dumps({"ready": os.getpid()}), flush=True)
            time.sleep(120)
        elif scenario == "desync":
            dist.broadcast(t, src=0)
            t.to_host()
            return "desync rank returned"
    dist.all_reduce(t)
    return t.to_host().tolist()


def large(rank: int, world: int) -> object:
    """Receive buffers above the engine's streaming threshold (`STREAM_BYTES`: the group's
    receive buffers add up to 64 MiB or more, so the copies out of the slots use
    non-temporal stores), odd counts (unaligned pieces), and a
    reduce_scatter whose output is its own chunk of the input (overlapping buffers: its own
    chunk is staged, not read from the input); returns the collectives that went wrong."""
    n = (64 << 20) // 4 // world + 1001  # elements: > 64 MiB in the group's receive buffers below
    bad = []
    x = np.arange(n, dtype=np.float32) * (rank + 1) + 0.25
    t = npurt.to_device(x)
    dist.all_reduce(t)
    if not np.array_equal(t.to_host(), sum(np.arange(n, dtype=np.float32) * (r + 1) + 0.25 for r in range(world))):
        bad.append("all_reduce")
    t = npurt.to_device(x)
    dist.broadcast(t, src=world - 1)
    if not np.array_equal(t.to_host(), np.arange(n, dtype=np.float32) * world + 0.25):
        bad.append("broadcast")
    o = npurt.empty((n * world,), "float32")
    dist.all_gather_into_tensor(o, npurt.to_device(x))
    if not np.array_equal(o.to_host(), np.concatenate([np.arange(n, dtype=np.float32) * (r + 1) + 0.25 for r in range(world)])):
        bad.append("all_gather")
    g = npurt.to_device(np.zeros(n * world, np.float32))
    g[rank * n:(rank + 1) * n].copy_(npurt.to_device(x))
    dist.all_gather_into_tensor(g, g[rank * n:(rank + 1) * n])  # in place: the input is this rank's part
    if not np.array_equal(g.to_host(), o.to_host()):
        bad.append("all_gather in place")
    big = np.arange(n * world, dtype=np.float32) - rank
    a2a = npurt.empty((n * world,), "float32")
    dist.all_to_all_single(a2a, npurt.to_device(big))
    mine = np.arange(n * world, dtype=np.float32)[rank * n:(rank + 1) * n]
    if not np.array_equal(a2a.to_host(), np.concatenate([mine - r for r in range(world)])):
        bad.append("all_to_all")
    b = npurt.to_device(big)
    dist.reduce_scatter_tensor(b[rank * n:(rank + 1) * n], b)  # in place: output inside input
    if not np.array_equal(b.to_host()[rank * n:(rank + 1) * n], sum(mine - r for r in range(world)).astype(np.float32)):
        bad.append("reduce_scatter in place")
    rs = npurt.empty((n,), "float32")
    dist.reduce_scatter_tensor(rs, npurt.to_device(big))
    if not np.array_equal(rs.to_host(), sum(mine - r for r in range(world)).astype(np.float32)):
        bad.append("reduce_scatter")
    return bad


def hccl(rank: int, world: int) -> object:
    from npurt import hccl as h

    path = os.environ["ROOT_INFO_FILE"]
    if rank == 0:
        info, ret = h.HcclGetRootInfo()
        assert ret == h.HCCL_SUCCESS and len(info) == h.HCCL_ROOT_INFO_BYTES
        with open(path + ".tmp", "wb") as f:
            f.write(info)
        os.replace(path + ".tmp", path)
    else:
        while not os.path.exists(path):
            time.sleep(0.01)
        with open(path, "rb") as f:
            info = f.read()
    comm, ret = h.HcclCommInitRootInfo(world, info, rank)
    assert ret == h.HCCL_SUCCESS, h.get_last_error_message()
    size, _ = h.HcclGetRankSize(comm)
    rid, _ = h.HcclGetRankId(comm)
    s = npurt.Stream()
    x = npurt.to_device(np.full(5, rank + 1, np.float64).view(np.float32))  # float64 bits in a float32 array
    y = npurt.empty((10,), "float32")
    ret = h.HcclAllReduce(x, y, 5, h.HCCL_DATA_TYPE_FP64, h.HCCL_REDUCE_SUM, comm, s)
    assert ret == h.HCCL_SUCCESS, h.get_last_error_message()
    ret = h.HcclBarrier(comm, s)
    s.synchronize()
    out = y.to_host().view(np.float64).tolist()
    bad = h.HcclAllReduce(x, y, 50, h.HCCL_DATA_TYPE_FP64, h.HCCL_REDUCE_SUM, comm, s)
    msg = h.get_last_error_message()
    h.HcclCommDestroy(comm)
    return {"size": size, "rank": rid, "sum": out, "bad": int(bad), "msg": msg}


if __name__ == "__main__":
    try:
        out = {"ok": main(sys.argv[1])}
    except npurt.Error as e:
        out = {"err": type(e).__name__, "msg": e.message, "code": e.code}
    print(json.dumps(out), flush=True)
    os._exit(0)  # do not wait for the group at exit
