"""Behaviours real pyacl code relies on (issue 17), each reproduced from what ACL's
documentation and pyacl's C bindings say: argument-count errors worded by CPython's
``PyArg_ParseTuple``, the per-thread last error, device status and utilisation, forced
reset, copies whose direction comes from the pointers, ``get_mem_info`` after a free, and
``acl.media``'s DVPP memory."""

import threading

import npurt
import npurt.acl as acl
import numpy as np
import pytest


@pytest.fixture
def dev0():
    assert acl.rt.set_device(0) == 0
    yield 0
    acl.rt.reset_device(0)


def test_wrong_argument_count_is_pyacl_wording():
    with pytest.raises(TypeError, match=r"^function takes exactly 1 argument \(0 given\)$"):
        acl.rt.set_device()
    with pytest.raises(TypeError, match=r"^function takes exactly 5 arguments \(2 given\)$"):
        acl.rt.memcpy(1, 2)
    # argument-less calls ignore extras, as pyacl's METH_VARARGS wrappers that never parse them
    assert acl.rt.get_device(0) == acl.rt.get_device()
    # wrong types keep pyacl's parse-failure message
    with pytest.raises(TypeError, match="args parse failed"):
        acl.rt.set_device("0")


def test_last_error_is_per_thread_peek_keeps_get_clears(dev0):
    assert acl.rt.get_last_error(acl.ACL_RT_THREAD_LEVEL) == 0
    bad = acl.rt.set_device(-1)
    assert bad != 0
    assert acl.rt.peek_at_last_error(0) == bad
    assert acl.rt.peek_at_last_error(0) == bad, "peek does not clear"
    # a later successful call leaves it
    assert acl.rt.get_device() == (0, 0)
    assert acl.rt.peek_at_last_error(0) == bad
    seen = []
    t = threading.Thread(target=lambda: seen.append(acl.rt.peek_at_last_error(0)))
    t.start()
    t.join(10)
    assert seen == [0], "another thread has its own last error"
    assert acl.rt.get_last_error(0) == bad
    assert acl.rt.get_last_error(0) == 0, "get clears"
    assert acl.rt.peek_at_last_error(5) == acl.ACL_ERROR_INVALID_PARAM


def test_query_device_status(dev0):
    n, ret = acl.rt.get_device_count()
    assert ret == 0
    for i in range(n):
        assert acl.rt.query_device_status(i) == (acl.ACL_RT_DEVICE_STATUS_NORMAL, 0)
    status, ret = acl.rt.query_device_status(n)
    assert (status, ret) == (acl.ACL_RT_DEVICE_STATUS_END, acl.ACL_ERROR_RT_INVALID_DEVICEID)


def test_device_utilization_is_measured(dev0):
    keys = {"cube_utilization", "vector_utilization", "aicpu_utilization", "memory_utilization", "utilization_extend"}
    idle, ret = acl.rt.get_device_utilization_rate(0)
    assert ret == 0 and set(idle) == keys
    assert idle["memory_utilization"] == -1 and idle["aicpu_utilization"] == -1
    # Keep both cores' workers busy with many short kernels for longer than the window.
    s = npurt.Stream()
    stop, fed = threading.Event(), threading.Event()

    def feed():
        while not stop.is_set():
            for _ in range(20):
                npurt.kernels.busy(0.002, blocks=2, stream=s)  # 2 ms per block
            fed.set()
            s.synchronize()

    t = threading.Thread(target=feed)
    t.start()
    try:
        # Sample once work is queued (a loaded machine may start the feeder late), up to
        # ten 50 ms windows, until one shows the cores busy.
        assert fed.wait(10)
        busy = 0
        for _ in range(10):
            busy = max(busy, acl.rt.get_device_utilization_rate(0)[0]["cube_utilization"])
            if busy >= 30:
                break
    finally:
        stop.set()
        t.join(30)
        s.destroy()
    assert busy >= 30, busy
    assert busy > idle["cube_utilization"]
    assert acl.rt.get_device_utilization_rate(99)[1] == acl.ACL_ERROR_RT_INVALID_DEVICEID


@pytest.mark.npurt_sanitizer(expect=["leak"])  # misuse on purpose: the sanitizer must see it
def test_reset_device_force_releases_every_reference():
    assert acl.rt.set_device(0) == 0
    assert acl.rt.set_device(0) == 0
    p, ret = acl.rt.malloc(1024, 0)
    assert ret == 0
    with pytest.warns(ResourceWarning):
        assert acl.rt.reset_device_force(0) == 0
    assert npurt._npurt._device_status(0) is None, "the device is not running any more"
    assert acl.rt.set_device(0) == 0
    assert acl.rt.reset_device(0) == 0


