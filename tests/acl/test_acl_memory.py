"""npurt.acl memory: malloc size rounding (ACL §3: ALIGN_UP(n, 32) + 32, start 64-byte
aligned), policies, frees, get_mem_info, memcpy/memset in every direction with interior
pointers, the kind/pointer checks, and the semantics that trip users: async results are
defined only after synchronize, freeing memory queued work still uses, stream order
across threads."""

import threading

import npurt
import npurt.acl as acl
import numpy as np
import pytest
from helpers import acl_thread, run_in_thread
from npurt import _npurt
from npurt.acl import _state

H2D, D2H, D2D, H2H, DEFAULT = (
    acl.ACL_MEMCPY_HOST_TO_DEVICE,
    acl.ACL_MEMCPY_DEVICE_TO_HOST,
    acl.ACL_MEMCPY_DEVICE_TO_DEVICE,
    acl.ACL_MEMCPY_HOST_TO_HOST,
    acl.ACL_MEMCPY_DEFAULT,
)
PARAM, INVALID = acl.ACL_ERROR_RT_PARAM_INVALID, acl.ACL_ERROR_INVALID_PARAM


def busy(stream_handle, seconds):
    npurt.kernels.busy(seconds, stream=_state.get_handle("stream", stream_handle))


def align_up(n, k):
    return (n - 1) // k * k + k


