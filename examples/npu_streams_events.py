"""torch_npu-style streams, events and memory statistics on npurt.

Written as ``torch.npu`` code is written: a side stream with high priority does the
upload and a matmul chain while the default stream does other work; events order the
streams and time the work; the memory API reports what the caching allocator holds.
With torch_npu the same calls are ``torch.npu.*`` (and tensors instead of npurt arrays).
"""

import sys

import npurt
import numpy as np
from npurt import npu


def main():
    npu.set_device("npu:0")
    rng = np.random.default_rng(0)
    a = rng.random((128, 128), dtype=np.float32)
    b = rng.random((128, 128), dtype=np.float32)

    side = npu.Stream(priority=-1)  # torch: lower number = higher priority
    start = npu.Event(enable_timing=True)
    uploaded = npu.Event()
    end = npu.Event(enable_timing=True)
    npu.reset_peak_memory_stats()
    base = npu.memory_allocated()
    try:
        with npu.stream(side):
            start.record()
            x, w = npurt.to_device(a), npurt.to_device(b)
            uploaded.record()
            y = x
            for _ in range(4):
                y = npurt.tanh(y @ w)
            end.record()
        # Meanwhile the default stream works too, and waits for the upload only.
        npu.current_stream().wait_event(uploaded)
        z = npurt.add(x, 1.0)
        end.synchronize()
        ms = start.elapsed_time(end)

        expected = a
        for _ in range(4):
            expected = np.tanh(expected @ b)
        ok = np.allclose(np.asarray(y), expected, rtol=1e-4, atol=1e-5)
        ok &= np.allclose(np.asarray(z), a + 1.0)
        peak = npu.max_memory_allocated() - base
        print(f"side stream: upload + 4 matmul/tanh in {ms:.3f} ms (event timing, ms)")
        print(f"allocated now {npu.memory_allocated() - base} B, peak {peak} B, reserved {npu.memory_reserved()} B")
        del x, w, y, z
        npu.synchronize()
        npu.empty_cache()
        print("npu_streams_events: OK" if ok else "npu_streams_events: MISMATCH")
        return 0 if ok else 1
    finally:
        side.synchronize()
        side.destroy()


if __name__ == "__main__":
    sys.exit(main())
