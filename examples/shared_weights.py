"""Load model weights onto the device once, serve several worker processes from them.

The loader puts an MLP's weights (``--size-mb`` in total, default 64; the figures in the
report use 1024) in shareable device memory and exports one key per layer, whitelisted for
the workers' pids. Each worker (an unrelated process, started with ``subprocess``) imports
the layers and runs the MLP on them with ``npurt.matmul``/``relu``. Printed: the resident
memory of the whole group (PSS, the sum of ``/proc/<pid>/smaps_rollup``'s ``Pss``) before
and after, which grows by the weights once, not once per process; the time a worker takes
to import the weights against re-loading them from a file; and the check that every
worker's output matches numpy's.

    python examples/shared_weights.py --size-mb 1024 --workers 4
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import npurt
import numpy as np

LAYERS = 4
BATCH = 16

WORKER = r"""
import json, sys, time
import numpy as np
import npurt

def mlp(x, ws):
    for i, w in enumerate(ws):
        x = npurt.matmul(x, w)
        if i + 1 < len(ws):
            x = npurt.relu(x)
    return np.asarray(x)

npurt.current_stream()  # start the device before the baseline
print(json.dumps({"ready": True}), flush=True)
keys = json.loads(sys.stdin.readline())
t0 = time.perf_counter()
ws = [npurt.ipc_import_array(k) for k in keys["layers"]]
t_import = time.perf_counter() - t0
x = npurt.to_device(np.asarray(keys["x"], dtype=np.float32))
y = mlp(x, ws)
print(json.dumps({"import_s": t_import, "y": y.tolist()}), flush=True)
cmd = json.loads(sys.stdin.readline())
if cmd.get("reload"):
    t0 = time.perf_counter()
    arrs = [npurt.to_device(np.load(f)) for f in cmd["reload"]]
    t_reload = time.perf_counter() - t0
    y2 = mlp(x, arrs)
    del arrs
    print(json.dumps({"reload_s": t_reload, "same": bool(np.allclose(y, y2))}), flush=True)
else:
    print(json.dumps({}), flush=True)
sys.stdin.readline()
"""


def pss(pid: int) -> int:
    """Proportional set size of a process in bytes (shared pages split among sharers)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def send(p: subprocess.Popen, obj: dict) -> dict:
    p.stdin.write(json.dumps(obj) + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=64, help="total weight bytes in MiB (default 64)")
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    d = int(math.sqrt(args.size_mb * (1 << 20) / 4 / LAYERS))
    d -= d % 64
    size = LAYERS * d * d * 4
    npurt.current_stream()
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(args.workers)
    ]
    tmp = tempfile.mkdtemp(prefix="shared_weights_")
    try:
        for w in workers:
            assert json.loads(w.stdout.readline()) == {"ready": True}
        group = [os.getpid()] + [w.pid for w in workers]
        base = sum(pss(p) for p in group)

        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        files, layers = [], []
        for i in range(LAYERS):
            h = (rng.standard_normal((d, d), dtype=np.float32) / np.float32(math.sqrt(d)))
            f = os.path.join(tmp, f"w{i}.npy")
            np.save(f, h)
            files.append(f)
            layers.append(npurt.to_device(h, shareable=True))
            del h
        t_load = time.perf_counter() - t0
        loaded = sum(pss(p) for p in group)
        pids = [w.pid for w in workers]
        keys = [a.ipc_export(pids=pids) for a in layers]
        x = rng.standard_normal((BATCH, d), dtype=np.float32)
        ref = x
        for i in range(LAYERS):
            ref = ref @ np.load(files[i])
            if i + 1 < LAYERS:
                ref = np.maximum(ref, 0)

        outs = [send(w, {"layers": keys, "x": x.tolist()}) for w in workers]
        served = sum(pss(p) for p in group)
        ok = all(np.allclose(np.asarray(o["y"]), ref, rtol=1e-3, atol=1e-3) for o in outs)
        rel = [send(w, {"reload": files} if i == 0 else {}) for i, w in enumerate(workers)]
        for w in workers:
            w.stdin.write("\n")
            w.stdin.flush()
            w.wait(timeout=60)
    finally:
        for w in workers:
            w.kill()
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)

    mib = 1 << 20
    growth = served - base
    t_import = max(o["import_s"] for o in outs)
    print(f"weights: {LAYERS} layers of {d}x{d} float32 = {size / mib:.0f} MiB, {args.workers} workers")
    print(f"group PSS: baseline {base / mib:.0f} MiB, after loading {loaded / mib:.0f} MiB, "
          f"after {args.workers} workers imported and ran the MLP {served / mib:.0f} MiB")
    print(f"group PSS growth: {growth / mib:.0f} MiB = {growth / size:.2f}x the weights "
          f"(re-loading in every worker: about {1 + args.workers}x)")
    print(f"load in the exporter: {t_load:.3f} s; import in a worker (slowest): {t_import * 1e3:.1f} ms; "
          f"re-load from file in a worker: {rel[0]['reload_s']:.3f} s "
          f"({rel[0]['reload_s'] / max(t_import, 1e-9):.0f}x the import)")
    # Re-loading in every process would take (1 + workers) x the weights; sharing must stay
    # well under half of that (each worker's own few MiB of activations and buffers count).
    ok = ok and rel[0]["same"] and growth < (1 + args.workers) * size / 2
    print("shared_weights: OK" if ok else "shared_weights: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
