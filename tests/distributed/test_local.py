"""npurt.distributed on the "local" backend: one thread per rank, ranks on virtual
devices 0 and 1 (rank % 2), every collective × op × dtype against numpy."""

import threading
import time
import uuid

import npurt
import npurt.distributed as dist
import numpy as np
import pytest
from matrix import DTYPES, OPS, run_matrix


def run_ranks(world, fn, timeout=30.0, devices=2):
    """Runs ``fn(rank)`` on one thread per rank inside a fresh local group; returns the
    results (exceptions are returned, not raised)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    out = [None] * world

    def body(r):
        try:
            dist.init_process_group("local", rank=r, world_size=world, device=r % devices, group_name=name, timeout=timeout)
            try:
                out[r] = fn(r)
            finally:
                dist.destroy_process_group()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out[r] = e

    ts = [threading.Thread(target=body, args=(r,)) for r in range(world)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts), "a rank hung"
    return out


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_matrix(world):
    out = run_ranks(world, lambda r: run_matrix(r, world))
    for r, fails in enumerate(out):
        assert fails == [], f"rank {r}: {fails}"


def test_matrix_on_the_general_path():
    """Chunks above the engine's eager limit: the direct algorithms (peers' buffers)."""
    from matrix import N_GENERAL

    out = run_ranks(3, lambda r: run_matrix(r, 3, dtypes=["float32", "float16", "int8"], ops=[OPS[0], OPS[2]], n=N_GENERAL))
    for r, fails in enumerate(out):
        assert fails == [], f"rank {r}: {fails}"


def test_collectives_stay_ordered_after_the_current_streams_work():
    """Back-to-back collectives skip re-waiting for the current stream when nothing was
    queued on it since; work queued in between must still come first."""
    def fn(r):
        t = npurt.to_device(np.full(4, 1.0, np.float32), device=r)
        for _ in range(3):
            dist.all_reduce(t)  # the skip applies from the second call on
        gate = threading.Event()
        cur = npurt.current_stream(r)
        cur.launch_host_func(gate.wait, 20)
        w = dist.all_reduce(t, async_op=True)
        time.sleep(0.2)  # long enough for both ranks' collective, were it not ordered
        early = w.is_completed()
        gate.set()
        assert w.wait(timeout=30)
        return early, float(t.to_host()[0])

    out = run_ranks(2, fn)
    assert out == [(False, 16.0), (False, 16.0)], out


def test_matrix_spot_check_8():
    out = run_ranks(8, lambda r: run_matrix(r, 8, dtypes=["float32", "int8"], ops=[OPS[0], OPS[2]]))
    for r, fails in enumerate(out):
        assert fails == [], f"rank {r}: {fails}"


def test_async_work_and_group_state():
    def fn(r):
        assert dist.is_initialized() and dist.get_rank() == r and dist.get_world_size() == 2
        assert dist.get_backend() == "local"
        t = npurt.to_device(np.full(1000, r + 1.0, np.float32), device=r)
        w = dist.all_reduce(t, async_op=True)
        assert w.wait(timeout=30) is True and w.is_completed() and w.exception() is None
        sub = dist.new_group([1])
        if r == 1:
            u = npurt.to_device(np.ones(3, np.float32), device=r)
            dist.all_reduce(u, group=sub)
            assert dist.get_rank(sub) == 0 and dist.get_world_size(sub) == 1
        else:
            assert sub is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(sub) == -1
        return float(t.to_host()[0])

    assert run_ranks(2, fn) == [3.0, 3.0]


def test_bitwise_deterministic_across_runs_and_ranks():
    def fn(r):
        x = np.random.default_rng(r).uniform(-1e4, 1e4, 5000).astype(np.float32)
        t = npurt.to_device(x, device=r % 2)
        dist.all_reduce(t)
        return t.to_host().tobytes()

    a, b = run_ranks(4, fn), run_ranks(4, fn)
    assert all(x == a[0] for x in a) and a == b
    # the documented order: ((x0 + x1) + x2) + x3 in float32
    xs = [np.random.default_rng(r).uniform(-1e4, 1e4, 5000).astype(np.float32) for r in range(4)]
    assert a[0] == (((xs[0] + xs[1]) + xs[2]) + xs[3]).tobytes()


def test_bad_arguments_are_typed():
    def fn(r):
        errs = []
        t = npurt.to_device(np.ones((4, 4), np.float32), device=r)
        for call in (
            lambda: dist.all_reduce(np.ones(3)),
            lambda: dist.all_reduce(t[:, ::2]),
            lambda: dist.broadcast(t, src=5),
            lambda: dist.all_gather_into_tensor(npurt.empty((3,), "float32", device=r), t),
            lambda: dist.all_gather([t], t),
        ):
            try:
                call()
                errs.append(None)
            except npurt.Error as e:
                errs.append(type(e).__name__)
        dist.barrier()
        return errs

    for errs in run_ranks(2, fn):
        assert errs == ["InvalidTypeError", "InvalidValueError", "CollectiveError", "CollectiveError", "CollectiveError"]


def test_not_initialized_and_double_init():
    with pytest.raises(npurt.CollectiveError, match="not initialized"):
        dist.all_reduce(npurt.zeros(2))
    with pytest.raises(npurt.CollectiveError, match="rank 3 / world_size 2"):
        dist.init_process_group("local", rank=3, world_size=2)
    assert DTYPES and not dist.is_initialized()


def test_progress_board_shows_each_rank():
    def fn(r):
        t = npurt.to_device(np.ones(4, np.float32), device=r)
        dist.all_reduce(t)
        t.to_host()
        return dist.progress_board()

    rows = run_ranks(2, fn)[0]
    assert [row["rank"] for row in rows] == [0, 1]
    assert all(row["collective"] == "all_reduce(float32 x 4, sum)" and row["seq"] == 0 for row in rows)
    assert all(row["state"] in (1, 2) and row["pid"] > 0 for row in rows)  # 2: a rank already left


@pytest.mark.parametrize("limit, phases", [(None, 2), ("0", 6), ("16", 4)])
def test_the_eager_limit_is_the_groups(monkeypatch, limit, phases):
    """Two all_reduces of 4 and 1000 floats: on the eager path one barrier each, on the
    general (direct) path three; the creating rank's NPURT_COLLECTIVE_EAGER_BYTES holds for
    the group (read when it is created), and both paths give the same sums."""
    if limit is None:
        monkeypatch.delenv("NPURT_COLLECTIVE_EAGER_BYTES", raising=False)
    else:
        monkeypatch.setenv("NPURT_COLLECTIVE_EAGER_BYTES", limit)

    def fn(r):
        a = npurt.to_device(np.full(4, r + 1.0, np.float32), device=r)
        b = npurt.to_device(np.arange(1000, dtype=np.float32) * (r + 1), device=r)
        dist.all_reduce(a)
        dist.all_reduce(b)
        ok = np.array_equal(a.to_host(), np.full(4, 3.0, np.float32)) and np.array_equal(b.to_host(), np.arange(1000, dtype=np.float32) * 3)
        return ok, [row["phase"] for row in dist.progress_board()]

    for ok, ph in run_ranks(2, fn):
        assert ok and ph[0] >= phases and ph[1] >= phases, (ok, ph)
        assert max(ph) == phases, ph


def test_blocking_collectives_on_idle_streams_run_without_a_task():
    """On idle streams, with nothing observing them, a blocking collective runs on the
    calling thread with no task on the group's communication stream (the direct path); one
    that fails there leaves a single failed task on that stream, whose error is raised where
    the result is read."""
    from npurt.distributed._group import _default

    def body(rank):
        x = npurt.to_device(np.ones(256, np.float32), device=rank)
        dist.all_reduce(x)  # the first call makes the communication stream
        x.to_host()
        cs = next(iter(_default()._streams.values()))
        n0 = cs.submitted
        for _ in range(3):
            dist.all_reduce(x)
        direct = (cs.submitted - n0, bool((x.to_host() == 16).all()))
        dist.barrier()
        n1 = cs.submitted
        try:
            if rank == 0:
                dist.all_reduce(x)
            else:
                dist.broadcast(x, 0)
            x.to_host()
            err = None
        except npurt.CollectiveDesyncError as e:
            err = e.message
        return direct, cs.submitted - n1, err is not None and "desync" in err

    assert run_ranks(2, body, timeout=5.0) == [((0, True), 1, True)] * 2


def test_profiles_show_collectives_under_hccl_names():
    """A collective is a host-engine task, but profiles name it as HCCL does."""
    from npurt import profiler

    tables = {}

    def body(rank):
        x = npurt.to_device(np.ones(256, np.float32), device=rank)
        if rank == 0:
            with profiler.profile() as p:
                dist.all_reduce(x)
                dist.barrier()
                npurt.current_stream(0).synchronize()
            tables["t"] = p.key_averages().table()
        else:
            dist.all_reduce(x)
            dist.barrier()
        return bool((x.to_host() == 2).all())

    assert run_ranks(2, body) == [True, True]
    t = tables["t"]
    assert "HcclAllReduce" in t and "HcclBarrier" in t, t
    assert "Host Callback" not in t, t


def test_launch_collective_refuses_bad_input_with_typed_errors():
    """The glue behind the mpi backend's tasks checks its arguments."""
    from npurt import _npurt

    s = npurt.Stream()
    with pytest.raises(ValueError, match='unknown collective "nope"'):
        _npurt._launch_collective(s, lambda: None, "nope", 0)
    with pytest.raises(TypeError, match="callable"):
        _npurt._launch_collective(s, 42, "all_reduce", 0)
    ran = []
    _npurt._launch_collective(s, lambda: ran.append(1), "barrier", 0)
    s.synchronize()
    assert ran == [1]
