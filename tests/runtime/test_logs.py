"""Runtime logs (issue 14): the levels and environment variables (CANN's names), lines in
Python's ``logging`` naming device / context / stream / task, module levels, the plog
file and stdout formats, off by default, the bounded queue's drop count, no deadlock when
runtime threads log while the main thread holds the GIL, and ``acl.app_log``. Environment
cases run in a child interpreter (the environment is read once)."""

import inspect
import logging
import os
import re

import npurt
import npurt.acl as acl
import pytest
from helpers import LONG, run_python

PLOG = re.compile(
    r"^\[(DEBUG|INFO|WARNING|ERROR)\] (RUNTIME|MEM|KERNEL|PROFILING|APP)\((\d+),([^)]+)\):"
    r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3} \[([^:\]]+):(\d+)\](\d+) (.+)$"
)
LOG_VARS = ("ASCEND_GLOBAL_LOG_LEVEL", "ASCEND_MODULE_LOG_LEVEL", "ASCEND_LOG_PRINT_TO_STDOUT",
            "ASCEND_SLOG_PRINT_TO_STDOUT", "ASCEND_HOST_LOG_FILE_NUM")


def child(code, env=None, timeout=120):
    """Runs ``code`` in a fresh interpreter with only ``env``'s log variables set."""
    saved = {k: os.environ.pop(k) for k in LOG_VARS if k in os.environ}
    try:
        p = run_python(code, env=env, timeout=timeout)
    finally:
        os.environ.update(saved)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


@pytest.fixture
def debug_logs(caplog):
    """Runtime logs at debug, captured; back to the default (error) afterwards."""
    caplog.set_level(logging.DEBUG, logger="npurt")
    npurt.set_log_level("debug")
    try:
        yield caplog
    finally:
        npurt.set_log_level("error")
        npurt.logs.flush()


def messages(caplog, logger):
    npurt.logs.flush()
    return [r.getMessage() for r in caplog.records if r.name == logger]


LEVELS = "import npurt; print(npurt.get_log_level(), dict(npurt._npurt._log_levels()))"


@pytest.mark.parametrize(
    "env, glob, mods, warned",
    [
        ({}, "error", {}, False),
        ({"ASCEND_GLOBAL_LOG_LEVEL": "1"}, "info", {}, False),
        ({"ASCEND_GLOBAL_LOG_LEVEL": "9"}, "error", {}, True),
        ({"ASCEND_GLOBAL_LOG_LEVEL": "3", "NPURT_LOG_LEVEL": "debug"}, "debug", {}, False),
        ({"ASCEND_MODULE_LOG_LEVEL": "RUNTIME=0:MEM=1"}, "error", {"RUNTIME": "debug", "MEM": "info"}, False),
        ({"ASCEND_MODULE_LOG_LEVEL": "RUNTIME=0:TBEX=1"}, "error", {}, True),
        ({"NPURT_LOG_LEVEL": "warning:MEM=debug", "ASCEND_MODULE_LOG_LEVEL": "RUNTIME=0"}, "warning",
         {"MEM": "debug"}, False),
        ({"NPURT_LOG_LEVEL": "chatty", "ASCEND_GLOBAL_LOG_LEVEL": "2"}, "warning", {}, True),
    ],
    ids=["default", "ascend-global", "ascend-invalid", "npurt-wins", "modules", "unknown-module",
         "npurt-modules", "npurt-invalid"],
)
def test_environment_sets_the_levels(env, glob, mods, warned):
    p = child(LEVELS, env)
    got_glob, got_mods = p.stdout.split(" ", 1)
    assert got_glob == glob, p.stdout
    want = {m: mods.get(m, glob) for m in npurt.logs.MODULES}
    assert eval(got_mods) == want, p.stdout
    assert ("ignored" in p.stderr) == warned, p.stderr


