"""``MpiComm``'s failures (``_mpi_comm.py``): the abort notices ranks send each other (a
rank that failed a collective, timed out, or left), and the errors a collective raises
when it times out, when the group was aborted before it, and when MPI reports an error
or, under ULFM, a dead process (the communicators are then revoked so every survivor
stops waiting). A mixin: the methods use ``MpiComm``'s state (``MPI``, ``ctl``, ``note``,
``rank``, ``peers``, ``failed``, ``pids``, ``hosts``, ``_x0``, ``_left``).
"""

from __future__ import annotations

import json
import time
from typing import Any, List, Optional

from ._backend import collective_error
from ._mpi_small import Call

_TAG_NOTICE = 7102
_NOTICE_BYTES = 4096


def _text(e: BaseException) -> str:
    return str(getattr(e, "message", e))


def _aborted(label: str, seq: int, at: int, reason: str, like: Optional[BaseException], cls_name: Optional[str]) -> BaseException:
    """"{op} (collective #{seq}) cannot run: the communicator was aborted at collective #{at}:
    {reason}" (the engine's Aborted wording) with the class of the failure that aborted it."""
    from .. import exceptions as exc

    msg = f"{label} (collective #{seq}) cannot run: the communicator was aborted at collective #{at}: {reason}"
    cls = type(like) if like is not None else getattr(exc, cls_name or "", None)
    if not (isinstance(cls, type) and issubclass(cls, exc.Error)):
        cls = getattr(exc, "RankFailedError", exc.InternalError)
    err = cls(msg)
    if like is not None and hasattr(like, "code"):
        err.code, err.name = like.code, like.name
    return err


