"""Buggy on purpose (racecheck: two streams, no event). Stream 1 uploads into a device
buffer, stream 2 copies it out without waiting for stream 1: nothing orders the two.

    NPURT_SANITIZER=all python examples/buggy/missing_event_between_streams.py

reports one ``Race reported between Write access by stream ... and Read access by
stream ...`` block with both launch lines and the buffer's allocation stack."""

import npurt
import numpy as np


def main():
    s1, s2 = npurt.Stream(), npurt.Stream()
    src = npurt.malloc_host(1 << 16)
    src.numpy(np.uint8)[:] = 7
    dev = npurt.malloc(1 << 16)
    out = npurt.malloc_host(1 << 16)
    npurt.memcpy_async(dev, src, s1)  # H2D on stream 1 writes dev
    # BUG: missing `ev = npurt.Event(); ev.record(s1); s2.wait_event(ev)`
    npurt.memcpy_async(out, dev, s2)  # D2H on stream 2 reads dev
    s1.synchronize()
    s2.synchronize()
    print("first byte", out.numpy(np.uint8)[0])
    for b in (src, dev, out):
        b.free()


if __name__ == "__main__":
    main()
