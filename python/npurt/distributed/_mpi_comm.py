"""``MpiComm``: one npurt group over MPI communicators, run synchronously with a deadline.

A small collective (at most 64 KiB per peer: ``_mpi_small``) is one exchange on the control
communicator: each rank sends every other rank its header followed by the data that peer
needs, checks the headers as below, and completes the collective locally. Any other is two
phases on two private duplicates of the group's communicator:

1. **Header** (control communicator): each rank sends every other rank
   ``(seq, kind, dtype, count, op, root, one-phase?)`` and receives theirs (into buffers
   that also hold a one-phase message, so a peer on the other path is a desync, not an
   MPI error). Ranks whose header has not come by the deadline "never arrived"
   (``CollectiveTimeoutError``); headers that differ are a desync (``CollectiveDesyncError``,
   the same message on every rank: rank 0's call against the first rank that differs).
2. **Data** (data communicator): MPI's non-blocking collective (``Iallreduce``, ``Ibcast``...)
   on the arrays' own memory, completed by a ``Test`` loop that checks the deadline.

A rank that fails a collective (timeout, desync) sends an abort notice to the others, so
ranks still waiting at that collective raise the same timeout at once and later calls on
any rank raise ``RankFailedError`` ("aborted at collective #n: ..."); the communicator
stays aborted. Under ``mpirun --with-ft ulfm`` a dead rank surfaces as ``MPI_ERR_PROC_FAILED``:
it is raised as ``RankFailedError`` naming the dead rank and its pid, and the communicators
are revoked so every survivor stops waiting.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import weakref
from typing import Any, List, Optional

import numpy as np

from .. import _npurt
from . import _mpi_ops as ops
from . import _mpi_small as small
from ._backend import collective_error
from ._mpi_data import native_handles
from ._mpi_fail import _NOTICE_BYTES, MpiFailures
from ._mpi_load import load_mpi
from ._mpi_small import Call, describe

_TAG_HDR, _TAG_P2P_HDR, _TAG_P2P = 7101, 7103, 7104  # (7102: abort notices, `_mpi_fail`)
_HOT_S = 0.000005  # poll MPI_Test back to back this long (MPI progresses only inside its calls:
# longer starves a peer that shares this core; none when the host has more ranks than cores),
_SPIN_S = 0.002  # then yielding the core between polls this long, then sleeping between polls
_DATA_SPIN_S = 0.05  # (the data exchange, once every rank arrived, yields this long)


class MpiComm(MpiFailures):
    """A group's MPI side. ``ranks``: the group's global ranks (None: every rank)."""

    def __init__(self, ranks: Optional[List[int]] = None) -> None:
        MPI = self.MPI = load_mpi()
        world = MPI.COMM_WORLD
        if ranks is None or list(ranks) == list(range(world.Get_size())):
            base = world
        else:
            grp = world.Get_group().Incl(list(ranks))
            base = world.Create_group(grp, tag=_TAG_HDR)
            grp.Free()
        self.data, self.ctl, self.note = base.Dup(), base.Dup(), base.Dup()  # note: never revoked
        for c in (self.data, self.ctl, self.note):
            c.Set_errhandler(MPI.ERRORS_RETURN)
        self.rank, self.size = self.ctl.Get_rank(), self.ctl.Get_size()
        self.peers = [p for p in range(self.size) if p != self.rank]
        self.pids = self.ctl.allgather(os.getpid())
        self.hosts = self.ctl.allgather(MPI.Get_processor_name())
        self.ulfm = os.environ.get("OMPI_MCA_mpi_ft_enable", "") in ("1", "true")
        self.failed: Optional[BaseException] = None
        self.failed_seq = 0
        self._lock = threading.Lock()
        self._keep: List[Any] = []  # requests (and buffers) abandoned by an abort
        self._notice_buf = bytearray(_NOTICE_BYTES)
        self._post_notice()
        self._left: dict = {}  # rank -> (last collective it took part in, why it left)
        self.closed = False
        self._last_seq = 0
        _ALL.add(self)
        self._status = MPI.Status()
        self._statuses: List[Any] = []  # _wait's MPI_Testsome statuses
        self.eager_limit = small.eager_limit()
        local = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "")
        crowded = local.isdigit() and int(local) > len(os.sched_getaffinity(0))
        self._hot_s = 0.0 if crowded else _HOT_S
        # every rank of the group has a core (the same answer on every rank: the one-phase rule's)
        self.spread = self.size > 1 and not any(self.ctl.allgather(crowded))
        # every collective's first exchange (the whole of a one-phase one): native code
        # calling libmpi (npurt_core::collective::mpi), with persistent per-peer receives
        # (also the one-call path's: `_MpiExchange.run_sync`, on once `enable_fast` ran)
        self._x: Any = None
        if self.size > 1:
            try:  # MPI's functions are looked up through mpi4py's extension module (its libmpi)
                self._x = _npurt._MpiExchange(MPI._handleof(self.ctl), MPI._handleof(MPI.BYTE),
                                              MPI._sizeof(MPI.Request), MPI._sizeof(MPI.Status), MPI.UNDEFINED,
                                              self.rank, self.size, _TAG_HDR, small.inbox_bytes(self.size),
                                              self._hot_s, getattr(MPI, "__file__", None))
            except Exception as e:  # noqa: BLE001 - reported as the backend being unavailable
                from ..exceptions import UnavailableError

                raise UnavailableError(f"backend 'mpi': cannot call this MPI library natively: {e}") from None
            self._x.notice = self._notice_h
            self._x.set_data(*native_handles(MPI, self.data))  # two-phase calls' data phase, natively
        self._x0 = self._x  # (`_x` is dropped after a failure that leaves MPI owning its buffers)
        self._seq0 = 0  # the collective numbering of a group of one (else `_x0`'s)

    # -- the entry point -------------------------------------------------------------
    def run(self, c: Call) -> None:
        """Runs one collective on this thread; raises the collective errors."""
        with self._lock:
            if self.failed is not None:
                raise self.aborted_error(c, self.failed)
            self._last_seq = c.seq
            deadline = time.monotonic() + c.timeout_s
            try:
                self._check_left(c)
                if c.kind in ("send", "recv"):
                    self._p2p(c, deadline)
                elif small.eligible(c.kind, c.dtype, c.count, self.size, self.eager_limit, c.op, self.spread):
                    c.eager = True
                    self._exchange(c, deadline)
                elif self.size > 1 and small.native_data(c, self.size):
                    self._exchange(c, deadline, data=True)  # headers and data, natively
                else:
                    if self.size > 1:
                        self._exchange(c, deadline)
                    self._data(c, deadline)
            except self.MPI.Exception as e:
                raise self._fail(self._mpi_failure(c, e), c.seq) from None
            except BaseException as e:
                self._fail(e, c.seq)
                raise

    def native_call(self, kind: int, seq: int, dtype: int, count: int, op: int, root: int, timeout_s: float,
                    left_s: float, st: int, info: Any, send_a: Any, recv_a: Any) -> None:
        """The one-call path's collective (``_MpiExchange.run_sync``, its host task) when
        the native exchange did not simply complete it: ``st`` as in :meth:`_settle`; 5: it
        did not start (the group failed or a rank left since it was queued): runs as
        :meth:`run`; 6: a signal interrupted the wait (the group is then failed, as when
        the Python wait is interrupted). Raises the collective's error."""
        recv_a = send_a if recv_a is None else recv_a  # in place
        send_mv = ops.native_view(send_a)
        recv_mv = send_mv if recv_a is send_a else ops.native_view(recv_a)
        c = Call(small.KIND_NAMES[kind], seq, ops.NAMES_BY_CODE[dtype], count, op, root, send_mv, recv_mv, -1, timeout_s)
        c.arrays = (send_a, recv_a)
        if st == 5:
            self.run(c)
            return
        with self._lock:
            c.eager = True
            self._last_seq = max(self._last_seq, seq)
            try:
                if st == 6:
                    raise KeyboardInterrupt
                self._settle(c, time.monotonic() + left_s, st, info)
            except self.MPI.Exception as e:
                raise self._fail(self._mpi_failure(c, e), c.seq) from None
            except BaseException as e:
                self._fail(e, c.seq)
                raise

    def enable_fast(self, timeout_s: float) -> None:
        """Turns the one-call path on (``MpiBackend.one_call``) with the group's deadline."""
        if self._x0 is not None and self.failed is None and not self._left and not self.closed:
            # (the group size's part of the rule is the native one's: `_mpi_small.eligible`)
            self._x0.set_fast(functools.partial(_native_call, weakref.ref(self)), timeout_s, self.eager_limit, self.spread)

    def set_fast_timeout(self, timeout_s: float) -> None:
        if self._x0 is not None:
            self._x0.set_timeout(timeout_s)

    def next_seq(self) -> int:
        """Claims the next collective number (in enqueue order, shared with the one-call path)."""
        if self._x0 is not None:
            return int(self._x0.next_seq())
        self._seq0 += 1
        return self._seq0

    @property
    def seq(self) -> int:
        """The last collective number claimed."""
        return int(self._x0.seq) if self._x0 is not None else self._seq0

    # -- waiting ---------------------------------------------------------------------
    def _wait(self, c: Call, reqs: List[Any], deadline: float, on_timeout: Any, hot: bool = False) -> None:
        """Polls ``reqs`` until done or ``deadline``: back to back for 5 µs (none with more
        ranks than cores here: a spin keeps a peer sharing the core from sending what it
        waits for), then yielding the core between polls, then sleeping (backing off to
        1 ms). A poll is one ``MPI_Testsome`` over ``reqs`` and the abort-notice receive
        (a notice is seen even by a rank whose exchange completes at once). Arrival yields
        for 2 ms; the data exchange (``hot``: every rank arrived) for 50 ms: Open MPI's
        non-blocking collectives progress only inside MPI calls (DESIGN.md, "Collectives
        over MPI")."""
        MPI = self.MPI
        t0 = time.monotonic()
        spin = _DATA_SPIN_S if hot else _SPIN_S
        pause = 0.0
        polled, left, sts = list(reqs) + [self._notice], len(reqs), self._statuses
        while True:
            done = MPI.Request.Testsome(polled, sts)
            for k, i in enumerate(done or ()):
                if i < len(reqs):
                    left -= 1
                else:  # raises, or records a rank that left and receives the next notice
                    self._on_notice(c, sts[k])
                    polled[-1] = self._notice
            if not left:
                return
            now = time.monotonic()
            if now >= deadline:
                self._keep.append(reqs)
                raise on_timeout()
            if now - t0 < self._hot_s:
                continue
            if now - t0 < spin:
                os.sched_yield()
            else:
                pause = min(pause * 2 or 20e-6, 1e-3, max(deadline - now, 0.0))
                time.sleep(pause)


    # -- phase 1: headers (the whole collective on the one-phase path) ---------------
    def _exchange(self, c: Call, deadline: float, data: bool = False) -> None:
        """Sends every peer this rank's header (one-phase: followed by the data the peer
        needs), receives every peer's, checks that every rank called the same collective
        and, one-phase, completes it (``data``: a two-phase call whose data phase then runs
        natively too): all in ``_MpiExchange.run`` (native, GIL released); what it cannot
        finish comes back as a status for the errors below."""
        x = self._x
        send, recv = c.arrays
        if c.eager:
            src = recv if c.kind == "broadcast" else send  # the payload: the root's buffer / the input
        elif data:
            src = send
        else:
            src = recv = None
        st, info = x.run(small.KINDS[c.kind], c.seq, ops.DTYPES[c.dtype][0], c.count, c.op, c.root, c.eager, src,
                         recv, deadline - time.monotonic(), self._notice_h, data)
        self._settle(c, deadline, st, info)

    def _settle(self, c: Call, deadline: float, st: int, info: Any) -> None:
        """The rest of an exchange that ``_MpiExchange`` ended with status ``st`` (see its
        ``run``): done, or the wait resumed after an abort notice that did not end it, or
        the error (timeout, MPI error, desync: every rank words it the same way)."""
        x = self._x
        while st == 3:  # an abort notice came: raises, or records a rank that left (then go on)
            self._check_notice(c)
            st, info = x.resume(deadline - time.monotonic(), self._notice_h)
        if st == 0:
            return
        if st != 2:  # MPI may still use the exchange's buffers: it is kept, never reused
            self._keep.append(x)
            self._x = None
        if st == 1:
            raise self._timeout(c, list(info))
        if st == 4:
            if info < 0:  # the native side's own refusal (a message over the rows, a pending exchange)
                raise collective_error("internal", c.label(), c.seq, [], f"native exchange refused the call ({info})",
                                       self.rank)
            raise self.MPI.Exception(info)
        theirs = np.frombuffer(info, np.int64).reshape(self.size, -1)
        first = theirs[0]
        for p in range(1, self.size):
            if not np.array_equal(theirs[p], first):
                if np.array_equal(theirs[p][:7], first[:7]):
                    detail = (f"rank 0 and rank {p} called {describe(first)} but took different paths "
                              "(NPURT_MPI_EAGER_BYTES differs between them)")
                else:
                    detail = f"rank 0 called {describe(first)}, rank {p} called {describe(theirs[p])}"
                raise collective_error("desync", c.label(), c.seq, [0, p], detail, self.rank)

    # -- phase 2: data ---------------------------------------------------------------
    def _data(self, c: Call, deadline: float) -> None:
        from ._mpi_data import start

        reqs, finish = start(self, c)
        self._wait(c, reqs, deadline, lambda: self._timeout(c, []), hot=True)
        if finish is not None:
            finish()

    # -- point to point --------------------------------------------------------------
    def _p2p(self, c: Call, deadline: float) -> None:
        MPI = self.MPI
        mine = c.header()
        if c.kind == "send":
            reqs = [self.ctl.Isend([mine, MPI.INT64_T], dest=c.peer, tag=_TAG_P2P_HDR),
                    self.data.Isend([c.send, MPI.BYTE], dest=c.peer, tag=_TAG_P2P)]
            self._keep_on_timeout(c, reqs, deadline, mine)
            return
        theirs = np.zeros_like(mine)
        hreq = self.ctl.Irecv([theirs, MPI.INT64_T], source=c.peer, tag=_TAG_P2P_HDR)
        self._keep_on_timeout(c, [hreq], deadline, theirs)
        if theirs[3] != mine[3] or theirs[4] != mine[4]:
            detail = (f"rank {c.peer} sent {ops.NAMES_BY_CODE.get(int(theirs[3]))}[{int(theirs[4])}], "
                      f"rank {self.rank} receives {c.dtype}[{c.count}]")
            raise collective_error("desync", c.label(), c.seq, [c.peer], detail, self.rank)
        self._keep_on_timeout(c, [self.data.Irecv([c.recv, MPI.BYTE], source=c.peer, tag=_TAG_P2P)], deadline, c.recv)

    def _keep_on_timeout(self, c: Call, reqs: List[Any], deadline: float, buf: Any) -> None:
        def late() -> BaseException:
            self._keep.append(buf)
            return self.timeout_error(c, [c.peer], c.timeout_s)

        self._wait(c, reqs, deadline, late)

    # -- teardown --------------------------------------------------------------------
    def close(self, why: str = "left the communicator (destroy_process_group)") -> None:
        """Leaves the group: peers still waiting for this rank get RankFailedError at once;
        the communicators are freed (an aborted one's are left to the process's exit)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self.failed is None:
                self._notify({"kind": "left", "seq": max(self._last_seq, self.seq), "rank": self.rank,
                              "what": f"{why} (pid {os.getpid()})"})
            try:
                if not self._notice.Test():
                    self._notice.Cancel()
                    self._notice.Wait()
            except self.MPI.Exception:
                return
            if self.failed is None:
                if self._x is not None:
                    self._x.close()
                for comm in (self.data, self.ctl):
                    comm.Free()


_ALL: "weakref.WeakSet[MpiComm]" = weakref.WeakSet()


def _native_call(ref: Any, *args: Any) -> None:
    """The one-call path's handler (a weak reference: the native object holds it)."""
    comm = ref()
    if comm is None:
        raise RuntimeError("the mpi group was destroyed while a collective was queued")
    comm.native_call(*args)


def healthy() -> bool:
    """No group of this process failed (then ``MPI_Finalize`` at exit is safe)."""
    return all(c.failed is None for c in list(_ALL))


def known_peers() -> set:
    """``(host, pid)`` of every other process in this process's groups."""
    me = os.getpid()
    return {(h, p) for c in list(_ALL) for h, p in zip(c.hosts, c.pids, strict=True) if p != me}


def close_all(why: str) -> None:
    for c in list(_ALL):
        c.close(why)
