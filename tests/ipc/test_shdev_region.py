"""One device, several processes (issue 15): real processes attach to the device's shared
status region, see each other there and in npurt-smi, share its capacity (an allocation
beyond it is OutOfMemoryError naming the holder), and a SIGKILLed holder's share is
reclaimed. Each test has its own status directory; every child has a timeout."""

import json
import signal
import subprocess
import sys

import pytest
from shdev_child import BOUND, Child, env_for, snapshot, wait_for

MIB = 1 << 20

HOLDER = """
import json, os, sys, npurt
buf = npurt.malloc(int(sys.argv[1]) << 20)
if len(sys.argv) > 2:
    npurt.set_per_process_memory_fraction(float(sys.argv[2]))
s = npurt.Stream()
print("STATE", json.dumps(npurt._npurt._shared_state(0)), flush=True)
for line in sys.stdin:
    if line.startswith("alloc"):
        try:
            b2 = npurt.malloc(int(line.split()[1]) << 20)
            print("OK", flush=True)
        except npurt.OutOfMemoryError as e:
            print("OOM", json.dumps([str(e), e.code]), flush=True)
    elif line.startswith("free"):
        buf = None
        npurt.empty_cache()
        print("FREED", flush=True)
"""


@pytest.fixture
def env(tmp_path):
    return env_for(tmp_path, NPURT_DEVICE_MEMORY="64M")


def _procs(env):
    return {p["pid"]: p for d in snapshot(env) for p in d["processes"]}


def _smi(env):
    r = subprocess.run([sys.executable, "-m", "npurt.smi", "--json"], capture_output=True, text=True,
                       timeout=BOUND, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_two_processes_see_each_other_in_the_region_and_in_smi(env):
    with Child(HOLDER, env, "8", "0.5") as a, Child(HOLDER, env, "4") as b:
        assert a.json("STATE") == [True, True, None]
        assert b.json("STATE")[1]
        procs = _procs(env)
        assert procs[a.pid]["allocated"] == 8 * MIB and procs[b.pid]["allocated"] == 4 * MIB
        assert procs[a.pid]["reserved"] >= 8 * MIB and procs[a.pid]["quota"] == 32 * MIB
        assert procs[a.pid]["alive"] and "python" in procs[a.pid]["name"]
        info = wait_for(lambda: (i := _smi(env)) and {a.pid, b.pid} <= {p["pid"] for p in i["processes"]} and i,
                        "both children in npurt-smi")
        mine = {p["pid"]: p for p in info["processes"]}
        assert mine[a.pid]["devices"][0]["memory_used"] == 8 * MIB and mine[a.pid]["devices"][0]["shared"]
        assert mine[a.pid]["devices"][0]["quota"] == 32 * MIB
        dev = info["devices"][0]
        assert dev["memory_total"] == 64 * MIB and dev["processes"] == 2 and dev["memory_used"] == 12 * MIB
        assert a.finish() == 0
        assert a.pid not in _procs(env), "a clean exit detaches"


def test_capacity_holds_across_processes_and_names_the_holder(env):
    with Child(HOLDER, env, "40") as a, Child(HOLDER, env, "1") as b:
        a.expect("STATE"), b.expect("STATE")
        b.send("alloc 40")
        msg, code = b.json("OOM")
        assert code == 207001
        assert f"pid {a.pid} 'python" in msg and "40.00 MiB reserved" in msg, msg
        assert f"pid {b.pid} " in msg and "(this process)" in msg, msg
        b.send("alloc 16")
        b.expect("OK")  # what is left of the device still serves
        a.send("free")
        a.expect("FREED")
        b.send("alloc 40")
        b.expect("OK")


def test_sigkilled_holder_share_is_reclaimed(env):
    base = _procs(env)
    with Child(HOLDER, env, "40") as a, Child(HOLDER, env, "1") as b:
        a.expect("STATE"), b.expect("STATE")
        assert _procs(env)[a.pid]["reserved"] >= 40 * MIB
        a.p.send_signal(signal.SIGKILL)
        a.p.wait(BOUND)
        dead = _procs(env)[a.pid]
        assert not dead["alive"], "the slot stays until someone looks, and then reads as dead"
        b.send("alloc 40")
        b.expect("OK")  # the refusal path found the dead process and reclaimed its 40 MiB
        procs = _procs(env)
        assert a.pid not in procs and procs[b.pid]["allocated"] == 41 * MIB
        assert b.finish() == 0
    assert _procs(env) == base
    assert all(d["reserved"] == 0 for d in snapshot(env)), "records back to baseline"


def test_smi_reclaims_a_killed_process_after_showing_it_stale(env):
    with Child(HOLDER, env, "8") as a:
        a.expect("STATE")
        wait_for(lambda: any(p["pid"] == a.pid for p in _smi(env)["processes"]), "the child in smi")
        a.p.send_signal(signal.SIGKILL)
        a.p.wait(BOUND)
    info = _smi(env)
    p = next(p for p in info["processes"] if p["pid"] == a.pid)
    assert p["stale"]
    assert _smi(env)["processes"] == [] and snapshot(env)[0]["reserved"] == 0


def test_region_off_keeps_the_device_private(env):
    env = dict(env, NPURT_SHARED_DEVICE="0")
    with Child(HOLDER, env, "40") as a, Child(HOLDER, env, "40") as b:
        assert a.json("STATE")[:2] == [False, False] and b.json("STATE")[:2] == [False, False]
        b.send("alloc 16")
        b.expect("OK")  # each process has its own 64 MiB device
        assert _procs(env) == {}


def test_unsafe_status_dir_is_refused(tmp_path):
    d = tmp_path / "open"
    d.mkdir(mode=0o777)
    d.chmod(0o777)
    env = env_for(tmp_path, NPURT_STATUS_DIR=str(d))
    with Child(HOLDER, env, "1") as a:
        enabled, attached, why = a.json("STATE")
        assert enabled and not attached and "group or others have access" in why


POOLS = """
import json, os, npurt
import npurt.acl as acl
mine = lambda: next(p["allocated"] for d in npurt._npurt._shared_snapshot() for p in d["processes"] if p["pid"] == os.getpid())
s = npurt.Stream()
base = mine()
pool = npurt.MemPool(4 << 20)
b = pool.malloc(1 << 20)  # direct, not routed by `with pool:`
direct = mine()
b.free()
after_direct = mine()
with pool:
    c = npurt.malloc(1 << 20)
routed = mine()
c.free()
acl.rt.set_device(0)
parent, _ = acl.rt.malloc(1 << 20, 0)
acl.rt.register_mem(parent, 1 << 20, 0)
blk, _ = acl.rt.malloc_from_mem(4096, parent)
with_block = mine()
acl.rt.free(blk)
acl.rt.unregister_mem(parent)
acl.rt.free(parent)
print("COUNTS", json.dumps([base, direct, after_direct, routed, with_block, mine()]), flush=True)
"""


def test_pool_and_registered_range_allocations_count_once_in_the_region(env):
    with Child(POOLS, env) as c:
        base, direct, after_direct, routed, with_block, end = c.json("COUNTS")
    assert direct == base + MIB, "a direct MemPool allocation counts"
    assert after_direct == base and end == base, "and its free takes it back, never below the start"
    assert routed == base + MIB, "a routed one counts once"
    assert with_block - base == MIB + 512, "acl.rt.malloc's bytes; a registered range's block adds nothing"
