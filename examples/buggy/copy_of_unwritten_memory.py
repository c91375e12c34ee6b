"""Buggy on purpose (initcheck: a D2H copy of device memory nothing wrote). The result
buffer is copied back before the code meant to fill it ran (it sits in a branch not
taken): the host gets whatever the block last held.

    NPURT_SANITIZER=all,initcheck python examples/buggy/copy_of_unwritten_memory.py

reports one ``Uninitialized read of 1024 bytes by acl.rt.memcpy`` block naming the copy's line
and the ``acl.rt.malloc`` (initcheck is opt-in: not part of ``all``)."""

import npurt.acl as acl
import numpy as np


def main(fill=False):
    assert acl.rt.set_device(0) == 0
    n = 1024
    dev, ret = acl.rt.malloc(n, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    if fill:
        assert acl.rt.memset(dev, n, 0, n) == 0
    out = np.empty(n, np.uint8)
    # BUG: nothing wrote dev (fill=False)
    assert acl.rt.memcpy(out.ctypes.data, n, dev, n, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    print("copied", out.nbytes, "bytes")
    assert acl.rt.free(dev) == 0
    assert acl.rt.reset_device(0) == 0


if __name__ == "__main__":
    main()
