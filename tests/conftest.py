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
import tempfile

os.environ.setdefault("NPURT_DEVICE_COUNT", "2")
# The suite's processes (and the subprocesses its tests start) share devices through status
# regions in a directory of this run's own (0700), not the user's /dev/shm one: another
# test run on the machine never shares a device (its capacity) with this one.
os.environ.setdefault("NPURT_STATUS_DIR", tempfile.mkdtemp(prefix="npurt-status-"))

import npurt  # noqa: E402
import pytest  # noqa: E402

# Tests import their helpers from `helpers`; the names are also visible here so that a test
# written against the old flat layout (`from conftest import ...`) still runs.
from helpers import LONG, acl_thread, release_device, release_stream, run_in_thread, run_python, wait_until  # noqa: E402,F401


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
    release_stream(s)
