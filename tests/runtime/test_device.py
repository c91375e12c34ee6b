"""Devices: properties, the per-thread current device, reference counting, configuration."""

import threading
import time

import npurt
import pytest
from helpers import LONG, run_in_thread, run_python

# ---------------------------------------------------------------- count and properties


def test_device_count_matches_config():
    cfg = npurt.get_config()
    assert npurt.device_count() == len(cfg["visible_devices"]) == cfg["device_count"] == 2


def test_get_config_reports_every_setting():
    cfg = npurt.get_config()
    assert set(cfg) == {
        "device_count",
        "device_memory",
        "aicore_num",
        "worker_threads",
        "visible_devices",
        "stream_queue_depth",
        "worker_policy",
    }
    assert cfg["worker_policy"] == "batch"
    assert cfg["visible_devices"] == [0, 1]
    assert cfg["aicore_num"] >= 1 and cfg["worker_threads"] >= 1
    assert cfg["device_memory"] >= 1 << 20
    assert cfg["stream_queue_depth"] >= 2


@pytest.mark.parametrize("i", [0, 1])
def test_device_properties_agree_with_config(i):
    cfg = npurt.get_config()
    d = npurt.Device(i)
    assert d.id == i and int(d) == i
    assert isinstance(d.name, str) and str(i) in d.name
    assert d.total_memory == cfg["device_memory"]
    assert d.aicore_num == cfg["aicore_num"]
    assert d.vector_core_num >= 1
    assert d.l2_cache_size > 0
    props = d.properties
    assert props["id"] == i
    assert props["name"] == d.name
    assert props["total_memory"] == d.total_memory
    assert props["aicore_num"] == d.aicore_num
    assert props["vector_core_num"] == d.vector_core_num
    assert props["l2_cache_size"] == d.l2_cache_size
    assert props["worker_threads"] == cfg["worker_threads"]
    assert props["stream_queue_depth"] == cfg["stream_queue_depth"]


def test_get_device_properties_accepts_id_and_device():
    assert npurt.get_device_properties(1) == npurt.Device(1).properties
    assert npurt.get_device_properties(npurt.Device(0)) == npurt.Device(0).properties
    assert npurt.get_device_properties(0) != npurt.get_device_properties(1)


def test_properties_do_not_start_the_device(fresh_dev1):
    d = npurt.Device(1)
    _ = (d.name, d.total_memory, d.aicore_num, d.properties, npurt.get_device_properties(1))
    d.synchronize()  # nothing to wait for on a device that is not started
    assert not d.is_active
    assert d._refcount() == 0


def test_device_equality_and_hash():
    assert npurt.Device(0) == npurt.Device(0)
    assert npurt.Device(0) != npurt.Device(1)
    assert len({npurt.Device(0), npurt.Device(0), npurt.Device(1)}) == 2
    assert npurt.Device(npurt.Device(1)) == npurt.Device(1)


@pytest.mark.parametrize("bad", [2, 7, -1, 1000])
def test_out_of_range_device_id_is_invalid_device(bad):
    for call in (npurt.Device, npurt.get_device_properties, npurt.set_device, npurt.reset_device):
        with pytest.raises(npurt.InvalidDeviceError) as ei:
            call(bad)
        assert ei.value.code == 107001
        assert isinstance(ei.value, ValueError)


def test_huge_device_id_is_invalid_value():
    with pytest.raises(npurt.InvalidValueError):
        npurt.Device(2**70)


@pytest.mark.parametrize("bad", ["0", 1.0, True, [0]])
def test_device_id_of_wrong_type(bad):
    with pytest.raises(npurt.InvalidTypeError) as ei:
        npurt.Device(bad)
    assert isinstance(ei.value, TypeError)


# ---------------------------------------------------------------- current device


def test_new_thread_starts_on_device_0():
    assert run_in_thread(npurt.current_device) == 0
    assert run_in_thread(lambda: npurt.current_stream() == npurt.default_stream(0))


def test_device_without_argument_is_the_current_one():
    assert npurt.Device() == npurt.Device(0)
    with npurt.Device(1):
        assert npurt.Device() == npurt.Device(1)


def test_nested_devices_restore_previous():
    with npurt.Device(0) as d0:
        assert d0 == npurt.Device(0)
        assert npurt.current_device() == 0
        with npurt.Device(1) as d1:
            assert d1.id == 1
            assert npurt.current_device() == 1
            assert npurt.current_stream().device == 1
            assert npurt.default_stream().device == 1
            with npurt.Device(0):
                assert npurt.current_device() == 0
            assert npurt.current_device() == 1
        assert npurt.current_device() == 0
        assert npurt.current_stream().device == 0
    assert npurt.current_device() == 0


