"""Shared set-up for the npurt test suite.

The runtime reads its configuration once, at first use, so the device count is set here
before ``npurt`` is imported: cross-device tests need two virtual devices.

Device 0 is used implicitly by many tests (``npurt.Stream()`` outside any ``with``), which
takes the process-wide implicit reference on it; the session fixture takes that reference
up front so that test order never decides whether a ``with npurt.Device(0)`` tears device 0
down. Tests about teardown use device 1 through the ``fresh_dev1`` fixture, which makes
sure no reference is left on device 1 before (and after) the test.
"""

import os

os.environ.setdefault("NPURT_DEVICE_COUNT", "2")

import gc  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import npurt  # noqa: E402
import pytest  # noqa: E402

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
        if k.startswith("NPURT_"):
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


@pytest.fixture(scope="session", autouse=True)
def _implicit_device0():
    assert npurt.device_count() >= 2, "the suite needs NPURT_DEVICE_COUNT >= 2"
    npurt.current_stream()  # takes the implicit reference on device 0
    assert npurt.Device(0)._refcount() >= 1
    yield


@pytest.fixture(autouse=True)
def _main_thread_state_restored():
    """Every test must leave the main thread on device 0's default stream."""
    yield
    assert npurt.current_device() == 0
    assert npurt.current_stream() == npurt.default_stream()


@pytest.fixture
def fresh_dev1():
    """Device 1 with no reference held on it (not started)."""
    release_device(1)
    yield npurt.Device(1)
    release_device(1)


@pytest.fixture
def stream():
    """A fresh stream on device 0, released at the end of the test."""
    s = npurt.Stream()
    yield s
    if s.is_alive:
        try:
            s.synchronize(timeout=LONG)
        except npurt.TaskFailedError:
            pass
        s.destroy()
