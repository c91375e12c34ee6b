"""Buggy on purpose (memcheck: use after free and double free). A pointer kept after
``acl.rt.free`` is copied into, then freed again.

    NPURT_SANITIZER=all python examples/buggy/stale_pointer.py

reports an ``Invalid acl.rt copy ... use after free`` block (where it was freed and
allocated) and an ``Invalid acl.rt.free ... double free`` block."""

import npurt.acl as acl
import numpy as np


def main():
    acl.init()
    acl.rt.set_device(0)
    data = np.ones(256, np.float32)
    ptr, _ = acl.rt.malloc(data.nbytes, 0)
    acl.rt.free(ptr)
    # BUG: ptr is stale; npurt refuses the copy (ret != 0), the card would corrupt memory.
    ret = acl.rt.memcpy(ptr, data.nbytes, data.ctypes.data, data.nbytes, 1)
    print("memcpy into a freed pointer: ret", ret)
    ret = acl.rt.free(ptr)  # BUG: double free
    print("second free: ret", ret)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
