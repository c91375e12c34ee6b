"""npurt.acl (pyacl-compatible): constants, init/finalize, devices, contexts, streams,
events, util — every call with good and bad arguments and the ACL code it returns.

ACL state is per thread, so each test runs its ACL code on a fresh thread (which starts
with no context: 107002), leaving the main thread's npurt state alone."""

import os
import threading
import time

import npurt
import npurt.acl as acl
import numpy as np
import pytest
from helpers import acl_thread, run_in_thread
from npurt.acl import _state

NO_CTX = acl.ACL_ERROR_RT_CONTEXT_NULL


def test_constants_have_acl_names_and_values():
    expected = {
        "ACL_SUCCESS": 0,
        "ACL_ERROR_INVALID_PARAM": 100000,
        "ACL_ERROR_REPEAT_INITIALIZE": 100002,
        "ACL_ERROR_REPEAT_FINALIZE": 100037,
        "ACL_ERROR_RT_PARAM_INVALID": 107000,
        "ACL_ERROR_RT_INVALID_DEVICEID": 107001,
        "ACL_ERROR_RT_CONTEXT_NULL": 107002,
        "ACL_ERROR_RT_INVALID_HANDLE": 107017,
        "ACL_ERROR_RT_MEMORY_ALLOCATION": 207001,
        "ACL_ERROR_RT_MEMORY_FREE": 207002,
        "ACL_ERROR_RT_REPORT_TIMEOUT": 507012,
        "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT": 507046,
        "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT": 507047,
        "ACL_MEM_MALLOC_HUGE_FIRST": 0,
        "ACL_MEM_MALLOC_HUGE_ONLY": 1,
        "ACL_MEM_MALLOC_NORMAL_ONLY": 2,
        "ACL_MEM_MALLOC_HUGE_FIRST_P2P": 3,
        "ACL_MEM_MALLOC_NORMAL_ONLY_P2P": 5,
        "ACL_MEMCPY_HOST_TO_HOST": 0,
        "ACL_MEMCPY_HOST_TO_DEVICE": 1,
        "ACL_MEMCPY_DEVICE_TO_HOST": 2,
        "ACL_MEMCPY_DEVICE_TO_DEVICE": 3,
        "ACL_MEMCPY_DEFAULT": 4,
        "ACL_DDR_MEM": 0,
        "ACL_HBM_MEM": 1,
        "ACL_CALLBACK_NO_BLOCK": 0,
        "ACL_CALLBACK_BLOCK": 1,
        "ACL_EVENT_SYNC": 1,
        "ACL_EVENT_TIME_LINE": 8,
        "ACL_STREAM_FAST_LAUNCH": 1,
        "ACL_STREAM_FAST_SYNC": 2,
        "ACL_EVENT_RECORDED_STATUS_COMPLETE": 1,
        "ACL_HOST": 1,
    }
    for name, value in expected.items():
        assert getattr(acl, name) == value, name
        assert getattr(acl.constants, name) == value, name


def test_init_and_finalize_codes(tmp_path):
    acl.finalize()  # whatever state earlier tests left
    assert acl.finalize() == acl.ACL_ERROR_REPEAT_FINALIZE
    assert acl.init() == 0
    assert acl.init() == acl.ACL_ERROR_REPEAT_INITIALIZE
    assert acl.finalize() == 0
    assert acl.init(str(tmp_path / "missing.json")) == acl.ACL_ERROR_INVALID_FILE
    cfg = tmp_path / "acl.json"
    cfg.write_text("{}")
    assert acl.init(str(cfg)) == 0
    with pytest.raises(TypeError):
        acl.init(42)


def test_a_thread_without_a_context_gets_107002():
    def body():
        return (
            acl.rt.get_device(),
            acl.rt.get_context(),
            acl.rt.create_stream(),
            acl.rt.create_event(),
            acl.rt.malloc(64, 0),
            acl.rt.malloc_host(64),
            acl.rt.get_mem_info(acl.ACL_HBM_MEM),
            acl.rt.synchronize_stream(0),
            acl.rt.synchronize_device(),
            acl.rt.memcpy(1 << 20, 8, 2 << 20, 8, acl.ACL_MEMCPY_HOST_TO_HOST),
        )

    got = run_in_thread(body)
    assert got == (
        (0, NO_CTX),
        (0, NO_CTX),
        (0, NO_CTX),
        (0, NO_CTX),
        (0, NO_CTX),
        (0, NO_CTX),
        (0, 0, NO_CTX),
        NO_CTX,
        NO_CTX,
        NO_CTX,
    )
    assert acl.rt.get_device_count() == (npurt.device_count(), 0)


