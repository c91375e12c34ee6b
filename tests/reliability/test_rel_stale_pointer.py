"""Defect 1: a freed acl.rt.malloc pointer passed with ACL_MEMCPY_DEFAULT or HOST_TO_HOST
was taken for pageable host memory and written through: SIGSEGV once empty_cache()
unmapped its segment, silent corruption of the pool before. Freed device ranges must stay
known: the copy returns an ACL error code (the child must exit cleanly)."""

import pytest
from relhelp import assert_clean, run_script

SCRIPT = """
import sys
import numpy as np
import npurt, npurt.acl as acl
kind, unmap, asynchronous = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1"
a = np.ones(1 << 20, np.float32)  # before: a host mapping made later may reuse the range
b = np.zeros_like(a)
assert acl.rt.set_device(0) == 0
s, ret = acl.rt.create_stream()
p, ret = acl.rt.malloc(8 << 20, acl.ACL_MEM_MALLOC_HUGE_FIRST)
assert ret == 0
assert acl.rt.free(p) == 0
if unmap:
    npurt.empty_cache()
for dst, src in ((p, a.ctypes.data), (a.ctypes.data, p), (p + 4096, a.ctypes.data)):
    if asynchronous:
        ret = acl.rt.memcpy_async(dst, a.nbytes // 2, src, a.nbytes // 2, kind, s)
        assert acl.rt.synchronize_stream(s) == 0
    else:
        ret = acl.rt.memcpy(dst, a.nbytes // 2, src, a.nbytes // 2, kind)
    print("ret", ret)
    assert ret == acl.ACL_ERROR_RT_PARAM_INVALID, ret
# a pointer nobody ever mapped is refused too
ret = acl.rt.memcpy(8 << 40, 64, a.ctypes.data, 64, kind)
assert ret == acl.ACL_ERROR_RT_PARAM_INVALID, ret
# a live host buffer next to it still works
assert acl.rt.memcpy(b.ctypes.data, a.nbytes, a.ctypes.data, a.nbytes, kind) == 0
assert (b == 1).all()
acl.rt.destroy_stream(s)
acl.rt.reset_device(0)
print("ok")
"""


@pytest.mark.parametrize("asynchronous", [False, True], ids=["memcpy", "memcpy_async"])
@pytest.mark.parametrize("unmap", [True, False], ids=["unmapped", "cached"])
@pytest.mark.parametrize("kind", [0, 4], ids=["HOST_TO_HOST", "DEFAULT"])
def test_stale_device_pointer_is_an_error_code(kind, unmap, asynchronous):
    p = run_script(SCRIPT, args=(str(kind), "1" if unmap else "0", "1" if asynchronous else "0"), timeout=60)
    assert_clean(p, "ok")


def test_freed_ranges_bookkeeping():
    from npurt.acl import _state as S

    f = S.FreedRanges()
    f.add(100, 50)
    f.add(200, 50)
    assert f.overlaps(120, 1) and f.overlaps(90, 20) and not f.overlaps(150, 50) and f.overlaps(150, 51)
    f.add(150, 50)  # bridges both
    assert f.overlaps(170, 1) and f._starts == [100] and f._ends == [250]
    f.discard(120, 10)  # a new allocation inside
    assert not f.overlaps(120, 10) and f.overlaps(119, 1) and f.overlaps(130, 1)
    f.discard(0, 1000)
    assert not f.overlaps(0, 1000)


def test_host_accessible_reads_the_maps():
    import ctypes
    import mmap

    from npurt.acl import _state as S

    rw = mmap.mmap(-1, 3 * mmap.PAGESIZE)
    ro = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ)
    a = ctypes.addressof(ctypes.c_char.from_buffer(rw))
    b = ctypes.addressof(ctypes.c_char.from_buffer_copy(b"x"))  # heap memory
    assert S.host_accessible(a, 3 * mmap.PAGESIZE, True)
    assert S.host_mapped(a, 3 * mmap.PAGESIZE)
    assert S.host_accessible(b, 1, True)
    import numpy as np

    r = np.frombuffer(ro, np.uint8)
    assert S.host_accessible(r.ctypes.data, 16, False)
    assert not S.host_accessible(r.ctypes.data, 16, True)
    assert not S.host_mapped(8 << 40, 64) and not S.host_accessible(8 << 40, 64, False)
