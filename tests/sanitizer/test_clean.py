"""Correct programs give no report: the examples run under NPURT_SANITIZER=all exit 0
with ``ERROR SUMMARY: 0 errors`` (and still print their correctness line)."""

import pathlib

import pytest

from .helpers_san import ROOT, run_sanitized

EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))
# Scripts that start other processes or need extras are run by tests/test_examples.py only.
SKIP = {"data_parallel.py", "shared_weights.py"}


@pytest.mark.parametrize("script", [s for s in EXAMPLES if s not in SKIP])
def test_example_is_clean_under_the_sanitizer(script):
    r, rep = run_sanitized([ROOT / "examples" / script], timeout=180)
    assert r.returncode == 0, f"{script}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-6000:]}"
    assert "========= ERROR SUMMARY: 0 errors" in r.stderr.splitlines(), r.stderr[-6000:]
    assert rep is not None and rep["errors"] == 0, rep
    assert f"{pathlib.Path(script).stem}: OK" in r.stdout.splitlines(), r.stdout[-2000:]
