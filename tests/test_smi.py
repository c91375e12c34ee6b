"""npurt-smi across real processes: a child holding device memory shows up in another
process's smi output (table and JSON); after SIGKILL its record is shown stale once, then
cleaned. Each test uses a status directory of its own."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

MIB = 1 << 20

CHILD = """
import sys, time, npurt
buf = npurt.malloc(64 << 20)
e = npurt.Event()
npurt.kernels.busy(0.2)
print("READY", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, NPURT_STATUS_DIR=str(tmp_path / "status"), NPURT_STATUS_INTERVAL="0.05")
    return e


def _smi(env, *args):
    r = subprocess.run([sys.executable, "-m", "npurt.smi", *args], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _wait_for(env, pred, what):
    deadline = time.monotonic() + 60  # a liveness bound, not a speed assertion
    while time.monotonic() < deadline:
        info = json.loads(_smi(env, "--json"))
        if pred(info):
            return info
        time.sleep(0.05)
    pytest.fail(f"smi never showed {what}: {info}")


def _proc(info, pid):
    return next((p for p in info["processes"] if p["pid"] == pid), None)


def test_child_shows_up_then_is_stale_then_cleaned(env):
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "READY"
        info = _wait_for(env, lambda i: (p := _proc(i, child.pid)) is not None
                         and p["devices"][0]["memory_used"] >= 64 * MIB, "the child's memory")
        p = _proc(info, child.pid)
        assert not p["stale"] and p["devices"][0]["memory_reserved"] >= 64 * MIB
        dev = info["devices"][0]
        assert dev["memory_used"] >= 64 * MIB and dev["aicore_count"] >= 1 and dev["events"] >= 1
        assert dev["memory_total"] > dev["memory_used"] and dev["health"] == "OK"
        table = _smi(env)
        for header in ("Health", "AICore(%)", "Memory-Usage(MB)", "Hugepages-Usage(page)",
                       "Process id", "Process name", "Process memory(MB)"):
            assert header in table, table
        assert str(child.pid) in table
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        info = json.loads(_smi(env, "--json"))
        p = _proc(info, child.pid)
        assert p is not None and p["stale"], info
        assert info["devices"][0]["health"] == "Warning"
        info = json.loads(_smi(env, "--json"))
        assert _proc(info, child.pid) is None, "cleaned after being shown stale"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_clean_exit_removes_the_record(env):
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env)
    assert child.stdout.readline().strip() == "READY"
    _wait_for(env, lambda i: _proc(i, child.pid) is not None, "the child")
    child.stdin.write("\n")
    child.stdin.flush()
    assert child.wait(timeout=60) == 0
    info = json.loads(_smi(env, "--json"))
    assert _proc(info, child.pid) is None and info["devices"] == []
    assert "No running processes found in NPU" in _smi(env)


def test_watch_redraws_count_times(env):
    out = _smi(env, "--watch", "0.05", "--count", "3", "--json")
    assert len(out.strip().splitlines()) == 3
