"""``npurt.random``: random device arrays from a real per-device generator.

Every device has one counter-based generator (Philox4x32-10, in Rust): its state is a
seed and an offset (the next unused counter block). A launch reserves the counter blocks
it needs when it is queued, so

* the same seed gives the same bits (whatever the block count, cores or scheduling);
* ``get_rng_state()`` / ``set_rng_state(state)`` replay a sequence of draws;
* launches never share counters, on one stream or on many: each stream's draws are
  independent of the others', and depend only on the order launches were queued::

    import npurt
    npurt.random.manual_seed(0)
    x = npurt.random.randn((1024, 1024))            # float32, on the current stream
    u = npurt.random.uniform(-1.0, 1.0, (4, 4), dtype="bfloat16", stream=s)

The seeding names are torch's (``torch.npu.manual_seed`` and friends; ``npurt.npu``
re-exports them). States are 16 bytes (seed, then offset, little-endian), returned as a
numpy ``uint8`` array like torch's ``ByteTensor``.
"""

from __future__ import annotations

from typing import Any, List

import numpy as np

from . import _npurt
from .array import DeviceArray, empty
from .array.util import _dtype_name, _real, _shape_arg, _stream_for, _type_error, _value_error

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "initial_seed",
    "manual_seed",
    "manual_seed_all",
    "normal",
    "rand",
    "randn",
    "seed",
    "seed_all",
    "set_rng_state",
    "set_rng_state_all",
    "uniform",
]

_U64 = (1 << 64) - 1


def _device(device: Any) -> Any:
    """None → the current device; ints and Devices go to the native check (107001)."""
    if device is None:
        return _npurt.current_device()
    if isinstance(device, str) or (hasattr(device, "index") and not isinstance(device, int)):
        from .npu import _index

        return _index(device, optional=False)
    return device


def _seed_value(seed: Any) -> int:
    """torch's seed rule: an int in [-2**63, 2**64); negatives map to 2**64 - 1 + seed."""
    if isinstance(seed, (bool, np.bool_)):
        raise _type_error("seed must be an int, not bool")
    try:
        s = int(seed)
    except OverflowError:
        raise _value_error(f"seed {seed!r} is out of range [-2**63, 2**64 - 1]") from None
    except (TypeError, ValueError):
        raise _type_error(f"seed must be an int, not {type(seed).__name__}") from None
    if s < -(1 << 63) or s > _U64:
        raise _value_error(f"seed {s} is out of range [-2**63, 2**64 - 1]")
    return s if s >= 0 else _U64 + s


def manual_seed(seed: Any, device: Any = None) -> None:
    """Seeds the device's generator (the current device's by default); rewinds its offset."""
    _npurt._rng_manual_seed(_device(device), _seed_value(seed))


def manual_seed_all(seed: Any) -> None:
    """Seeds every device's generator with ``seed``."""
    s = _seed_value(seed)
    for d in range(_npurt.device_count()):
        _npurt._rng_manual_seed(d, s)


def seed(device: Any = None) -> None:
    """Seeds the device's generator from the operating system's randomness."""
    _npurt._rng_seed(_device(device))


def seed_all() -> None:
    """Seeds every device's generator from the operating system's randomness (one seed,
    shared by all devices, as torch does)."""
    s = _npurt._rng_seed(0)
    for d in range(1, _npurt.device_count()):
        _npurt._rng_manual_seed(d, s)


def initial_seed(device: Any = None) -> int:
    """The device generator's current seed (torch's default: 67280421310721)."""
    return int(_npurt._rng_initial_seed(_device(device)))


def get_rng_state(device: Any = None) -> np.ndarray:
    """The generator's state: 16 ``uint8`` (seed, then offset; little-endian)."""
    return np.frombuffer(_npurt._rng_get_state(_device(device)), dtype=np.uint8).copy()


def get_rng_state_all() -> List[np.ndarray]:
    return [get_rng_state(d) for d in range(_npurt.device_count())]


def _state_bytes(state: Any) -> bytes:
    if isinstance(state, (bytes, bytearray, memoryview)):
        return bytes(state)
    try:
        a = np.asarray(state)
    except (TypeError, ValueError):
        raise _type_error(f"an RNG state is 16 bytes, not {type(state).__name__}") from None
    if a.dtype != np.uint8:
        if a.dtype.kind not in "iu" or a.size and (a.min() < 0 or a.max() > 255):
            raise _type_error(f"an RNG state holds uint8 values, got {a.dtype}")
        a = a.astype(np.uint8)
    return a.tobytes()


def set_rng_state(new_state: Any, device: Any = None) -> None:
    """Restores a state from :func:`get_rng_state` (16 bytes; else InvalidValueError)."""
    _npurt._rng_set_state(_device(device), _state_bytes(new_state))


def set_rng_state_all(new_states: Any) -> None:
    """Restores every device's state from :func:`get_rng_state_all`'s list."""
    if isinstance(new_states, (str, bytes, bytearray)) or not hasattr(new_states, "__iter__"):
        raise _type_error(f"set_rng_state_all takes a list of states, not {type(new_states).__name__}")
    for d, st in enumerate(new_states):
        set_rng_state(st, d)


def _draw(kind: str, a: float, b: float, shape: Any, dtype: Any, stream: Any, device: Any) -> DeviceArray:
    dt = _dtype_name(dtype)
    if stream is not None and device is None:
        device = getattr(stream, "device", None)
    out = empty(_shape_arg(shape), dt, device=device)
    _npurt._random(kind, a, b, out._a, _stream_for(stream, device))
    return out


def rand(shape: Any, dtype: Any = "float32", stream: Any = None, device: Any = None) -> DeviceArray:
    """Uniform draws on ``[0, 1)`` (exact in float32, float16 and bfloat16), queued on
    ``stream`` (default: the current stream) from its device's generator."""
    return _draw("uniform", 0.0, 1.0, shape, dtype, stream, device)


def randn(shape: Any, dtype: Any = "float32", stream: Any = None, device: Any = None) -> DeviceArray:
    """Standard normal draws (Box–Muller, computed in float64, rounded once)."""
    return _draw("normal", 0.0, 1.0, shape, dtype, stream, device)


def uniform(
    low: Any = 0.0, high: Any = 1.0, shape: Any = (), dtype: Any = "float32", stream: Any = None, device: Any = None
) -> DeviceArray:
    """Uniform draws on ``[low, high)`` (``low <= high``, finite; the rounding to the dtype
    may give ``high``)."""
    return _draw("uniform", _real(low, "low"), _real(high, "high"), shape, dtype, stream, device)


def normal(
    mean: Any = 0.0, std: Any = 1.0, shape: Any = (), dtype: Any = "float32", stream: Any = None, device: Any = None
) -> DeviceArray:
    """Normal draws with ``mean`` and standard deviation ``std`` (``std >= 0``, finite)."""
    return _draw("normal", _real(mean, "mean"), _real(std, "std"), shape, dtype, stream, device)
