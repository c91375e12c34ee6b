"""``acl.mdl``: pyacl's model calls on ONNX models (``npurt.Model`` underneath).

    model_id, ret = acl.mdl.load_from_file("net.onnx")
    desc = acl.mdl.create_desc(); ret = acl.mdl.get_desc(desc, model_id)
    size = acl.mdl.get_input_size_by_index(desc, 0)
    ds = acl.mdl.create_dataset(); _, ret = acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
    ret = acl.mdl.execute_async(model_id, in_ds, out_ds, stream)

ACL's argument lists, return tuples and codes (docs/COMPAT.md): load, execute and unload
need the thread's context (107002); unknown model ids are ``ACL_ERROR_GE_EXEC_MODEL_ID_INVALID``
(145003); a missing file ``ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID`` (145002); a file that is
not ONNX (an ``.om``) ``ACL_ERROR_GE_PARAM_INVALID`` (145000, logged: npurt loads ONNX); a
model with ops npurt cannot run ``ACL_ERROR_FEATURE_UNSUPPORTED`` (200006, the nodes logged).
Dataset buffers must be ``acl.rt.malloc`` (or ``malloc_host``) memory holding the model's
bytes: inputs are copied into the run's arrays and outputs copied back, on the stream. One
model id may run on several streams at once (the card forbids it; npurt allows it).
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import threading
from typing import Any, Dict, List, Optional, Tuple

from ..exceptions import Error, NotSupportedError
from . import _state as S
from . import constants as C
from .mdl_data import *  # noqa: F403
from .mdl_data import __all__ as _data_all

__all__ = sorted(_data_all + [
    "create_desc", "destroy_desc", "execute", "execute_async", "get_desc", "get_input_data_type", "get_input_dims",
    "get_input_format", "get_input_index_by_name", "get_input_name_by_index", "get_input_size_by_index", "get_num_inputs",
    "get_cur_output_dims", "get_num_outputs", "get_output_data_type", "get_output_dims", "get_output_format", "get_output_index_by_name",
    "get_output_name_by_index", "get_output_size_by_index", "load_from_file", "load_from_mem", "unload",
])

_log = logging.getLogger("npurt")
_lock = threading.Lock()
_ids = itertools.count(1)
_models: Dict[int, Tuple[Any, Any]] = {}  # model id -> (npurt.Model, context)


class _Desc:
    __slots__ = ("model",)

    def __init__(self) -> None:
        self.model: Optional[Any] = None


def _load(src: Any, what: str) -> Tuple[int, int]:
    ctx = S.current_context()
    from ..model import Model, Unsupported
    from ..model.onnx_io import parse

    try:
        proto = parse(src)
    except ImportError as e:
        _log.error("acl.mdl.%s: %s", what, e)
        raise S.Fail(C.ACL_ERROR_FEATURE_UNSUPPORTED, str(e)) from None
    except Error as e:
        missing = "cannot read" in e.message
        _log.error("acl.mdl.%s: %s", what, e.message)
        raise S.Fail(C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID if missing else C.ACL_ERROR_GE_PARAM_INVALID, e.message) from None
    try:
        from ..model.graph import Graph

        model = Model(Graph(proto), ctx.device)
    except (Unsupported, NotSupportedError) as e:
        _log.error("acl.mdl.%s: %s", what, e.message)
        raise S.Fail(C.ACL_ERROR_FEATURE_UNSUPPORTED, e.message) from None
    with _lock:
        mid = next(_ids)
        _models[mid] = (model, ctx)
    return mid, C.ACL_SUCCESS


@S.api(0)
def load_from_file(model_path: str) -> Tuple[int, int]:
    """``model_id, ret = acl.mdl.load_from_file(path)`` (``aclmdlLoadFromFile``): an ONNX file."""
    if not isinstance(model_path, str):
        raise TypeError("acl.mdl.load_from_file args parse failed")
    if not model_path:
        raise S.Fail(C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID, "empty path")
    return _load(model_path, "load_from_file")


@S.api(0)
def load_from_mem(model: int, model_size: int) -> Tuple[int, int]:
    """``model_id, ret = acl.mdl.load_from_mem(ptr, size)``: ONNX bytes at a host pointer
    (``acl.util.bytes_to_ptr``, ``numpy_to_ptr``, ``malloc_host`` memory)."""
    fn = "mdl.load_from_mem"
    p, n = S.ulong(model, fn), S.ulong(model_size, fn)
    if p == 0 or n == 0:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "null model data")
    found = S.host_allocs.find(p) or S.device_allocs.find(p)
    if found is None and not S.host_mapped(p, n):
        raise S.Fail(C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID, f"{p:#x} (+{n}) is not mapped memory")
    data = ctypes.string_at(p, n)
    return _load(data, "load_from_mem")


def _model(model_id: Any, fn: str) -> Any:
    mid = S.uint(model_id, fn)
    with _lock:
        entry = _models.get(mid)
    if entry is None:
        raise S.Fail(C.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, f"acl.{fn}: unknown model id {mid}")
    return entry


@S.api()
def unload(model_id: int) -> int:
    """``ret = acl.mdl.unload(model_id)`` (``aclmdlUnload``); 145003 for an unknown id.
    Runs already queued keep what they use."""
    mid = S.uint(model_id, "mdl.unload")
    S.current_context()
    _model(mid, "mdl.unload")
    with _lock:
        entry = _models.pop(mid, None)
    if entry is not None:
        from .mdl_exec import cur_shapes

        cur_shapes.pop(id(entry[0]), None)
    return C.ACL_SUCCESS


def create_desc() -> int:
    """``desc = acl.mdl.create_desc()`` (``aclmdlCreateDesc``)."""
    return S.add_handle("mdl_desc", _Desc())


def _desc(desc: Any, fn: str) -> _Desc:
    try:
        return S.get_handle("mdl_desc", S.ulong(desc, fn))
    except S.Fail:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"acl.{fn}: unknown model description {desc!r}") from None


@S.api()
def get_desc(model_desc: int, model_id: int) -> int:
    """``ret = acl.mdl.get_desc(desc, model_id)`` (``aclmdlGetDesc``): fills the description."""
    d = _desc(model_desc, "mdl.get_desc")
    d.model = _model(model_id, "mdl.get_desc")[0]
    return C.ACL_SUCCESS


@S.api()
def destroy_desc(model_desc: int) -> int:
    h = S.ulong(model_desc, "mdl.destroy_desc")
    _desc(h, "mdl.destroy_desc")
    S.drop_handle("mdl_desc", h)
    return C.ACL_SUCCESS


def _infos(desc: Any, out: bool, fn: str) -> List[Any]:
    m = _desc(desc, fn).model
    if m is None:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"acl.{fn}: the description was not filled by get_desc")
    return m.outputs if out else m.inputs


def _count(desc: Any, out: bool) -> int:
    try:
        return len(_infos(desc, out, "mdl.get_num_outputs" if out else "mdl.get_num_inputs"))
    except S.Fail:
        return 0


def get_num_inputs(model_desc: int) -> int:
    """``n = acl.mdl.get_num_inputs(desc)``; 0 for an unfilled or unknown description."""
    return _count(model_desc, False)


def get_num_outputs(model_desc: int) -> int:
    return _count(model_desc, True)


def _info(desc: Any, index: Any, out: bool, fn: str) -> Tuple[Any, int]:
    i = S.ulong(index, fn)
    infos = _infos(desc, out, fn)
    if i >= len(infos):
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"acl.{fn}: index {i} of {len(infos)}")
    return infos[i], i


def _static_dims(desc: Any, info: Any, i: int, out: bool) -> List[int]:
    """Dims with -1 for dynamic ones; a static model's outputs come from its plan."""
    if out:
        shapes = _desc(desc, "mdl").model.static_output_shapes()
        if shapes is not None:
            return list(shapes[i])
    return [d if isinstance(d, int) else -1 for d in (info.shape or ())]


