"""Asynchronous processing with user-thread callbacks, in the shape of pyacl's async
samples (resnet50_async_imagenet_classification): a callback thread loops on
``acl.rt.process_report``, is subscribed to the stream, and every batch queued on the
stream is followed by ``acl.rt.launch_callback`` that post-processes it on that thread.
Change ``import npurt.acl as acl`` to ``import acl`` to run it on the card.
"""

import sys

import npurt.acl as acl
import numpy as np

DEVICE_ID = 0
BATCH = 4096  # float32 values per batch
BATCHES = 6
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_CALLBACK_BLOCK = 1


def check_ret(message, ret):
    if ret != 0:
        raise RuntimeError(f"{message} failed ret={ret}")


class Net:
    def __init__(self):
        self.context = self.stream = None
        self.callback_run_flag = True
        self.tid = None
        self.results = {}
        self.buffers = []

    def init_resource(self):
        check_ret("acl.init", acl.init())
        check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
        self.context, ret = acl.rt.create_context(DEVICE_ID)
        check_ret("acl.rt.create_context", ret)
        self.stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        self.tid, ret = acl.util.start_thread(self._process_callback, [self.context, 50])
        check_ret("acl.util.start_thread", ret)
        check_ret("acl.rt.subscribe_report", acl.rt.subscribe_report(self.tid, self.stream))

    def _process_callback(self, args_list):
        context, timeout = args_list
        check_ret("acl.rt.set_context", acl.rt.set_context(context))
        while self.callback_run_flag:
            acl.rt.process_report(timeout)

    def callback_func(self, user_data):
        index, host_ptr, nbytes = user_data
        out = np.frombuffer(acl.util.ptr_to_bytes(host_ptr, nbytes), dtype=np.float32)
        self.results[index] = float(out.sum())
        check_ret("acl.rt.free_host", acl.rt.free_host(host_ptr))

    def forward(self, batches):
        for i, batch in enumerate(batches):
            nbytes = batch.nbytes
            dev_ptr, ret = acl.rt.malloc(nbytes, 0)
            check_ret("acl.rt.malloc", ret)
            self.buffers.append(dev_ptr)
            check_ret(
                "H2D",
                acl.rt.memcpy_async(dev_ptr, nbytes, batch.ctypes.data, nbytes, ACL_MEMCPY_HOST_TO_DEVICE, self.stream),
            )
            host_ptr, ret = acl.rt.malloc_host(nbytes)
            check_ret("acl.rt.malloc_host", ret)
            check_ret(
                "D2H", acl.rt.memcpy_async(host_ptr, nbytes, dev_ptr, nbytes, ACL_MEMCPY_DEVICE_TO_HOST, self.stream)
            )
            ret = acl.rt.launch_callback(self.callback_func, [i, host_ptr, nbytes], ACL_CALLBACK_BLOCK, self.stream)
            check_ret("acl.rt.launch_callback", ret)
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(self.stream))

    def release_resource(self):
        if self.tid is not None:
            acl.rt.unsubscribe_report(self.tid, self.stream)
            self.callback_run_flag = False
            acl.util.stop_thread(self.tid)
        for ptr in self.buffers:
            acl.rt.free(ptr)
        if self.stream:
            acl.rt.destroy_stream(self.stream)
        if self.context:
            acl.rt.destroy_context(self.context)
        acl.rt.reset_device(DEVICE_ID)
        acl.finalize()


def main():
    rng = np.random.default_rng(0)
    batches = [rng.random(BATCH, dtype=np.float32) for _ in range(BATCHES)]
    net = Net()
    try:
        net.init_resource()
        net.forward(batches)
    finally:
        net.release_resource()
    expected = {i: float(b.sum()) for i, b in enumerate(batches)}
    ok = net.results == expected
    print(f"{len(net.results)} callbacks ran on the subscribed thread")
    print("acl_callbacks: OK" if ok else f"acl_callbacks: MISMATCH {net.results} != {expected}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
