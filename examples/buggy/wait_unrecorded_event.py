"""Buggy on purpose (synccheck: a wait on an event never recorded). The record was
forgotten, so the wait orders nothing (on the card too).

    NPURT_SANITIZER=all python examples/buggy/wait_unrecorded_event.py

reports one ``Wait on an event that was never recorded`` block with the wait's line."""

import npurt


def main():
    s1, s2 = npurt.Stream(), npurt.Stream()
    done = npurt.Event()
    npurt.kernels.busy(0.001, stream=s1)
    # BUG: missing done.record(s1)
    s2.wait_event(done)
    npurt.kernels.busy(0.001, stream=s2)
    s1.synchronize()
    s2.synchronize()


if __name__ == "__main__":
    main()
