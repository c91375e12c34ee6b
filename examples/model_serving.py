"""Serving in Pythonic style: ``npurt.Model.load`` once, then 4 threads, each with its own
``npurt.Stream``, queue requests with ``model.run_async`` and read the results after
synchronizing their stream. One loaded model serves every thread at once (weights shared,
each run its own workspace); results are checked against a sequential run (and against
onnxruntime when it is installed).
"""

import os
import sys
import tempfile
import threading

import npurt
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_models import encoder  # noqa: E402

THREADS, REQUESTS, BATCH = 4, 3, 2


def main():
    path = os.path.join(tempfile.mkdtemp(), "encoder.onnx")
    shape = encoder(path)
    model = npurt.Model.load(path)
    print(model)
    rng = np.random.default_rng(0)
    requests = [[rng.standard_normal((BATCH,) + shape[1:]).astype(np.float32) for _ in range(REQUESTS)] for _ in range(THREADS)]
    expected = [[model(x).to_host() for x in reqs] for reqs in requests]
    results, errors = {}, []

    def worker(t):
        try:
            s = npurt.Stream()
            pending = [model.run_async([x], stream=s)[0] for x in requests[t]]  # all queued, nothing waited for
            s.synchronize()
            results[t] = [y.to_host() for y in pending]
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
            assert np.allclose(got, want, rtol=1e-5, atol=1e-6), "concurrent result differs"
    try:
        import onnxruntime as ort

        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        x = requests[0][0]
        assert np.allclose(sess.run(None, {"x": x})[0], expected[0][0], rtol=1e-4, atol=1e-5), "differs from onnxruntime"
        print("matches onnxruntime")
    except ImportError:
        pass
    mem = model.plan(requests[0][0]).memory
    print(f"workspace {mem.workspace} bytes for {mem.intermediates} bytes of intermediates")
    print(f"{THREADS} threads x {REQUESTS} requests of batch {BATCH}: results match the sequential run")
    print("model_serving: OK")


if __name__ == "__main__":
    main()
