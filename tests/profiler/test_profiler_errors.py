"""Errors that point at the right line: a task keeps its launch's call site, so the
failure raised at a later synchronize() names it; NPURT_DUMP_ON_ERROR dumps the flight
recorder's last task records as a trace (the same writer) when that error is raised."""

import json
import os

from helpers import run_python
from trace_check import check_trace

FAILING = """
    import npurt
    s = npurt.Stream()
    npurt.kernels.empty(stream=s)
    npurt.kernels.fault("boom", stream=s)   # line 5: the failing launch
    npurt.kernels.empty(stream=s)
    try:
        s.synchronize()
    except npurt.TaskFailedError as e:
        print("ERR", e)
"""


def test_an_async_failure_names_the_launch_line():
    r = run_python(FAILING, env={"NPURT_CALL_SITES": "1"})
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "boom" in r.stdout
    assert "(launched at <string>:5)" in r.stdout, r.stdout


def test_without_call_sites_the_message_is_unchanged():
    r = run_python(FAILING)
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "launched at" not in r.stdout


def test_dump_on_error_writes_the_last_tasks_as_a_trace(tmp_path):
    path = str(tmp_path / "dump.json")
    r = run_python(FAILING, env={"NPURT_DUMP_ON_ERROR": path})
    assert r.returncode == 0, r.stderr
    assert "(launched at <string>:5)" in r.stdout
    assert os.path.exists(path)
    summary = check_trace(path)
    tasks = summary.device_tasks()
    failed = [t for t in tasks if t["args"].get("failed")]
    assert len(failed) == 1 and failed[0]["name"] == "fault" and failed[0]["args"]["site"] == "<string>:5"
    assert json.load(open(path))["npurtError"].startswith("stream")


def test_a_wait_timeout_dumps_too(tmp_path):
    path = str(tmp_path / "timeout.json")
    code = """
        import npurt
        s = npurt.Stream()
        npurt.kernels.busy(0.5, stream=s)
        try:
            s.synchronize(timeout=0.01)
        except npurt.WaitTimeoutError as e:
            print("TIMEOUT", e)
        s.synchronize()
    """
    r = run_python(code, env={"NPURT_DUMP_ON_ERROR": path})
    assert r.returncode == 0, r.stderr
    assert "TIMEOUT" in r.stdout and os.path.exists(path)
    check_trace(path)
