"""Fault injection (issue 13): ``NPURT_FAULT=alloc:N,kernel:N,hang:N,copy_stall:N`` or the
test-only ``_npurt._fault_set``. Each fault is reported as a typed error, the runtime
recovers, memory goes back to its baseline, and nothing hangs (the faults that can hang
run in a child interpreter with a timeout)."""

import gc
import json

import npurt
import npurt.acl as acl
import numpy as np
import pytest
from npurt import _npurt
from relhelp import assert_clean, describe, run_script


@pytest.fixture(autouse=True)
def _disarm():
    _npurt._fault_clear()
    yield
    _npurt._fault_clear()


def _injected(kind):
    return _npurt._fault_injected()[kind]


def _settle():
    gc.collect()
    npurt.synchronize()
    gc.collect()
    return npurt.memory_allocated()


ALLOCS = {
    "malloc": lambda x: npurt.malloc(4096),
    "zeros": lambda x: npurt.zeros(1024),
    "to_device": lambda x: npurt.to_device(np.ones(1024, np.float32)),
    "kernel output": lambda x: npurt.exp(x),
    "operator": lambda x: x + 1.0,
    "copy": lambda x: x.copy(),
}


@pytest.mark.parametrize("make", list(ALLOCS))
def test_alloc_fault_is_an_out_of_memory_error_and_nothing_leaks(make):
    x = npurt.ones(1024)
    base = _settle()
    before = _injected("alloc")
    _npurt._fault_set("alloc:1")
    with pytest.raises(npurt.OutOfMemoryError) as ei:
        ALLOCS[make](x)
    assert ei.value.code == 207001 and "injected" in str(ei.value)
    assert _injected("alloc") == before + 1
    assert _settle() == base, "the failed allocation left memory behind"
    y = ALLOCS[make](x)  # the fault fired once: the same call works now
    del y
    assert _settle() == base


def test_alloc_fault_fires_on_the_nth_allocation_only():
    base = _settle()
    _npurt._fault_set("alloc:3")
    keep = [npurt.malloc(4096), npurt.malloc(4096)]
    with pytest.raises(npurt.OutOfMemoryError):
        npurt.malloc(4096)
    keep += [npurt.malloc(4096) for _ in range(4)]
    del keep
    assert _settle() == base
    st = npurt.memory_stats()
    assert st["num_ooms"] >= 1


def test_alloc_fault_in_a_mempool_and_in_acl():
    pool = npurt.MemPool(1 << 20)
    _npurt._fault_set("alloc:1")
    with pool, pytest.raises(npurt.OutOfMemoryError):
        npurt.malloc(4096)
    pool.destroy()
    acl.rt.set_device(0)
    try:
        _npurt._fault_set("alloc:1")
        ptr, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 207001 and ptr == 0
        ptr, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0
        assert acl.rt.free(ptr) == 0
    finally:
        acl.rt.reset_device(0)


# The kernel faults run in a fresh interpreter: `kernel:N` counts every kernel of the
# process, so work left running by earlier tests must not take the fault.
KERNEL = """
import gc, json
import npurt
from npurt import _npurt


def outcomes(fail):
    # A failing kernel on a fresh stream (fail(stream)), then the later work a user might
    # do; what each step raised.
    s, other = npurt.Stream(), npurt.Stream()
    x = npurt.ones(256, stream=s)
    s.synchronize()
    y = npurt.add(x, 1.0, stream=s)
    fail(s)
    # Every later step is recorded after synchronize saw the failure, so no step depends on
    # whether the failing kernel had run yet (a launch after it raises once it has).
    out = {}
    steps = {
        "synchronize": lambda: s.synchronize(timeout=30),
        "query": lambda: s.query(),
        "launch": lambda: npurt.kernels.empty(stream=s),
        "launch an array op": lambda: npurt.add(x, 2.0, stream=s).to_host(),
        "use on another stream": lambda: npurt.relu(y, stream=other).to_host(),
        "an earlier result": lambda: y.to_host(),
        "other streams go on": lambda: npurt.add(x, 3.0, stream=other).to_host(),
    }
    for name, step in steps.items():
        try:
            step()
            out[name] = None
        except npurt.Error as e:
            out[name] = [type(e).__name__, e.code]
    s.destroy(force=True)
    other.synchronize(timeout=30)
    other.destroy()
    return out


def real_fault(s):
    npurt.synchronize()
    npurt.kernels.fault(stream=s)


def inject(s):
    npurt.synchronize()  # nothing else queued: the next kernel is the one below
    _npurt._fault_set("kernel:1")
    npurt.kernels.empty(stream=s)


gc.collect()
base = npurt.memory_allocated()
real = outcomes(real_fault)
injected = outcomes(inject)
print("real", json.dumps(real))
print("injected", json.dumps(injected))
print("count", _npurt._fault_injected()["kernel"])
# kernel:3: the third kernel from now fails
s = npurt.Stream()
x = npurt.ones(64, stream=s)
npurt.synchronize()
_npurt._fault_set("kernel:3")
npurt.kernels.empty(stream=s)
npurt.kernels.empty(stream=s)
s.synchronize(timeout=30)
npurt.add(x, 1.0, out=x, stream=s)
try:
    s.synchronize(timeout=30)
    print("third ran")
except npurt.TaskFailedError as e:
    print("third failed", "injected" in str(e))
s.destroy(force=True)
del x, s
gc.collect()
print("leak", npurt.memory_allocated() - base)
"""


