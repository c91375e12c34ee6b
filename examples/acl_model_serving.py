"""Serving in pyacl style: load a model once, then 4 threads, each with its own stream and
datasets, run requests with ``acl.mdl.execute_async`` and read the results after
``acl.rt.synchronize_stream``. The model is an ONNX encoder layer (npurt loads ONNX where the
card loads the .om built from it). Change ``import npurt.acl as acl`` to ``import acl`` and
the path to the .om to run it on the card (which runs one model id on one stream at a time:
there, give each thread its own loaded copy).
"""

import os
import sys
import tempfile
import threading

import npurt.acl as acl
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_models import encoder  # noqa: E402

DEVICE_ID, THREADS, REQUESTS, BATCH = 0, 4, 3, 2
ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 0, 1, 2


def check_ret(message, ret):
    if ret != 0:
        raise RuntimeError(f"{message} failed ret={ret}")


def make_dataset(ptrs_sizes):
    ds = acl.mdl.create_dataset()
    for ptr, size in ptrs_sizes:
        _, ret = acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
        check_ret("acl.mdl.add_dataset_buffer", ret)
    return ds


def destroy_dataset(ds):
    for i in range(acl.mdl.get_dataset_num_buffers(ds)):
        check_ret("acl.destroy_data_buffer", acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(ds, i)))
    check_ret("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(ds))


def infer(model_id, x, stream):
    """One request: H2D, execute_async, D2H on ``stream`` (synchronized before returning)."""
    n = x.nbytes
    dev_in, ret = acl.rt.malloc(n, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    dev_out, ret = acl.rt.malloc(n, ACL_MEM_MALLOC_HUGE_FIRST)  # the output has the input's shape
    check_ret("acl.rt.malloc", ret)
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(dev_in, n, x.ctypes.data, n, ACL_MEMCPY_HOST_TO_DEVICE, stream))
    ins, outs = make_dataset([(dev_in, n)]), make_dataset([(dev_out, n)])
    check_ret("acl.mdl.execute_async", acl.mdl.execute_async(model_id, ins, outs, stream))
    y = np.empty_like(x)
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(y.ctypes.data, n, dev_out, n, ACL_MEMCPY_DEVICE_TO_HOST, stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    destroy_dataset(ins)
    destroy_dataset(outs)
    check_ret("acl.rt.free", acl.rt.free(dev_in))
    check_ret("acl.rt.free", acl.rt.free(dev_out))
    return y


def main():
    path = os.path.join(tempfile.mkdtemp(), "encoder.onnx")
    shape = encoder(path)
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    context, ret = acl.rt.create_context(DEVICE_ID)
    check_ret("acl.rt.create_context", ret)
    model_id, ret = acl.mdl.load_from_file(path)
    check_ret("acl.mdl.load_from_file", ret)
    desc = acl.mdl.create_desc()
    check_ret("acl.mdl.get_desc", acl.mdl.get_desc(desc, model_id))
    dims, ret = acl.mdl.get_input_dims(desc, 0)
    check_ret("acl.mdl.get_input_dims", ret)
    print(f"model: {acl.mdl.get_num_inputs(desc)} input {dims}, {acl.mdl.get_num_outputs(desc)} output "
          f"{acl.mdl.get_output_name_by_index(desc, 0)!r}")

    rng = np.random.default_rng(0)
    requests = [[rng.standard_normal((BATCH,) + shape[1:]).astype(np.float32) for _ in range(REQUESTS)] for _ in range(THREADS)]
    # The reference: every request once, one after another, on one stream.
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    expected = [[infer(model_id, x, stream) for x in reqs] for reqs in requests]
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))

    results, errors = {}, []

    def worker(t):
        try:
            check_ret("acl.rt.set_context", acl.rt.set_context(context))  # ACL contexts are per thread
            s, ret = acl.rt.create_stream()
            check_ret("acl.rt.create_stream", ret)
            results[t] = [infer(model_id, x, s) for x in requests[t]]
            check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(s))
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    for t in range(THREADS):
        for got, want in zip(results[t], expected[t], strict=False):
            assert got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6), "concurrent result differs"
    check_ret("acl.mdl.unload", acl.mdl.unload(model_id))
    check_ret("acl.mdl.destroy_desc", acl.mdl.destroy_desc(desc))
    check_ret("acl.rt.destroy_context", acl.rt.destroy_context(context))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print(f"{THREADS} threads x {REQUESTS} requests of batch {BATCH}: results match the sequential run")
    print("acl_model_serving: OK")


if __name__ == "__main__":
    main()
