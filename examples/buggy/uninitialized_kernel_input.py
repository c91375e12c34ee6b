"""Buggy on purpose (initcheck: a kernel reads memory nothing wrote). ``npurt.empty``
hands out memory with unspecified contents, like ``aclrtMalloc``; adding to it before
anything was written into it gives whatever the block last held (on the card: garbage).

    NPURT_SANITIZER=all,initcheck python examples/buggy/uninitialized_kernel_input.py

reports one ``Uninitialized read of 4096 bytes by kernel add`` block naming the launch
line and where the array was allocated (initcheck is opt-in: not part of ``all``)."""

import npurt
import numpy as np


def main():
    s = npurt.Stream()
    acc = npurt.empty(1024, stream=s)  # contents unspecified
    ones = npurt.full(1024, 1.0, stream=s)
    total = npurt.add(acc, ones, stream=s)  # BUG: acc was never zeroed (npurt.zeros)
    print("first element:", np.asarray(total)[0])


if __name__ == "__main__":
    main()
