"""Buggy on purpose (memcheck with padding: a raw write past the end of an allocation).
A header is written with ctypes one field too far: 16 bytes land behind the block, in
whatever the pool put there (on the card: another tensor). memcheck's ``padding`` puts a
redzone behind each ``acl.rt.malloc`` block: the overwritten redzone bytes are found when
the block is freed.

    NPURT_SANITIZER=all,padding python examples/buggy/write_past_the_end.py

reports one ``Invalid write past the end of the 1056-byte allocation ... 16 bytes of its
redzone (bytes 1056..1072 of the allocation) were overwritten, found when it was freed``
block (``padding`` is opt-in: not part of ``all``)."""

import ctypes

import npurt.acl as acl


def main():
    assert acl.rt.set_device(0) == 0
    p, ret = acl.rt.malloc(1000, acl.ACL_MEM_MALLOC_HUGE_FIRST)  # ACL's rule: 1056 bytes usable
    assert ret == 0
    ctypes.memset(p, 0, 1056)
    ctypes.memset(p + 1056, 0x7F, 16)  # BUG: the trailer goes past the end
    assert acl.rt.free(p) == 0
    assert acl.rt.reset_device(0) == 0
    print("done")


if __name__ == "__main__":
    main()
