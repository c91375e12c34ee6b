"""Hangs become errors (local backend, threads): a rank past the deadline, a rank calling
another collective, a rank that leaves. Every other rank raises the named error; the
checks are on the type and the message, not on timing."""

import os
import subprocess
import sys
import threading

import npurt
import npurt.distributed as dist
import numpy as np
from test_local import run_ranks


def test_a_sleeping_rank_times_out_by_name():
    gate = threading.Event()

    def fn(r):
        t = npurt.to_device(np.ones(16, np.float32), device=r % 2)
        if r == 2:
            gate.wait(30)  # arrive only after the others failed
        try:
            dist.all_reduce(t, timeout=0.3)
            t.to_host()
            return None
        finally:
            if r != 2:
                gate.set()

    out = run_ranks(3, fn)
    for r in (0, 1):
        e = out[r]
        assert isinstance(e, npurt.CollectiveTimeoutError) and isinstance(e, TimeoutError), repr(e)
        assert "all_reduce(float32 x 16, sum) (collective #0)" in e.message and "rank(s) 2 never arrived" in e.message
        assert e.code == 9 and e.name == "HCCL_E_TIMEOUT"
    assert isinstance(out[2], npurt.CollectiveTimeoutError), repr(out[2])


def test_desync_names_both_calls():
    def fn(r):
        t = npurt.to_device(np.ones(4, np.float32), device=r % 2)
        if r == 1:
            dist.broadcast(t, src=0)
        else:
            dist.all_reduce(t)
        t.to_host()

    out = run_ranks(3, fn)
    for e in out:
        assert isinstance(e, npurt.CollectiveDesyncError), repr(e)
        assert "collective desync at #0" in e.message
        assert "ranks 0, 2 called all_reduce(float32 x 4, sum)" in e.message
        assert "rank 1 called broadcast(float32 x 4, root 0)" in e.message


def test_a_rank_that_leaves_fails_the_others_and_later_calls_fail_fast():
    def fn(r):
        t = npurt.to_device(np.ones(4, np.float32), device=r % 2)
        if r == 1:
            return "left"
        try:
            dist.all_reduce(t)
            t.to_host()
        except npurt.RankFailedError as e:
            first = e
        try:
            dist.all_reduce(t)  # the group is aborted: the call fails at once (HCCL, torch)
        except npurt.RankFailedError as e:
            return (first.message, e.message, e.code)
        return "the call on an aborted group returned"

    out = run_ranks(2, fn)
    first, later, code = out[0]
    assert "rank 1 left the group" in first and code == 21
    assert "collective #1" in later and "aborted at collective #0" in later


def test_barrier_timeout_blocks_the_host_and_raises():
    gate = threading.Event()

    def fn(r):
        if r == 0:
            try:
                dist.barrier(timeout=0.2)
            except npurt.CollectiveTimeoutError as e:
                return ("timeout", "barrier" in e.message and "rank(s) 1 never arrived" in e.message)
            finally:
                gate.set()
        gate.wait(30)
        return "late"

    out = run_ranks(2, fn)
    assert out[0] == ("timeout", True)


def test_hccl_exec_timeout_is_the_default_deadline():
    # A fresh interpreter: the group default comes from HCCL_EXEC_TIMEOUT when no timeout= is given.
    script = (
        "import threading, numpy as np, npurt, npurt.distributed as dist\n"
        "out = []\n"
        "def rank(r):\n"
        "    dist.init_process_group('local', rank=r, world_size=2, device=0, group_name='env')\n"
        "    if r == 0:\n"
        "        t = npurt.to_device(np.ones(2, np.float32))\n"
        "        dist.all_reduce(t)\n"
        "        try:\n"
        "            t.to_host()\n"
        "        except npurt.CollectiveTimeoutError as e:\n"
        "            out.append(e.message)\n"
        "        done.set()\n"
        "    else:\n"
        "        done.wait(60)\n"
        "    dist.destroy_process_group()\n"
        "done = threading.Event()\n"
        "ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(out[0])\n"
    )
    env = dict(os.environ, HCCL_EXEC_TIMEOUT="0.25")
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "timed out after 0.250s" in p.stdout and "rank(s) 1 never arrived" in p.stdout, p.stdout


def test_timeout_errors_name_the_ranks_that_arrived_or_a_stalled_exchange():
    """The one formatter (Rust) fills in who arrived from the world size, and a timeout with
    nobody missing is a stalled data exchange, still a CollectiveTimeoutError."""
    from npurt.distributed._backend import collective_error

    late = collective_error("timeout", "all_reduce(float32 x 4, sum)", 5, [1, 3], "2.0", 0, 4)
    assert isinstance(late, npurt.CollectiveTimeoutError)
    assert "rank(s) 1, 3 never arrived (arrived: 0, 2)" in str(late), str(late)
    stalled = collective_error("timeout", "all_reduce(float32 x 4, sum)", 5, [], "2.0", 2, 3)
    assert isinstance(stalled, npurt.CollectiveTimeoutError)
    assert "every rank arrived (0, 1, 2) but the data exchange did not finish" in str(stalled), str(stalled)
    assert "#5" in str(stalled) and "rank 2" in str(stalled)
