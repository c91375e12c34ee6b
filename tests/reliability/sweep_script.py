"""The entry-point sweep (run by test_rel_sweep.py in a fresh interpreter): calls every
public entry point of npurt, npurt.kernels, DeviceArray and the runtime classes with one
argument replaced by a wrong type or an out-of-range value, and prints every call that
raised something other than an npurt.Error (or crashed the interpreter: then the test sees
the signal)."""

import inspect
import os
import tempfile
import warnings

import npurt
import npurt.kernels as K
import npurt.npu
import numpy as np

warnings.simplefilter("ignore")
os.chdir(tempfile.mkdtemp(prefix="npurt-sweep-"))  # entry points given "x" as a path write files
BAD = [object(), "x", -1, 2**70, -(2**70), 1e-3, float("nan"), float("inf"), -1.5, [1, 2], (1, "a"), b"x", {}, True,
       None, np.float32(1.5), np.int64(-5), 2**63, 1 << 40]
failures = []


def base_values():
    x = npurt.ones((4, 4))
    v = npurt.ones(4)
    buf = npurt.malloc(64)
    return {
        "x": x, "x1": x, "x2": x, "a": x, "b": x, "c": x, "y": x, "weight": x, "bias": v,
        "arrays": [v, v], "axes": (1, 0), "axis": None, "out": None, "stream": npurt.Stream(),
        "device": None, "dtype": "float32", "shape": (4,), "fill_value": 1.0, "alpha": 1.0,
        "beta": 0.0, "eps": 1e-5, "keepdims": False, "approximate": "none", "blocks": None,
        "trans_a": False, "trans_b": False, "seconds": 0.0, "message": "m", "block": 0,
        "nbytes": 64, "policy": "huge_first", "size": 1 << 20, "dst": buf, "src": np.zeros(64, np.uint8),
        "buf": buf, "value": 0, "fraction": 1.0, "native": x._a if hasattr(x, "_a") else x,
        "priority": 0, "timing": False, "enable_timing": None, "memory_limit": None, "s": None,
        "force": False, "timeout": 1.0, "event": npurt.Event(), "other": npurt.Stream(), "end": npurt.Event(),
        "limit": None, "func": print, "o": x, "key": 0, "copy": None, "max_version": None, "dl_device": None,
        "seed": 1, "new_state": bytes(16), "new_states": [], "low": 0.0, "high": 1.0, "mean": 0.0, "std": 1.0,
        "obj": x, "debug_mode": 0,
    }


def call(label, f, args, kwargs):
    try:
        f(*args, **kwargs)
    except npurt.Error:
        pass
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - what the sweep looks for
        failures.append(f"{label}: {type(e).__name__}: {str(e)[:120]}")
    finally:
        npurt.set_per_process_memory_fraction(1.0)


def sweep(label, f, skip=(), bound=False):
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return
    params = [p for p in sig.parameters.values() if p.name not in ("self",) and p.kind not in (p.VAR_KEYWORD,)]
    # before a *args, the parameters must be passed by position
    star = any(p.kind == p.VAR_POSITIONAL for p in params)
    for p in params:
        if p.name in skip:
            continue
        for bad in BAD:
            base = base_values()
            args, kwargs = [], {}
            for q in params:
                val = bad if q is p else base.get(q.name, q.default)
                if q.kind == q.VAR_POSITIONAL:
                    if q is p:
                        args.append(bad)
                    continue
                if val is inspect.Parameter.empty:
                    break
                if q.kind == q.POSITIONAL_ONLY or (star and q.kind == q.POSITIONAL_OR_KEYWORD):
                    args.append(val)
                elif q.kind == q.KEYWORD_ONLY or val is not q.default or q is p:
                    kwargs[q.name] = val
            else:
                call(f"{label}({p.name}={bad!r})", f, args, kwargs)


