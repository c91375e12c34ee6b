"""The test suite's own workloads run clean under the sanitizer: pytest with
``-p npurt.sanitizer.pytest`` and NPURT_SANITIZER=all (a test fails on any report; a
test that misuses the runtime on purpose names the reports it must produce with
``@pytest.mark.npurt_sanitizer(expect=[...])`` and fails unless exactly those come).

The whole suite is checked the same way by hand (docs/BENCH.md, "Sanitizer"); here a part
of it runs, misuse tests included, to keep the suite's own time down."""

import textwrap

from .helpers_san import ROOT, run_sanitized

# Streams, events, callbacks, memory, views, arrays and kernels, copies, pyACL, torch_npu, nn.
SUBSET = [
    "tests/runtime/test_stream.py",
    "tests/runtime/test_event.py",
    "tests/runtime/test_callbacks.py",
    "tests/memory/test_memory.py",
    "tests/memory/test_view.py",
    "tests/array/test_array.py",
    "tests/array/test_array_copies.py",
    "tests/array/test_array_streams.py",
    "tests/array/test_kernels.py",
    "tests/acl/test_acl.py",
    "tests/acl/test_acl_memory.py",
    "tests/acl/test_acl_compat.py",
    "tests/acl/test_acl_callbacks.py",
    "tests/npu/test_npu.py",
    "tests/nn/test_nn_ops.py",
]


def test_a_part_of_the_suite_passes_under_the_sanitizer():
    args = ["-m", "pytest", "-q", "-p", "npurt.sanitizer.pytest", "-p", "no:cacheprovider", *SUBSET]
    r, rep = run_sanitized(args, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-4000:]
    last = r.stdout.strip().splitlines()[-1]
    assert " passed" in last and "failed" not in last and "error" not in last, r.stdout[-4000:]
    assert rep is not None and rep["errors"] == 0, rep


def test_the_plugin_checks_expected_reports_and_watches_fixtures(tmp_path):
    (tmp_path / "test_marked.py").write_text(
        textwrap.dedent(
            """
            import npurt.acl as acl
            import pytest

            def _double_free():
                acl.rt.set_device(0)
                p, _ = acl.rt.malloc(64, 0)
                acl.rt.free(p)
                acl.rt.free(p)

            @pytest.fixture
            def block():
                acl.rt.set_device(0)
                p, _ = acl.rt.malloc(64, 0)
                yield p
                acl.rt.free(p)  # freed in the tear-down: no leak

            @pytest.mark.npurt_sanitizer(expect=["double-free"])
            def test_expected_and_seen():
                _double_free()

            @pytest.mark.npurt_sanitizer(expect=["double-free"])
            def test_expected_but_not_seen():
                acl.rt.set_device(0)

            @pytest.mark.npurt_sanitizer(expect=["leak"])
            def test_another_kind():
                _double_free()

            @pytest.mark.npurt_sanitizer(allow=["double-free"])
            def test_allowed_seen():
                _double_free()

            @pytest.mark.npurt_sanitizer(allow=["double-free"])
            def test_allowed_not_seen():
                acl.rt.set_device(0)

            def test_fixture_frees_in_teardown(block):
                assert block

            def test_leak():
                acl.rt.set_device(0)
                acl.rt.malloc(96, 0)
            """
        )
    )
    r, _ = run_sanitized(
        ["-m", "pytest", "-q", "-rfE", "-p", "npurt.sanitizer.pytest", "-p", "no:cacheprovider", "test_marked.py"],
        tools="memcheck",
        cwd=tmp_path,
    )
    out = r.stdout
    assert r.returncode == 1 and "2 failed, 5 passed, 1 error" in out, out + r.stderr
    assert "FAILED test_marked.py::test_another_kind" in out and "double-free not expected" in out, out
    assert "FAILED test_marked.py::test_expected_but_not_seen" in out, out
    assert "expected report(s) not produced: double-free" in out, out
    assert "ERROR test_marked.py::test_leak" in out and "Leaked 128 bytes" in out, out
