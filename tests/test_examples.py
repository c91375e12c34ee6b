"""The scripts in examples/ run in CI: each in a fresh interpreter, within a time limit,
exiting 0 and printing its ``<name>: OK`` correctness line."""

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def test_there_are_examples():
    assert {"acl_memcpy_overlap.py", "acl_callbacks.py", "npu_streams_events.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs_and_is_correct(script):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPURT_")}
    r = subprocess.run([sys.executable, str(EXAMPLES / script)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{script} failed:\n{r.stdout}\n{r.stderr}"
    name = script.removesuffix(".py")
    assert f"{name}: OK" in r.stdout.splitlines(), r.stdout
    assert "Traceback" not in r.stderr, r.stderr
