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
assert acl.rt.set_device(0) == 0
s, ret = acl.rt.create_stream()
p, ret = acl.rt.malloc(8 << 20, acl.ACL_MEM_MALLOC_HUGE_FIRST)
assert ret == 0
assert acl.rt.free(p) == 0
if unmap:
    npurt.empty_cache()
a = np.ones(1 << 20, np.float32)
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
b = np.zeros_like(a)
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
