"""Defect 10: pyACL callbacks are delivered per stream: a BLOCK callback on stream A that
launches a callback on stream B (served by another report thread) and waits for B must
not wait on A's own delivery."""

import threading

import npurt.acl as acl
from conftest import acl_thread


def _server(stop, stream, ready):
    assert acl.rt.set_device(0) == 0
    tid = threading.get_ident()
    assert acl.rt.subscribe_report(tid, stream) == 0
    ready.set()
    while not stop.is_set():
        acl.rt.process_report(20)
    acl.rt.unsubscribe_report(tid, stream)
    acl.rt.reset_device(0)


def test_block_callback_on_one_stream_does_not_block_another():
    def body():
        a, _ = acl.rt.create_stream()
        b, _ = acl.rt.create_stream()
        stop = threading.Event()
        threads = []
        for st in (a, b):
            ready = threading.Event()
            t = threading.Thread(target=_server, args=(stop, st, ready), daemon=True)
            t.start()
            assert ready.wait(10)
            threads.append(t)
        got = {}

        def on_b(data):
            got["b"] = data

        def on_a(data):
            assert acl.rt.set_context(ctx) == 0
            assert acl.rt.launch_callback(on_b, "from a", acl.ACL_CALLBACK_BLOCK, b) == 0
            got["sync_b"] = acl.rt.synchronize_stream_with_timeout(b, 5000)

        ctx, _ = acl.rt.get_context()
        assert acl.rt.launch_callback(on_a, None, acl.ACL_CALLBACK_BLOCK, a) == 0
        got["sync_a"] = acl.rt.synchronize_stream_with_timeout(a, 10000)
        stop.set()
        for t in threads:
            t.join(10)
        acl.rt.destroy_stream(a)
        acl.rt.destroy_stream(b)
        return got

    got = acl_thread(body)
    assert got == {"b": "from a", "sync_b": 0, "sync_a": 0}
