"""Buggy on purpose (racecheck: a host read before the copy is known complete). The D2H
result in pinned memory is read before the stream is synchronized: on the card it may
still hold old bytes.

    NPURT_SANITIZER=all python examples/buggy/async_copy_read_early.py

reports one ``Host access to an async copy's destination before the copy is known
complete`` block naming the D2H copy's launch line and the read's line."""

import npurt
import numpy as np


def main():
    s = npurt.Stream()
    x = npurt.to_device(np.arange(1024, dtype=np.float32), stream=s)
    y = npurt.multiply(x, 2.0, stream=s)
    host = npurt.malloc_host(y.nbytes)
    y.to_host(out=host, stream=s)  # D2H into pinned memory: returns at once
    total = host.numpy(np.float32).sum()  # BUG: read before s.synchronize()
    s.synchronize()
    print("sum read early:", total, "after sync:", host.numpy(np.float32).sum())
    host.free()


if __name__ == "__main__":
    main()
