"""``pytest -p npurt.sanitizer.pytest``: runs every test with the sanitizer on (the tools
of ``NPURT_SANITIZER``, default ``all``) and fails a test whose run produced a report,
showing the report."""

from __future__ import annotations

import os

import pytest

from . import ENV, check


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    tools = os.environ.get(ENV, "").strip() or "all"
    with check(tools) as rep:
        res = yield
    if rep.errors:
        pytest.fail(f"npurt sanitizer: {rep.errors} error(s)\n{rep.text}", pytrace=False)
    return res
