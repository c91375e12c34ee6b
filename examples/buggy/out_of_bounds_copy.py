"""Buggy on purpose (memcheck: an out-of-bounds copy). 4096 floats are copied into a
buffer of 1024: npurt refuses it (ACL's destMax check), the card would overrun.

    NPURT_SANITIZER=all python examples/buggy/out_of_bounds_copy.py

reports one ``Invalid memcpy of 16384 bytes ... out of bounds of its 4096 bytes`` block."""

import npurt
import numpy as np


def main():
    dev = npurt.malloc(1024 * 4)
    data = np.zeros(4096, np.float32)
    try:
        npurt.memcpy(dev, data)  # BUG: 16 KiB into 4 KiB
    except npurt.InvalidValueError as e:
        print("refused:", e.name)
    dev.free()


if __name__ == "__main__":
    main()
