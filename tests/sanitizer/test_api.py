"""The switches and reports of npurt.sanitizer, in this process."""

import textwrap

import npurt
import npurt.acl as acl
import pytest

from .helpers_san import run_sanitized


def test_unknown_tools_are_refused_and_nothing_changes():
    before = npurt.sanitizer.enabled()
    with pytest.raises(npurt.InvalidValueError, match="leakcheck"):
        npurt.sanitizer.enable("memcheck,leakcheck")
    assert npurt.sanitizer.enabled() == before


def test_check_collects_a_double_free_and_restores_the_tools():
    before = npurt.sanitizer.enabled()
    acl.rt.set_device(0)
    with npurt.sanitizer.check("memcheck") as rep:
        assert npurt.sanitizer.enabled() == ["memcheck"]
        p, ret = acl.rt.malloc(1000, 0)
        assert acl.rt.free(p) == 0
        assert acl.rt.free(p) != 0
    assert npurt.sanitizer.enabled() == before
    assert rep.errors == 1, rep.text
    assert "double free" in rep.text and "test_api.py" in rep.text
    assert rep.text.splitlines()[-1] == "========= ERROR SUMMARY: 1 errors"


def test_check_reports_allocations_not_freed_in_the_block_as_leaks():
    acl.rt.set_device(0)
    with npurt.sanitizer.check("memcheck") as rep:
        p, _ = acl.rt.malloc_host(100)
    assert rep.errors == 1 and "LEAK SUMMARY: 100 bytes leaked in 1 allocations" in rep.text, rep.text
    assert acl.rt.free_host(p) == 0


def test_correct_code_gives_an_empty_report():
    acl.rt.set_device(0)
    with npurt.sanitizer.check("all") as rep:
        p, _ = acl.rt.malloc(4096, 0)
        h, _ = acl.rt.malloc_host(4096)
        assert acl.rt.memcpy(p, 4096, h, 4096, 1) == 0
        assert acl.rt.free(p) == 0 and acl.rt.free_host(h) == 0
    assert not rep and rep.errors == 0, rep.text


def test_the_pytest_plugin_fails_a_test_with_a_report(tmp_path):
    (tmp_path / "test_it.py").write_text(
        textwrap.dedent(
            """
            import npurt.acl as acl

            def test_clean():
                acl.rt.set_device(0)
                p, _ = acl.rt.malloc(64, 0)
                acl.rt.free(p)

            def test_double_free():
                acl.rt.set_device(0)
                p, _ = acl.rt.malloc(64, 0)
                acl.rt.free(p)
                acl.rt.free(p)
            """
        )
    )
    r, _ = run_sanitized(
        ["-m", "pytest", "-q", "-p", "npurt.sanitizer.pytest", "-p", "no:cacheprovider", "test_it.py"],
        tools="memcheck",
        cwd=tmp_path,
    )
    assert "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr
    assert "test_double_free" in r.stdout and "double free" in r.stdout, r.stdout


def test_the_status_thread_leaves_the_configuration_to_the_program():
    # `-p npurt.sanitizer.pytest` imports npurt before conftest.py sets NPURT_DEVICE_COUNT:
    # npurt's status thread (one write per interval) must not read the configuration
    # first (it fixed it at the default, one device, half a second after the import).
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("NPURT_")}
    env["NPURT_STATUS_INTERVAL"] = "0.05"
    code = "import os, time, npurt\ntime.sleep(0.5)\nos.environ['NPURT_DEVICE_COUNT'] = '3'\nprint(npurt.device_count())\n"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "3", r.stdout + r.stderr
