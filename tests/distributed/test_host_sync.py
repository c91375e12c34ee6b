"""Small collectives without hand-offs (issue 18): a blocking collective
(``async_op=False``) on an idle communication stream runs on the calling thread, and an
eager broadcast's root does not wait for the ranks that read from it. Local backend
(threads); the checks are on what happened before what, never on timing."""

import threading

import npurt
import npurt.distributed as dist
import numpy as np
import pytest
from test_local import run_ranks


def test_a_blocking_collective_returns_only_after_every_rank_called_it():
    # Host-synchronous: the call runs the collective itself, so it cannot return before
    # the late rank arrived (queued, it returned at once and this read False).
    arrived = threading.Event()

    def fn(r):
        t = npurt.to_device(np.full(4, r + 1, np.float32), device=r % 2)
        if r == 1:
            arrived.wait(0.3)  # nobody sets it: a late rank
            arrived.set()
            dist.all_reduce(t)
            return t.to_host().tolist()
        dist.all_reduce(t)
        seen = arrived.is_set()
        return seen, t.to_host().tolist()

    out = run_ranks(2, fn)
    assert out[0] == (True, [3.0] * 4), out
    assert out[1] == [3.0] * 4, out


def test_host_sync_off_keeps_the_call_non_blocking(monkeypatch):
    # NPURT_COLLECTIVE_HOST_SYNC=0: queued as before; rank 1 calls only after rank 0's
    # call returned, which host-synchronous execution would turn into a timeout.
    monkeypatch.setenv("NPURT_COLLECTIVE_HOST_SYNC", "0")
    returned = threading.Event()

    def fn(r):
        t = npurt.to_device(np.full(4, r + 1, np.float32), device=r % 2)
        if r == 1:
            assert returned.wait(30)
            dist.all_reduce(t, timeout=20)
            return t.to_host().tolist()
        dist.all_reduce(t, timeout=20)
        returned.set()
        return t.to_host().tolist()

    out = run_ranks(2, fn)
    assert out == [[3.0] * 4, [3.0] * 4], out


def test_a_failed_host_synchronous_collective_raises_where_its_result_is_read():
    done = threading.Event()

    def fn(r):
        t = npurt.to_device(np.ones(4, np.float32), device=r % 2)
        if r == 1:
            return done.wait(30)  # never calls (and stays in the group)
        try:
            dist.all_reduce(t, timeout=0.2)  # runs here, fails here: raised below
            try:
                t.to_host()
            except npurt.CollectiveTimeoutError as e:
                return "rank(s) 1 never arrived" in e.message
            return "no error"
        finally:
            done.set()

    assert run_ranks(2, fn)[0] is True


def test_a_broadcast_root_returns_before_the_readers_arrive():
    # Rank 1 broadcasts only after rank 0's broadcast returned (a root that waited for its
    # readers would time out here).
    returned = threading.Event()

    def fn(r):
        t = npurt.to_device(np.full(8, 7.0 if r == 0 else 0.0, np.float32), device=r % 2)
        if r == 1:
            assert returned.wait(30)
        dist.broadcast(t, src=0, timeout=20)
        if r == 0:
            returned.set()
        return t.to_host().tolist()

    assert run_ranks(2, fn) == [[7.0] * 8, [7.0] * 8]


def test_a_broadcast_root_stays_at_most_depth_minus_one_collectives_ahead():
    # The root's broadcast number DEPTH waits for the reader to finish the first (its
    # staging area and descriptor row are reused DEPTH collectives later): the reader never
    # comes, so it times out naming it. The DEPTH - 1 before it returned without the reader.
    done = threading.Event()
    depth = npurt._npurt.COLLECTIVE_EAGER_DEPTH
    assert depth >= 2

    def fn(r):
        if r == 1:
            return done.wait(30)  # never calls (and stays in the group)
        try:
            a = npurt.to_device(np.ones(4, np.float32), device=0)
            b = npurt.to_device(np.ones(4, np.float32), device=0)
            for _ in range(depth - 1):
                dist.broadcast(a, src=0)
            a.to_host()  # they returned without the reader
            dist.broadcast(b, src=0, timeout=0.2)
            with pytest.raises(npurt.CollectiveTimeoutError) as e:
                b.to_host()
            return "broadcast" in e.value.message and "rank(s) 1 never arrived" in e.value.message
        finally:
            done.set()

    assert run_ranks(2, fn)[0] is True