def _size(desc: Any, index: Any, out: bool, fn: str) -> int:
    try:
        info, i = _info(desc, index, out, fn)
    except S.Fail:
        return 0
    from ..model import dtypes

    dims = _static_dims(desc, info, i, out)
    dt = dtypes.npurt_dtype(info.elem_type)
    if dt is None or any(d < 0 for d in dims):
        return 0
    n = dtypes.itemsize(dt)
    for d in dims:
        n *= d
    return n


def get_input_size_by_index(model_desc: int, index: int) -> int:
    """``size = acl.mdl.get_input_size_by_index(desc, i)``: bytes; 0 for dynamic dims."""
    return _size(model_desc, index, False, "mdl.get_input_size_by_index")


def get_output_size_by_index(model_desc: int, index: int) -> int:
    return _size(model_desc, index, True, "mdl.get_output_size_by_index")


def _dims(desc: Any, index: Any, out: bool, fn: str) -> Tuple[Dict[str, Any], int]:
    info, i = _info(desc, index, out, fn)
    dims = _static_dims(desc, info, i, out)
    return {"name": info.name, "dimCount": len(dims), "dims": dims}, C.ACL_SUCCESS


@S.api({})
def get_input_dims(model_desc: int, index: int) -> Tuple[Dict[str, Any], int]:
    """``dims, ret = acl.mdl.get_input_dims(desc, i)``: ``{"name", "dimCount", "dims"}``
    (dynamic dims -1)."""
    return _dims(model_desc, index, False, "mdl.get_input_dims")