def test_debug_lines_name_device_context_stream_and_task(debug_logs):
    with npurt.Context() as ctx:
        s, s2 = npurt.Stream(), npurt.Stream()
        ids = f"device {s.device} context {ctx.id} stream {s.id}"
        npurt.kernels.empty(stream=s)
        buf = npurt.malloc(4096)
        host = npurt.malloc_host(4096)
        npurt.memcpy_async(buf, host, s)
        ev = npurt.Event()
        ev.record(s)
        s2.wait_event(ev)
        s2.synchronize(timeout=LONG)
        addr = f"{buf.ptr:#x}"
        buf.free()
        s.synchronize(timeout=LONG)
        s.destroy()
        s2.destroy()
    rt, mem = messages(debug_logs, "npurt.runtime"), messages(debug_logs, "npurt.mem")
    text = "\n".join(rt + mem)

    def seen(lines, *parts):
        return any(all(p in line for p in parts) for line in lines)

    assert seen(rt, f"stream {s.id} created", f"device {s.device} context {ctx.id}"), text
    assert seen(rt, "queued kernel", ids, "task 0"), text
    assert seen(rt, "queued Memcpy HtoD of 4096 B", ids, "task 1"), text
    assert seen(rt, "event 0x", f"recorded at stream {s.id} task 1"), text
    assert seen(rt, f"stream {s2.id} waits for event", f"stream {s.id} task 1"), text
    assert seen(rt, f"stream {s.id} destroyed", f"context {ctx.id}"), text
    assert seen(mem, "malloc 4096 B at", addr, f"device {s.device} context {ctx.id}"), text
    assert seen(mem, "free 4096 B at", addr), text
    rec = next(r for r in debug_logs.records if r.name == "npurt.runtime" and "queued kernel" in r.getMessage())
    assert rec.levelno == logging.DEBUG and rec.lineno > 0 and rec.filename.endswith(".rs")
    assert rec.npurt_module == "RUNTIME"


def test_task_failure_is_an_error_line_at_the_default_level(caplog, stream):
    caplog.set_level(logging.DEBUG, logger="npurt")
    assert npurt.get_log_level() == "error"
    npurt.kernels.empty(stream=stream)
    npurt.kernels.fault("boom-log", stream=stream)
    with pytest.raises(npurt.TaskFailedError):
        stream.synchronize(timeout=LONG)
    lines = messages(caplog, "npurt.runtime")
    assert any("task failed" in m and f"stream {stream.id} task 1" in m and "boom-log" in m for m in lines), lines
    assert not any("queued" in m for m in lines), "debug lines are off by default"


def test_module_levels_and_the_logger_levels_follow(caplog):
    caplog.set_level(logging.DEBUG, logger="npurt")
    try:
        npurt.set_log_level("error")
        npurt.set_log_level("debug", module="MEM")
        assert npurt.get_log_level() == "error" and npurt.get_log_level("MEM") == "debug"
        assert logging.getLogger("npurt").level == logging.ERROR
        assert logging.getLogger("npurt.mem").level == logging.DEBUG
        s = npurt.Stream()
        npurt.kernels.empty(stream=s)
        npurt.malloc(1024).free()
        s.synchronize(timeout=LONG)
        s.destroy()
        assert any(m.startswith("malloc 1024 B") for m in messages(caplog, "npurt.mem"))
        assert messages(caplog, "npurt.runtime") == []
        npurt.set_log_level("info")
        assert npurt.get_log_level("MEM") == "info", "setting every module drops the override"
        assert logging.getLogger("npurt").level == logging.INFO
        assert logging.getLogger("npurt.mem").level == logging.NOTSET
        npurt.set_log_level(logging.WARNING)
        assert npurt.get_log_level() == "warning"
        npurt.set_log_level(4)
        assert npurt.get_log_level() == "off" and logging.getLogger("npurt").level > logging.CRITICAL
    finally:
        npurt.set_log_level("error")


@pytest.mark.parametrize(
    "args, error",
    [(("verbose",), npurt.InvalidValueError), ((7,), npurt.InvalidValueError), ((1.5,), npurt.InvalidTypeError),
     ((True,), npurt.InvalidTypeError), ((None,), npurt.InvalidTypeError),
     (("debug", "TBE"), npurt.InvalidValueError), (("debug", 3), npurt.InvalidTypeError)],
)
def test_bad_levels_are_typed_errors(args, error):
    with pytest.raises(error):
        npurt.set_log_level(*args)
    assert npurt.get_log_level() == "error"


def test_plog_file_and_stdout_lines(tmp_path):
    path = tmp_path / "plog.log"
    code = """
        import os, npurt, npurt.acl as acl
        s = npurt.Stream()
        npurt.kernels.empty(stream=s)
        s.synchronize(timeout=10)
        acl.app_log(acl.ACL_WARNING, "app says hi")
        print("PID", os.getpid())
    """
    p = child(code, {"NPURT_LOG_FILE": str(path), "ASCEND_GLOBAL_LOG_LEVEL": "0", "ASCEND_LOG_PRINT_TO_STDOUT": "1"})
    pid = p.stdout.split("PID ")[1].split()[0]
    lines = path.read_text().splitlines()
    assert len(lines) > 3
    for line in lines:
        m = PLOG.match(line)
        assert m, line
        assert m.group(3) == pid
    assert any("] RUNTIME(" in f" {x}" and "queued kernel" in x for x in lines), lines
    app = next(x for x in lines if "app says hi" in x)
    assert app.startswith(f"[WARNING] APP({pid},") and "[<string>:6]" in app, app
    printed = [x for x in p.stdout.splitlines() if PLOG.match(x)]
    assert sorted(printed) == sorted(lines), "stdout gets the same lines"


