"""``npurt.hccl``: HCCL's API in Python form over npurt's collective engine.

Calls return an :class:`HcclResult` (``HCCL_SUCCESS`` 0, else the error's code, with the
message in :func:`get_last_error_message`), or ``(value, ret)`` where HCCL has an out
argument, like pyACL. Collectives are queued on ``stream`` (an ``npurt.Stream`` or a pyACL
stream handle) and run in stream order; their failures (timeout, desync, a dead rank)
become the stream's error, raised by ``synchronize`` as :class:`npurt.CollectiveError`
subclasses. Buffers: DeviceArrays, DeviceBuffers or ``acl.rt.malloc`` pointers.

Bootstrap, as with HCCL: rank 0 calls :func:`HcclGetRootInfo` (``HCCL_ROOT_INFO_BYTES``
bytes naming a rendezvous it serves), hands the bytes to the others (MPI_Bcast, a pipe,
a file...), and every rank calls :func:`HcclCommInitRootInfo`: the ranks form an ``shm``
communicator. :func:`HcclCommInitAll` makes every rank of a ``local`` (one-process)
communicator at once.
"""

from __future__ import annotations

import enum
import secrets
import socket
from typing import Any, Dict, List, Optional, Tuple

from . import _npurt
from .distributed._native import shm_backend
from .distributed._store import TCPStore
from .exceptions import CollectiveError, Error

HCCL_ROOT_INFO_BYTES = 4108
_MAGIC = b"npurt-hccl1"

HcclResult = enum.IntEnum("HcclResult", {k: v for k, v in _npurt._hccl_result_codes().items()})  # type: ignore[misc]
globals().update({m.name: m for m in HcclResult})


class HcclDataType(enum.IntEnum):
    HCCL_DATA_TYPE_INT8 = 0
    HCCL_DATA_TYPE_INT16 = 1
    HCCL_DATA_TYPE_INT32 = 2
    HCCL_DATA_TYPE_FP16 = 3
    HCCL_DATA_TYPE_FP32 = 4
    HCCL_DATA_TYPE_INT64 = 5
    HCCL_DATA_TYPE_UINT64 = 6
    HCCL_DATA_TYPE_UINT8 = 7
    HCCL_DATA_TYPE_UINT16 = 8
    HCCL_DATA_TYPE_UINT32 = 9
    HCCL_DATA_TYPE_FP64 = 10
    HCCL_DATA_TYPE_BFP16 = 11


class HcclReduceOp(enum.IntEnum):
    HCCL_REDUCE_SUM = 0
    HCCL_REDUCE_PROD = 1
    HCCL_REDUCE_MAX = 2
    HCCL_REDUCE_MIN = 3


globals().update({m.name: m for m in HcclDataType})
globals().update({m.name: m for m in HcclReduceOp})

_last_message = ""
_servers: Dict[bytes, TCPStore] = {}


class HcclComm:
    """A communicator handle (``HcclComm``)."""

    __slots__ = ("_comm", "device")

    def __init__(self, comm: Any, device: Optional[int]) -> None:
        self._comm, self.device = comm, device

    def __repr__(self) -> str:
        return f"HcclComm(rank={self._comm.rank}, size={self._comm.world}, transport={self._comm.transport!r})"


def _ret(fn):
    def call(*args: Any, **kwargs: Any) -> Any:
        global _last_message
        try:
            out = fn(*args, **kwargs)
        except CollectiveError as e:
            _last_message = e.message
            return _fail(fn, int(e.code))
        except Error as e:
            _last_message = e.message
            return _fail(fn, int(HcclResult.HCCL_E_PARA))
        _last_message = ""
        return out if out is not None else HcclResult.HCCL_SUCCESS

    def _fail(f: Any, code: int) -> Any:
        r = HcclResult(code)
        return (None, r) if f.__name__ in _RETURNS_VALUE else r

    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__ = fn.__doc__
    return call


_RETURNS_VALUE = {"HcclGetRootInfo", "HcclCommInitRootInfo", "HcclCommInitAll", "HcclGetRankSize", "HcclGetRankId"}


def get_last_error_message() -> str:
    """The message of the last failed call on this process ("" after a success)."""
    return _last_message


def _comm(comm: Any) -> Any:
    if not isinstance(comm, HcclComm):
        raise _param(f"comm must be an HcclComm, not {type(comm).__name__}")
    return comm._comm


def _param(msg: str) -> BaseException:
    return _npurt._collective_error("param", "hccl", 0, [], msg, 0)


def _stream(stream: Any) -> Any:
    import npurt

    if stream is None or isinstance(stream, npurt.Stream):
        return stream
    from .acl import _state

    return _state.stream_of(int(stream))


def _buf(x: Any, what: str) -> Any:
    if isinstance(x, int) and not isinstance(x, bool):
        from .acl import _state

        found = _state.device_allocs.find(x)
        if found is None:
            raise _param(f"{what} {x:#x} is not inside an acl.rt.malloc allocation")
        buf, off, size = found
        return _npurt._BufferView(buf, off, size - off)
    return x


def _enqueue(kind: str, send: Any, recv: Any, count: Any, dtype: Any, op: Any, root: Any, comm: Any, stream: Any) -> None:
    c = _comm(comm)
    s = _buf(send, "sendBuf") if send is not None else None
    r = _buf(recv, "recvBuf") if recv is not None else None
    c.enqueue(kind, s, r, int(count), int(dtype), int(op), int(root), _stream(stream), None)


