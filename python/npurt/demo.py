"""``python -m npurt.demo``: a short tour of npurt (devices, streams, events, callbacks)."""

from __future__ import annotations

import time

import npurt


def main() -> None:
    print(f"npurt {npurt.__version__}: {npurt.device_count()} virtual device(s)")
    with npurt.Device(0) as dev:
        print(f"  {dev.name}: {dev.aicore_num} AI cores, {dev.total_memory / 2**30:.1f} GiB")
        print(f"  kernels run on {npurt.isa_info()['summary']}")
        compute, side = npurt.Stream(priority=0), npurt.Stream(priority=3)
        start, end = npurt.Event(timing=True), npurt.Event(timing=True)
        start.record(compute)
        npurt.kernels.busy(0.005, stream=compute, blocks=dev.aicore_num * 2)
        end.record(compute)
        side.wait_event(end)
        side.launch_host_func(print, "  host callback: ran after the compute stream's kernel")
        side.synchronize(timeout=10.0)
        print(f"  busy kernel, {dev.aicore_num * 2} blocks x 5 ms: {start.elapsed_time(end):.2f} ms on the device")
        t = time.perf_counter()
        n = 100_000
        for _ in range(n):
            npurt.kernels.empty(stream=compute)
        compute.synchronize()
        print(f"  {n / (time.perf_counter() - t):,.0f} empty kernels/s from Python on one stream")
        try:
            npurt.Stream(priority=9)
        except npurt.Error as e:
            print(f"  errors carry ACL codes: {type(e).__name__} {e.code} {e.name}")
        compute.destroy()
        side.destroy()


if __name__ == "__main__":
    main()