SAFE_SKIP = {"reset_device", "set_device", "configure", "stream", "synchronize"}
for name in npurt.__all__:
    f = getattr(npurt, name)
    if name in SAFE_SKIP or not callable(f) or (isinstance(f, type) and issubclass(f, BaseException)):
        continue
    if name in ("Device", "Context", "Stream", "Event", "MemPool", "DeviceArray", "DeviceBuffer", "HostBuffer"):
        sweep(f"npurt.{name}", f, skip=("native",))
        continue
    sweep(f"npurt.{name}", f)
for name in npurt.random.__all__:
    sweep(f"npurt.random.{name}", getattr(npurt.random, name))
for name in ("device", "device_of", "StreamContext", "set_stream", "H2D", "D2H", "set_sync_debug_mode", "stream"):
    sweep(f"npurt.npu.{name}", getattr(npurt.npu, name))
for name in ("busy", "empty", "fault"):
    sweep(f"npurt.kernels.{name}", getattr(K, name), skip=() if name != "fault" else ("stream",))
# the ones that change global state, with their dangerous values left out
for bad in BAD:
    call(f"npurt.set_device({bad!r})", npurt.set_device, (bad,), {}) if bad is not None else None
    npurt.set_device(0)
    if bad not in (None, 1) and not (isinstance(bad, bool)):
        call(f"npurt.reset_device({bad!r})", npurt.reset_device, (bad,), {})
    if not isinstance(bad, bool) and bad is not None:
        call(f"npurt.reset_device(1, force={bad!r})", npurt.reset_device, (1,), {"force": bad})
    call(f"npurt.synchronize(device={bad!r})", npurt.synchronize, (), {"device": bad}) if bad is not None else None
    if bad is not None:
        call(f"npurt.synchronize(timeout={bad!r})", npurt.synchronize, (), {"timeout": bad if bad != float("inf") else 1.0})
    for key in ("device_count", "worker_threads", "device_memory"):
        call(f"npurt.configure({key}={bad!r})", npurt.configure, (), {key: bad})
    call(f"npurt.stream({bad!r})", lambda b: npurt.stream(b).__enter__(), (bad,), {}) if bad is not None else None
    npurt.set_device(0)

# methods of the runtime objects
objects = {
    "DeviceArray": lambda: npurt.ones((4, 4)),
    "Stream": lambda: npurt.Stream(),
    "Event": lambda: npurt.Event(timing=True),
    "Context": lambda: npurt.Context(),
    "Device": lambda: npurt.Device(0),
    "DeviceBuffer": lambda: npurt.malloc(64),
    "HostBuffer": lambda: npurt.malloc_host(64),
    "MemPool": lambda: npurt.MemPool(1 << 20),
}
DUNDER = ("__getitem__", "__setitem__", "__add__", "__sub__", "__mul__", "__truediv__", "__matmul__", "__array__",
          "__dlpack__", "__radd__", "__iadd__", "__pow__", "__eq__", "__lt__")
for cname, make in objects.items():
    for mname in dir(type(make())):
        if (mname.startswith("_") and mname not in DUNDER) or mname in ("destroy", "free"):
            continue
        attr = getattr(type(make()), mname)
        if not callable(attr):
            continue
        obj = make()
        bound = getattr(obj, mname)
        sweep(f"{cname}.{mname}", bound)
        if mname == "__setitem__":
            for bad in BAD:
                call(f"{cname}[{bad!r}] = 1", obj.__setitem__, (bad, 1.0), {})
                call(f"{cname}[0] = {bad!r}", obj.__setitem__, (0, bad), {})
# DeviceArray methods with *args
x = npurt.ones((4, 4))
for m in ("reshape", "permute", "transpose"):
    for bad in BAD:
        call(f"DeviceArray.{m}({bad!r})", getattr(x, m), (bad,), {})
        call(f"DeviceArray.{m}(0, {bad!r})", getattr(x, m), (0, bad), {})
for bad in BAD:
    call(f"npurt.empty(({bad!r}, 2))", npurt.empty, ((bad, 2),), {})
    call(f"npurt.sum(x, axis=({bad!r},))", npurt.sum, (x,), {"axis": (bad,)})

npurt.synchronize(timeout=30)
for f in sorted(set(failures)):
    print("UNTYPED", f)
print("calls checked; untyped:", len(set(failures)))
