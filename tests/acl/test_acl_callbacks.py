"""npurt.acl user-thread callbacks: subscribe_report / launch_callback / process_report /
unsubscribe_report, in the shape of pyacl's async samples, with the codes of every misuse."""

import threading
import time

import npurt.acl as acl
import pytest
from helpers import acl_thread, wait_until
from npurt.acl import _state

BLOCK, NO_BLOCK = acl.ACL_CALLBACK_BLOCK, acl.ACL_CALLBACK_NO_BLOCK


class Reporter:
    """The pyacl sample's callback thread: loops on process_report until told to stop."""

    def __init__(self, timeout_ms=20):
        self.run = True
        self.rets = []
        self.tid, ret = acl.util.start_thread(self._loop, [timeout_ms])
        assert ret == 0

    def _loop(self, args):
        (timeout,) = args
        while self.run:
            self.rets.append(acl.rt.process_report(timeout))

    def stop(self):
        self.run = False
        assert acl.util.stop_thread(self.tid) == 0


def on_device0(fn):
    """``fn(stream)`` on a fresh ACL thread (device 0 set) with a stream it destroys after."""

    def body():
        s, _ = acl.rt.create_stream()
        try:
            return fn(s)
        finally:
            assert acl.rt.destroy_stream(s) == 0

    return acl_thread(body)


def test_callbacks_run_in_the_subscribed_thread_in_stream_order():
    def body(s):
        rep = Reporter()
        seen = []
        assert acl.rt.subscribe_report(rep.tid, s) == 0
        for i in range(5):
            ret = acl.rt.launch_callback(lambda data: seen.append((threading.get_ident(), data)), [i, "x"], BLOCK, s)
            assert ret == 0
        assert acl.rt.synchronize_stream(s) == 0  # BLOCK callbacks are part of the stream's work
        assert seen == [(rep.tid, [i, "x"]) for i in range(5)]
        assert acl.rt.unsubscribe_report(rep.tid, s) == 0
        rep.stop()
        assert acl.ACL_ERROR_RT_REPORT_TIMEOUT in rep.rets or 0 in rep.rets

    on_device0(body)


def test_block_holds_the_stream_and_no_block_does_not():
    def body(s):
        rep = Reporter()
        assert acl.rt.subscribe_report(rep.tid, s) == 0
        order = []
        stream = _state.get_handle("stream", s)

        def slow(tag):
            time.sleep(0.1)
            order.append(tag)

        assert acl.rt.launch_callback(slow, "block", BLOCK, s) == 0
        stream.launch_host_func(order.append, "after-block")
        assert acl.rt.synchronize_stream(s) == 0
        assert order == ["block", "after-block"]
        order.clear()
        assert acl.rt.launch_callback(slow, "no-block", NO_BLOCK, s) == 0
        stream.launch_host_func(order.append, "after-no-block")
        assert acl.rt.synchronize_stream(s) == 0
        assert wait_until(lambda: len(order) == 2)
        assert order == ["after-no-block", "no-block"]
        assert acl.rt.unsubscribe_report(rep.tid, s) == 0
        rep.stop()

    on_device0(body)


def test_process_report_codes():
    def body(s):
        t0 = time.monotonic()
        assert acl.rt.process_report(30) == acl.ACL_ERROR_RT_THREAD_SUBSCRIBE  # this thread serves no stream
        assert time.monotonic() - t0 >= 0.02
        assert acl.rt.process_report(-1) == acl.ACL_ERROR_RT_THREAD_SUBSCRIBE
        assert acl.rt.process_report(0) == acl.ACL_ERROR_INVALID_PARAM
        assert acl.rt.process_report(-2) == acl.ACL_ERROR_INVALID_PARAM
        with pytest.raises(TypeError):
            acl.rt.process_report("10")
        me = threading.get_ident()
        assert acl.rt.subscribe_report(me, s) == 0
        t0 = time.monotonic()
        assert acl.rt.process_report(30) == acl.ACL_ERROR_RT_REPORT_TIMEOUT  # nothing to run
        assert time.monotonic() - t0 >= 0.025
        got = []
        assert acl.rt.launch_callback(got.append, 7, NO_BLOCK, s) == 0
        assert acl.rt.process_report(5000) == 0 and got == [7]  # run here, by this thread
        assert acl.rt.unsubscribe_report(me, s) == 0

    on_device0(body)


def test_subscription_and_launch_errors():
    def body(s):
        me, other = threading.get_ident(), threading.get_ident() + 1
        assert acl.rt.launch_callback(print, None, BLOCK, s) == acl.ACL_ERROR_RT_STREAM_NO_CB_REG
        assert acl.rt.unsubscribe_report(me, s) == acl.ACL_ERROR_RT_STREAM_SUBSCRIBE
        assert acl.rt.subscribe_report(0, s) == acl.ACL_ERROR_INVALID_PARAM
        assert acl.rt.subscribe_report(me, 0xBAD) == acl.ACL_ERROR_RT_PARAM_INVALID
        assert acl.rt.subscribe_report(me, s) == 0
        assert acl.rt.subscribe_report(other, s) == acl.ACL_ERROR_RT_STREAM_SUBSCRIBE  # one thread per stream
        assert acl.rt.subscribe_report(me, 0) == 0  # one thread may serve several streams
        assert acl.rt.unsubscribe_report(other, s) == acl.ACL_ERROR_RT_STREAM_SUBSCRIBE
        assert acl.rt.launch_callback(print, None, 2, s) == acl.ACL_ERROR_INVALID_PARAM
        with pytest.raises(TypeError, match="callable"):
            acl.rt.launch_callback(42, None, BLOCK, s)
        with pytest.raises(TypeError):
            acl.rt.launch_callback(print, None, BLOCK, None)
        assert acl.rt.unsubscribe_report(me, s) == 0 and acl.rt.unsubscribe_report(me, 0) == 0

    on_device0(body)


def test_a_failing_callback_does_not_stop_the_stream(capfd):
    def body(s):
        rep = Reporter()
        assert acl.rt.subscribe_report(rep.tid, s) == 0
        done = []

        def bad(_):
            raise ValueError("callback failed on purpose")

        assert acl.rt.launch_callback(bad, None, BLOCK, s) == 0
        assert acl.rt.launch_callback(done.append, "next", BLOCK, s) == 0
        assert acl.rt.synchronize_stream(s) == 0
        assert done == ["next"]
        assert acl.rt.unsubscribe_report(rep.tid, s) == 0
        rep.stop()

    on_device0(body)
    assert "callback failed on purpose" in capfd.readouterr().err


def test_a_blocking_callback_whose_thread_is_gone_releases_the_stream():
    def body(s):
        rep = Reporter()
        assert acl.rt.subscribe_report(rep.tid, s) == 0
        rep.stop()  # the thread ends without unsubscribing
        assert acl.rt.launch_callback(print, "never", BLOCK, s) == 0
        assert acl.rt.synchronize_stream_with_timeout(s, 5000) == 0
        assert acl.rt.unsubscribe_report(rep.tid, s) == 0

    on_device0(body)