def test_nested_devices_restore_on_exception():
    with pytest.raises(KeyError):
        with npurt.Device(0):
            with npurt.Device(1):
                raise KeyError("boom")
    assert npurt.current_device() == 0

    with npurt.Device(0):
        try:
            with npurt.Device(1):
                assert npurt.current_device() == 1
                raise ValueError("inner")
        except ValueError:
            pass
        assert npurt.current_device() == 0


def test_current_device_is_per_thread():
    entered, release = threading.Event(), threading.Event()
    seen = {}

    def other():
        with npurt.Device(1):
            seen["other_inside"] = npurt.current_device()
            entered.set()
            assert release.wait(LONG)
        seen["other_after"] = npurt.current_device()

    t = threading.Thread(target=other)
    t.start()
    try:
        assert entered.wait(LONG)
        # The other thread is inside Device(1): this thread is still on device 0.
        assert npurt.current_device() == 0
        with npurt.Device(1):
            # ... and this thread entering device 1 does not change the other thread.
            assert run_in_thread(npurt.current_device) == 0
    finally:
        release.set()
        t.join(LONG)
    assert seen == {"other_inside": 1, "other_after": 0}


def test_set_device_is_per_thread_and_reset_drops_its_reference(fresh_dev1):
    def body():
        npurt.set_device(1)
        cur = npurt.current_device()
        s = npurt.Stream()
        dev = s.device
        refs = npurt.Device(1)._refcount()
        s.destroy()
        npurt.set_device(0)  # replaces, does not stack
        back = npurt.current_device()
        return cur, dev, refs, back

    cur, dev, refs, back = run_in_thread(body)
    assert (cur, dev, back) == (1, 1, 0)
    assert refs == 1
    assert npurt.current_device() == 0  # main thread untouched
    assert npurt.Device(1).is_active
    npurt.reset_device(1)
    assert npurt.Device(1)._refcount() == 0
    assert not npurt.Device(1).is_active


def test_reset_device_of_inactive_device_is_harmless(fresh_dev1):
    npurt.reset_device(1)
    npurt.reset_device(1)
    assert npurt.Device(1)._refcount() == 0


# ---------------------------------------------------------------- reference counting


def test_with_device_counts_references(fresh_dev1):
    d = npurt.Device(1)
    assert (d._refcount(), d.is_active) == (0, False)
    with d:
        assert (d._refcount(), d.is_active) == (1, True)
        with npurt.Device(1):
            assert d._refcount() == 2
        assert (d._refcount(), d.is_active) == (1, True)
    assert (d._refcount(), d.is_active) == (0, False)


def test_implicit_reference_keeps_device0_alive():
    d = npurt.Device(0)
    refs = d._refcount()
    assert refs >= 1  # the implicit reference taken by device-0 use outside any `with`
    s = npurt.Stream()
    with d:
        assert d._refcount() == refs + 1
    assert d._refcount() == refs
    assert d.is_active
    npurt.kernels.empty(stream=s)
    s.synchronize(timeout=LONG)
    s.destroy()


def test_implicit_use_of_a_device_takes_one_reference(fresh_dev1):
    s = npurt.Stream(device=1)  # implicit use of device 1 (no `with`)
    assert npurt.Device(1)._refcount() == 1
    npurt.Stream(device=1).destroy()  # the implicit reference is taken once
    assert npurt.Device(1)._refcount() == 1
    with npurt.Device(1):
        assert npurt.Device(1)._refcount() == 2
    assert npurt.Device(1).is_active  # the implicit reference kept it alive
    npurt.kernels.empty(stream=s)
    s.synchronize(timeout=LONG)
    with pytest.warns(ResourceWarning, match="1 stream"):
        npurt.reset_device(1)  # drops the implicit reference: teardown
    assert not npurt.Device(1).is_active
    with pytest.raises(npurt.InvalidHandleError):
        s.synchronize()


# ---------------------------------------------------------------- device synchronize


def test_device_synchronize_waits_for_all_streams():
    flags = [threading.Event(), threading.Event()]
    s1, s2 = npurt.Stream(), npurt.Stream()
    npurt.kernels.busy(0.1, stream=s1)
    s1.launch_host_func(flags[0].set)
    npurt.kernels.busy(0.15, stream=s2)
    s2.launch_host_func(flags[1].set)
    npurt.Device(0).synchronize(timeout=LONG)
    assert all(f.is_set() for f in flags)
    assert s1.query() and s2.query()
    s1.destroy()
    s2.destroy()


def test_module_synchronize_waits_for_current_device():
    flag = threading.Event()
    s = npurt.Stream()
    npurt.kernels.busy(0.1, stream=s)
    s.launch_host_func(flag.set)
    npurt.synchronize()
    assert flag.is_set()
    s.destroy()


