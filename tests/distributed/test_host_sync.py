"""Small collectives without hand-offs (issue 18): a blocking collective
(``async_op=False``) on an idle communication stream runs on the calling thread. Local
backend (threads); the checks are on what happened before what, never on timing."""

import threading

import npurt
import npurt.distributed as dist
import numpy as np
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
