"""acl.rt.create_event_ex_with_flag and acl.rt.query_event_wait_status (issue 17) with
ACL's flag values, status codes and the restrictions aclrtCreateEventExWithFlag documents:
IPC only alone, no query_event / query_event_wait_status on such events, stream waits
need ACL_EVENT_SYNC. The NOT_READY cases hold a stream on a host callback blocked on a
threading.Event, so no assertion depends on timing."""

import threading

import npurt.acl as acl
import pytest
from helpers import acl_thread
from npurt.acl import _state

FEATURE = acl.ACL_ERROR_RT_FEATURE_NOT_SUPPORT


def test_wait_status_constants_are_acls():
    assert acl.ACL_EVENT_WAIT_STATUS_COMPLETE == 0
    assert acl.ACL_EVENT_WAIT_STATUS_NOT_READY == 1
    assert acl.ACL_EVENT_WAIT_STATUS_RESERVED == 0xFFFF
    assert FEATURE == 207000
    assert (acl.ACL_EVENT_SYNC, acl.ACL_EVENT_CAPTURE_STREAM_PROGRESS) == (0x1, 0x2)
    assert (acl.ACL_EVENT_TIME_LINE, acl.ACL_EVENT_IPC) == (0x8, 0x40)


def _gate(stream_handle):
    """Blocks the stream on a host callback until the returned Event is set."""
    gate, started = threading.Event(), threading.Event()

    def hold():
        started.set()
        gate.wait(30)

    _state.stream_of(stream_handle).launch_host_func(hold)
    assert started.wait(30)
    return gate


def test_query_event_wait_status_follows_the_waiting_stream():
    def body():
        s1, _ = acl.rt.create_stream()
        s2, _ = acl.rt.create_stream()
        ev, ret = acl.rt.create_event_with_flag(acl.ACL_EVENT_SYNC)
        assert ret == 0
        # never waited on: every (zero) wait is complete
        assert acl.rt.query_event_wait_status(ev) == (acl.ACL_EVENT_WAIT_STATUS_COMPLETE, 0)
        gate = _gate(s1)
        assert acl.rt.record_event(ev, s1) == 0
        assert acl.rt.stream_wait_event(s2, ev) == 0
        # s1 is held, so s2's wait cannot have run
        assert acl.rt.query_event_wait_status(ev) == (acl.ACL_EVENT_WAIT_STATUS_NOT_READY, 0)
        gate.set()
        assert acl.rt.synchronize_stream(s2) == 0
        assert acl.rt.query_event_wait_status(ev) == (acl.ACL_EVENT_WAIT_STATUS_COMPLETE, 0)
        # a second wait, on the default stream, is tracked too
        gate = _gate(s1)
        assert acl.rt.record_event(ev, s1) == 0
        assert acl.rt.stream_wait_event(0, ev) == 0
        assert acl.rt.query_event_wait_status(ev) == (acl.ACL_EVENT_WAIT_STATUS_NOT_READY, 0)
        gate.set()
        assert acl.rt.synchronize_stream(0) == 0
        assert acl.rt.query_event_wait_status(ev) == (acl.ACL_EVENT_WAIT_STATUS_COMPLETE, 0)
        assert acl.rt.destroy_event(ev) == 0
        assert acl.rt.query_event_wait_status(ev)[1] == acl.ACL_ERROR_RT_PARAM_INVALID  # as destroy_event of a gone handle
        for s in (s1, s2):
            assert acl.rt.destroy_stream(s) == 0

    acl_thread(body)


def test_query_event_wait_status_bad_arguments():
    def body():
        assert acl.rt.query_event_wait_status(987654)[1] == acl.ACL_ERROR_RT_PARAM_INVALID
        with pytest.raises(TypeError):  # pyacl's argument parsing
            acl.rt.query_event_wait_status("x")

    acl_thread(body)


def test_create_event_ex_with_flag_flags():
    def body():
        s1, _ = acl.rt.create_stream()
        s2, _ = acl.rt.create_stream()
        # unknown bits, and flags only create_event_with_flag takes: 100000
        for bad in (0x4000, acl.ACL_EVENT_EXTERNAL, acl.ACL_EVENT_DEVICE_USE_ONLY):
            assert acl.rt.create_event_ex_with_flag(bad) == (0, acl.ACL_ERROR_INVALID_PARAM)
        # ACL_EVENT_IPC does not combine with another flag
        for other in (acl.ACL_EVENT_SYNC, acl.ACL_EVENT_TIME_LINE, acl.ACL_EVENT_CAPTURE_STREAM_PROGRESS):
            assert acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_IPC | other) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
        # IPC events come from the Ex call only
        assert acl.rt.create_event_with_flag(acl.ACL_EVENT_IPC)[1] == acl.ACL_ERROR_RT_PARAM_INVALID

        timed, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_TIME_LINE | acl.ACL_EVENT_SYNC)
        assert ret == 0
        start, _ = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_TIME_LINE)
        assert acl.rt.record_event(start, s1) == 0
        assert acl.rt.record_event(timed, s1) == 0
        assert acl.rt.synchronize_event(timed) == 0
        ms, ret = acl.rt.event_elapsed_time(start, timed)
        assert ret == 0 and ms >= 0.0
        # SYNC: streams may wait on it; without SYNC they may not (207000)
        assert acl.rt.stream_wait_event(s2, timed) == 0
        assert acl.rt.stream_wait_event(s2, start) == FEATURE
        progress, _ = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_CAPTURE_STREAM_PROGRESS)
        assert acl.rt.stream_wait_event(s2, progress) == FEATURE
        # Ex events refuse query_event and query_event_wait_status; query_event_status works
        assert acl.rt.query_event(timed) == (acl.ACL_EVENT_STATUS_NOT_READY, FEATURE)
        assert acl.rt.query_event_wait_status(timed) == (acl.ACL_EVENT_WAIT_STATUS_NOT_READY, FEATURE)
        assert acl.rt.query_event_status(timed) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
        # a plain event's handle reused after destroy is not an Ex event any more
        for e in (timed, start, progress):
            assert acl.rt.destroy_event(e) == 0
        plain, _ = acl.rt.create_event()
        assert acl.rt.query_event(plain) == (acl.ACL_EVENT_STATUS_NOT_READY, 0)  # never recorded
        assert acl.rt.destroy_event(plain) == 0
        assert acl.rt.synchronize_stream(s2) == 0
        for s in (s1, s2):
            assert acl.rt.destroy_stream(s) == 0

    acl_thread(body)


def test_ipc_ex_event_is_waitable_and_has_a_handle():
    def body():
        s1, _ = acl.rt.create_stream()
        ev, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_IPC)
        assert ret == 0
        handle, ret = acl.rt.ipc_get_event_handle(ev)
        assert ret == 0 and len(handle) == 64
        opened, ret = acl.rt.ipc_open_event_handle(handle)
        assert ret == 0
        gate = _gate(s1)
        assert acl.rt.record_event(ev, s1) == 0
        assert acl.rt.stream_wait_event(0, ev) == 0  # IPC events may be waited on
        assert acl.rt.query_event_status(opened) == (acl.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)
        gate.set()
        assert acl.rt.synchronize_event_with_timeout(opened, 30000) == 0
        assert acl.rt.synchronize_stream(0) == 0
        assert acl.rt.query_event_status(opened) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
        for e in (ev, opened):
            assert acl.rt.destroy_event(e) == 0
        assert acl.rt.destroy_stream(s1) == 0

    acl_thread(body)