def test_a_reader_that_disagrees_with_the_root_is_a_desync_on_every_rank():
    # The root does not wait, so it learns at its next collective (the abort record).
    def fn(r):
        t = npurt.to_device(np.ones(4 if r != 2 else 8, np.float32), device=r % 2)
        dist.broadcast(t, src=0)
        t.to_host()  # rank 2 raises here; for 0 and 1 the broadcast went through
        dist.barrier()  # ... and they learn here
        return "no error"

    out = run_ranks(3, fn)
    for r, e in enumerate(out):
        assert isinstance(e, npurt.CollectiveDesyncError), (r, repr(e))
    assert "collective desync at #0" in out[2].message, out[2].message
    assert "ranks 0, 1 called broadcast(float32 x 4, root 0)" in out[2].message, out[2].message
    assert "rank 2 called broadcast(float32 x 8, root 0)" in out[2].message, out[2].message
    assert "aborted at collective #0" in out[0].message, out[0].message


def test_broadcasts_from_changing_roots_between_other_collectives_stay_correct():
    world, n = 3, 64

    def fn(r):
        bad = []
        t = npurt.to_device(np.zeros(n, np.float32), device=r % 2)
        s = npurt.to_device(np.zeros(n, np.float32), device=r % 2)
        for k in range(150):
            root = k % world
            t.copy_(npurt.to_device(np.full(n, k * 10 + r, np.float32), device=r % 2))
            dist.broadcast(t, src=root)
            if k % 4 == 0:
                s.copy_(npurt.to_device(np.full(n, k + r, np.float32), device=r % 2))
                dist.all_reduce(s)
                if s.to_host()[0] != sum(k + q for q in range(world)):
                    bad.append(("all_reduce", k))
            if t.to_host()[n - 1] != k * 10 + root:
                bad.append(("broadcast", k, float(t.to_host()[0])))
        return bad

    assert run_ranks(world, fn) == [[]] * world


def test_ctrl_c_ends_a_host_synchronous_collective_before_its_deadline():
    # The main thread runs the collective itself; SIGINT must raise KeyboardInterrupt there
    # well before the 600 s deadline (the subprocess gets 120 s), and the other rank learns
    # who failed.
    import os
    import subprocess
    import sys

    script = (
        "import os, signal, threading, numpy as np, npurt, npurt.distributed as dist\n"
        "later, out = threading.Event(), []\n"
        "def rank1():\n"
        "    dist.init_process_group('local', rank=1, world_size=2, device=0, group_name='int')\n"
        "    later.wait(120)\n"
        "    t = npurt.to_device(np.ones(2, np.float32))\n"
        "    try:\n"
        "        dist.all_reduce(t)\n"
        "        t.to_host()\n"
        "    except npurt.RankFailedError as e:\n"
        "        out.append(e.message)\n"
        "    dist.destroy_process_group()\n"
        "th = threading.Thread(target=rank1); th.start()\n"
        "dist.init_process_group('local', rank=0, world_size=2, device=0, group_name='int', timeout=600)\n"
        "t = npurt.to_device(np.ones(2, np.float32))\n"
        "threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "try:\n"
        "    dist.all_reduce(t)\n"
        "    print('returned')\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt')\n"
        "later.set(); th.join()\n"
        "print(out[0] if out else 'rank 1 saw nothing')\n"
        "dist.destroy_process_group()\n"
    )
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert lines[0] == "KeyboardInterrupt", p.stdout
    assert "rank 0 was interrupted" in lines[1], p.stdout


