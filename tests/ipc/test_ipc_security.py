"""IPC keys between real processes: visibility both ways, the whitelist (the importer's
pid comes from the kernel), forged, stale, closed and reused keys, each a typed 507022
error. Every child has a timeout."""

import json
import os
import subprocess
import sys

import npurt
import numpy as np
import pytest

CHILD = os.path.join(os.path.dirname(__file__), "ipc_child.py")
TIMEOUT = 120


def child(steps):
    """Runs ipc_child.py with `steps` in an unrelated process; its JSON results."""
    r = subprocess.run(
        [sys.executable, CHILD, json.dumps(steps)], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def shared(values):
    b = npurt.malloc(4 * len(values), shareable=True)
    npurt.memcpy(b, np.asarray(values, dtype=np.float32))
    return b


def test_unrelated_process_reads_and_writes_the_same_memory():
    b = shared([1.0, 2.0, 3.0, 4.0])
    key = b.ipc_export(open=True)
    assert key.isprintable() and len(key) < 65
    out = child([{"key": key, "op": "read"}, {"key": key, "op": "write", "value": 7.5, "n": 2}])
    assert out[0] == {"ok": [1.0, 2.0, 3.0, 4.0]}
    assert out[1] == {"ok": True}
    assert b.copy_to_host().view(np.float32).tolist() == [7.5, 7.5, 3.0, 4.0]


def test_interior_range_and_array_views():
    a = npurt.to_device(np.arange(24, dtype=np.float32).reshape(4, 6), shareable=True)
    v = a[1:, ::2].T
    out = child([{"key": v.ipc_export(open=True), "op": "array"}])
    assert out[0]["shape"] == [3, 3]
    assert out[0]["ok"] == np.asarray(v).tolist()
    b = shared(list(range(2048)))
    k = b.ipc_export(open=True, offset=4 * 1500, nbytes=16)
    assert child([{"key": k, "op": "read"}])[0] == {"ok": [1500.0, 1501.0, 1502.0, 1503.0]}


def test_whitelist_by_kernel_pid():
    b = shared([5.0] * 4)
    closed_list = b.ipc_export()  # default: whitelist on, nobody listed
    # The child cannot pass a whitelisted pid in the message: only SO_PEERCRED counts.
    out = child([{"key": closed_list, "op": "read"}])
    assert out[0]["err"] == "IpcPermissionError" and out[0]["code"] == 507022, out
    assert "whitelist" in out[0]["msg"]
    # Listing the child's pid: start the child first, then list it.
    p = subprocess.Popen(
        [sys.executable, "-c", "import os,sys; print(os.getpid(), flush=True); sys.stdin.readline(); "
         f"sys.argv=['x', sys.stdin.readline()]; exec(open({CHILD!r}).read())"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        pid = int(p.stdout.readline())
        key = b.ipc_export(pids=[pid])
        other = b.ipc_export(pids=[pid + 100000])
        npurt.ipc_set_import_pid(other, [pid])  # ACL's aclrtIpcMemSetImportPid adds pids
        steps = [{"key": key, "op": "read"}, {"key": other, "op": "read"}]
        out, _ = p.communicate("\n" + json.dumps(steps) + "\n", timeout=TIMEOUT)
    finally:
        p.kill()
    res = [json.loads(line) for line in out.splitlines()]
    assert res == [{"ok": [5.0] * 4}, {"ok": [5.0] * 4}], res


def test_forged_stale_closed_and_reused_keys():
    b = shared([1.0] * 4)
    key = b.ipc_export(open=True)
    forged = key[:-8] + ("0" * 8 if not key.endswith("0" * 8) else "1" * 8)
    garbage = "npurt1-" + "g" * 56
    closed = shared([2.0] * 4)
    ck = closed.ipc_export(open=True)
    npurt.ipc_close(ck)
    freed = shared([3.0] * 4)
    fk = freed.ipc_export(open=True)
    freed.free()
    # Key reuse after free: the same address may be handed out again, the old key is dead.
    again = shared([4.0] * 4)
    out = child([
        {"key": forged, "op": "read"},
        {"key": garbage, "op": "read"},
        {"key": ck, "op": "read"},
        {"key": fk, "op": "read"},
    ])
    assert [o["err"] for o in out] == [
        "IpcInvalidKeyError", "IpcInvalidKeyError", "IpcClosedKeyError", "IpcStaleKeyError"
    ], out
    assert all(o["code"] == 507022 for o in out)
    assert "forged" in out[0]["msg"] and "freed" in out[3]["msg"]
    assert again.ipc_export(open=True) != fk


def test_stale_key_of_exited_exporter():
    code = (
        "import npurt, numpy as np; b = npurt.malloc(64, shareable=True); "
        "print(b.ipc_export(open=True))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    key = r.stdout.strip()
    with pytest.raises(npurt.IpcStaleKeyError, match="exited"):
        npurt.ipc_import(key)


def test_not_shareable_and_bad_arguments():
    b = npurt.malloc(64)
    assert not b.shareable
    with pytest.raises(npurt.IpcNotShareableError, match="shareable=True"):
        b.ipc_export()
    with pytest.raises(npurt.IpcNotShareableError):
        npurt.zeros(4).ipc_export()
    s = npurt.malloc(64, shareable=True)
    with pytest.raises(npurt.InvalidValueError):
        s.ipc_export(offset=60, nbytes=8)
    with pytest.raises(npurt.IpcError, match="invalid pid"):
        s.ipc_export(pids=[-3])
    with pytest.raises(npurt.InvalidTypeError):
        s.ipc_export(pids="me")
    with pytest.raises(npurt.IpcInvalidKeyError):
        npurt.ipc_import("not a key")
    with pytest.raises(npurt.InvalidTypeError):
        npurt.ipc_import(42)
    with pytest.raises(npurt.IpcError, match="did not export"):
        npurt.ipc_close("npurt1-" + "1" * 56)


def test_process_default_switch(monkeypatch):
    assert not npurt.get_ipc_shareable()
    npurt.set_ipc_shareable(True)
    try:
        b = npurt.malloc(1000)
        assert b.shareable and b.page_kind == "normal"
        assert npurt.malloc(1000, shareable=False).shareable is False
    finally:
        npurt.set_ipc_shareable(False)
    assert not npurt.malloc(1000).shareable
    pool = npurt.MemPool(1 << 20, shareable=True)
    with pool:
        assert npurt.malloc(100).shareable
    pool.destroy()
