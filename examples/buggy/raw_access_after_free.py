"""Buggy on purpose (memcheck: a raw access to freed memory). A pointer kept after
``acl.rt.free_host`` is read through ctypes. The freed block sits in the sanitizer's
quarantine with its pages ``PROT_NONE``, so the read traps into a report (where the block
was allocated and freed) instead of reading memory that was handed out again.

    NPURT_SANITIZER=all python examples/buggy/raw_access_after_free.py

prints ``Invalid access at 0x...: the page belongs to a freed (quarantined) block`` and the
block's stacks, and exits with NPURT_SANITIZER_EXITCODE (1 if unset)."""

import ctypes

import npurt.acl as acl

N = 1 << 16


def main():
    acl.init()
    acl.rt.set_device(0)
    p, _ = acl.rt.malloc_host(N)
    ctypes.memset(p, 1, N)
    acl.rt.free_host(p)
    q, _ = acl.rt.malloc_host(64)  # the program goes on
    print("stale byte:", ctypes.c_ubyte.from_address(p + 100).value)  # BUG: p was freed
    acl.rt.free_host(q)


if __name__ == "__main__":
    main()
