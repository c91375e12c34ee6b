"""NPURT_LAUNCH_BLOCKING=1 / ASCEND_LAUNCH_BLOCKING=1: every launch, copy and record waits
for completion and a failing task raises at its own call (the Python line), as
CUDA_LAUNCH_BLOCKING does. Each case runs in a child process with the variable set."""

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import numpy as np, npurt, traceback
    s = npurt.Stream()
    npurt.kernels.busy(0.05, stream=s)
    print("DONE_AFTER_LAUNCH", s.query())
    buf, host = npurt.malloc(1 << 20), npurt.malloc_host(1 << 20)
    npurt.kernels.busy(0.05, stream=s)
    npurt.memcpy_async(host, buf, s)
    print("DONE_AFTER_COPY", s.query())
    a = npurt.zeros((64, 64), dtype=np.float32, stream=s)
    npurt.add(a, 1.0, out=a, stream=s)
    print("DONE_AFTER_ARRAY_OP", s.query())
    try:
        npurt.kernels.fault("boom-lb", stream=s)  # FAULT_LINE
    except npurt.TaskFailedError as e:
        line = traceback.extract_tb(e.__traceback__)[-1]
        print("RAISED_AT", line.lineno, "boom-lb" in str(e))
    else:
        print("NOT_RAISED")
    """
)
FAULT_LINE = next(i for i, t in enumerate(CHILD.splitlines(), 1) if "FAULT_LINE" in t)


def _run(env_extra):
    env = {k: v for k, v in os.environ.items() if k not in ("NPURT_LAUNCH_BLOCKING", "ASCEND_LAUNCH_BLOCKING")}
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("var", ["NPURT_LAUNCH_BLOCKING", "ASCEND_LAUNCH_BLOCKING"])
def test_blocking_waits_and_raises_at_the_launch_line(var):
    out = _run({var: "1"})
    for what in ("LAUNCH", "COPY", "ARRAY_OP"):
        assert f"DONE_AFTER_{what} True" in out, out
    assert f"RAISED_AT {FAULT_LINE} True" in out, out


def test_default_is_asynchronous():
    out = _run({})
    assert "NOT_RAISED" in out, out


def test_npurt_variable_wins():
    out = _run({"NPURT_LAUNCH_BLOCKING": "0", "ASCEND_LAUNCH_BLOCKING": "1"})
    assert "NOT_RAISED" in out, out