def test_off_by_default_and_errors_reach_logging():
    code = """
        import logging, npurt
        logging.basicConfig(level=logging.DEBUG, format="%(name)s|%(levelname)s|%(message)s")
        s = npurt.Stream()
        npurt.kernels.empty(stream=s)
        npurt.malloc(1 << 20).free()
        npurt.kernels.fault("boom-default", stream=s)
        try:
            s.synchronize(timeout=10)
        except npurt.TaskFailedError:
            pass
        npurt.logs.flush()
    """
    p = child(code)
    npurt_lines = [x for x in p.stderr.splitlines() if x.startswith("npurt")]
    assert len(npurt_lines) == 1, npurt_lines
    assert npurt_lines[0].startswith("npurt.runtime|ERROR|task failed") and "boom-default" in npurt_lines[0]


def test_full_queue_drops_counts_and_reports_once():
    code = """
        import logging, npurt
        from npurt import _npurt
        seen = []
        class H(logging.Handler):
            def emit(self, r):
                seen.append((r.name, r.levelno, r.getMessage()))
        logging.getLogger("npurt").addHandler(H())
        npurt.set_log_level("debug")
        _npurt._log_burst(6000, 2)      # holds the GIL: the forwarder cannot drain meanwhile
        first = npurt.logs.dropped()
        npurt.logs.flush()
        _npurt._log_burst(6000, 1)
        npurt.logs.flush()
        burst = sum(1 for s in seen if s[2].startswith("burst "))
        reports = [s for s in seen if "log queue was full" in s[2]]
        print(first, npurt.logs.dropped(), burst, len(reports), reports[0][1] if reports else None)
    """
    first, total, burst, reports, level = child(code).stdout.split()
    assert int(first) >= 12000 - 4096
    assert int(total) > int(first)
    assert int(burst) + int(total) == 18000, "every record was either delivered or counted"
    assert reports == "1" and level == str(logging.WARNING)


def test_logging_from_runtime_threads_never_waits_for_the_gil():
    # The main thread holds the GIL while runtime threads log (the burst), and waits inside
    # a logging handler (holding its lock) for a stream whose host callback logs: records
    # are queued, so neither waits for Python. A deadlock would hit the child's timeout.
    code = """
        import logging, npurt, npurt.acl as acl
        from npurt import _npurt
        npurt.set_log_level("debug")
        s = npurt.Stream()
        seen = []
        class H(logging.Handler):
            def emit(self, r):
                if r.getMessage() == "go":
                    s.synchronize(timeout=20)
                seen.append(r.getMessage())
        logging.getLogger("npurt").addHandler(H())
        _npurt._log_burst(3000, 4)
        npurt.logs.flush()              # (the burst filled the queue: make room)
        npurt.kernels.busy(0.05, stream=s)
        s.launch_host_func(lambda: acl.app_log(acl.ACL_INFO, "from callback"))
        npurt.kernels.empty(stream=s)
        logging.getLogger("npurt.app").info("go")
        npurt.logs.flush()
        print("from callback" in seen, any(m.startswith("queued Host Callback") for m in seen))
    """
    assert child(code, timeout=60).stdout.split() == ["True", "True"]


def test_app_log_writes_through_the_runtime_logger(caplog):
    caplog.set_level(logging.DEBUG, logger="npurt")
    assert (acl.ACL_DEBUG, acl.ACL_INFO, acl.ACL_WARNING, acl.ACL_ERROR) == (0, 1, 2, 3)
    line = inspect.currentframe().f_lineno + 1
    acl.app_log(acl.ACL_ERROR, "app error line")
    acl.app_log(acl.ACL_INFO, "below the level")
    acl.app_log(9, "not a level")
    npurt.logs.flush()
    recs = [r for r in caplog.records if r.name == "npurt.app"]
    assert [r.getMessage() for r in recs] == ["app error line"]
    assert recs[0].levelno == logging.ERROR and recs[0].lineno == line and recs[0].pathname == __file__
    try:
        npurt.set_log_level("info", module="APP")
        acl.app_log(acl.ACL_INFO, "info now")
        npurt.logs.flush()
        assert "info now" in [r.getMessage() for r in caplog.records if r.name == "npurt.app"]
    finally:
        npurt.set_log_level("error")
    for bad in [("1", "m"), (1, 2), (None, "m"), (True, "m")]:
        with pytest.raises(TypeError):
            acl.app_log(*bad)
