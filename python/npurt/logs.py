"""Runtime logs in Python's :mod:`logging`.

The runtime (Rust, ``npurt_core::logging``) decides what is logged: levels per module,
the environment variables (``NPURT_LOG_LEVEL``, ``ASCEND_GLOBAL_LOG_LEVEL``,
``ASCEND_MODULE_LOG_LEVEL``, ``ASCEND_LOG_PRINT_TO_STDOUT``, ``NPURT_LOG_FILE``) and the
plog line of the file and stdout sinks. This module only forwards: one daemon thread
(``npurt-log``) waits for records without the GIL and hands them to the loggers
``npurt.runtime``, ``npurt.mem``, ``npurt.kernel``, ``npurt.profiling`` and ``npurt.app``
(children of ``npurt``, which has a ``NullHandler``: configure :mod:`logging` to see them).

Records are queued by the thread that logs them (a worker, an engine, a host callback)
and never handed to Python there, so logging can never wait for the GIL: a full queue
(4096 records) drops records, counts them (:func:`dropped`) and says so once.

>>> import logging, npurt
>>> logging.basicConfig()
>>> npurt.set_log_level("debug")          # or NPURT_LOG_LEVEL=debug / ASCEND_GLOBAL_LOG_LEVEL=0
>>> npurt.get_log_level()
'debug'

:func:`set_log_level` wins over ``logging.getLogger("npurt").setLevel``: it decides what
the runtime produces and sets the ``npurt`` loggers' levels to match. A level set on those
loggers afterwards only filters on the Python side (it can hide records, not produce
records the runtime's level drops).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading

from . import _npurt

__all__ = ["MODULES", "dropped", "flush", "get_log_level", "set_log_level"]

#: The runtime's log modules (``ASCEND_MODULE_LOG_LEVEL`` names) and their loggers.
MODULES = {m: "npurt." + m.lower() for m, _ in _npurt._log_levels()}
_PY = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL + 10)
_BY_NAME = {"debug": 0, "info": 1, "warning": 2, "error": 3, "off": 4}
_root = logging.getLogger("npurt")
_root.addHandler(logging.NullHandler())
_loggers = {m: logging.getLogger(name) for m, name in MODULES.items()}


def _sync_levels() -> None:
    """Sets the ``npurt`` loggers' levels to the runtime's (module overrides on children)."""
    glob = _npurt._get_log_level()
    _root.setLevel(_PY[_BY_NAME[glob]])
    for m, lvl in _npurt._log_levels():
        _loggers[m].setLevel(logging.NOTSET if lvl == glob else _PY[_BY_NAME[lvl]])


def set_log_level(level: str | int, module: str | None = None) -> None:
    """Sets the runtime's log level: ``"debug"``, ``"info"``, ``"warning"``, ``"error"``
    (the default), ``"off"``; CANN's 0–4 or :mod:`logging`'s ``DEBUG``…``CRITICAL`` also
    work. ``module`` (``"RUNTIME"``, ``"MEM"``, ``"KERNEL"``, ``"PROFILING"``, ``"APP"``)
    sets one module only; without it every module is set (dropping module overrides)."""
    _npurt._set_log_level(level, module)
    _sync_levels()


def get_log_level(module: str | None = None) -> str:
    """The level name set for every module, or ``module``'s level."""
    return _npurt._get_log_level(module)


def dropped() -> int:
    """Records dropped because the forwarding queue was full (since the process started)."""
    return _npurt._log_dropped()


class _Forwarder:
    def __init__(self) -> None:
        self.lock = threading.RLock()  # one drain at a time keeps records in order
        self.stop = False
        self.thread: threading.Thread | None = None
        self.reported = False

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="npurt-log", daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop:
            try:
                if _npurt._log_wait(0.5):
                    self.flush()
            except Exception:  # noqa: BLE001 - the forwarder must not die (a handler raised)
                pass

    def flush(self) -> None:
        with self.lock:
            while True:
                batch = _npurt._log_take(512)
                for row in batch:
                    self.emit(*row)
                if len(batch) < 512:
                    break
            if not self.reported and _npurt._log_dropped():
                self.reported = True
                _root.warning(
                    "npurt: the log queue was full; %d runtime log records were dropped (later drops are "
                    "counted, not reported: npurt.logs.dropped())",
                    _npurt._log_dropped(),
                )

    @staticmethod
    def emit(level, module, message, file, line, created, tid, tname) -> None:
        logger = _loggers.get(module, _root)
        pylevel = _PY[level]
        if not logger.isEnabledFor(pylevel):
            return
        rec = logger.makeRecord(logger.name, pylevel, file, line, message, (), None)
        rec.created, rec.msecs = created, (created - int(created)) * 1000.0
        rec.relativeCreated = (created - getattr(logging, "_startTime", created)) * 1000.0
        rec.thread, rec.threadName = tid, tname or f"npurt-{tid}"
        rec.npurt_module = module
        logger.handle(rec)

    def shutdown(self) -> None:
        """At exit (after the runtime's teardown, whose leak warnings it delivers)."""
        self.stop = True
        _npurt._log_wake()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=2.0)
        self.flush()
        _npurt._log_forward(False)


_forwarder = _Forwarder()


def flush() -> None:
    """Delivers every record queued so far to :mod:`logging` (on the calling thread)."""
    _forwarder.flush()


def _after_fork_in_child() -> None:
    # The forwarder thread does not exist in a forked child (nor does the runtime): stop
    # queueing; the file and stdout sinks still write.
    _npurt._log_forward(False)


def start() -> None:
    """Installs the runtime's logger (reading the environment) and starts the forwarder.
    Called once by ``import npurt``, before the runtime's own exit handler is registered,
    so that at exit this flush runs after the runtime's teardown."""
    _npurt._log_init()
    _sync_levels()
    _forwarder.start()
    atexit.register(_forwarder.shutdown)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
