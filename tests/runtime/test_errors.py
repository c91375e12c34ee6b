"""The error model: classes, codes, argument checking, sticky errors, timeouts."""

import math
import pickle
import threading
import time

import npurt
import pytest
from helpers import LONG

# ---------------------------------------------------------------- the exception tree

BUILTIN = {
    "InvalidValueError": ValueError,
    "InvalidTypeError": TypeError,
    "InvalidDeviceError": ValueError,
    "InvalidHandleError": ValueError,
    "NoContextError": RuntimeError,
    "WrongContextError": RuntimeError,
    "WaitTimeoutError": TimeoutError,
    "OutOfMemoryError": MemoryError,
    "MemoryFreeError": ValueError,
    "TaskFailedError": RuntimeError,
    "StreamAbortedError": RuntimeError,
    "NotSupportedError": NotImplementedError,
    "InternalError": RuntimeError,
    "EventStateError": RuntimeError,
}


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_error_classes_derive_from_error_and_builtin(name):
    cls = getattr(npurt, name)
    assert issubclass(cls, npurt.Error)
    assert issubclass(cls, BUILTIN[name])
    assert issubclass(npurt.Error, Exception)


def test_invalid_device_is_an_invalid_value():
    assert issubclass(npurt.InvalidDeviceError, npurt.InvalidValueError)


def test_error_str_code_name_and_pickle():
    e = npurt.InvalidValueError("bad thing", 107000, "ACL_ERROR_RT_PARAM_INVALID")
    assert (e.code, e.name, e.message) == (107000, "ACL_ERROR_RT_PARAM_INVALID", "bad thing")
    assert "bad thing" in str(e) and "107000" in str(e) and "ACL_ERROR_RT_PARAM_INVALID" in str(e)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is npurt.InvalidValueError
    assert (back.code, back.name, str(back)) == (e.code, e.name, str(e))


def _kernel_fault():
    s = npurt.Stream()
    npurt.kernels.fault(stream=s)
    try:
        s.synchronize(timeout=LONG)
    finally:
        s.destroy()


def _destroyed():
    s = npurt.Stream()
    s.destroy()
    s.query()


def _timeout():
    s = npurt.Stream()
    npurt.kernels.busy(0.1, stream=s)
    try:
        s.synchronize(timeout=0.001)
    finally:
        s.synchronize(timeout=LONG)
        s.destroy()


# (what raises, the class, its code)
RAISERS = [
    ("priority_value", lambda: npurt.Stream(priority=9), npurt.InvalidValueError, 107000),
    ("priority_type", lambda: npurt.Stream(priority="x"), npurt.InvalidTypeError, 107000),
    ("device_id", lambda: npurt.Device(3), npurt.InvalidDeviceError, 107001),
    ("destroyed_stream", _destroyed, npurt.InvalidHandleError, 107017),
    ("untimed_elapsed", lambda: npurt.Event().elapsed_time(npurt.Event()), npurt.EventStateError, 107006),
    ("kernel_fault", _kernel_fault, npurt.TaskFailedError, 507015),
    ("stream_timeout", _timeout, npurt.WaitTimeoutError, 507046),
    ("wrong_context", lambda: npurt.Stream(device=1).__enter__(), npurt.WrongContextError, 107003),
]


@pytest.mark.parametrize("raiser,cls,code", [r[1:] for r in RAISERS], ids=[r[0] for r in RAISERS])
def test_raised_errors_carry_code_and_name(raiser, cls, code):
    with pytest.raises(cls) as ei:
        raiser()
    e = ei.value
    assert isinstance(e, npurt.Error)
    assert isinstance(e.code, int) and e.code == code
    assert isinstance(e.name, str) and e.name.startswith("ACL_ERROR_")
    assert str(code) in str(e)
    assert e.name in str(e)


# ---------------------------------------------------------------- argument checking


@pytest.mark.parametrize(
    "call",
    [
        lambda s: npurt.kernels.empty(stream=s, blocks=0),
        lambda s: npurt.kernels.empty(stream=s, blocks=-1),
        lambda s: npurt.kernels.empty(stream=s, blocks=65536),
        lambda s: npurt.kernels.empty(stream=s, blocks=70000),
        lambda s: npurt.kernels.empty(stream=s, blocks=2**70),
        lambda s: npurt.kernels.busy(-1, stream=s),
        lambda s: npurt.kernels.busy(3601, stream=s),
        lambda s: npurt.kernels.busy(math.nan, stream=s),
        lambda s: npurt.kernels.busy(math.inf, stream=s),
        lambda s: npurt.kernels.busy(0.01, stream=s, blocks=0),
        lambda s: npurt.kernels.busy(0.01, stream=s, blocks=70000),
    ],
)
def test_kernel_bad_values(stream, call):
    with pytest.raises(npurt.InvalidValueError) as ei:
        call(stream)
    assert ei.value.code == 107000
    assert stream.completed == 0 and stream.query()  # nothing was launched


@pytest.mark.parametrize(
    "call",
    [
        lambda s: npurt.kernels.busy("x", stream=s),
        lambda s: npurt.kernels.busy(None, stream=s),
        lambda s: npurt.kernels.busy(True, stream=s),
        lambda s: npurt.kernels.empty(stream=s, blocks=1.5),
        lambda s: npurt.kernels.empty(stream=s, blocks="2"),
        lambda s: npurt.kernels.empty(stream=s, blocks=True),
        lambda s: npurt.kernels.empty(stream="s"),
        lambda s: npurt.kernels.busy(0.01, stream=0),
    ],
)
def test_kernel_bad_types(stream, call):
    with pytest.raises(npurt.InvalidTypeError) as ei:
        call(stream)
    assert isinstance(ei.value, TypeError)
    assert stream.completed == 0 and stream.query()


