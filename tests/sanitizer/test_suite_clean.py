"""Part of the test suite's own workloads runs clean under the sanitizer: pytest with
``-p npurt.sanitizer.pytest`` and NPURT_SANITIZER=all (a test fails on any report)."""

from .helpers_san import ROOT, run_sanitized

# Streams, callbacks, memory, views, arrays and kernels, copies, pyACL, torch_npu, nn.
SUBSET = [
    "tests/runtime/test_stream.py",
    "tests/runtime/test_callbacks.py",
    "tests/memory/test_memory.py",
    "tests/memory/test_view.py",
    "tests/array/test_array.py",
    "tests/array/test_array_copies.py",
    "tests/array/test_kernels.py",
    "tests/acl/test_acl.py",
    "tests/acl/test_acl_callbacks.py",
    "tests/npu/test_npu.py",
    "tests/nn/test_nn_ops.py",
]
# Tests of misuse on purpose (the sanitizer reports them, as it should): blocking calls
# from callbacks, out-of-bounds copies.
MISUSE = [
    "blocking_call_inside_callback",
    "uncaught_synchronize_inside_callback",
    "bad_copy_arguments",
    "bounds_and_sizes_are_typed_errors",
    "check_dtype_shape_and_size",
]


def test_a_part_of_the_suite_passes_under_the_sanitizer():
    k = " and ".join(f"not {m}" for m in MISUSE)
    args = ["-m", "pytest", "-q", "-p", "npurt.sanitizer.pytest", "-p", "no:cacheprovider", "-k", k, *SUBSET]
    r, rep = run_sanitized(args, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-4000:]
    assert " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-4000:]
    assert rep is not None and rep["errors"] == 0, rep


def test_misuse_tests_are_reported_under_the_sanitizer():
    # The other side: the tests left out above do fail under the plugin (their misuse is seen).
    args = ["-m", "pytest", "-q", "-p", "npurt.sanitizer.pytest", "-p", "no:cacheprovider", "-k", " or ".join(MISUSE)]
    r, _ = run_sanitized([*args, "tests/runtime/test_callbacks.py", "tests/memory/test_view.py"], cwd=ROOT)
    assert r.returncode == 1 and " failed" in r.stdout and "npurt sanitizer:" in r.stdout, r.stdout[-4000:]
    assert "passed" not in r.stdout.splitlines()[-1], r.stdout[-2000:]
