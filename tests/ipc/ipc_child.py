"""A child process for the IPC tests: imports keys and reports, one JSON line per step.

Usage: ``python ipc_child.py '<json list of steps>'``. A step is ``{"key": k, "op": op}``:
``read`` (import the buffer key, return its first ``n`` float32 values), ``write`` (import,
fill the first ``n`` float32 with ``value``), ``array`` (import an array key, return the
array as a list and its shape), ``hold`` (import, print ``held`` and then keep running a
kernel loop on the memory until stdin closes). A failing import reports its exception
class name and message.
"""

import json
import sys

import npurt
import numpy as np


def run(step: dict) -> dict:
    op, key = step["op"], step["key"]
    try:
        if op == "array":
            a = npurt.ipc_import_array(key)
            return {"ok": np.asarray(a).tolist(), "shape": list(a.shape)}
        b = npurt.ipc_import(key)
        n = step.get("n", 4)
        if op == "read":
            return {"ok": b.copy_to_host(nbytes=4 * n).view(np.float32).tolist()}
        if op == "write":
            npurt.memcpy(b, np.full(n, step["value"], dtype=np.float32))
            return {"ok": True}
        if op == "hold":
            a = npurt.ipc_import_array(step["array"]) if "array" in step else None
            print(json.dumps({"held": b.nbytes}), flush=True)
            s = npurt.Stream()
            import threading

            done = threading.Event()
            threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
            while not done.is_set():
                if a is not None:
                    npurt.add(a, 0.0, out=a, stream=s)  # kernels on the imported memory
                s.synchronize(timeout=10)
            return {"ok": True}
        return {"err": "bad op"}
    except npurt.Error as e:
        return {"err": type(e).__name__, "msg": str(e), "code": e.code}


if __name__ == "__main__":
    for st in json.loads(sys.argv[1]):
        print(json.dumps(run(st)), flush=True)