@_ret
def HcclGetRootInfo() -> Tuple[bytes, Any]:
    """Root info (``HCCL_ROOT_INFO_BYTES`` bytes) naming a rendezvous served by this process."""
    nonce = secrets.token_hex(8).encode()
    store = TCPStore("127.0.0.1", 0, True, 300.0)
    _servers[nonce] = store
    host, port = store._addr
    body = b" ".join([_MAGIC, host.encode(), str(port).encode(), nonce])
    return body.ljust(HCCL_ROOT_INFO_BYTES, b"\0"), HcclResult.HCCL_SUCCESS


@_ret
def HcclCommInitRootInfo(nRanks: int, rootInfo: bytes, rank: int) -> Tuple[HcclComm, Any]:
    """Rank ``rank`` of an ``nRanks``-rank communicator (every rank passes the same root info)."""
    raw = bytes(rootInfo).rstrip(b"\0").split(b" ")
    if len(raw) != 4 or raw[0] != _MAGIC:
        raise _param("rootInfo does not come from HcclGetRootInfo")
    host, port, nonce = raw[1].decode(), int(raw[2]), raw[3]
    try:
        client = TCPStore(host, port, False, 300.0, int(rank))
    except (OSError, socket.error) as e:
        raise _param(f"cannot reach the root at {host}:{port}: {e}") from None
    be = shm_backend(client, f"hccl-{nonce.decode()}", int(rank), int(nRanks), None, None)
    client.close()
    return HcclComm(be.comm, None), HcclResult.HCCL_SUCCESS


@_ret
def HcclCommInitAll(ndev: int, devices: Optional[List[int]] = None) -> Tuple[List[HcclComm], Any]:
    """Every rank of a one-process communicator over ``devices`` (default 0..ndev-1)."""
    devs = list(devices) if devices is not None else list(range(int(ndev)))
    if len(devs) != int(ndev):
        raise _param(f"devices has {len(devs)} entries, ndev is {ndev}")
    comms = _npurt._comm_init_all(int(ndev))
    return [HcclComm(c, d) for c, d in zip(comms, devs, strict=True)], HcclResult.HCCL_SUCCESS


@_ret
def HcclGetRankSize(comm: HcclComm) -> Tuple[int, Any]:
    return _comm(comm).world, HcclResult.HCCL_SUCCESS


@_ret
def HcclGetRankId(comm: HcclComm) -> Tuple[int, Any]:
    return _comm(comm).rank, HcclResult.HCCL_SUCCESS


@_ret
def HcclCommDestroy(comm: HcclComm) -> None:
    _comm(comm).destroy()


@_ret
def HcclAllReduce(sendBuf, recvBuf, count, dataType, op, comm, stream) -> None:
    _enqueue("all_reduce", sendBuf, recvBuf, count, dataType, op, 0, comm, stream)


@_ret
def HcclBroadcast(buf, count, dataType, root, comm, stream) -> None:
    _enqueue("broadcast", buf, buf, count, dataType, 0, root, comm, stream)


@_ret
def HcclReduce(sendBuf, recvBuf, count, dataType, op, root, comm, stream) -> None:
    _enqueue("reduce", sendBuf, recvBuf, count, dataType, op, root, comm, stream)


@_ret
def HcclAllGather(sendBuf, recvBuf, sendCount, dataType, comm, stream) -> None:
    _enqueue("all_gather", sendBuf, recvBuf, sendCount, dataType, 0, 0, comm, stream)


@_ret
def HcclReduceScatter(sendBuf, recvBuf, recvCount, dataType, op, comm, stream) -> None:
    _enqueue("reduce_scatter", sendBuf, recvBuf, recvCount, dataType, op, 0, comm, stream)


@_ret
def HcclAlltoAll(sendBuf, sendCount, sendType, recvBuf, recvCount, recvType, comm, stream) -> None:
    if int(sendCount) != int(recvCount) or int(sendType) != int(recvType):
        raise _param("HcclAlltoAll: sendCount/recvCount and the types must match")
    _enqueue("all_to_all", sendBuf, recvBuf, sendCount, sendType, 0, 0, comm, stream)


@_ret
def HcclSend(sendBuf, count, dataType, destRank, comm, stream) -> None:
    _enqueue("send", sendBuf, None, count, dataType, 0, destRank, comm, stream)


@_ret
def HcclRecv(recvBuf, count, dataType, srcRank, comm, stream) -> None:
    _enqueue("recv", None, recvBuf, count, dataType, 0, srcRank, comm, stream)


@_ret
def HcclBarrier(comm, stream) -> None:
    _enqueue("barrier", None, None, 0, HcclDataType.HCCL_DATA_TYPE_UINT8, 0, 0, comm, stream)


__all__ = [
    "HCCL_ROOT_INFO_BYTES",
    "HcclResult",
    "HcclDataType",
    "HcclReduceOp",
    "HcclComm",
    "HcclGetRootInfo",
    "HcclCommInitRootInfo",
    "HcclCommInitAll",
    "HcclGetRankSize",
    "HcclGetRankId",
    "HcclCommDestroy",
    "HcclAllReduce",
    "HcclBroadcast",
    "HcclReduce",
    "HcclAllGather",
    "HcclReduceScatter",
    "HcclAlltoAll",
    "HcclSend",
    "HcclRecv",
    "HcclBarrier",
    "get_last_error_message",
]
