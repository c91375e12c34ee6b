"""``pytest -p npurt.sanitizer.pytest``: runs every test with the sanitizer on (the tools
of ``NPURT_SANITIZER``, default ``all``) and fails a test whose run produced a report,
showing the report.

A test is watched from the start of its set-up to the end of its tear-down (fixtures
allocate and free too): errors found up to the end of the test's body fail the test;
errors of its tear-down, and explicit-free allocations made during the test and still live
after its tear-down (leaks), are an error at tear-down.

A test that misuses the runtime on purpose (to test npurt's answer to the misuse) says
which reports it must produce::

    @pytest.mark.npurt_sanitizer(expect=["double-free", "invalid-free"])

Under the plugin such a test fails unless each expected kind was reported by the end of
its body, and fails on any report of another kind; ``allow=[kinds]`` names kinds a
randomised test may or may not produce (a fuzzer racing copies on purpose). Without the
plugin the marker does nothing.
"""

from __future__ import annotations

import json
import os
from typing import List, Set

import pytest

from .. import _npurt
from . import ENV, enable, enabled

MARKER = "npurt_sanitizer"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"{MARKER}(expect=[kinds], allow=[kinds]): the sanitizer reports this test must (may) produce"
    )


def _expected(item) -> Set[str]:
    m = item.get_closest_marker(MARKER)
    return set(m.kwargs.get("expect", ())) if m else set()


def _allowed(item) -> Set[str]:
    m = item.get_closest_marker(MARKER)
    return set(m.kwargs.get("allow", ())) if m else set()


def _kinds(js: str) -> List[str]:
    return [f["kind"] for f in json.loads(js)["findings"]]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    tools = os.environ.get(ENV, "").strip() or "all"
    item._npurt_san = {"before": ",".join(enabled()), "seen": []}
    enable(tools)
    item._npurt_san["since"], item._npurt_san["mark"] = _npurt._sanitizer_begin()
    return (yield)


def _take(item, leaks: bool):
    st = item._npurt_san
    memcheck = "memcheck" in enabled()
    if leaks and memcheck:
        _npurt._sanitizer_leaks_since(st["mark"])
    return _npurt._sanitizer_report(True, memcheck, st["since"])


def _judge(item, st, n: int, text: str, js: str, final: bool) -> None:
    # `final`: the test's body ended (without raising); every expected kind must have come.
    want = _expected(item)
    kinds = _kinds(js) if n else []
    st["seen"] += kinds
    other = sorted(set(kinds) - want - _allowed(item))
    if other:
        pytest.fail(f"npurt sanitizer: {n} error(s) ({', '.join(other)} not expected)\n{text}", pytrace=False)
    missing = sorted(want - set(st["seen"]))
    if final and missing:
        pytest.fail(f"npurt sanitizer: expected report(s) not produced: {', '.join(missing)}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    res = yield
    if hasattr(item, "_npurt_san"):
        n, text, js = _take(item, leaks=False)
        _judge(item, item._npurt_san, n, text, js, final=True)
    return res


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        res = yield
    finally:
        st = getattr(item, "_npurt_san", None)
        if st is not None:
            n, text, js = _take(item, leaks=True)
            enable(st["before"])
            del item._npurt_san
            _judge(item, st, n, text, js, final=False)
    return res
