"""pyACL's IPC calls (``acl.rt.ipc_mem_*``, ``device_get_bare_tgid``) between real
processes: unchanged pyACL code under ``NPURT_IPC_SHAREABLE=1``, ACL's flags and codes."""

import os
import subprocess
import sys
import textwrap

import npurt
import npurt.acl as acl
import numpy as np
from helpers import acl_thread

TIMEOUT = 120

# The importer: tells its bare tgid, waits for a key, imports it, reads 4 floats, closes.
IMPORTER = textwrap.dedent(
    """
    import sys, numpy as np
    import npurt.acl as acl
    assert acl.rt.set_device(0) == 0
    pid, ret = acl.rt.device_get_bare_tgid()
    print(pid, ret, flush=True)
    for line in sys.stdin:
        key = line.strip()
        ptr, ret = acl.rt.ipc_mem_import_by_key(key, acl.ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT)
        if ret != 0:
            print("ret", ret, flush=True)
            continue
        out = np.zeros(4, dtype=np.float32)
        r = acl.rt.memcpy(out.ctypes.data, 16, ptr + 4, 16, acl.ACL_MEMCPY_DEVICE_TO_HOST)
        print("ok", r, *out.tolist(), acl.rt.ipc_mem_close(key), acl.rt.ipc_mem_close(key), flush=True)
    """
)


def test_unchanged_pyacl_code_exports_with_the_process_switch():
    acl_thread(_export_with_switch)


def _export_with_switch():
    npurt.set_ipc_shareable(True)
    try:
        ptr, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    finally:
        npurt.set_ipc_shareable(False)
    assert ret == 0
    data = np.arange(16, dtype=np.float32)
    assert acl.rt.memcpy(ptr, 64, data.ctypes.data, 64, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    p = subprocess.Popen([sys.executable, "-c", IMPORTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid, r = map(int, p.stdout.readline().split())
        assert r == 0 and pid == p.pid
        flag = acl.ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT
        listed, r1 = acl.rt.ipc_mem_get_export_key(ptr, 32, flag)
        unlisted, r2 = acl.rt.ipc_mem_get_export_key(ptr, 32, flag)
        open_key, r3 = acl.rt.ipc_mem_get_export_key(ptr + 8, 24, acl.ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
        assert (r1, r2, r3) == (0, 0, 0) and len(listed) < acl.ACL_IPC_MEM_KEY_LEN
        assert acl.rt.ipc_mem_set_import_pid(listed, [pid]) == 0
        out, _ = p.communicate(f"{listed}\n{unlisted}\n{open_key}\n", timeout=TIMEOUT)
    finally:
        p.kill()
    lines = out.splitlines()
    # Listed pid: the import reads ptr+4.. (floats 1..4); the second close has nothing left.
    assert lines[0].split() == ["ok", "0", "1.0", "2.0", "3.0", "4.0", "0", "507022"], lines
    assert lines[1] == "ret 507022", lines  # not whitelisted
    assert lines[2].split()[:6] == ["ok", "0", "3.0", "4.0", "5.0", "6.0"], lines
    assert acl.rt.ipc_mem_close(listed) == 0  # the exporter retires its key
    assert acl.rt.free(ptr) == 0


def test_acl_errors_are_codes():
    acl_thread(_errors)


def _errors():
    plain, ret = acl.rt.malloc(64, 0)
    key, ret = acl.rt.ipc_mem_get_export_key(plain, 64, 0)
    assert (key, ret) == ("", 507022)
    assert acl.rt.ipc_mem_get_export_key(plain, 64, 7)[1] == 100000
    assert acl.rt.ipc_mem_get_export_key(12345, 64, 0)[1] == 100000
    assert acl.rt.ipc_mem_import_by_key("npurt1-" + "0" * 56, 0) == (0, 507022)
    assert acl.rt.ipc_mem_close("bogus") == 507022
    assert acl.rt.device_get_bare_tgid() == (os.getpid(), 0)
    assert acl.rt.free(plain) == 0