def test_kernel_boundary_values_are_accepted(stream):
    npurt.kernels.busy(0, stream=stream)
    npurt.kernels.busy(0.0, stream=stream, blocks=None)
    npurt.kernels.empty(stream=stream, blocks=1)
    stream.synchronize(timeout=LONG)
    assert stream.completed == 3


@pytest.fixture
def timeout_targets():
    s = npurt.Stream()
    ctx = npurt.Context()
    yield [
        ("stream", s.synchronize),
        ("event", npurt.Event().synchronize),
        ("device", npurt.Device(0).synchronize),
        ("module", lambda timeout: npurt.synchronize(timeout=timeout)),
        ("context", ctx.synchronize),
    ]
    ctx.destroy()
    s.destroy()


@pytest.mark.parametrize("bad", [-1, -0.001, math.nan, -math.inf])
def test_bad_timeout_values(timeout_targets, bad):
    for what, sync in timeout_targets:
        with pytest.raises(npurt.InvalidValueError) as ei:
            sync(timeout=bad)
        assert ei.value.code == 107000, what


@pytest.mark.parametrize("bad", ["1", True, [1], object()])
def test_bad_timeout_types(timeout_targets, bad):
    for what, sync in timeout_targets:
        with pytest.raises(npurt.InvalidTypeError) as ei:
            sync(timeout=bad)
        assert isinstance(ei.value, TypeError), what


@pytest.mark.parametrize("ok", [None, 0, 0.0, 5, 2.5, math.inf, 1e12])
def test_good_timeouts_on_idle_objects(timeout_targets, ok):
    for _, sync in timeout_targets:
        sync(timeout=ok)


def test_zero_timeout_on_busy_objects_times_out_at_once(stream):
    gate = threading.Event()  # the stream stays busy until the checks are done
    stream.launch_host_func(gate.wait, LONG)
    npurt.kernels.busy(0.001, stream=stream)
    e = stream.record_event()
    with pytest.raises(npurt.WaitTimeoutError) as ei:
        stream.synchronize(timeout=0)
    assert ei.value.code == 507046
    with pytest.raises(npurt.WaitTimeoutError) as ei:
        e.synchronize(timeout=0)
    assert ei.value.code == 507047
    assert not e.query()
    gate.set()
    stream.synchronize(timeout=LONG)


def test_huge_int_arguments_give_typed_errors(stream):
    try:
        stream.synchronize(timeout=2**1100)  # accepted as "wait forever" would be fine too
    except Exception as e:  # noqa: BLE001 - checked below
        assert isinstance(e, npurt.InvalidValueError), repr(e)
    with pytest.raises(npurt.InvalidValueError):
        npurt.kernels.busy(2**1100, stream=stream)


# ---------------------------------------------------------------- sticky errors


def test_kernel_fault_is_sticky_and_isolated():
    s, other = npurt.Stream(), npurt.Stream()
    ran = []
    npurt.kernels.busy(0.05, stream=s)
    npurt.kernels.fault("injected-xyz", stream=s)
    s.launch_host_func(ran.append, "after fault")
    for _ in range(3):
        with pytest.raises(npurt.TaskFailedError) as ei:
            s.synchronize(timeout=LONG)
        assert ei.value.code == 507015
        assert isinstance(ei.value, RuntimeError)
        assert "injected-xyz" in str(ei.value)
    with pytest.raises(npurt.TaskFailedError):
        s.query()
    with pytest.raises(npurt.TaskFailedError):
        npurt.kernels.empty(stream=s)
    assert ran == []  # work queued behind the fault was skipped
    npurt.kernels.busy(0.02, stream=other)
    other.launch_host_func(ran.append, "other")
    other.synchronize(timeout=LONG)
    assert ran == ["other"]
    npurt.default_stream().synchronize(timeout=LONG)
    s.destroy()
    other.destroy()


def test_fault_in_one_block_of_many():
    s = npurt.Stream()
    npurt.kernels.fault("block-fault", stream=s, blocks=8, block=5)
    with pytest.raises(npurt.TaskFailedError, match="block 5") as ei:
        s.synchronize(timeout=LONG)
    assert "block-fault" in str(ei.value)
    s.destroy()


def test_fault_in_a_block_that_does_not_exist_is_harmless(stream):
    npurt.kernels.fault(stream=stream, blocks=2, block=7)
    stream.synchronize(timeout=LONG)


def test_sticky_error_reaches_device_synchronize():
    s = npurt.Stream(device=1)
    npurt.kernels.fault("dev1-fault", stream=s)
    with pytest.raises(npurt.TaskFailedError, match="dev1-fault"):
        npurt.Device(1).synchronize(timeout=LONG)
    s.destroy()  # once the failed stream is gone the device synchronizes cleanly
    npurt.Device(1).synchronize(timeout=LONG)


def test_wait_on_event_of_a_failed_stream_still_completes():
    bad, s = npurt.Stream(), npurt.Stream()
    npurt.kernels.busy(0.05, stream=bad)
    npurt.kernels.fault(stream=bad)
    npurt.kernels.busy(1.0, stream=bad)  # skipped because of the fault
    e = bad.record_event()
    s.wait_event(e)
    t0 = time.monotonic()
    s.synchronize(timeout=LONG)
    assert time.monotonic() - t0 < 0.9
    with pytest.raises(npurt.TaskFailedError):
        bad.synchronize(timeout=LONG)
    bad.destroy()
    s.destroy()