def test_set_get_reset_device(fresh_dev1):
    def body():
        out = [acl.rt.set_device(1), acl.rt.get_device(), acl.rt.set_device(99), acl.rt.set_device(-1)]
        out.append(acl.rt.reset_device(1))
        out.append(acl.rt.get_device())  # last reference gone: the thread has no context
        return out

    assert run_in_thread(body) == [0, (1, 0), acl.ACL_ERROR_RT_INVALID_DEVICEID, 107001, 0, (0, NO_CTX)]
    assert not npurt.Device(1).is_active
    for bad in ("0", 1.0, None):
        with pytest.raises(TypeError):
            acl.rt.set_device(bad)


def test_device_reference_counting(fresh_dev1):
    def body():
        assert acl.rt.set_device(1) == 0
        assert acl.rt.set_device(1) == 0  # ACL: each set_device is one more reference
        assert acl.rt.reset_device(1) == 0
        assert acl.rt.get_device() == (1, 0)  # still one reference left
        stream, ret = acl.rt.create_stream()
        assert ret == 0
        assert acl.rt.destroy_stream(stream) == 0
        assert acl.rt.reset_device(1) == 0

    run_in_thread(body)
    assert not npurt.Device(1).is_active


def test_contexts_are_per_thread_and_shareable():
    state = {}

    def creator():
        assert acl.rt.set_device(0) == 0
        default_ctx, ret = acl.rt.get_context()
        assert ret == 0 and default_ctx != 0
        assert acl.rt.get_context() == (default_ctx, 0)  # stable handle
        ctx, ret = acl.rt.create_context(0)
        assert ret == 0 and ctx not in (0, default_ctx)
        assert acl.rt.get_context() == (ctx, 0)  # bound to the creating thread
        state.update(ctx=ctx, default=default_ctx)

    run_in_thread(creator)

    def user():
        assert acl.rt.get_context() == (0, NO_CTX)
        assert acl.rt.set_context(state["ctx"]) == 0
        assert acl.rt.get_context() == (state["ctx"], 0)
        assert acl.rt.get_device() == (0, 0)
        s, ret = acl.rt.create_stream()
        assert ret == 0 and acl.rt.destroy_stream(s) == 0
        assert acl.rt.set_context(state["default"]) == 0
        assert acl.rt.get_context() == (state["default"], 0)
        assert acl.rt.set_context(state["ctx"]) == 0
        assert acl.rt.destroy_context(state["ctx"]) == 0
        assert acl.rt.get_context() == (0, NO_CTX)  # destroyed the current one
        assert acl.rt.destroy_context(state["ctx"]) == acl.ACL_ERROR_RT_PARAM_INVALID
        assert acl.rt.set_context(state["ctx"]) == 107000
        assert acl.rt.set_context(0xDEAD) == 107000
        assert acl.rt.create_context(57) == (0, acl.ACL_ERROR_RT_INVALID_DEVICEID)
        with pytest.raises(TypeError):
            acl.rt.set_context("ctx")
        assert acl.rt.set_device(0) == 0
        assert acl.rt.reset_device(0) == 0
        assert acl.rt.reset_device(0) == 0  # the creator's reference

    run_in_thread(user)


def test_streams_create_sync_destroy():
    def body():
        s, ret = acl.rt.create_stream()
        assert ret == 0 and s != 0
        assert acl.rt.synchronize_stream(s) == 0
        assert acl.rt.synchronize_stream(0) == 0  # the default stream
        assert acl.rt.stream_query(s) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)
        s2, ret = acl.rt.create_stream_with_config(7, acl.ACL_STREAM_FAST_LAUNCH | acl.ACL_STREAM_FAST_SYNC)
        assert ret == 0 and _state.get_handle("stream", s2).priority == 7
        assert acl.rt.create_stream_with_config(9, 0)[1] == acl.ACL_ERROR_RT_PARAM_INVALID
        assert acl.rt.destroy_stream(s) == 0
        assert acl.rt.destroy_stream(s) == 107000
        assert acl.rt.synchronize_stream(s) == 107000
        assert acl.rt.destroy_stream_force(s2) == 0
        with pytest.raises(TypeError):
            acl.rt.synchronize_stream(None)

    acl_thread(body)


def test_synchronize_stream_with_timeout_codes():
    def body():
        s, _ = acl.rt.create_stream()
        npurt.kernels.busy(0.3, stream=_state.get_handle("stream", s))
        t0 = time.monotonic()
        assert acl.rt.synchronize_stream_with_timeout(s, 20) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        assert time.monotonic() - t0 < 0.25
        assert acl.rt.synchronize_stream_with_timeout(s, -2) == acl.ACL_ERROR_RT_PARAM_INVALID
        assert acl.rt.synchronize_stream_with_timeout(s, -1) == 0
        assert acl.rt.synchronize_stream_with_timeout(s, 1000) == 0
        assert acl.rt.destroy_stream(s) == 0

    acl_thread(body)