# -- the one-call path (`ProcessGroup.one_call`, `_npurt._Comm.run_sync`) -----------------


def test_the_one_call_path_takes_blocking_calls_without_a_timeout_only():
    from npurt.distributed._group import fast_group

    def fn(r):
        g = dist.group_of(None)
        return (
            g.one_call is not None,
            fast_group(None, False, None) is g,
            fast_group(None, True, None),
            fast_group(None, False, 5.0),
            fast_group("not a group", False, None),
        )

    assert run_ranks(2, fn) == [(True, True, None, None, None)] * 2


def test_a_failed_one_call_collective_raises_where_its_result_is_read():
    # As the general path: the group's deadline (no per-call timeout: the one-call path)
    # fails the collective on the communication stream, raised when the result is read;
    # the next collective gets a fresh communication stream (and the group's abort).
    done = threading.Event()

    def fn(r):
        t = npurt.to_device(np.ones(4, np.float32), device=r % 2)
        if r == 1:
            return done.wait(30)  # never calls (and stays in the group)
        try:
            dist.group_of(None).backend.set_timeout(0.2)
            dist.all_reduce(t)  # returns: the failure is the stream's
            with pytest.raises(npurt.CollectiveTimeoutError, match=r"rank\(s\) 1 never arrived"):
                t.to_host()
            u = npurt.to_device(np.ones(4, np.float32), device=0)
            with pytest.raises(npurt.CollectiveError):
                dist.all_reduce(u)
                u.to_host()
            return True
        finally:
            done.set()

    assert run_ranks(2, fn)[0] is True


@pytest.mark.parametrize("one_call", [True, False])
def test_the_one_call_path_orders_like_the_general_path(one_call):
    # Work queued on the current stream before the collective is in its input (the
    # communication stream waits for it); kernels after it see its result (the current
    # stream waits for the communication stream); a second stream's writes are ordered
    # through the array's last writer. The same with the one-call path switched off.
    def fn(r):
        g = dist.group_of(None)
        if not one_call:
            g.one_call = None
        t = npurt.to_device(np.full(64, r + 1, np.float32), device=r % 2)
        out = []
        for _ in range(3):
            npurt.add(t, 1.0, out=t)  # before: in the input
            dist.all_reduce(t)
            npurt.multiply(t, 0.5, out=t)  # after: sees the sum
            dist.broadcast(t, src=1)
            out.append(t.to_host()[0].item())
        s = npurt.Stream(device=r % 2)
        npurt.add(t, 1.0, out=t, stream=s)  # another stream: ordered through the last writer
        dist.reduce(t, dst=0)
        out.append(t.to_host()[0].item() if r == 0 else None)
        return out

    a, b = run_ranks(2, fn)
    # rank values 1, 2: (2 + 3) * 0.5 = 2.5; (3.5 + 3.5) * 0.5 = 3.5; (4.5 + 4.5) * 0.5 = 4.5;
    # then both add 1 on another stream and rank 0 gets 5.5 + 5.5.
    assert a == [2.5, 3.5, 4.5, 11.0], a
    assert b == [2.5, 3.5, 4.5, None], b


def test_a_collective_with_the_communication_stream_current_takes_the_general_path():
    # The group's communication stream made current (as its own wait would be a self-wait):
    # the general path gives the group a fresh communication stream; same result.
    def fn(r):
        g = dist.group_of(None)
        t = npurt.to_device(np.full(4, r + 1, np.float32), device=r % 2)
        dist.all_reduce(t)  # (makes the communication stream)
        with g._streams[r % 2]:
            dist.all_reduce(t)
            dist.broadcast(t, src=0)
        return t.to_host().tolist()

    assert run_ranks(2, fn) == [[6.0] * 4, [6.0] * 4]
