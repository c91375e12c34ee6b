"""Shared helpers of the npurt test suite (``from helpers import LONG, run_in_thread, ...``).

``conftest.py`` sets the device count before ``npurt`` is first imported and holds the
fixtures; everything a test calls directly lives here.
"""

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import npurt

# A generous timeout for waits that should finish quickly: a hang fails the test instead
# of blocking the suite.
LONG = 10.0


def release_device(i):
    """Drops every reference left on device ``i`` (tearing it down), quietly."""
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for _ in range(64):
            if npurt.Device(i)._refcount() == 0:
                break
            npurt.reset_device(i)
    assert npurt.Device(i)._refcount() == 0
    assert not npurt.Device(i).is_active


def release_stream(s, timeout=LONG):
    """Waits for a live stream (its own failure is no error here) and destroys it."""
    if s.is_alive:
        try:
            s.synchronize(timeout=timeout)
        except npurt.TaskFailedError:
            pass
        s.destroy()


def run_in_thread(fn, *args, timeout=LONG):
    """Runs ``fn(*args)`` on a new thread; returns its result or re-raises its exception."""
    out = {}

    def body():
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed back to the caller
            out["error"] = e

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"{fn!r} did not finish within {timeout}s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def acl_thread(fn):
    """Runs ``fn()`` on a fresh thread with device 0 set the ACL way
    (``acl.rt.set_device(0)``), resets the device afterwards (also when ``fn`` raises), and
    returns ``fn``'s result. ACL state is per thread, so the main thread's npurt state is
    left alone."""
    import npurt.acl as acl

    def body():
        assert acl.rt.set_device(0) == 0
        try:
            return fn()
        finally:
            assert acl.rt.reset_device(0) == 0

    return run_in_thread(body)


def run_python(code, env=None, timeout=60):
    """Runs ``code`` in a fresh interpreter (for configuration that must precede first use,
    or for checks that could hang the interpreter). Returns the CompletedProcess."""
    full_env = dict(os.environ)
    for k in list(full_env):
        if k.startswith("NPURT_") and k != "NPURT_STATUS_DIR":  # the run's own shared regions
            del full_env[k]
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_until(pred, timeout=LONG, interval=0.005):
    """Polls ``pred`` until it is true or ``timeout`` passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)
