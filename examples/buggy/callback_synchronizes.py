"""Buggy on purpose (synccheck: a host callback blocking on the runtime). The callback
synchronizes the stream that runs it: it would wait for itself (npurt refuses the call,
so the callback fails; on the card it hangs).

    NPURT_SANITIZER=all python examples/buggy/callback_synchronizes.py

reports one ``Host callback ... blocks on the runtime`` block with the call's line."""

import npurt


def main():
    s = npurt.Stream()

    def on_done():
        try:
            s.synchronize()  # BUG: blocking call from a callback
        except npurt.Error as e:
            print("refused:", e.name)

    s.launch_host_func(on_done)
    s.synchronize()


if __name__ == "__main__":
    main()
