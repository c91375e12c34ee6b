"""The fork guard of the shared status region (issue 15): a child forked from a process
that uses a shared device inherits the region's mapping, the process's slot and its
interprocess event slots, but they stay the parent's. The child drops every inherited
buffer, memory pool, stream and event (then exits through os._exit, or through the
interpreter's normal exit with npurt's atexit teardown); afterwards the parent's region
entries are unchanged, its interprocess event is still open, and freeing in the parent
gives back exactly what it holds (nothing was released twice). Real processes: the script
runs in a fresh interpreter that forks with os.fork."""

import subprocess
import sys
import textwrap

import pytest
from shdev_child import BOUND, env_for

SCRIPT = """
import gc, os, sys, threading, time
import npurt

def mine():
    for d in npurt._npurt._shared_snapshot():
        for p in d["processes"]:
            if p["pid"] == os.getpid():
                return {"device_reserved": d["reserved"], "allocated": p["allocated"], "reserved": p["reserved"]}
    return None

small = [npurt.malloc(4096) for _ in range(8)]
big = npurt.malloc(3 << 20)
pool = npurt.MemPool(2 << 20)
ev = npurt.Event(interprocess=True)
s = npurt.Stream()
npurt.synchronize()
enabled, attached, why = npurt._npurt._shared_state(0)
assert attached, why
before = mine()
assert before and before["allocated"] >= 8 * 4096 + (3 << 20), before
assert before["reserved"] >= (2 << 20) + (3 << 20), before

pid = os.fork()
if pid == 0:
    code = 9
    try:
        del small, big, pool, ev, s
        gc.collect()
        code = 0
    except BaseException as e:
        print("child:", type(e).__name__, e, flush=True)
        code = 5
    if "{exit}" == "os._exit":
        os._exit(code)
    sys.exit(code)  # the interpreter's exit: atexit (npurt's teardown) runs in the child

deadline = time.monotonic() + {bound}
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        sys.exit("child hung")
    time.sleep(0.01)
code = os.waitstatus_to_exitcode(status)
assert code == 0, f"child exit {code}"

after = mine()
assert after == before, (before, after)

# The event is still the parent's: a closed slot would make this query raise IpcError.
gate, started = threading.Event(), threading.Event()
def hold():
    started.set()
    gate.wait({bound})
s.launch_host_func(hold)
assert started.wait({bound})
ev.record(s)
peer = npurt.Event.from_ipc_handle(ev.ipc_handle())
assert peer.query() is False  # recorded behind the held callback: not complete, not closed
s2 = npurt.Stream()
s2.wait_event(peer, timeout={bound})
gate.set()
s2.synchronize(timeout={bound})
assert peer.query() and ev.query()

# Freeing in the parent takes exactly its own bytes off its slot.
del small, big
gc.collect()
freed = mine()
assert freed["allocated"] == before["allocated"] - (8 * 4096 + (3 << 20)), (before, freed)
pool.destroy()
npurt.empty_cache()
end = mine()
assert end["reserved"] <= before["reserved"] - (2 << 20), (before, end)
assert end["device_reserved"] == end["reserved"], end  # the only process on this device
print("OK", flush=True)
"""


@pytest.mark.parametrize("exit_with", ["os._exit", "sys.exit"])
def test_a_forked_child_leaves_the_parents_region_entries_alone(tmp_path, exit_with):
    env = env_for(tmp_path, NPURT_DEVICE_MEMORY="64M", NPURT_STATUS="0")
    code = textwrap.dedent(SCRIPT).replace("{exit}", exit_with).replace("{bound}", str(BOUND))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=4 * BOUND, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), (r.returncode, r.stdout, r.stderr)
