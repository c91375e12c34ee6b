"""The per-process status record that ``npurt-smi`` reads.

While a device is active, a daemon thread rewrites ``<dir>/<pid>.json`` every
``NPURT_STATUS_INTERVAL`` seconds (default 0.5; written to a temporary file and renamed,
so readers never see half a record) with each active device's memory, live events and
AI-core utilisation over the last second (from the executor's busy-time counters). The
record goes when no device is active and at exit; a process killed without exiting leaves
it behind, and ``npurt-smi`` tells that by the pid (shown stale once, then removed).
``NPURT_STATUS=0`` turns the record off. The directory: ``NPURT_STATUS_DIR``, else
``/dev/shm/npurt-<uid>``, else ``$XDG_RUNTIME_DIR/npurt``, else the temp dir (created 0700;
one owner of the rule, in Rust). Each refresh also publishes the process's live streams and
events in the device's shared status region (memory is published there on every
allocation), which ``npurt-smi`` reads beside these records.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

__all__ = ["record_path", "start", "status_dir"]


def status_dir() -> Path:
    """The per-user status directory; the rule (and its 0700 check) is Rust's
    (``npurt_core::shared::status_dir``), shared with the device regions."""
    from . import _npurt

    return Path(_npurt._status_dir())


def record_path(pid: int | None = None) -> Path:
    return status_dir() / f"{os.getpid() if pid is None else pid}.json"


def _proc_name() -> str:
    try:
        with open(f"/proc/{os.getpid()}/comm") as f:
            comm = f.read().strip()
    except OSError:
        comm = ""
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return f"{comm}:{script}" if script and script != comm else (comm or script or "python")


class _Writer:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.samples: dict[int, deque[tuple[float, int]]] = {}
        try:
            self.path = record_path()
        except Exception:  # noqa: BLE001 - an unsafe status directory: no record
            self.path = None
        self.written = False
        self.stop = threading.Event()

    def snapshot(self) -> dict[str, Any] | None:
        from . import _npurt

        if not _npurt._runtime_initialized():
            # Nothing used a device yet: reading the configuration now would fix it before
            # the program set NPURT_DEVICE_COUNT & co (a pytest plugin imports npurt first).
            return None
        try:
            n = _npurt.get_config()["device_count"]
        except Exception:  # noqa: BLE001 - a broken config: nothing to report
            return None
        devices = []
        now = time.monotonic()
        for d in range(n):
            try:
                st = _npurt._device_status(d)
            except Exception:  # noqa: BLE001 - a device going away while read
                st = None
            if st is None:
                self.samples.pop(d, None)
                continue
            q = self.samples.setdefault(d, deque())
            q.append((now, st["busy_ns"]))
            while len(q) > 2 and now - q[1][0] >= 1.0:
                q.popleft()
            (t0, b0), (t1, b1) = q[0], q[-1]
            # The one utilisation rule is Rust's (npurt_core::busy_percent).
            busy = _npurt._busy_percent(max(0, b1 - b0), max(0, int((t1 - t0) * 1e9)), max(1, st["workers"]))
            st["aicore_util"] = round(busy, 1)
            st["device"] = d
            devices.append(st)
        if not devices:
            return None
        streams, events, contexts = _npurt.live_counts()
        return {
            "pid": os.getpid(),
            "name": _proc_name(),
            "updated": time.time(),
            "interval": self.interval,
            "streams": streams,
            "contexts": contexts,
            "devices": devices,
        }

    def write(self) -> None:
        if self.path is None:
            return
        rec = self.snapshot()
        if rec is None:
            self.remove()
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{threading.get_ident()}")
        tmp.write_text(json.dumps(rec))
        os.replace(tmp, self.path)
        self.written = True

    def remove(self) -> None:
        if self.written and self.path is not None and self.path.name == f"{os.getpid()}.json":
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            self.written = False

    def loop(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                self.write()
            except Exception:  # noqa: BLE001 - a full /dev/shm must not kill the app
                pass

    def close(self) -> None:
        self.stop.set()
        self.remove()


_writer: _Writer | None = None


def start() -> None:
    """Starts the record's thread (once per process; at ``import npurt``)."""
    global _writer
    if _writer is not None or os.environ.get("NPURT_STATUS", "1") == "0":
        return
    try:
        interval = float(os.environ.get("NPURT_STATUS_INTERVAL", "0.5"))
    except ValueError:
        interval = 0.5
    _writer = _Writer(max(0.05, interval))
    threading.Thread(target=_writer.loop, name="npurt-status", daemon=True).start()
    atexit.register(_writer.close)
    os.register_at_fork(after_in_child=_forget)


def _forget() -> None:
    # A forked child has no writer thread and must not remove its parent's record.
    if _writer is not None:
        _writer.written = False
