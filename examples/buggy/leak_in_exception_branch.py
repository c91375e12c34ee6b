"""Buggy on purpose (memcheck: a leak). pyACL-style code frees its buffer only on the
success path: the exception branch skips ``acl.rt.free``, so the device memory leaks.

    NPURT_SANITIZER=all python examples/buggy/leak_in_exception_branch.py

reports one ``Leaked 4128 bytes`` block with the allocation's Python stack and
``LEAK SUMMARY: 4128 bytes leaked in 1 allocations``."""

import npurt.acl as acl


def process(n):
    ptr, ret = acl.rt.malloc(n, 0)  # aclrtMalloc pads 4096 to 4128 bytes
    if n > 1024:
        raise ValueError("chunk too large")  # BUG: returns without acl.rt.free(ptr)
    acl.rt.free(ptr)


def main():
    acl.init()
    acl.rt.set_device(0)
    try:
        process(4096)
    except ValueError as e:
        print("skipped:", e)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