@S.api({})
def get_output_dims(model_desc: int, index: int) -> Tuple[Dict[str, Any], int]:
    return _dims(model_desc, index, True, "mdl.get_output_dims")


@S.api({})
def get_cur_output_dims(model_desc: int, index: int) -> Tuple[Dict[str, Any], int]:
    """``dims, ret = acl.mdl.get_cur_output_dims(desc, i)`` (``aclmdlGetCurOutputDims``): the
    output's dims in the model's latest ``execute``/``execute_async`` (a dynamic model's actual
    ones); before any run, or for a static model, those of ``get_output_dims``."""
    from .mdl_exec import cur_shapes

    fn = "mdl.get_cur_output_dims"
    info, i = _info(model_desc, index, True, fn)
    shapes = cur_shapes.get(id(_desc(model_desc, fn).model))
    if shapes is None:
        return _dims(model_desc, index, True, fn)
    dims = list(shapes[i])
    return {"name": info.name, "dimCount": len(dims), "dims": dims}, C.ACL_SUCCESS


def _name(desc: Any, index: Any, out: bool) -> str:
    try:
        return _info(desc, index, out, "mdl.get_name_by_index")[0].name
    except S.Fail:
        return ""


def get_input_name_by_index(model_desc: int, index: int) -> str:
    return _name(model_desc, index, False)


def get_output_name_by_index(model_desc: int, index: int) -> str:
    return _name(model_desc, index, True)


def _index_by_name(desc: Any, name: Any, out: bool, fn: str) -> Tuple[int, int]:
    if not isinstance(name, str):
        raise TypeError(f"acl.{fn} args parse failed")
    for i, info in enumerate(_infos(desc, out, fn)):
        if info.name == name:
            return i, C.ACL_SUCCESS
    raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"acl.{fn}: no tensor named {name!r}")


@S.api(0)
def get_input_index_by_name(model_desc: int, name: str) -> Tuple[int, int]:
    return _index_by_name(model_desc, name, False, "mdl.get_input_index_by_name")


@S.api(0)
def get_output_index_by_name(model_desc: int, name: str) -> Tuple[int, int]:
    return _index_by_name(model_desc, name, True, "mdl.get_output_index_by_name")


def _data_type(desc: Any, index: Any, out: bool) -> int:
    from ..model import dtypes

    try:
        return dtypes.acl_type(_info(desc, index, out, "mdl.get_data_type")[0].elem_type)
    except S.Fail:
        return dtypes.ACL_DT_UNDEFINED


def get_input_data_type(model_desc: int, index: int) -> int:
    """``aclDataType`` of input ``index`` (``ACL_FLOAT`` 0, ``ACL_INT64`` 9...)."""
    return _data_type(model_desc, index, False)


def get_output_data_type(model_desc: int, index: int) -> int:
    return _data_type(model_desc, index, True)


def get_input_format(model_desc: int, index: int) -> int:
    """``ACL_FORMAT_ND`` (2): ONNX tensors carry no layout."""
    return C.ACL_FORMAT_ND


def get_output_format(model_desc: int, index: int) -> int:
    return C.ACL_FORMAT_ND


from .mdl_exec import execute, execute_async  # noqa: E402,F401  (uses the registries above)
