"""Data buffers (``acl.create_data_buffer`` & co, on ``acl`` itself as in pyacl) and
datasets (``acl.mdl.create_dataset`` & co): the ``aclDataBuffer`` / ``aclmdlDataset``
handles model execution reads its inputs from and writes its outputs to.

A data buffer is ``(ptr, size)``: any pointer (it is only resolved when a model runs). A
dataset is an ordered list of data buffers. Handles are ints (never 0); an unknown handle
is ``ACL_ERROR_INVALID_PARAM`` (100000) where a call returns ``ret``, and 0 / None where it
returns a value, as the C API's NULL results.
"""

from __future__ import annotations

import threading
from typing import Any, List, Tuple

from . import _state as S
from . import constants as C

__all__ = [
    "add_dataset_buffer",
    "create_data_buffer",
    "create_dataset",
    "destroy_data_buffer",
    "destroy_dataset",
    "get_data_buffer_addr",
    "get_data_buffer_size",
    "get_data_buffer_size_v2",
    "get_dataset_buffer",
    "get_dataset_num_buffers",
    "update_data_buffer",
]


class DataBuffer:
    __slots__ = ("ptr", "size")

    def __init__(self, ptr: int, size: int) -> None:
        self.ptr, self.size = ptr, size


class Dataset:
    __slots__ = ("buffers", "lock")

    def __init__(self) -> None:
        self.buffers: List[int] = []
        self.lock = threading.Lock()


def _buffer(handle: Any, fn: str) -> DataBuffer:
    try:
        return S.get_handle("data_buffer", S.ulong(handle, fn))
    except S.Fail:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"acl.{fn}: unknown data buffer {handle!r}") from None


def dataset_of(handle: Any, fn: str) -> Dataset:
    try:
        return S.get_handle("dataset", S.ulong(handle, fn))
    except S.Fail:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"acl.{fn}: unknown dataset {handle!r}") from None


def buffers_of(ds: Dataset) -> List[Tuple[int, int]]:
    """(ptr, size) of every buffer of a dataset, in order (destroyed ones: 100000)."""
    with ds.lock:
        handles = list(ds.buffers)
    return [(b.ptr, b.size) for b in (_buffer(h, "mdl.execute") for h in handles)]


def create_data_buffer(data: int, size: int) -> int:
    """``buf = acl.create_data_buffer(data, size)`` (``aclCreateDataBuffer``): a handle over
    ``size`` bytes at ``data`` (0 and 0 make an empty buffer, as ACL allows)."""
    fn = "create_data_buffer"
    return S.add_handle("data_buffer", DataBuffer(S.ulong(data, fn), S.ulong(size, fn)))


def get_data_buffer_addr(data_buffer: int) -> int:
    """``ptr = acl.get_data_buffer_addr(buf)``; 0 for an unknown handle."""
    try:
        return _buffer(data_buffer, "get_data_buffer_addr").ptr
    except S.Fail:
        return 0


def get_data_buffer_size_v2(data_buffer: int) -> int:
    """``size = acl.get_data_buffer_size_v2(buf)`` (``aclGetDataBufferSizeV2``); 0 if unknown."""
    try:
        return _buffer(data_buffer, "get_data_buffer_size_v2").size
    except S.Fail:
        return 0


def get_data_buffer_size(data_buffer: int) -> int:
    """``size = acl.get_data_buffer_size(buf)``: the deprecated 32-bit form (``size & 0xFFFFFFFF``)."""
    return get_data_buffer_size_v2(data_buffer) & 0xFFFFFFFF


@S.api()
def update_data_buffer(data_buffer: int, data: int, size: int) -> int:
    """``ret = acl.update_data_buffer(buf, data, size)``: points the buffer elsewhere."""
    fn = "update_data_buffer"
    b = _buffer(data_buffer, fn)
    b.ptr, b.size = S.ulong(data, fn), S.ulong(size, fn)
    return C.ACL_SUCCESS


@S.api()
def destroy_data_buffer(data_buffer: int) -> int:
    """``ret = acl.destroy_data_buffer(buf)``: the handle only; the memory stays the caller's."""
    h = S.ulong(data_buffer, "destroy_data_buffer")
    _buffer(h, "destroy_data_buffer")
    S.drop_handle("data_buffer", h)
    return C.ACL_SUCCESS


def create_dataset() -> int:
    """``dataset = acl.mdl.create_dataset()`` (``aclmdlCreateDataset``)."""
    return S.add_handle("dataset", Dataset())


@S.api(0)
def add_dataset_buffer(dataset: int, data_buffer: int, size: Any = None) -> Tuple[int, int]:
    """``dataset, ret = acl.mdl.add_dataset_buffer(dataset, data_buffer)``; the seeds'
    simplified ``add_dataset_buffer(dataset, ptr, size)`` makes the data buffer itself
    (``get_dataset_buffer`` returns it; destroy it with ``acl.destroy_data_buffer``)."""
    fn = "mdl.add_dataset_buffer"
    h = S.ulong(dataset, fn)
    ds = dataset_of(h, fn)
    if size is not None:
        buf = create_data_buffer(data_buffer, size)
    else:
        buf = S.ulong(data_buffer, fn)
        _buffer(buf, fn)
    with ds.lock:
        ds.buffers.append(buf)
    return h, C.ACL_SUCCESS


def get_dataset_num_buffers(dataset: int) -> int:
    """``n = acl.mdl.get_dataset_num_buffers(dataset)``; 0 for an unknown dataset."""
    try:
        ds = dataset_of(dataset, "mdl.get_dataset_num_buffers")
    except S.Fail:
        return 0
    with ds.lock:
        return len(ds.buffers)


def get_dataset_buffer(dataset: int, index: int) -> int:
    """``buf = acl.mdl.get_dataset_buffer(dataset, index)``; 0 when out of range."""
    fn = "mdl.get_dataset_buffer"
    i = S.uint(index, fn)
    try:
        ds = dataset_of(dataset, fn)
    except S.Fail:
        return 0
    with ds.lock:
        return ds.buffers[i] if i < len(ds.buffers) else 0


@S.api()
def destroy_dataset(dataset: int) -> int:
    """``ret = acl.mdl.destroy_dataset(dataset)``: the dataset only (its data buffers stay
    valid, as in ACL; call ``acl.destroy_data_buffer`` on them)."""
    fn = "mdl.destroy_dataset"
    h = S.ulong(dataset, fn)
    dataset_of(h, fn)
    S.drop_handle("dataset", h)
    return C.ACL_SUCCESS
