"""Two-stream copy/compute overlap, written the way pyacl code is written.

A copy stream uploads chunk i+1 (H2D from pinned memory) while a compute stream works on
chunk i; events order the two streams on the device, and timing events measure the
pipeline. On the card, "compute" would be ``acl.mdl.execute_async``; here it is a
device-to-device transform (reverse the chunk's bytes through a second buffer) so the
result can be checked. Runs on npurt by changing one import:

    import acl                      # on the card
    import npurt.acl as acl         # here
"""

import sys

import npurt.acl as acl
import numpy as np

DEVICE_ID = 0
CHUNK = 1 << 20  # bytes per chunk
CHUNKS = 8
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3


def check_ret(message, ret):
    if ret != 0:
        raise RuntimeError(f"{message} failed ret={ret}")


def main():
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, CHUNK * CHUNKS, dtype=np.uint8)
    result = np.zeros_like(data)
    context = copy_stream = compute_stream = None
    dev_in, dev_out, host_in, host_out, events = [], [], None, None, []
    check_ret("acl.init", acl.init())
    try:
        check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
        context, ret = acl.rt.create_context(DEVICE_ID)
        check_ret("acl.rt.create_context", ret)
        copy_stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        compute_stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)

        # Pinned host staging and two device buffers per pipeline slot.
        host_in, ret = acl.rt.malloc_host(CHUNK * CHUNKS)
        check_ret("acl.rt.malloc_host", ret)
        host_out, ret = acl.rt.malloc_host(CHUNK * CHUNKS)
        check_ret("acl.rt.malloc_host", ret)
        check_ret("memcpy to pinned", acl.rt.memcpy(host_in, data.nbytes, data.ctypes.data, data.nbytes, 0))
        for _ in range(2):
            for bufs in (dev_in, dev_out):
                ptr, ret = acl.rt.malloc(CHUNK, ACL_MEM_MALLOC_HUGE_FIRST)
                check_ret("acl.rt.malloc", ret)
                bufs.append(ptr)

        start, ret = acl.rt.create_event()
        check_ret("acl.rt.create_event", ret)
        end, _ = acl.rt.create_event()
        uploaded = [acl.rt.create_event()[0] for _ in range(CHUNKS)]
        computed = [acl.rt.create_event()[0] for _ in range(CHUNKS)]
        events = [start, end] + uploaded + computed

        check_ret("record start", acl.rt.record_event(start, copy_stream))
        for i in range(CHUNKS):
            slot = i % 2
            if i >= 2:  # the slot is free once chunk i-2 was computed
                check_ret("wait", acl.rt.stream_wait_event(copy_stream, computed[i - 2]))
            src = host_in + i * CHUNK
            check_ret(
                "H2D", acl.rt.memcpy_async(dev_in[slot], CHUNK, src, CHUNK, ACL_MEMCPY_HOST_TO_DEVICE, copy_stream)
            )
            check_ret("record", acl.rt.record_event(uploaded[i], copy_stream))
            check_ret("wait", acl.rt.stream_wait_event(compute_stream, uploaded[i]))
            # "compute": reverse the chunk in 4 KiB blocks, device to device.
            block = 4096
            for b in range(CHUNK // block):
                ret = acl.rt.memcpy_async(
                    dev_out[slot] + (CHUNK - (b + 1) * block),
                    block,
                    dev_in[slot] + b * block,
                    block,
                    ACL_MEMCPY_DEVICE_TO_DEVICE,
                    compute_stream,
                )
                check_ret("D2D", ret)
            dst = host_out + i * CHUNK
            check_ret(
                "D2H", acl.rt.memcpy_async(dst, CHUNK, dev_out[slot], CHUNK, ACL_MEMCPY_DEVICE_TO_HOST, compute_stream)
            )
            check_ret("record", acl.rt.record_event(computed[i], compute_stream))
        check_ret("wait", acl.rt.stream_wait_event(copy_stream, computed[-1]))
        check_ret("record end", acl.rt.record_event(end, copy_stream))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(copy_stream))
        elapsed_ms, ret = acl.rt.event_elapsed_time(start, end)
        check_ret("acl.rt.event_elapsed_time", ret)

        check_ret("memcpy from pinned", acl.rt.memcpy(result.ctypes.data, result.nbytes, host_out, result.nbytes, 0))
        expected = data.reshape(CHUNKS, CHUNK // 4096, 4096)[:, ::-1, :].reshape(-1)
        ok = np.array_equal(result, expected)
        mib = data.nbytes / (1 << 20)
        print(f"pipelined {CHUNKS} chunks ({mib:.0f} MiB) over 2 streams in {elapsed_ms:.2f} ms")
        print("acl_memcpy_overlap: OK" if ok else "acl_memcpy_overlap: MISMATCH")
        return 0 if ok else 1
    finally:
        for e in events:
            acl.rt.destroy_event(e)
        for ptr in dev_in + dev_out:
            acl.rt.free(ptr)
        for ptr in (host_in, host_out):
            if ptr:
                acl.rt.free_host(ptr)
        for s in (copy_stream, compute_stream):
            if s:
                acl.rt.destroy_stream(s)
        if context:
            acl.rt.destroy_context(context)
        acl.rt.reset_device(DEVICE_ID)
        acl.finalize()


if __name__ == "__main__":
    sys.exit(main())
