"""Buggy on purpose (memcheck with padding: a raw read past the end of an allocation).
``acl.util.ptr_to_bytes`` copies whatever lies at a pointer; asked for more than the
allocation holds, it silently returns the neighbouring block's bytes (on the card too).
memcheck's ``padding`` puts a redzone behind each ``acl.rt.malloc`` block, so the read
reaches into it instead of a neighbour and is reported.

    NPURT_SANITIZER=all,padding python examples/buggy/read_past_the_end.py

reports one ``Invalid acl.util.ptr_to_bytes of 2048 bytes ... 992 bytes past the end of
the 1056-byte allocation`` block (``padding`` is opt-in: not part of ``all``)."""

import npurt.acl as acl


def main():
    assert acl.rt.set_device(0) == 0
    p, ret = acl.rt.malloc(1000, acl.ACL_MEM_MALLOC_HUGE_FIRST)  # ACL's rule: 1056 bytes usable
    assert ret == 0
    assert acl.rt.memset(p, 1056, 1, 1056) == 0
    try:
        data = acl.util.ptr_to_bytes(p, 2048)  # BUG: 992 bytes past the end
        print("read", len(data), "bytes")
    except ValueError as e:
        print("refused:", e)
    assert acl.rt.free(p) == 0
    assert acl.rt.reset_device(0) == 0


if __name__ == "__main__":
    main()
