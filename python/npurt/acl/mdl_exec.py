"""``acl.mdl.execute`` / ``execute_async``: a loaded model on datasets of device pointers.

Each input buffer is resolved to its ``acl.rt.malloc`` (or ``malloc_host``) allocation
(anything else: ``ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID``, 145007) and copied into the run's
input array on the stream; the model's kernels follow on the same stream, then each output
is copied into its buffer. The shapes are the model's; a dynamic input (one ``-1`` dim) takes
the dim from its buffer's size. ``execute`` waits for the stream (its failure code is the
``ret``); ``execute_async`` returns once the work is queued.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .. import _npurt
from ..array import empty
from ..exceptions import InvalidTypeError, InvalidValueError
from ..model import dtypes
from . import _state as S
from . import constants as C
from .mdl_data import buffers_of, dataset_of

__all__ = ["execute", "execute_async"]

# id(npurt.Model) -> output shapes of its latest run (acl.mdl.get_cur_output_dims)
cur_shapes: Dict[int, List[Tuple[int, ...]]] = {}


def _view(ptr: int, n: int, what: str) -> Any:
    found = S.device_allocs.find(ptr) or S.host_allocs.find(ptr)
    if found is None:
        raise S.Fail(C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID, f"{what}: {ptr:#x} is not acl.rt.malloc / malloc_host memory")
    buf, off, size = found
    if off + n > size:
        raise S.Fail(C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID, f"{what}: {n} bytes at {ptr:#x} run past its allocation")
    return _npurt._BufferView(buf, off, n)


def _shape(info: Any, size: int, what: str) -> Tuple[List[int], str]:
    dt = dtypes.npurt_dtype(info.elem_type)
    if dt is None:
        raise S.Fail(C.ACL_ERROR_UNSUPPORTED_DATA_TYPE, f"{what}: ONNX type {info.dtype} has no device dtype")
    dims = [d if isinstance(d, int) else -1 for d in (info.shape or ())]
    item = dtypes.itemsize(dt)
    known = item
    for d in dims:
        if d >= 0:
            known *= d
    unknown = dims.count(-1)
    if unknown == 0:
        if size < known:
            raise S.Fail(C.ACL_ERROR_GE_PARAM_INVALID, f"{what}: buffer of {size} bytes, the model needs {known}")
        return dims, dt
    if unknown > 1 or known == 0 or size % known:
        raise S.Fail(C.ACL_ERROR_GE_PARAM_INVALID, f"{what}: cannot infer dims {dims} from a buffer of {size} bytes")
    return [size // known if d == -1 else d for d in dims], dt


def _run(fn: str, model_id: Any, input_ds: Any, output_ds: Any, stream: Any, wait: bool) -> int:
    from .mdl import _model

    h = S.ulong(stream, fn)
    model, _ctx = _model(model_id, fn)
    S.current_context()
    st = S.stream_of(h)
    ins = buffers_of(dataset_of(input_ds, fn))
    outs = buffers_of(dataset_of(output_ds, fn))
    if len(ins) != len(model.inputs) or len(outs) != len(model.outputs):
        raise S.Fail(C.ACL_ERROR_GE_PARAM_INVALID, f"acl.{fn}: datasets of {len(ins)} / {len(outs)} buffers for a model of {len(model.inputs)} inputs / {len(model.outputs)} outputs")
    arrays = []
    for k, (info, (ptr, size)) in enumerate(zip(model.inputs, ins, strict=True)):
        what = f"acl.{fn}: input {k} ({info.name})"
        shape, dt = _shape(info, size, what)
        a = empty(shape, dt, device=model.device)
        if a.nbytes:
            _npurt.memcpy_async(a._a, _view(ptr, a.nbytes, what), st, a.nbytes)
        arrays.append(a)
    try:
        results = model.run_async(arrays, stream=st)
    except (InvalidValueError, InvalidTypeError) as e:
        raise S.Fail(C.ACL_ERROR_GE_PARAM_INVALID, e.message) from None
    for k, (r, (ptr, size)) in enumerate(zip(results, outs, strict=True)):
        what = f"acl.{fn}: output {k} ({model.outputs[k].name})"
        if size < r.nbytes:
            raise S.Fail(C.ACL_ERROR_GE_PARAM_INVALID, f"{what}: buffer of {size} bytes, the output has {r.nbytes}")
        if r.nbytes:
            _npurt.memcpy_async(_view(ptr, r.nbytes, what), r._a, st, r.nbytes)
    cur_shapes[id(model)] = [tuple(r.shape) for r in results]
    if wait:
        st.synchronize()
    return C.ACL_SUCCESS


@S.api()
def execute(model_id: int, input: int, output: int) -> int:  # noqa: A002  (pyacl's names)
    """``ret = acl.mdl.execute(model_id, input_dataset, output_dataset)`` (``aclmdlExecute``):
    runs on the current context's default stream and waits."""
    return _run("mdl.execute", model_id, input, output, 0, True)


@S.api()
def execute_async(model_id: int, input: int, output: int, stream: int) -> int:  # noqa: A002
    """``ret = acl.mdl.execute_async(model_id, input_dataset, output_dataset, stream)``:
    queued on ``stream``; outputs are defined after ``acl.rt.synchronize_stream``."""
    return _run("mdl.execute_async", model_id, input, output, stream, False)
