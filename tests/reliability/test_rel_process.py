"""Defects 4 and 5: a forked child fails fast with a typed error (spawn works); use after
npurt's own atexit teardown is a typed error and the interpreter exits cleanly. Each case
runs in a fresh interpreter with a timeout."""

import pytest
from relhelp import assert_clean, run_script

FORK_CHILD = """
import os, sys, time
import npurt
x = npurt.ones(1024)
npurt.kernels.busy(0.001)
npurt.synchronize()
pid = os.fork()
if pid == 0:
    code = 9
    try:
        {action}
        code = 3  # ran: must not happen (the child has no runtime threads)
    except npurt.Error as e:
        code = 0 if "fork" in str(e) else 4
        print("child:", type(e).__name__, e, flush=True)
    except BaseException as e:
        print("child: untyped", type(e).__name__, e, flush=True)
        code = 5
    os._exit(code)
deadline = time.monotonic() + 20
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("child hung")
        sys.exit(1)
    time.sleep(0.01)
code = os.waitstatus_to_exitcode(status)
print("child exit", code)
# the parent is unaffected
assert (npurt.add(x, 1.0).to_host() == 2.0).all()
print("ok" if code == 0 else "bad")
"""

ACTIONS = {
    "kernel+sync": "npurt.kernels.busy(0.001); npurt.synchronize()",
    "array": "print(npurt.add(x, 1.0).to_host())",
    "stream": "s = npurt.Stream(); s.synchronize()",
    "read": "x.to_host()",
    "malloc": "npurt.malloc(1 << 20)",
    "new_device": "npurt.set_device(1); npurt.zeros(4)",
}


@pytest.mark.parametrize("action", list(ACTIONS))
def test_forked_child_fails_fast_with_a_typed_error(action):
    p = run_script(FORK_CHILD.replace("{action}", ACTIONS[action]), env={"NPURT_DEVICE_COUNT": "2"}, timeout=60)
    assert_clean(p, "child exit 0", "ok")


def test_multiprocessing_fork_and_spawn(tmp_path):
    script = tmp_path / "mp_workers.py"
    script.write_text(
        """
import multiprocessing as mp
import numpy as np
import npurt

def work(i):
    x = npurt.to_device(np.full(256, float(i), np.float32))
    return float(npurt.sum(npurt.add(x, 1.0)).to_host())

def forked(i):
    try:
        work(i)
        return "ran"
    except npurt.Error as e:
        return type(e).__name__

if __name__ == "__main__":
    print("parent", work(0))
    with mp.get_context("spawn").Pool(2) as pool:
        print("spawn", pool.map(work, [1, 2, 3], chunksize=1))
    with mp.get_context("fork").Pool(2) as pool:
        print("fork", pool.map(forked, [1, 2], chunksize=1))
    print("parent again", work(4))
"""
    )
    import subprocess
    import sys

    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert_clean(p, "parent 256.0", "spawn [512.0, 768.0, 1024.0]", "fork ['ForkedProcessError', 'ForkedProcessError']", "parent again 1280.0")


AFTER_EXIT = """
import atexit, threading, time

def late():  # registered before npurt: runs after npurt's teardown
    import npurt
    try:
        s = npurt.Stream()
        npurt.kernels.busy(0.001, stream=s)
        s.launch_host_func(print, "callback at exit")
        s.synchronize()
        print("late: ran")
    except npurt.Error as e:
        print("late: typed", type(e).__name__, flush=True)
    except BaseException as e:
        print("late: untyped", type(e).__name__, e, flush=True)

atexit.register(late)
import npurt

stop = False
def serve():  # a daemon thread still launching when the interpreter exits
    x = npurt.ones(4096)
    while True:
        try:
            x = npurt.add(x, 1.0)
            npurt.current_stream().launch_host_func(lambda: None)
            x.to_host()
        except npurt.Error:
            time.sleep(0.001)

t = threading.Thread(target=serve, daemon=True)
t.start()
time.sleep(0.2)
print("main done", flush=True)
"""


def test_use_after_atexit_teardown_is_typed_and_exit_is_clean():
    for _ in range(3):
        p = run_script(AFTER_EXIT, timeout=60)
        assert_clean(p, "main done", "late: typed")
        assert "untyped" not in p.stdout


def test_exit_with_work_in_flight_finishes_it():
    p = run_script(
        """
        import npurt
        s = npurt.Stream()
        for i in range(20):
            npurt.kernels.busy(0.005, stream=s)
        s.launch_host_func(print, "last callback ran")
        print("exiting", flush=True)
        """,
        timeout=60,
    )
    assert_clean(p, "exiting", "last callback ran")