@pytest.mark.npurt_sanitizer(expect=["use-after-free"])  # misuse on purpose: the sanitizer must see it
@pytest.mark.parametrize("kind", [acl.ACL_MEMCPY_DEVICE_TO_HOST, acl.ACL_MEMCPY_HOST_TO_HOST, acl.ACL_MEMCPY_DEVICE_TO_DEVICE])
def test_memcpy_direction_comes_from_the_pointers(dev0, kind):
    """A torch clone uploads with a mislabelled kind: the copy goes the pointers' way."""
    a = np.arange(256, dtype=np.float32)
    b = np.zeros_like(a)
    p, ret = acl.rt.malloc(a.nbytes, 0)
    assert ret == 0
    try:
        assert acl.rt.memcpy(p, a.nbytes, a.ctypes.data, a.nbytes, kind) == 0  # really H2D
        assert acl.rt.memcpy(b.ctypes.data, b.nbytes, p, a.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0  # really D2H
        np.testing.assert_array_equal(a, b)
    finally:
        assert acl.rt.free(p) == 0
    # the freed pointer is still never host memory, whatever the kind says
    assert acl.rt.memcpy(p, 64, a.ctypes.data, 64, kind) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memcpy(a.ctypes.data, 64, 8 << 40, 64, kind) == acl.ACL_ERROR_RT_PARAM_INVALID


def test_get_mem_info_counts_freed_memory_as_free(dev0):
    free0, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    assert ret == 0
    p, ret = acl.rt.malloc(64 << 20, 0)
    assert ret == 0
    free1, _, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    assert free1 <= free0 - (64 << 20)
    assert acl.rt.free(p) == 0
    free2, total2, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    assert total2 == total and free2 == free0, "freed memory is free again, as on the card"
    # the cache is still visible where torch's users look for it
    assert npurt.memory_reserved() >= 64 << 20


def test_dvpp_memory_is_device_memory(dev0):
    a = np.arange(1000, dtype=np.uint8)
    p, ret = acl.media.dvpp_malloc(a.nbytes)
    assert ret == 0 and p % 128 == 0
    # ALIGN_UP(size, 32) + 32 bytes are usable
    assert acl.rt.memset(p, 1024 + 32, 7, 1024 + 32) == 0
    assert acl.rt.memcpy(p, a.nbytes, a.ctypes.data, a.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    b = np.zeros_like(a)
    assert acl.rt.memcpy(b.ctypes.data, b.nbytes, p, b.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    np.testing.assert_array_equal(a, b)
    assert acl.rt.memset(p, 1024 + 33, 0, 1024 + 33) == acl.ACL_ERROR_RT_PARAM_INVALID
    q, ret = acl.rt.malloc(64, 0)
    assert acl.media.dvpp_free(q) == acl.ACL_ERROR_RT_MEMORY_FREE, "not DVPP memory"
    assert acl.rt.free(q) == 0
    assert acl.media.dvpp_free(p) == 0
    assert acl.media.dvpp_free(p) == acl.ACL_ERROR_RT_MEMORY_FREE
    assert acl.media.dvpp_malloc(0)[1] == acl.ACL_ERROR_INVALID_PARAM


def test_other_media_calls_are_feature_not_supported():
    assert acl.media.dvpp_create_channel_desc() == acl.ACL_ERROR_FEATURE_UNSUPPORTED
    assert acl.media.vdec_create_channel_desc() == 200006
    with pytest.raises(AttributeError):
        acl.media.__wrapped__  # noqa: B018


def test_tutorial_dialect_constants():
    assert acl.GDDR_MEM == acl.ACL_HBM_MEM
    assert (acl.HOST_TO_DEVICE, acl.DEVICE_TO_HOST) == (acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST)
    assert acl.acl_rt_mem_malloc_policy.ACL_MEM_MALLOC_HUGE_FIRST == acl.ACL_MEM_MALLOC_HUGE_FIRST
    assert acl.acl_rt_memcpy_kind.ACL_MEMCPY_DEVICE_TO_DEVICE == 3


def test_tutorial_dialect_pool_allocates_from_a_real_mempool(dev0):
    pool, ret = acl.rt.mem_pool_config(1 << 20)
    assert ret == 0
    before = npurt.memory_allocated()
    p, ret = acl.rt.malloc(1000, acl.ACL_MEM_MALLOC_HUGE_FIRST, pool)
    assert ret == 0
    a = np.arange(250, dtype=np.float32)
    b = np.zeros_like(a)
    assert acl.rt.memcpy(p, 1056, a.ctypes.data, a.nbytes, acl.HOST_TO_DEVICE) == 0
    assert acl.rt.memcpy(b.ctypes.data, b.nbytes, p, b.nbytes, acl.DEVICE_TO_HOST) == 0
    np.testing.assert_array_equal(a, b)
    assert acl.rt.mem_pool_destroy(pool) == acl.ACL_ERROR_RT_PARAM_INVALID, "a block is still allocated"
    # the pool is full at 1 MiB
    q, ret = acl.rt.malloc(2 << 20, 0, pool)
    assert ret == acl.ACL_ERROR_RT_MEMORY_ALLOCATION
    assert acl.rt.free(p) == 0
    assert npurt.memory_allocated() == before
    assert acl.rt.mem_pool_destroy(pool) == 0
    assert acl.rt.malloc(1000, 0, pool)[1] == acl.ACL_ERROR_RT_PARAM_INVALID, "destroyed handle"


@pytest.mark.npurt_sanitizer(expect=["invalid-free"])  # misuse on purpose: the sanitizer must see it
def test_tutorial_dialect_registered_range_sub_allocates(dev0):
    parent, ret = acl.rt.malloc(8192, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    before = npurt.memory_allocated()
    start = parent + 100  # an interior start: the range begins at the next 32-byte boundary
    assert acl.rt.register_mem(start, 4096, 0) == 0
    assert acl.rt.register_mem(start, 4096, 0) == acl.ACL_ERROR_RT_PARAM_INVALID, "registered twice"
    a, ret = acl.rt.malloc_from_mem(1000, start)
    assert ret == 0
    b, ret = acl.rt.malloc_from_mem(1000, start)
    assert ret == 0
    assert a % 32 == 0 and start <= a and b >= a + 1056, "ACL's size rule: ALIGN_UP(1000, 32) + 32"
    assert b + 1000 <= start + 4096
    assert npurt.memory_allocated() == before, "blocks take no device memory of their own"
    # blocks are real device memory: copies into and out of them
    x = np.arange(250, dtype=np.float32)
    y = np.zeros_like(x)
    assert acl.rt.memcpy(b, 1000, x.ctypes.data, x.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert acl.rt.memcpy(y.ctypes.data, y.nbytes, b, 1000, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    np.testing.assert_array_equal(x, y)
    # the range is bounded: 4096 - 2 * 1056 bytes are left
    big, ret = acl.rt.malloc_from_mem(3000, start)
    assert ret == acl.ACL_ERROR_RT_MEMORY_ALLOCATION and big == 0
    assert acl.rt.free(parent) == acl.ACL_ERROR_RT_PARAM_INVALID, "a range is registered in it"
    assert acl.rt.unregister_mem(start) == acl.ACL_ERROR_RT_PARAM_INVALID, "blocks are live"
    assert acl.rt.free(a) == 0
    c, ret = acl.rt.malloc_from_mem(900, start)
    assert ret == 0 and c == a, "a freed block's bytes come back (best fit)"
    assert acl.rt.free(b) == 0 and acl.rt.free(c) == 0
    assert acl.rt.free(c) == acl.ACL_ERROR_RT_MEMORY_FREE, "double free"
    assert acl.rt.unregister_mem(start) == 0
    assert acl.rt.malloc_from_mem(64, start)[1] == acl.ACL_ERROR_RT_PARAM_INVALID, "no longer registered"
    assert acl.rt.free(parent) == 0


def test_tutorial_dialect_registered_range_refuses_bad_input(dev0):
    parent, ret = acl.rt.malloc(1024, 0)
    assert ret == 0
    host = np.zeros(64, np.uint8)
    assert acl.rt.register_mem(host.ctypes.data, 64, 0) == acl.ACL_ERROR_RT_PARAM_INVALID, "host memory"
    assert acl.rt.register_mem(parent, 0, 0) == acl.ACL_ERROR_RT_PARAM_INVALID, "empty range"
    assert acl.rt.register_mem(parent + 512, 4096, 0) == acl.ACL_ERROR_RT_PARAM_INVALID, "past the allocation"
    assert acl.rt.malloc_from_mem(64, parent) == (0, acl.ACL_ERROR_RT_PARAM_INVALID), "not registered"
    assert acl.rt.register_mem(parent, 1024, 0) == 0
    assert acl.rt.malloc_from_mem(0, parent) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.get_last_error(0) == acl.ACL_ERROR_INVALID_PARAM
    with pytest.raises(TypeError, match="args parse failed"):
        acl.rt.malloc_from_mem("64", parent)
    # a block may start where the allocation does: free() then names the block
    blk, ret = acl.rt.malloc_from_mem(64, parent)
    assert ret == 0 and blk == parent
    assert acl.rt.unregister_mem(parent) == acl.ACL_ERROR_RT_PARAM_INVALID, "the block is live"
    assert acl.rt.free(blk) == 0
    assert acl.rt.free(parent) == acl.ACL_ERROR_RT_PARAM_INVALID, "the range is still registered"
    assert acl.rt.unregister_mem(parent) == 0
    assert acl.rt.unregister_mem(parent) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.free(parent) == 0


def test_tutorial_dialect_context_block():
    with acl.rt.context(0) as ctx:
        assert ctx != 0
        assert acl.rt.get_device() == (0, 0)
        s, ret = acl.rt.create_stream()
        assert ret == 0 and acl.rt.destroy_stream(s) == 0
    with pytest.raises(RuntimeError, match="107001"):
        with acl.rt.context(99):
            pass