@pytest.mark.parametrize("n", [1, 31, 32, 33, 100, 1000, 4096, 1 << 20, (1 << 20) + 1])
def test_malloc_size_follows_acl_rounding(n):
    def body():
        ptr, ret = acl.rt.malloc(n, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0 and ptr % 64 == 0
        info = _npurt._resolve(0, ptr, 1)
        assert info["size"] == align_up(n, 32) + 32 == acl.rt.acl_malloc_size(n)
        pad = info["size"] - n
        assert 32 <= pad < 64
        assert acl.rt.memset(ptr + n, pad, 0xAB, pad) == 0  # the pad is real memory
        assert acl.rt.memset(ptr, info["size"] + 1, 0, info["size"] + 1) == PARAM  # past it is not
        p32, ret = acl.rt.malloc_align32(n, 0)
        assert ret == 0 and _npurt._resolve(0, p32, 1)["size"] == align_up(n, 32)
        p1g, ret = acl.rt.malloc(n, acl.ACL_MEM_MALLOC_HUGE1G_ONLY)
        if ret == 0:  # 1 GB policies: no pad
            assert _npurt._resolve(0, p1g, 1)["size"] == align_up(n, 32)
            assert acl.rt.free(p1g) == 0
        else:
            assert ret == acl.ACL_ERROR_RT_MEMORY_ALLOCATION
        assert acl.rt.free(ptr) == 0 and acl.rt.free(p32) == 0

    acl_thread(body)


def test_malloc_policies_and_bad_arguments():
    def body():
        p, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
        assert ret == 0 and _npurt._resolve(0, p, 1)["page_kind"] == "normal"
        assert acl.rt.free(p) == 0
        p, ret = acl.rt.malloc(4 << 20, acl.ACL_MEM_MALLOC_HUGE_ONLY)
        assert ret in (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
        if ret == 0:
            assert _npurt._resolve(0, p, 1)["page_kind"] != "normal"
            assert acl.rt.free(p) == 0
        p, ret = acl.rt.malloc(4096, 99)  # out-of-range policy: ACL's default, not an error
        assert ret == 0 and acl.rt.free(p) == 0
        assert acl.rt.malloc(0, 0) == (0, INVALID)
        assert acl.rt.malloc(-1, 0) == (0, INVALID)  # wraps to 2**64-1, like pyacl's 'k'
        assert acl.rt.malloc(1 << 50, 0) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
        assert acl.rt.malloc_host(0) == (0, INVALID)
        for bad in (("1", 0), (1.5, 0), (64, "huge")):
            with pytest.raises(TypeError):
                acl.rt.malloc(*bad)

    acl_thread(body)


@pytest.mark.npurt_sanitizer(expect=["invalid-free", "double-free"])  # misuse on purpose: the sanitizer must see it
def test_free_and_free_host_codes():
    def body():
        d, _ = acl.rt.malloc(256, 0)
        h, ret = acl.rt.malloc_host(256)
        assert ret == 0 and h % 64 == 0
        assert acl.rt.free(0) == INVALID and acl.rt.free_host(0) == INVALID
        assert acl.rt.free(d + 64) == acl.ACL_ERROR_RT_MEMORY_FREE  # interior pointer
        assert acl.rt.free(h) == acl.ACL_ERROR_RT_MEMORY_FREE  # host memory through free
        assert acl.rt.free_host(d) == acl.ACL_ERROR_RT_MEMORY_FREE
        assert acl.rt.free(d) == 0 and acl.rt.free(d) == acl.ACL_ERROR_RT_MEMORY_FREE
        assert acl.rt.free_host(h) == 0 and acl.rt.free_host(h) == acl.ACL_ERROR_RT_MEMORY_FREE

    acl_thread(body)


def test_get_mem_info_reports_the_device():
    def body():
        for attr in range(18):
            free, total, ret = acl.rt.get_mem_info(attr)
            assert ret == 0 and 0 < free <= total
        assert acl.rt.get_mem_info(18) == (0, 0, INVALID)
        assert acl.rt.get_mem_info(-1) == (0, 0, INVALID)
        with pytest.raises(TypeError):
            acl.rt.get_mem_info("hbm")
        npurt.empty_cache()  # no cached segment to reuse (or to trim) for the 64 MiB
        before, total, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
        p, _ = acl.rt.malloc(64 << 20, 0)
        after, total2, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
        assert total2 == total and before - after >= 64 << 20
        assert acl.rt.free(p) == 0

    acl_thread(body)


def test_memcpy_every_direction_with_interior_pointers():
    def body():
        n = 4096
        src = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
        out = np.zeros(n, np.uint8)
        d1, _ = acl.rt.malloc(n, 0)
        d2, _ = acl.rt.malloc(n, 0)
        h, _ = acl.rt.malloc_host(n)
        assert acl.rt.memcpy(d1, n, src.ctypes.data, n, H2D) == 0
        assert acl.rt.memcpy(d2 + 100, n - 100, d1 + 200, 1000, D2D) == 0  # interior on both sides
        assert acl.rt.memcpy(h, n, d2, n, D2H) == 0  # device -> pinned host
        assert acl.rt.memcpy(out.ctypes.data, n, h, n, H2H) == 0  # pinned -> pageable
        assert np.array_equal(out[100:1100], src[200:1200])
        assert acl.rt.memcpy(out.ctypes.data, n, d1, n, DEFAULT) == 0  # direction inferred
        assert np.array_equal(out, src)
        assert acl.rt.memset(d2, n, 0, n) == 0
        assert acl.rt.memcpy(d2, n, d1, n, H2H) == 0  # kind is a hint (ACL: "reserved"): D2D inferred
        assert acl.rt.memcpy(h, n, d2, n, H2H) == 0
        assert acl.util.ptr_to_bytes(h, n) == src.tobytes()
        a, b = np.arange(8, dtype=np.int64), np.zeros(8, np.int64)
        assert acl.rt.memcpy(b.ctypes.data, 64, a.ctypes.data, 64, H2H) == 0 and np.array_equal(a, b)
        for p in (d1, d2):
            assert acl.rt.free(p) == 0
        assert acl.rt.free_host(h) == 0

    acl_thread(body)


@pytest.mark.npurt_sanitizer(expect=["use-after-free"])  # misuse on purpose: the sanitizer must see it
def test_memcpy_argument_checks():
    def body():
        d, _ = acl.rt.malloc(1000, 0)  # 1056 usable bytes
        host = np.zeros(2048, np.uint8)
        hp = host.ctypes.data
        assert acl.rt.memcpy(d, 100, hp, 101, H2D) == PARAM  # count > dest_max
        assert acl.rt.memcpy(d + 1000, 2048, hp, 100, H2D) == PARAM  # past the allocation's end
        assert acl.rt.memcpy(0, 100, hp, 10, H2D) == INVALID
        assert acl.rt.memcpy(d, 100, 0, 10, H2D) == INVALID
        for kind in (6, 7, 8, -1):
            assert acl.rt.memcpy(d, 100, hp, 10, kind) == INVALID
        assert acl.rt.memcpy(d, 100, hp, 0, H2D) == 0  # nothing to copy
        host[1024:1034] = 9
        assert acl.rt.memcpy(hp, 100, hp + 1024, 10, H2D) == 0  # kind is reserved: host to host
        assert (host[:10] == 9).all()
        with npurt.malloc(256) as other:  # npurt memory, but not from acl.rt.malloc
            assert acl.rt.memcpy(hp, 256, other.ptr, 256, DEFAULT) == PARAM
        assert acl.rt.free(d) == 0
        assert acl.rt.memcpy(hp, 100, d, 10, D2H) == PARAM  # freed: never read as host memory
        with pytest.raises(TypeError):
            acl.rt.memcpy(d, 100, host, 10, H2D)  # an array is not a pointer

    acl_thread(body)


@pytest.mark.npurt_sanitizer(expect=["host-race"])  # misuse on purpose: the sanitizer must see it
def test_async_copy_is_defined_only_after_synchronize():
    def body():
        n = 1 << 20
        s, _ = acl.rt.create_stream()
        src, _ = acl.rt.malloc_host(n)
        dst, _ = acl.rt.malloc_host(n)
        d, _ = acl.rt.malloc(n, 0)
        assert acl.rt.memset(src, n, 0x5A, n) == 0 and acl.rt.memset(dst, n, 0, n) == 0
        busy(s, 0.1)  # the copies below cannot start before this kernel ends
        assert acl.rt.memcpy_async(d, n, src, n, H2D, s) == 0
        assert acl.rt.memcpy_async(dst, n, d, n, D2H, s) == 0
        early = acl.util.ptr_to_bytes(dst, n)
        assert early == bytes(n)  # not there yet: reading now is a race
        assert acl.rt.synchronize_stream(s) == 0
        assert acl.util.ptr_to_bytes(dst, n) == b"\x5a" * n
        assert acl.rt.memcpy_async(d, n, src, n + 1, H2D, s) == PARAM
        assert acl.rt.memcpy_async(d, n, src, n, H2D, 0xBAD) == PARAM
        for p in (src, dst):
            assert acl.rt.free_host(p) == 0
        assert acl.rt.free(d) == 0 and acl.rt.destroy_stream(s) == 0

    acl_thread(body)


def test_async_copies_with_pageable_memory():
    def body():
        n = 64 * 1024
        s, _ = acl.rt.create_stream()
        d, _ = acl.rt.malloc(n, 0)
        a = np.full(n, 7, np.uint8)
        busy(s, 0.05)
        assert acl.rt.memcpy_async(d, n, a.ctypes.data, n, H2D, s) == 0
        a[:] = 9  # staged before the call returned: the copy still sees the 7s
        out = np.zeros(n, np.uint8)
        busy(s, 0.02)
        assert acl.rt.memcpy_async(out.ctypes.data, n, d, n, D2H, s) == 0
        assert (out == 7).all()  # into pageable memory: the stream was waited for
        assert acl.rt.free(d) == 0 and acl.rt.destroy_stream(s) == 0

    acl_thread(body)


@pytest.mark.npurt_sanitizer(expect=["use-after-free"])  # misuse on purpose: the sanitizer must see it
def test_free_while_queued_work_uses_the_memory():
    def body():
        n = 1 << 20
        s, _ = acl.rt.create_stream()
        d, _ = acl.rt.malloc(n, 0)
        src, _ = acl.rt.malloc_host(n)
        dst, _ = acl.rt.malloc_host(n)
        assert acl.rt.memset(src, n, 0x33, n) == 0
        busy(s, 0.05)
        assert acl.rt.memcpy_async(d, n, src, n, H2D, s) == 0
        assert acl.rt.memcpy_async(dst, n, d, n, D2H, s) == 0
        assert acl.rt.free(d) == 0  # stream-ordered: the queued copies keep the memory
        assert acl.rt.free_host(src) == 0
        assert acl.rt.memcpy(dst, n, d, n, D2H) == PARAM  # but the pointer is dead now
        assert acl.rt.synchronize_stream(s) == 0
        assert acl.util.ptr_to_bytes(dst, n) == b"\x33" * n
        assert acl.rt.free_host(dst) == 0 and acl.rt.destroy_stream(s) == 0

    acl_thread(body)


def test_memset_and_memset_async():
    def body():
        n = 4096
        s, _ = acl.rt.create_stream()
        d, _ = acl.rt.malloc(n, 0)
        h, _ = acl.rt.malloc_host(n)
        assert acl.rt.memset(d, n, 0x1FF, n) == 0  # value & 0xFF
        assert acl.rt.memcpy(h, n, d, n, D2H) == 0
        assert acl.util.ptr_to_bytes(h, n) == b"\xff" * n
        busy(s, 0.02)
        assert acl.rt.memset_async(d + 10, n - 10, 1, 5, s) == 0
        assert acl.rt.memcpy_async(h, n, d, n, D2H, s) == 0
        assert acl.rt.synchronize_stream(s) == 0
        got = acl.util.ptr_to_bytes(h, 16)
        assert got == b"\xff" * 10 + b"\x01" * 5 + b"\xff"
        assert acl.rt.memset(d, 10, 0, 11) == PARAM
        assert acl.rt.memset(0, 10, 0, 1) == INVALID
        assert acl.rt.memset(d, 10, 0, 0) == 0
        page = np.zeros(16, np.uint8)
        assert acl.rt.memset(page.ctypes.data, 16, 1, 16) == PARAM  # pageable memory
        assert acl.rt.memset_async(d, n, 0, n, 0xBAD) == PARAM
        with pytest.raises(TypeError):
            acl.rt.memset(d, n, "x", n)
        assert acl.rt.free(d) == 0 and acl.rt.free_host(h) == 0 and acl.rt.destroy_stream(s) == 0

    acl_thread(body)


@pytest.mark.npurt_sanitizer(expect=["shared-stream"])  # misuse on purpose: the sanitizer must see it
def test_stream_order_holds_across_threads():
    n = 1 << 16
    shared = {}

    def setup():
        assert acl.rt.set_device(0) == 0
        shared["ctx"], _ = acl.rt.get_context()
        shared["s"], _ = acl.rt.create_stream()
        shared["d"], _ = acl.rt.malloc(n, 0)
        shared["h"], _ = acl.rt.malloc_host(n)

    run_in_thread(setup)
    order = []
    lock = threading.Lock()

    def worker(value):
        assert acl.rt.set_context(shared["ctx"]) == 0
        for _ in range(20):
            with lock:  # enqueue order = the order recorded
                assert acl.rt.memset_async(shared["d"], n, value, n, shared["s"]) == 0
                order.append(value)

    threads = [threading.Thread(target=worker, args=(v,)) for v in (1, 2, 3, 4)]
    busy(shared["s"], 0.05)
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    def finish():
        assert acl.rt.set_context(shared["ctx"]) == 0
        assert acl.rt.memcpy_async(shared["h"], n, shared["d"], n, D2H, shared["s"]) == 0
        assert acl.rt.synchronize_stream(shared["s"]) == 0
        got = acl.util.ptr_to_bytes(shared["h"], n)
        assert got == bytes([order[-1]]) * n  # the last one enqueued ran last
        assert acl.rt.free(shared["d"]) == 0 and acl.rt.free_host(shared["h"]) == 0
        assert acl.rt.destroy_stream(shared["s"]) == 0
        assert acl.rt.reset_device(0) == 0

    assert len(order) == 80
    run_in_thread(finish)