def test_kernel_fault_behaves_as_a_real_kernel_failure_and_fires_on_the_nth_kernel():
    p = run_script(KERNEL, timeout=120)
    assert_clean(p, "count 1", "third failed True", "leak 0")
    lines = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    real, injected = json.loads(lines["real"]), json.loads(lines["injected"])
    assert injected["synchronize"] == ["TaskFailedError", 507015]
    assert injected == real


HANG = """
import gc, time
import numpy as np
import npurt
from npurt import _npurt
base = npurt.memory_allocated()
s = npurt.Stream()
x = npurt.ones(1024, stream=s)
s.synchronize()
_npurt._fault_set("hang:1")
y = npurt.exp(x, stream=s)                      # this kernel never ends
e = npurt.Event(); e.record(s)
for name, wait in [
    ("stream", lambda: s.synchronize(timeout=0.2)),
    ("event", lambda: e.synchronize(timeout=0.2)),
    ("device", lambda: npurt.synchronize(timeout=0.2)),
]:
    try:
        wait()
        print(name, "returned")
    except npurt.WaitTimeoutError as err:
        print(name, "timed out", err.code)
other = npurt.Stream()                          # the other core still serves other streams
print("other", float(npurt.add(npurt.ones(4, stream=other), 1.0, stream=other).to_host()[0]))
{recover}
print("injected", _npurt._fault_injected()["hang"])
del x, y, e, s, other
gc.collect()
print("leak", npurt.memory_allocated() - base)
z = npurt.add(npurt.ones(8), 1.0)               # the runtime works again
print("after", float(z.to_host()[0]))
print("ok")
"""

RECOVER = {
    "reset_device(force=True)": "npurt.reset_device(0, force=True)",
    "Stream.destroy(force=True)": "s.destroy(force=True)",
}


@pytest.mark.parametrize("recover", list(RECOVER))
def test_hang_fault_times_out_and_a_forced_teardown_recovers(recover):
    p = run_script(HANG.replace("{recover}", RECOVER[recover]), env={"NPURT_WORKER_THREADS": "2"}, timeout=60)
    assert_clean(p, "stream timed out", "event timed out", "device timed out", "other 2.0",
                 "injected 1", "leak 0", "after 2.0", "ok")


COPY_STALL = """
import gc
import numpy as np
import npurt
from npurt import _npurt
s = npurt.Stream()
dev = npurt.malloc(1 << 16)
host = npurt.malloc_host(1 << 16)
gc.collect()
_npurt._fault_set("copy_stall:1")
npurt.memcpy_async(dev, host, s)               # the copy engine stalls on this copy
try:
    s.synchronize(timeout=0.2)
    print("returned")
except npurt.WaitTimeoutError:
    print("timed out")
a = npurt.to_device(np.ones(16, np.float32), stream=npurt.Stream())
print("injected", _npurt._fault_injected()["copy_stall"])
npurt.reset_device(0, force=True)
del dev, host, s, a
gc.collect()
print("leak", npurt.memory_allocated())
s = npurt.Stream()
b = npurt.to_device(np.full(16, 3, np.float32), stream=s)
print("after", float(b.to_host()[0]))
print("ok")
"""


def test_copy_stall_times_out_and_a_forced_reset_recovers():
    p = run_script(COPY_STALL, timeout=60)
    assert_clean(p, "timed out", "injected 1", "leak 0", "after 3.0", "ok")


def test_npurt_fault_environment_variable():
    code = """
    import npurt
    try:
        npurt.malloc(4096)
    except npurt.OutOfMemoryError as e:
        print("oom", e.code)
    b = npurt.malloc(4096)
    print("ok")
    """
    p = run_script(code, env={"NPURT_FAULT": "alloc:1"}, timeout=60)
    assert_clean(p, "oom 207001", "ok")


def test_a_bad_npurt_fault_is_a_typed_error():
    code = """
    import npurt
    try:
        npurt.malloc(4096)
    except npurt.InvalidValueError as e:
        print("typed", e.code)
    """
    p = run_script(code, env={"NPURT_FAULT": "alloc:x"}, timeout=60)
    assert p.returncode == 0, describe(p)
    assert "typed 107000" in p.stdout, describe(p)


@pytest.mark.parametrize("spec", ["alloc", "alloc:-1", "nothing:1", "kernel:1,", 3, None])
def test_fault_set_refuses_bad_specs(spec):
    with pytest.raises(npurt.Error):
        _npurt._fault_set(spec)