class MpiFailures:
    """The error half of ``MpiComm``."""

    MPI: Any
    ctl: Any
    data: Any
    rank: int
    size: int
    failed: Optional[BaseException]
    failed_seq: int
    pids: List[int]
    hosts: List[str]
    _x0: Any
    _last_seq: int
    note: Any
    peers: List[int]
    _left: dict
    _keep: List[Any]
    _status: Any
    _notice: Any
    _notice_h: int
    _notice_buf: bytearray

    # -- abort notices -----------------------------------------------------------------
    def _check_notice(self, c: Call) -> None:
        while self._notice.Test(self._status):
            self._on_notice(c, self._status)

    def _on_notice(self, c: Call, status: Any) -> None:
        """Handles the notice that came (``status``: its receive's): raises the error it
        means for ``c``, or records a rank that left (raising if ``c`` needs it)."""
        src = status.Get_source()
        try:
            note = json.loads(bytes(self._notice_buf[: status.Get_count(self.MPI.BYTE)]).decode())
        except ValueError:
            note = {"msg": "(unreadable abort notice)"}
        self._post_notice()
        if note.get("kind") == "left":  # fine for the collectives it took part in
            self._left[int(note.get("rank", src))] = (int(note.get("seq", 0)), str(note.get("what", "left")))
            if self._x0 is not None:
                self._x0.set_fast(None)  # `run` checks the collectives that need that rank
            self._check_left(c)
            return
        missing = note.get("missing")
        if note.get("kind") == "timeout" and note.get("seq") == c.seq and missing and self.rank not in missing:
            err = self.timeout_error(c, missing, float(note.get("secs", c.timeout_s)))
        elif note.get("kind") == "rank_failed" and note.get("rank") != self.rank:
            err = collective_error("rank_failed", c.label(), c.seq, [int(note["rank"])], note.get("what", "failed"), self.rank)
        else:
            err = _aborted(c.label(), c.seq, int(note.get("seq", c.seq)), f"rank {src}: {note.get('msg', '?')}",
                           None, str(note.get("cls", "RankFailedError")))
        raise self._fail(err, int(note.get("seq", c.seq)))

    def _check_left(self, c: Call) -> None:
        if c.kind not in ("send", "recv"):
            for r, (seq, what) in self._left.items():
                if c.seq > seq:  # this collective needs rank r, which left after #seq
                    raise self._fail(collective_error("rank_failed", c.label(), c.seq, [r], what, self.rank), c.seq)

    def _post_notice(self) -> None:
        self._notice = self.note.Irecv([self._notice_buf, self.MPI.BYTE], source=self.MPI.ANY_SOURCE, tag=_TAG_NOTICE)
        self._notice_h = self.MPI._handleof(self._notice)  # the native exchange watches it
        x = getattr(self, "_x0", None)
        if x is not None:
            x.notice = self._notice_h

    def _notify(self, note: dict) -> None:
        """Tells every peer this communicator is aborted (best effort, never waits)."""
        data = json.dumps(note).encode()[:_NOTICE_BYTES]
        for p in self.peers:
            try:
                self._keep.append((self.note.Isend([data, self.MPI.BYTE], dest=p, tag=_TAG_NOTICE), data))
            except self.MPI.Exception:
                pass

    # -- errors ------------------------------------------------------------------------
    def _fail(self, err: BaseException, seq: int) -> BaseException:
        """Records the group's first failure (every later collective is aborted by it)."""
        if self.failed is None:
            self.failed, self.failed_seq = err, seq
        if self._x0 is not None:
            self._x0.set_fast(None)  # every later call takes `run`, which raises the aborted error
        return err

    def aborted_error(self, c: Optional[Call], failed: BaseException, kind: str = "") -> BaseException:
        """The error of a collective that cannot run because ``failed`` aborted the group:
        the same class, "cannot run: the communicator was aborted at collective #n: ..."."""
        label, seq = (c.label(), c.seq) if c is not None else (kind, max(self._last_seq, self.seq) + 1)
        return _aborted(label, seq, self.failed_seq, _text(failed), failed, None)

    def _timeout(self, c: Call, missing: List[int]) -> BaseException:
        err = self.timeout_error(c, missing, c.timeout_s)
        self._notify({"kind": "timeout", "seq": c.seq, "missing": missing, "secs": c.timeout_s, "msg": _text(err),
                      "cls": type(err).__name__})
        return err

    def timeout_error(self, c: Call, missing: List[int], secs: float) -> BaseException:
        """The engine's timeout error naming the ranks that did arrive (this backend knows
        them: their headers came); ``missing`` empty: every rank arrived and the data
        exchange stalled."""
        return collective_error("timeout", c.label(), c.seq, missing, f"{secs}", self.rank, self.size)

    def _mpi_failure(self, c: Call, e: Any) -> BaseException:
        MPI = self.MPI
        cls = e.Get_error_class()
        ulfm = (getattr(MPI, "ERR_PROC_FAILED", -1), getattr(MPI, "ERR_PROC_FAILED_PENDING", -1),
                getattr(MPI, "ERR_REVOKED", -1))
        if cls in ulfm or (cls == MPI.ERR_IN_STATUS and self._failed_ranks()):
            dead = self._failed_ranks()
            if dead:
                r = dead[0]
                what = f"died (pid {self.pids[r]} on {self.hosts[r]}; MPI reports a process failure)"
                self._notify({"kind": "rank_failed", "seq": c.seq, "rank": r, "what": what})
            for comm in (self.data, self.ctl):
                try:
                    comm.Revoke()
                except MPI.Exception:
                    pass
            if dead:
                return collective_error("rank_failed", c.label(), c.seq, [r], what, self.rank)
            # revoked by a peer that saw the failure: its notice names the dead rank
            until = time.monotonic() + 1.0
            while time.monotonic() < until:
                try:
                    self._check_notice(c)
                except MPI.Exception:
                    break
                except BaseException as err:  # noqa: BLE001 - the notice's error
                    return err
                time.sleep(1e-3)
            return _aborted(c.label(), c.seq, c.seq, "a peer revoked the communicator after a process failure", None,
                            "RankFailedError")
        return collective_error("internal", c.label(), c.seq, [], f"MPI error: {e.Get_error_string()}", self.rank)

    def _failed_ranks(self) -> List[int]:
        try:
            g = self.ctl.Get_failed()
            n = g.Get_size()
            if n == 0:
                return []
            mine = self.ctl.Get_group()
            return sorted(r for r in self.MPI.Group.Translate_ranks(g, list(range(n)), mine) if r >= 0)
        except (self.MPI.Exception, AttributeError, NotImplementedError):
            return []