def test_device_synchronize_timeout():
    s = npurt.Stream(device=1)
    npurt.kernels.busy(0.6, stream=s)
    t0 = time.monotonic()
    with pytest.raises(npurt.WaitTimeoutError) as ei:
        npurt.Device(1).synchronize(timeout=0.05)
    took = time.monotonic() - t0
    assert ei.value.code == 507046
    assert 0.05 <= took < 0.5
    npurt.Device(1).synchronize(timeout=LONG)
    s.destroy()


def test_device_synchronize_waits_for_released_streams():
    flag = threading.Event()
    s = npurt.Stream()
    npurt.kernels.busy(0.2, stream=s)
    s.launch_host_func(flag.set)
    del s  # released: queued work still runs
    npurt.Device(0).synchronize(timeout=LONG)
    try:
        assert flag.is_set()
    finally:
        flag.wait(LONG)


# ---------------------------------------------------------------- configuration


def test_configure_with_same_settings_is_harmless():
    cfg = npurt.get_config()
    npurt.configure(device_count=cfg["device_count"])
    npurt.configure()
    assert npurt.get_config() == cfg


def test_configure_after_init_raises():
    cfg = npurt.get_config()
    with pytest.raises(npurt.Error) as ei:
        npurt.configure(device_count=cfg["device_count"] + 1)
    assert isinstance(ei.value.code, int) and str(ei.value.code) in str(ei.value)
    with pytest.raises(npurt.Error):
        npurt.configure(stream_queue_depth=cfg["stream_queue_depth"] * 2)
    assert npurt.get_config() == cfg
    assert npurt.device_count() == cfg["device_count"]


def test_configure_bad_arguments():
    with pytest.raises(npurt.InvalidTypeError):
        npurt.configure(no_such_setting=1)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.configure(device_count="2")
    with pytest.raises(npurt.InvalidValueError):
        npurt.configure(device_count=0)
    with pytest.raises(npurt.InvalidValueError):
        npurt.configure(device_count=-1)
    with pytest.raises(npurt.InvalidValueError, match="worker_policy"):
        npurt.configure(worker_policy="fast")
    with pytest.raises(npurt.InvalidTypeError, match="worker_policy"):
        npurt.configure(worker_policy=1)


def test_configure_before_first_use_in_fresh_process():
    r = run_python(
        """
        import npurt
        npurt.configure(device_count=3, aicore_num=1, stream_queue_depth=8, device_memory="64M")
        cfg = npurt.get_config()
        print(npurt.device_count(), cfg["aicore_num"], cfg["worker_threads"],
              cfg["stream_queue_depth"], cfg["device_memory"], npurt.Device(2).aicore_num)
        try:
            npurt.configure(device_count=4)
        except npurt.Error as e:
            print("late", type(e).__name__, e.code)
        npurt.configure(device_count=3, aicore_num=1, stream_queue_depth=8, device_memory="64M")
        print("same ok")
        """
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0].split() == ["3", "1", "1", "8", str(64 << 20), "1"]
    assert lines[1].startswith("late ")
    assert lines[2] == "same ok"


def test_environment_configuration_in_fresh_process():
    r = run_python(
        """
        import npurt
        print(npurt.device_count(), [npurt.Device(i).properties["physical_id"] for i in range(npurt.device_count())],
              npurt.Device(0).aicore_num)
        """,
        env={"NPURT_DEVICE_COUNT": "4", "NPURT_VISIBLE_DEVICES": "1,3", "NPURT_AICORE_NUM": "3"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == "2 [1, 3] 3"


_WORKER_POLICIES = """
    import os, npurt
    npurt.kernels.empty(stream=npurt.Stream())  # the device and its workers exist
    npurt.synchronize()
    pols = []
    for tid in sorted(os.listdir("/proc/self/task")):
        stat = open(f"/proc/self/task/{tid}/stat").read()
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if name.startswith("npurt-aicore"):
            pols.append(int(rest[38]))  # field 41 of stat: the scheduling policy
    print(npurt.get_config()["worker_policy"], sorted(set(pols)), len(pols))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
@pytest.mark.parametrize("env, name, policy", [({}, "batch", "SCHED_BATCH"), ({"NPURT_WORKER_POLICY": " Normal "}, "normal", "SCHED_OTHER")])
def test_worker_threads_run_under_the_configured_os_policy(env, name, policy):
    import os

    r = run_python(_WORKER_POLICIES, env=env)
    assert r.returncode == 0, r.stderr
    got, rest = r.stdout.split("\n")[0].split(" ", 1)
    pols, n = rest.rsplit(" ", 1)
    assert got == name
    assert pols == f"[{getattr(os, policy)}]" and int(n) >= 1, r.stdout


def test_bad_worker_policy_in_the_environment_is_a_clear_error():
    r = run_python("import npurt\ntry:\n    npurt.get_config()\nexcept npurt.Error as e:\n    print('refused', e)",
                   env={"NPURT_WORKER_POLICY": "fifo"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("refused") and "NPURT_WORKER_POLICY" in r.stdout, r.stdout
