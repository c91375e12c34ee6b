"""npurt's sanitizer: memcheck, racecheck and synccheck, with the host as a participant.

Switch it on for a whole program with ``NPURT_SANITIZER=memcheck,racecheck,synccheck``
(or ``all``; ``initcheck``, reads of device memory never written, and memcheck's
``padding``, a redzone behind each ``acl.rt.malloc`` block, are opt-in:
``all,initcheck,padding``) in the environment, or from code::

    npurt.sanitizer.enable("all")          # until disable()
    with npurt.sanitizer.check("racecheck") as rep:   # just this block
        ...
    print(rep.errors, rep.text)

Each error is printed to stderr when found, in compute-sanitizer's layout (every line
prefixed ``=========``); at exit the summary follows (``LEAK SUMMARY``, ``ERROR SUMMARY``),
``NPURT_SANITIZER_JSON=path`` also writes the JSON report, and
``NPURT_SANITIZER_EXITCODE=n`` makes a run with errors exit with status ``n``. The rules
live in npurt-core (``npurt_core::sanitizer``); this module only switches and reports.
``pytest -p npurt.sanitizer.pytest`` fails every test that produced a report.
"""

from __future__ import annotations

import atexit
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, List, Optional

from .. import _npurt

__all__ = ["Report", "enable", "disable", "enabled", "check", "report", "ENV", "EXITCODE_ENV", "JSON_ENV"]

ENV = "NPURT_SANITIZER"
EXITCODE_ENV = "NPURT_SANITIZER_EXITCODE"
JSON_ENV = "NPURT_SANITIZER_JSON"

_NAMES = (("memcheck", 1), ("racecheck", 2), ("synccheck", 4), ("initcheck", 8), ("padding", 16))

_exit_hooks: List[bool] = []

#: True while any tool is on (the Python fronts test it before calling their hooks).
active = False
#: True while memcheck's ``padding`` is on: pyACL's device allocations get a redzone.
padding = False


@dataclass(frozen=True)
class Report:
    """What the sanitizer found: ``errors`` (distinct errors), ``text`` (compute-sanitizer's
    layout with the summaries) and ``json`` (the same for tools)."""

    errors: int
    text: str
    json: str

    def __bool__(self) -> bool:
        return self.errors > 0


def enable(tools: str = "all", *, print_errors: bool = True) -> List[str]:
    """Enables exactly ``tools`` (``"memcheck,racecheck"``, ``"all"``; ``""`` disables);
    returns the names enabled. Unknown names: :class:`npurt.InvalidValueError`."""
    global active, padding
    if not isinstance(tools, str):
        tools = ",".join(tools)
    bits = _npurt._sanitizer_enable(tools, print_errors)
    active = bits != 0
    padding = bits & 17 == 17  # memcheck + padding
    if active and not _exit_hooks:
        # Enabled from code (not at import): check and summarise at exit.
        _exit_hooks.append(True)
        atexit.register(_finish)
        atexit.register(_leak_check)
    return enabled()


def disable() -> None:
    """Switches every tool off (findings so far stay in :func:`report`)."""
    enable("")


def enabled() -> List[str]:
    """The names of the tools that are on."""
    bits = _npurt._sanitizer_tools()
    return [n for n, b in _NAMES if bits & b]


def report(take: bool = False) -> Report:
    """The findings so far; ``take=True`` also clears them."""
    n, text, js = _npurt._sanitizer_report(take, "memcheck" in enabled(), 0)
    return Report(n, text, js)


@contextmanager
def check(tools: str = "all") -> Iterator[Report]:
    """Runs the block with ``tools`` on; the yielded report is filled in at the end with
    what the block produced (leaks: explicit-free allocations made and not freed in it).
    The previous tools are restored after it; earlier findings stay in :func:`report`."""
    before = ",".join(enabled())
    enable(tools)
    since, mark = _npurt._sanitizer_begin()
    holder = _Holder()
    try:
        yield holder  # type: ignore[misc]
    finally:
        memcheck = "memcheck" in enabled()
        if memcheck:
            _npurt._sanitizer_leaks_since(mark)
        n, text, js = _npurt._sanitizer_report(True, memcheck, since)
        enable(before)
        holder._fill(Report(n, text, js))


class _Holder(Report):
    """The report of a :func:`check` block, filled in when the block ends."""

    def __init__(self) -> None:
        object.__setattr__(self, "errors", 0)
        object.__setattr__(self, "text", "")
        object.__setattr__(self, "json", "")

    def _fill(self, r: Report) -> None:
        for k in ("errors", "text", "json"):
            object.__setattr__(self, k, getattr(r, k))


def _leak_check() -> None:
    # Before the runtime's teardown: what is still allocated at exit leaks.
    if active and "memcheck" in enabled():
        _npurt._sanitizer_at_exit()


def _finish() -> None:
    # After the teardown: the summary, the JSON file, the exit status.
    if not active:
        return
    r = report()
    sys.stderr.write(_summary(r.text))
    sys.stderr.flush()
    path = os.environ.get(JSON_ENV)
    if path:
        with open(path, "w") as f:
            f.write(r.json)
    code = os.environ.get(EXITCODE_ENV, "")
    if r.errors and code.strip() not in ("", "0"):
        sys.stdout.flush()
        os._exit(int(code))


def _summary(text: str) -> str:
    # Blocks were printed as they were found: at exit only the summary lines follow.
    return "".join(line for line in text.splitlines(True) if "SUMMARY:" in line)


def _from_env() -> None:
    """Enables the tools of ``NPURT_SANITIZER`` (at ``import npurt``) and arranges the
    exit report."""
    spec = os.environ.get(ENV, "")
    if spec.strip():
        _exit_hooks.append(True)
        enable(spec)
        atexit.register(_finish)


def _register_leak_check() -> None:
    """Registered after the runtime's teardown hook, so it runs before it."""
    if _exit_hooks:
        atexit.register(_leak_check)


def format_report(r: Optional[Report] = None) -> str:
    """The full text report (``report()`` by default)."""
    return (r or report()).text
