"""Buggy on purpose (racecheck: a pinned source rewritten before its async copy ran). The
host overwrites the staging buffer of an H2D copy that is still queued: the device may
see the new bytes (pytorch/pytorch#127612).

    NPURT_SANITIZER=all python examples/buggy/pinned_source_rewritten.py

reports one ``Host write to a pinned source whose async copy has not run`` block."""

import npurt
import numpy as np


def main():
    s = npurt.Stream()
    pinned = npurt.malloc_host(4096)
    dev = npurt.malloc(4096)
    pinned.numpy(np.float32)[:] = 1.0
    npurt.kernels.busy(0.01, stream=s)  # the copy below waits behind this
    npurt.memcpy_async(dev, pinned, s)  # H2D reads pinned later
    pinned.numpy(np.float32)[:] = 2.0  # BUG: rewritten before the copy ran
    s.synchronize()
    out = np.empty(1024, np.float32)
    npurt.memcpy(out, dev)
    print("device got", out[0])
    dev.free()
    pinned.free()


if __name__ == "__main__":
    main()
