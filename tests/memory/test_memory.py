"""Device memory: allocation, freeing (explicit, ``with``, stream-ordered), statistics,
quotas, memory pools, pointer validation, device reset. Copies are in test_copy.py."""

import gc
import threading
import warnings

import npurt
import numpy as np
import pytest
from helpers import LONG
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MIB = 1 << 20


def block(n):
    """Bytes a malloc(n) takes from the caching pool: n rounded up to 512."""
    return -(-n // 512) * 512


@pytest.fixture
def quiet():
    """No stray frees from earlier tests while this one measures statistics."""
    gc.collect()
    npurt.synchronize(timeout=LONG)
    yield
    gc.collect()


def test_malloc_gives_a_buffer_with_its_attributes(quiet):
    base = npurt.memory_allocated()
    b = npurt.malloc(1000)
    assert isinstance(b, npurt.DeviceBuffer)
    assert (b.nbytes, b.device, b.freed, b.pool_id) == (1000, 0, False, None)
    assert b.ptr % 64 == 0 and b.ptr > 0
    assert b.page_kind in ("hugetlb", "thp", "normal")
    assert "nbytes=1000" in repr(b) and hex(b.ptr) in repr(b)
    assert npurt.memory_allocated() == base + block(1000)
    assert npurt.memory_allocated(0) == npurt.memory_allocated(npurt.Device(0))
    b.free()
    assert b.freed and "freed" in repr(b)
    assert npurt.memory_allocated() == base
    assert b.nbytes == 1000  # attributes stay readable


def test_context_manager_frees_on_exit_and_on_exception(quiet):
    base = npurt.memory_allocated()
    with npurt.malloc(4096) as b:
        assert npurt.memory_allocated() == base + block(4096)
    assert b.freed and npurt.memory_allocated() == base
    with pytest.raises(KeyError):
        with npurt.malloc(4096):
            raise KeyError("boom")
    assert npurt.memory_allocated() == base
    with npurt.malloc(100) as b:
        b.free()  # freeing inside the block is fine; the exit does nothing more
    assert npurt.memory_allocated() == base


def test_exception_in_nested_with_blocks_leaves_memory_allocated_unchanged(quiet):
    base = npurt.memory_allocated()
    host_base = npurt.host_memory_stats()["live_bytes"]

    def work():
        with npurt.malloc(3 * MIB) as a, npurt.malloc(1000) as b:
            with npurt.malloc_host(5000) as h:
                with npurt.malloc(MIB, device=1) as c:
                    npurt.memset(a, 1)
                    npurt.memcpy_async(h, b, npurt.current_stream(), nbytes=1000)
                    assert c.device == 1
                    raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        work()
    npurt.synchronize(timeout=LONG)
    assert npurt.memory_allocated() == base
    assert npurt.host_memory_stats()["live_bytes"] == host_base


def test_dropping_the_last_reference_frees(quiet):
    base = npurt.memory_allocated()
    b = npurt.malloc(2 * MIB)
    assert npurt.memory_allocated() > base
    del b
    assert npurt.memory_allocated() == base


def test_double_free_and_use_after_free_are_typed_errors():
    b = npurt.malloc(256)
    b.free()
    with pytest.raises(npurt.MemoryFreeError) as e:
        b.free()
    assert (e.value.code, e.value.name) == (207002, "ACL_ERROR_RT_MEMORY_FREE")
    assert isinstance(e.value, npurt.Error)
    with pytest.raises(npurt.InvalidHandleError) as e:
        npurt.memcpy(b, np.zeros(8, np.uint8))
    assert e.value.code == 107017
    with pytest.raises(npurt.InvalidHandleError):
        npurt.memset(b, 0)
    with pytest.raises(npurt.InvalidHandleError):
        b.copy_to_host()
    h = npurt.malloc_host(64)
    h.free()
    with pytest.raises(npurt.MemoryFreeError):
        h.free()
    with pytest.raises(npurt.InvalidHandleError):
        h.numpy()


@pytest.mark.parametrize(
    "nbytes, exc, code",
    [
        (0, npurt.InvalidValueError, 107000),
        (-1, npurt.InvalidValueError, 107000),
        (2**64, npurt.InvalidValueError, 107000),
        (2**62, npurt.OutOfMemoryError, 207001),
        ("1", npurt.InvalidTypeError, 107000),
        (1.5, npurt.InvalidTypeError, 107000),
        (True, npurt.InvalidTypeError, 107000),
    ],
)
def test_bad_sizes_are_typed_errors(nbytes, exc, code):
    with pytest.raises(exc) as e:
        npurt.malloc(nbytes)
    assert e.value.code == code


def test_absurd_request_is_out_of_memory_with_an_explanation():
    ooms = npurt.memory_stats()["num_ooms"]
    with pytest.raises(npurt.OutOfMemoryError) as e:
        npurt.malloc(2**62)
    assert isinstance(e.value, MemoryError) and isinstance(e.value, npurt.Error)
    msg = str(e.value)
    for word in ("requested", "limit", "allocated", "reserved", "largest free", "Hint"):
        assert word in msg, msg
    assert npurt.memory_stats()["num_ooms"] == ooms + 1
    with npurt.malloc(1000):  # the device stays usable
        pass
    with pytest.raises(npurt.InvalidValueError):
        npurt.malloc_host(2**62)
    with pytest.raises(npurt.InvalidValueError):
        npurt.malloc_host(0)


def test_policies():
    with npurt.malloc(4 * MIB, policy="normal_only") as b:
        assert b.page_kind == "normal"
        npurt.memset(b, 7)
        assert npurt.memory_stats()["page_bytes.normal"] >= 4 * MIB
    try:
        with npurt.malloc(4 * MIB, policy="huge_only") as b:
            assert b.page_kind in ("thp", "hugetlb")
    except npurt.OutOfMemoryError as e:  # no huge pages on this machine
        assert e.code == 207001
    with npurt.malloc(100, policy="huge_first"), npurt.malloc(100, policy=0), npurt.malloc(100, policy="NORMAL_ONLY"):
        pass
    with pytest.raises(npurt.InvalidValueError):
        npurt.malloc(100, policy="huge")
    with pytest.raises(npurt.InvalidValueError):
        npurt.malloc(100, policy=7)
    with pytest.raises(npurt.InvalidDeviceError):
        npurt.malloc(100, device=99)


def test_malloc_on_another_device(quiet):
    before = (npurt.memory_allocated(0), npurt.memory_allocated(1))
    with npurt.malloc(MIB, device=1) as b:
        assert b.device == 1
        assert npurt.memory_allocated(1) == before[1] + block(MIB)
        assert npurt.memory_allocated(0) == before[0]
    with npurt.Device(1):
        with npurt.malloc(10) as b:
            assert b.device == 1


def test_statistics_and_peaks(quiet):
    npurt.reset_peak_memory_stats()
    base = npurt.memory_allocated()
    assert npurt.max_memory_allocated() == base
    bufs = [npurt.malloc(MIB) for _ in range(3)]
    peak = npurt.memory_allocated()
    del bufs
    assert npurt.memory_allocated() == base
    assert npurt.max_memory_allocated() == peak
    assert npurt.max_memory_reserved() >= npurt.memory_reserved() >= npurt.memory_allocated()
    npurt.reset_peak_memory_stats()
    assert npurt.max_memory_allocated() == base
    s = npurt.memory_stats()
    assert s["allocated_bytes.all.current"] == npurt.memory_allocated()
    assert s["reserved_bytes.all.current"] == npurt.memory_reserved()
    for k in (
        "allocated_bytes.all.peak",
        "allocated_bytes.small_pool.current",
        "allocated_bytes.large_pool.freed",
        "reserved_bytes.all.peak",
        "active_bytes.all.current",
        "segment.all.current",
        "num_alloc_retries",
        "num_ooms",
        "num_device_alloc",
        "page_bytes.hugetlb",
        "page_bytes.thp",
        "page_bytes.normal",
        "capacity",
        "largest_free_block",
    ):
        assert k in s, k
    assert sum(s[f"page_bytes.{k}"] for k in ("hugetlb", "thp", "normal")) == s["reserved_bytes.all.current"]
    assert s["capacity"] == npurt.Device(0).total_memory
    summary = npurt.memory_summary()
    assert isinstance(summary, str) and "Allocated memory" in summary and "Reserved thp" in summary


def test_mem_get_info_and_empty_cache(quiet):
    free, total = npurt.mem_get_info()
    assert total == npurt.Device(0).total_memory
    assert free == total - npurt.memory_reserved()
    b = npurt.malloc(30 * MIB)
    assert npurt.mem_get_info()[0] <= free - 30 * MIB or npurt.memory_reserved() >= 30 * MIB
    b.free()
    assert npurt.memory_reserved() >= 30 * MIB  # cached
    released = npurt.empty_cache()
    assert released >= 30 * MIB
    assert npurt.mem_get_info()[0] == total - npurt.memory_reserved()
    assert npurt.empty_cache(0) == 0
    assert isinstance(npurt.empty_cache(device=1), int)


def test_stats_of_an_inactive_device_do_not_start_it(fresh_dev1):
    assert npurt.memory_allocated(1) == 0
    assert npurt.memory_reserved(1) == 0
    assert npurt.mem_get_info(1) == (fresh_dev1.total_memory, fresh_dev1.total_memory)
    assert npurt.memory_stats(1)["allocated_bytes.all.current"] == 0
    assert not fresh_dev1.is_active


def test_quota_raises_out_of_memory_and_the_device_stays_usable(quiet):
    npurt.empty_cache()
    total = npurt.mem_get_info()[1]
    try:
        npurt.set_per_process_memory_fraction(64 * MIB / total)
        assert npurt.get_per_process_memory_fraction() == pytest.approx(64 * MIB / total)
        assert npurt.memory_stats()["limit"] == int(64 * MIB / total * total)
        a = npurt.malloc(40 * MIB)
        with pytest.raises(npurt.OutOfMemoryError) as e:
            npurt.malloc(40 * MIB)
        assert e.value.code == 207001
        assert "quota" in str(e.value) and "requested" in str(e.value)
        a.free()
        with npurt.malloc(40 * MIB):  # usable again once memory was freed
            pass
    finally:
        npurt.set_per_process_memory_fraction(1.0)
    for bad in (0, 0.0, -0.5, 1.01, float("nan"), float("inf"), 10**400):  # 10**400: no float
        with pytest.raises(npurt.InvalidValueError):
            npurt.set_per_process_memory_fraction(bad)
    for bad in ("0.5", None, True):
        with pytest.raises(npurt.InvalidTypeError):
            npurt.set_per_process_memory_fraction(bad)


def test_mem_pool_routes_allocations_and_releases_everything(quiet):
    npurt.empty_cache(1)
    reserved = npurt.memory_reserved(1)
    pool = npurt.MemPool(8 * MIB, device=1)
    assert (pool.device, pool.size, pool.destroyed) == (1, 8 * MIB, False)
    assert npurt.memory_reserved(1) == reserved + 8 * MIB
    assert npurt.mem_get_info(1)[0] == npurt.mem_get_info(1)[1] - npurt.memory_reserved(1)
    with pool:
        a = npurt.malloc(MIB, device=1)
        b = npurt.malloc(MIB)  # device 0: not routed
        with pytest.raises(npurt.OutOfMemoryError) as e:
            npurt.malloc(8 * MIB, device=1)
        assert "pool" in str(e.value)
    assert a.pool_id == pool.id and b.pool_id is None
    assert pool.memory_allocated() == block(MIB)
    assert pool.memory_stats()["allocation.all.current"] == 1
    assert npurt.memory_allocated(1) >= block(MIB)
    c = pool.malloc(1000)
    assert c.pool_id == pool.id
    with npurt.malloc(10, device=1) as d:  # outside the `with`: the device's own pool
        assert d.pool_id is None
    with pytest.warns(ResourceWarning, match="2 live allocation"):
        pool.destroy()
    assert pool.destroyed
    with pytest.raises(npurt.InvalidHandleError):
        pool.destroy()
    with pytest.raises(npurt.InvalidHandleError):
        pool.malloc(10)
    with pytest.raises(npurt.InvalidHandleError):
        with pool:
            pass
    npurt.memset(a, 1)  # buffers stay valid
    a.free()
    c.free()
    b.free()
    npurt.empty_cache(1)
    assert npurt.memory_reserved(1) == reserved


def test_mem_pool_reuse_across_with_blocks_and_bad_sizes(quiet):
    pool = npurt.MemPool(4 * MIB)
    for _ in range(3):
        with pool:
            with npurt.malloc(3 * MIB) as b:
                assert b.pool_id == pool.id
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pool.destroy()  # nothing live: no warning
    with pytest.raises(npurt.InvalidValueError):
        npurt.MemPool(100)
    with pytest.raises(npurt.OutOfMemoryError):
        npurt.MemPool(npurt.Device(0).total_memory + MIB)
    with pytest.raises(npurt.InvalidValueError):
        npurt.MemPool(-1)


def test_pool_quota_counts_against_the_device(quiet):
    npurt.empty_cache()
    total = npurt.mem_get_info()[1]
    try:
        npurt.set_per_process_memory_fraction(48 * MIB / total)
        pool = npurt.MemPool(32 * MIB)
        with pytest.raises(npurt.OutOfMemoryError):
            npurt.malloc(20 * MIB)  # 32 MiB of the 48 MiB quota are the pool's
        pool.destroy()
        del pool
        with npurt.malloc(20 * MIB):
            pass
    finally:
        npurt.set_per_process_memory_fraction(1.0)


def test_raw_pointers_are_validated():
    with npurt.malloc(1000) as b:
        r = npurt._npurt._resolve(0, b.ptr + 10, 990)
        assert (r["base"], r["offset"], r["size"], r["pool"]) == (b.ptr, 10, 1000, None)
        ptr = b.ptr
        for args in ((0, ptr + 10, 991), (0, ptr, 0), (0, 16, 1), (0, 2**62, 8)):
            with pytest.raises(npurt.InvalidValueError) as e:
                npurt._npurt._resolve(*args)
            assert e.value.code == 107000
    with pytest.raises(npurt.InvalidValueError):
        npurt._npurt._resolve(0, ptr, 1)  # freed


def test_buffers_of_a_reset_device_raise_invalid_handle(fresh_dev1):
    with pytest.warns(ResourceWarning, match=r"1 allocation\(s\)"):
        with npurt.Device(1):
            b = npurt.malloc(4096)
            npurt.memset(b, 3)
    assert not fresh_dev1.is_active
    with pytest.raises(npurt.InvalidHandleError) as e:
        npurt.memcpy(np.zeros(16, np.uint8), b, 16)
    assert e.value.code == 107017
    with pytest.raises(npurt.InvalidHandleError):
        npurt.memcpy_async(b, np.zeros(16, np.uint8), None)
    b.free()  # freeing a leaked buffer after the reset is allowed
    with npurt.Device(1):  # the device starts again with fresh memory
        assert npurt.memory_allocated() == 0


def test_concurrent_alloc_free_from_threads(quiet):
    base = npurt.memory_allocated()
    errors = []

    def worker(seed):
        try:
            rng = np.random.default_rng(seed)
            live = []
            for _ in range(300):
                if live and rng.random() < 0.5:
                    live.pop(int(rng.integers(len(live)))).free()
                else:
                    live.append(npurt.malloc(int(rng.integers(1, 3 * MIB))))
            for b in live:
                b.free()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(LONG)
    assert not errors
    assert npurt.memory_allocated() == base


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("alloc"), st.integers(1, 4 * MIB), st.sampled_from([None, "normal_only", "pool"])),
            st.tuples(st.just("free"), st.integers(0, 1000), st.none()),
            st.tuples(st.just("empty_cache"), st.none(), st.none()),
        ),
        max_size=40,
    )
)
def test_random_alloc_free_sequences_keep_the_books(quiet, ops):
    base = npurt.memory_allocated()
    pool = npurt.MemPool(8 * MIB)
    live = {}  # id -> (buffer, bytes it accounts for)
    for op, arg, kind in ops:
        if op == "alloc":
            try:
                if kind == "pool":
                    b = pool.malloc(arg)
                    cost = block(arg)
                elif kind == "normal_only":
                    b = npurt.malloc(arg, policy=kind)
                    cost = -(-arg // 4096) * 4096
                else:
                    b = npurt.malloc(arg)
                    cost = block(arg)
            except npurt.OutOfMemoryError:
                assert kind == "pool"
                continue
            live[id(b)] = (b, cost)
        elif op == "free" and live:
            key = sorted(live)[arg % len(live)]
            live.pop(key)[0].free()
        elif op == "empty_cache":
            npurt.empty_cache()
        assert npurt.memory_allocated() == base + sum(c for _, c in live.values())
        assert npurt.memory_reserved() >= npurt.memory_allocated()
        stats = npurt.memory_stats()
        assert stats["allocation.all.current"] >= len(live)
    for b, _ in live.values():
        b.free()
    pool.destroy()
    assert npurt.memory_allocated() == base
