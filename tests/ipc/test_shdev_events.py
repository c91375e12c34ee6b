"""Events across processes (issue 15): `Event(interprocess=True)`, `ipc_handle()` and
`Event.from_ipc_handle(h)`. A consumer stream in another process waits device-side on a
record made by the producer (after a busy kernel), then reads what the producer wrote; a
record that never comes times out; a producer killed or closing its event gives the
waiter a typed error, never a hang. Every child has a timeout."""

import signal

import npurt
import pytest
from shdev_child import Child, env_for

PRODUCER = """
import sys, npurt
ev = npurt.Event(interprocess=True)
s = npurt.Stream()
print("HANDLE", ev.ipc_handle().rstrip(b"\\0").decode(), flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "run":               # run <seconds> <file> <text>: busy kernel, write, record
        npurt.kernels.busy(float(cmd[1]), stream=s)
        s.launch_host_func(lambda: open(cmd[2], "w").write(cmd[3]))
        ev.record(s)
        print("QUEUED", flush=True)
    elif cmd[0] == "sync":
        s.synchronize(timeout=30)
        print("SYNCED", ev.query(), flush=True)
    elif cmd[0] == "drop":
        del ev
        print("DROPPED", flush=True)
"""

CONSUMER = """
import sys, json, npurt
ev = npurt.Event.from_ipc_handle(sys.argv[1].encode())
s = npurt.Stream()
got = []
print("OPENED", json.dumps([ev.interprocess, ev.query()]), flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "wait":               # wait <timeout> <file>: device-side wait, then read
        got.clear()
        s.wait_event(ev, timeout=float(cmd[1]))
        s.launch_host_func(lambda: got.append(open(cmd[2]).read()))
        print("WAITING", flush=True)   # returned at once: the wait is on the stream
        try:
            s.synchronize(timeout=30)
            print("DONE", json.dumps(got), flush=True)
        except npurt.Error as e:
            print("ERR", json.dumps([type(e).__name__, e.code, str(e)]), flush=True)
    elif cmd[0] == "host":             # host <timeout>: ev.synchronize on the host
        try:
            ev.synchronize(timeout=float(cmd[1]))
            print("DONE", json.dumps(ev.query()), flush=True)
        except npurt.Error as e:
            print("ERR", json.dumps([type(e).__name__, e.code, str(e)]), flush=True)
"""


@pytest.fixture
def env(tmp_path):
    return env_for(tmp_path)


def test_consumer_stream_waits_for_the_producer_record_then_reads_its_data(env, tmp_path):
    f = tmp_path / "data.txt"
    with Child(PRODUCER, env) as p:
        h = p.expect("HANDLE")
        with Child(CONSUMER, env, h) as c:
            assert c.json("OPENED") == [True, False], "before any record, waits wait for the first one"
            c.send(f"wait 30 {f}")
            c.expect("WAITING")
            p.send(f"run 0.3 {f} payload-1")
            p.expect("QUEUED")
            assert c.json("DONE") == ["payload-1"], "the consumer ran after the producer's write"
            p.send("sync")
            assert p.expect("SYNCED") == "True"
            c.send("host 30")
            assert c.json("DONE") is True
            # A second round: a wait made now waits for the latest record.
            p.send(f"run 0.2 {f} payload-2")
            p.expect("QUEUED")
            c.send(f"wait 30 {f}")
            c.expect("WAITING")
            assert c.json("DONE") == ["payload-2"]


def test_a_record_that_never_comes_times_out(env, tmp_path):
    with Child(PRODUCER, env) as p:
        h = p.expect("HANDLE")
        with Child(CONSUMER, env, h) as c:
            c.expect("OPENED")
            c.send(f"wait 0.3 {tmp_path / 'none'}")
            c.expect("WAITING")
            name, code, msg = c.json("ERR")
            assert (name, code) == ("TaskFailedError", 107019) and "timed out" in msg
            c.send("host 0.2")
            name, code, _ = c.json("ERR")
            assert (name, code) == ("WaitTimeoutError", 507047)


def test_killed_producer_gives_the_waiters_a_typed_error(env, tmp_path):
    with Child(PRODUCER, env) as p:
        h = p.expect("HANDLE")
        with Child(CONSUMER, env, h) as c:
            c.expect("OPENED")
            p.send(f"run 30 {tmp_path / 'never'}")  # records behind a long kernel
            p.expect("QUEUED")
            c.send(f"wait 60 {tmp_path / 'never'}")
            c.expect("WAITING")
            p.p.send_signal(signal.SIGKILL)
            p.p.wait(30)
            name, code, msg = c.json("ERR")
            assert (name, code) == ("TaskFailedError", 507022) and f"pid {p.pid}" in msg, msg
            c.send("host 60")
            name, code, msg = c.json("ERR")
            assert (name, code) == ("IpcError", 507022) and "exited" in msg, msg


def test_dropped_event_with_no_record_is_a_typed_error_for_waiters(env):
    with Child(PRODUCER, env) as p:
        h = p.expect("HANDLE")
        with Child(CONSUMER, env, h) as c:
            c.expect("OPENED")
            p.send("drop")
            p.expect("DROPPED")
            c.send("host 60")
            name, code, msg = c.json("ERR")
            assert (name, code) == ("IpcError", 507022) and "destroyed" in msg, msg


def test_local_errors():
    with pytest.raises(npurt.InvalidValueError, match="timing"):
        npurt.Event(interprocess=True, timing=True)
    with pytest.raises(npurt.InvalidValueError, match="interprocess"):
        npurt.Event().ipc_handle()
    for bad in (b"garbage", "npev1:0:1:0:1:zz", b"\0" * 64):
        with pytest.raises(npurt.InvalidValueError, match="not an npurt interprocess event handle"):
            npurt.Event.from_ipc_handle(bad)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.Event.from_ipc_handle(12)


def test_same_process_round_trip():
    ev = npurt.Event(interprocess=True)
    h = ev.ipc_handle()
    assert isinstance(h, bytes) and len(h) == 64
    other = npurt.Event.from_ipc_handle(h)
    s, s2 = npurt.Stream(), npurt.Stream()
    npurt.kernels.busy(0.05, stream=s)
    ev.record(s)
    s2.wait_event(other)
    s2.synchronize(timeout=30)
    assert other.query() and ev.query()
    assert npurt._npurt._external_waits_pending() == 0


def test_pyacl_ipc_event_calls():
    import npurt.acl as acl

    assert acl.rt.set_device(0) == 0
    ev, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_IPC)
    assert ret == 0
    handle, ret = acl.rt.ipc_get_event_handle(ev)
    assert ret == 0 and len(handle) == 64
    plain, _ = acl.rt.create_event()
    assert acl.rt.ipc_get_event_handle(plain) == (b"", 107000)
    assert acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_IPC | acl.ACL_EVENT_TIME_LINE)[1] == 107000
    assert acl.rt.ipc_open_event_handle(b"nonsense")[1] == 107000
    opened, ret = acl.rt.ipc_open_event_handle(handle)
    assert ret == 0
    stream, _ = acl.rt.create_stream()
    assert acl.rt.record_event(ev, stream) == 0
    assert acl.rt.stream_wait_event(0, opened) == 0
    assert acl.rt.synchronize_event_with_timeout(opened, 30000) == 0
    assert acl.rt.query_event_status(opened) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    for e in (ev, plain, opened):
        assert acl.rt.destroy_event(e) == 0
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.reset_device(0) == 0
