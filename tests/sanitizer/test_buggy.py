"""examples/buggy/: one program per class of mistake, each producing exactly its report
(run as real programs with NPURT_SANITIZER=all, plus the opt-in tool of its class)."""

import pytest

from .helpers_san import BUGGY, EXIT, run_sanitized

# (tool, kind, words of the message) of each report, in order.
EXPECTED = {
    "leak_in_exception_branch.py": [("memcheck", "leak", "Leaked 4128 bytes")],
    "stale_pointer.py": [
        ("memcheck", "use-after-free", "use after free"),
        ("memcheck", "double-free", "double free"),
    ],
    "out_of_bounds_copy.py": [("memcheck", "out-of-bounds", "Invalid memcpy of 16384 bytes")],
    "async_copy_read_early.py": [("racecheck", "host-race", "destination before the copy is known complete")],
    "pinned_source_rewritten.py": [("racecheck", "host-race", "pinned source whose async copy has not run")],
    "missing_event_between_streams.py": [("racecheck", "race", "Race reported between Write access by stream")],
    "two_threads_one_stream.py": [("synccheck", "shared-stream", "fed by two host threads")],
    "wait_unrecorded_event.py": [("synccheck", "unrecorded-event", "never recorded")],
    "callback_synchronizes.py": [("synccheck", "callback-blocks", "blocks on the runtime")],
    "uninitialized_kernel_input.py": [("initcheck", "uninitialized-read", "Uninitialized read of 4096 bytes by kernel add")],
    "copy_of_unwritten_memory.py": [("initcheck", "uninitialized-read", "Uninitialized read of 1024 bytes by acl.rt.memcpy")],
    "read_past_the_end.py": [("memcheck", "out-of-bounds", "992 bytes past the end of the 1056-byte allocation")],
    "write_past_the_end.py": [("memcheck", "out-of-bounds", "16 bytes of its redzone (bytes 1056..1072")],
}
# Opt-in tools: the programs whose class is not part of `all`.
TOOLS = {
    "uninitialized_kernel_input.py": "all,initcheck",
    "copy_of_unwritten_memory.py": "all,initcheck",
    "read_past_the_end.py": "all,padding",
    "write_past_the_end.py": "all,padding",
}


def test_every_buggy_program_has_an_expected_report():
    trapped = {"raw_access_after_free.py"}  # ends in the fault handler (test below)
    assert sorted(p.name for p in BUGGY.glob("*.py")) == sorted(set(EXPECTED) | trapped)


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_buggy_program_gives_exactly_its_report(script):
    r, rep = run_sanitized([BUGGY / script], tools=TOOLS.get(script, "all"))
    assert r.returncode == EXIT, f"{r.returncode}\n{r.stdout}\n{r.stderr}"
    assert rep is not None, r.stderr
    got = [(f["tool"], f["kind"]) for f in rep["findings"]]
    assert got == [(t, k) for t, k, _ in EXPECTED[script]], r.stderr
    for f, (_, _, words) in zip(rep["findings"], EXPECTED[script], strict=True):
        assert words in f["message"], f
        # every block names where in the program it happened (a frame of the script)
        assert any(script in (s["site"] or "") or any(script in line for line in s["stack"]) for s in f["sites"]), f
    n = len(EXPECTED[script])
    assert f"========= ERROR SUMMARY: {n} errors" in r.stderr.splitlines(), r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_leak_report_has_the_allocation_stack():
    r, rep = run_sanitized([BUGGY / "leak_in_exception_branch.py"])
    lines = r.stderr.splitlines()
    assert "========= LEAK SUMMARY: 4128 bytes leaked in 1 allocations" in lines, r.stderr
    (leak,) = rep["findings"]
    (alloc,) = [s for s in leak["sites"] if s["label"] == "allocated at"]
    # innermost first: the malloc line inside process(), then its caller main()
    frames = [f for f in alloc["stack"] if "leak_in_exception_branch.py" in f]
    assert "(process)" in frames[0] and "(main)" in frames[1], alloc["stack"]
    assert all(line.startswith("=========") for line in lines if "Leaked" in line or "LEAK" in line)


def test_a_raw_access_to_a_freed_block_traps_into_a_report():
    r, rep = run_sanitized([BUGGY / "raw_access_after_free.py"])
    assert r.returncode == EXIT, f"{r.returncode}\n{r.stdout}\n{r.stderr}"
    # the trap wrote the JSON report too (the exit hooks never run after it)
    assert rep is not None and rep["errors"] == 1, rep
    assert [f["kind"] for f in rep["findings"]] == ["use-after-free"], rep
    assert "use after free: 65536 B of pinned host memory" in rep["findings"][0]["message"], rep
    err = r.stderr
    assert "========= Error: Invalid access at 0x" in err and "freed (quarantined) block" in err, err
    assert "use after free: 65536 B of pinned host memory" in err, err
    assert "stale byte" not in r.stdout, "the read must not have happened"
    # where it was freed and allocated: frames of the script
    assert "raw_access_after_free.py:23(main)" in err and "raw_access_after_free.py:21(main)" in err, err


@pytest.mark.parametrize("script", sorted(TOOLS))
def test_opt_in_classes_are_silent_under_all(script):
    # initcheck and padding are not part of `all`: the same program is clean without them
    r, rep = run_sanitized([BUGGY / script], tools="all")
    assert r.returncode == 0 and rep is not None and rep["errors"] == 0, r.stderr


def test_initialised_memory_gives_no_initcheck_report(tmp_path):
    prog = tmp_path / "fine.py"
    prog.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(BUGGY)!r})\n"
        "import copy_of_unwritten_memory as m\n"
        "import npurt, numpy as np\n"
        "m.main(fill=True)\n"
        "s = npurt.Stream()\n"
        "a = npurt.zeros(256, stream=s)\n"
        "b = npurt.to_device(np.ones(256, np.float32), stream=s)\n"
        "c = npurt.empty(256, stream=s)\n"
        "npurt.add(a, b, out=c, stream=s)  # c written by the kernel, then read\n"
        "print(float(np.asarray(npurt.multiply(c, 2.0, stream=s)).sum()))\n"
    )
    r, rep = run_sanitized([prog], tools="all,initcheck")
    assert r.returncode == 0 and rep is not None and rep["errors"] == 0, r.stderr
    assert "512.0" in r.stdout, r.stdout


def test_a_raw_access_to_a_redzone_page_traps_and_the_json_keeps_earlier_errors(tmp_path):
    prog = tmp_path / "far.py"
    prog.write_text(
        "import ctypes\n"
        "import npurt.acl as acl\n"
        "acl.rt.set_device(0)\n"
        "p, _ = acl.rt.malloc(1000, 0)\n"
        "q, _ = acl.rt.malloc(64, 0)\n"
        "acl.rt.free(q)\n"
        "acl.rt.free(q)  # an earlier error: a double free\n"
        "print('far byte:', ctypes.c_ubyte.from_address(p + 1056 + 5000).value)  # in the redzone's pages\n"
    )
    r, rep = run_sanitized([prog], tools="all,padding")
    assert r.returncode == EXIT, f"{r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "far byte" not in r.stdout, "the read must not have happened"
    err = r.stderr
    assert "========= Error: Invalid access at 0x" in err, err
    assert "the page is in the redzone past the end of the 1056-byte allocation" in err, err
    assert rep is not None and rep["errors"] == 2, rep
    assert [f["kind"] for f in rep["findings"]] == ["double-free", "out-of-bounds"], rep