def test_events_record_query_wait_time_in_ms():
    def body():
        s1, _ = acl.rt.create_stream()
        s2, _ = acl.rt.create_stream()
        start, _ = acl.rt.create_event()
        end, ret = acl.rt.create_event()
        assert ret == 0
        assert acl.rt.query_event_status(end) == (acl.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)  # never recorded
        assert acl.rt.record_event(start, s1) == 0
        npurt.kernels.busy(0.05, stream=_state.get_handle("stream", s1))
        assert acl.rt.record_event(end, s1) == 0
        assert acl.rt.query_event_status(end) == (0, 0)  # the 50 ms kernel is still running
        assert acl.rt.query_event(end) == (acl.ACL_EVENT_STATUS_NOT_READY, 0)
        assert acl.rt.stream_wait_event(s2, end) == 0
        assert acl.rt.synchronize_stream(s2) == 0  # s2 waited for s1's kernel
        assert acl.rt.query_event_status(end) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
        assert acl.rt.query_event(end) == (acl.ACL_EVENT_STATUS_COMPLETE, 0)
        assert acl.rt.synchronize_event(end) == 0
        ms, ret = acl.rt.event_elapsed_time(start, end)
        assert ret == 0 and isinstance(ms, float)
        assert 40.0 <= ms < 2000.0  # milliseconds, not seconds or microseconds
        sync_only, ret = acl.rt.create_event_with_flag(acl.ACL_EVENT_SYNC)
        assert ret == 0 and acl.rt.record_event(sync_only, s1) == 0
        assert acl.rt.synchronize_event(sync_only) == 0
        assert acl.rt.event_elapsed_time(start, sync_only)[1] != 0  # no timestamp on it
        assert acl.rt.create_event_with_flag(0x4000)[1] == acl.ACL_ERROR_INVALID_PARAM
        npurt.kernels.busy(0.3, stream=_state.get_handle("stream", s1))
        assert acl.rt.record_event(end, s1) == 0
        assert acl.rt.synchronize_event_with_timeout(end, 10) == acl.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
        assert acl.rt.synchronize_event_with_timeout(end, -1) == 0
        for e in (start, end, sync_only):
            assert acl.rt.destroy_event(e) == 0
        assert acl.rt.destroy_event(start) == 107000
        assert acl.rt.record_event(start, s1) == 107000
        assert acl.rt.stream_wait_event(s1, start) == 107000
        assert acl.rt.event_elapsed_time(start, end) == (0.0, 107000)
        for s in (s1, s2):
            assert acl.rt.destroy_stream(s) == 0

    acl_thread(body)


def test_run_mode_and_device_sync():
    def body():
        assert acl.rt.get_run_mode() == (acl.ACL_HOST, 0)
        s, _ = acl.rt.create_stream()
        npurt.kernels.busy(0.05, stream=_state.get_handle("stream", s))
        assert acl.rt.synchronize_device_with_timeout(5) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        assert acl.rt.synchronize_device() == 0
        assert acl.rt.stream_query(s) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)
        assert acl.rt.destroy_stream(s) == 0

    acl_thread(body)


def test_util_pointer_helpers():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.warns(Warning, match="deprecated"):
        p = acl.util.numpy_to_ptr(a)
    assert p == a.ctypes.data
    with pytest.warns(Warning), pytest.raises(ValueError):
        acl.util.numpy_to_ptr([1, 2])
    with pytest.warns(Warning):
        view = acl.util.ptr_to_numpy(p, (3, 4), 11)  # NPY_FLOAT32
    assert view.dtype == np.float32 and np.array_equal(view, a)
    view[0, 0] = 42.0  # a view, not a copy: writes reach `a`
    assert a[0, 0] == 42.0
    with pytest.warns(Warning):
        assert acl.util.ptr_to_numpy(p, (2,), 7).dtype == np.int64
    data = b"npurt acl bytes"
    bp = acl.util.bytes_to_ptr(data)
    assert acl.util.ptr_to_bytes(bp, len(data)) == data
    assert acl.util.ptr_to_bytes(bp, 0) == b""
    with pytest.raises(ValueError):
        acl.util.bytes_to_ptr(bytearray(data))
    with pytest.raises(TypeError):
        acl.util.ptr_to_bytes("p", 3)


def test_util_start_and_stop_thread():
    seen = []
    tid, ret = acl.util.start_thread(lambda args: seen.append((threading.get_ident(), args)), [1, 2])
    assert ret == 0 and tid != 0
    assert acl.util.stop_thread(tid) == 0
    assert seen == [(tid, [1, 2])]

    def boom(_):
        raise KeyError("x")

    tid, _ = acl.util.start_thread(boom, [])
    with pytest.raises(RuntimeError, match="KeyError"):
        acl.util.stop_thread(tid)
    assert acl.util.stop_thread(12345) == 3
    with pytest.raises(TypeError):
        acl.util.start_thread(42, [])


def test_soc_name_is_a_string():
    assert isinstance(acl.get_soc_name(), str) and os.sep not in acl.get_soc_name()
