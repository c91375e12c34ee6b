"""Device arrays and tensor kernels: ``npurt.DeviceArray``, ``npurt.to_device``,
``npurt.empty/zeros/ones/full`` and numpy-named kernels (``npurt.add``, ``npurt.matmul``,
``npurt.softmax``, ``npurt.gemm``...).

Modules: ``device_array`` holds the class; ``creation`` (``empty``... ``to_device``), ``ops``
(elementwise, casts, reductions, softmax, norms), ``linalg`` (``matmul``, ``gemm``,
``linear``), ``mathops`` (power, erf, clip, comparisons, logic, ``where``), ``indexing``
(``take``, ``pad``, ``tile``, ``broadcast_to``, ``arange``, ``topk``), ``movement`` (``transpose``, ``permute``, ``concatenate``,
``ascontiguousarray``), ``util`` (dtype names, shapes, scalars). Every public name is
re-exported here (and so from ``npurt``).

Every kernel is asynchronous: it is checked (shapes, dtypes, devices) when called, raising a
typed npurt error (``InvalidValueError`` / ``InvalidTypeError`` 107000,
``WrongContextError`` for an array of another device) before anything is queued, then runs
on ``stream`` (default: the current stream). Outputs come from the device's caching pool;
queued kernels keep their operands alive.

Ordering: each buffer remembers the stream that last wrote it. A kernel reading or writing
an array last written on another stream first makes its stream wait for that stream (a
device-side wait, the host does not block); ``to_host`` / ``np.asarray`` synchronize the
last writer. Reads are not tracked: overwriting (``out=``) an array that another stream is
still reading is the caller's business (order it with events), as in CUDA/ACL. Freeing is
safe without ``record_stream``: queued kernels hold the buffer, so its memory goes back to
the pool only after every stream that reads it has run those kernels.

Views: ``reshape`` (no copy whenever the strides allow, numpy's rule), ``view``, ``T``,
``transpose``, ``permute`` and basic indexing (ints, slices, ``...``, ``None``) share the
buffer; every kernel takes any strides, so views are used as inputs without copies.

Dtypes: float32, float16, bfloat16, int32, int64, int8, uint8, bool. numpy has no
bfloat16: ``dtype="bfloat16"`` is accepted, ``.dtype`` is then the string ``"bfloat16"``,
and ``to_host`` returns float32. ``to_device`` of float64 data stores float32 (there is no
float64 on the device). Promotion is deliberately simple: two arrays must have the same
dtype (``astype`` first); Python scalars are cast to the array's dtype (a float scalar with
an integer array is an ``InvalidTypeError``); ``divide`` of integer arrays casts them to
float32 first (numpy's true division).
"""

from __future__ import annotations

# The class first: the function modules import it, and it imports them at its end.
from .device_array import DeviceArray

# isort: split
from . import creation, indexing, linalg, mathops, movement, ops
from .creation import *  # noqa: F403
from .indexing import *  # noqa: F403
from .linalg import *  # noqa: F403
from .mathops import *  # noqa: F403
from .movement import *  # noqa: F403
from .ops import *  # noqa: F403

__all__ = ["DeviceArray"] + creation.__all__ + ops.__all__ + mathops.__all__ + linalg.__all__ + movement.__all__ + indexing.__all__
