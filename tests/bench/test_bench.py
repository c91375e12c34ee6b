"""``python -m npurt.bench``: the CLI options, the JSON it writes, the correctness checks that
make a fast wrong answer fail, the baselines' skip messages, ``--compare`` and the progress
bar. Tiny stream counts and sample counts keep these fast; no test asserts a time."""

import importlib.util
import io
import json
import os

import npurt
import numpy as np
import pytest
from npurt.bench import baselines, cli, runner
from npurt.bench import throughput as tp

FAST = ["--quick", "--reps", "1", "--no-progress"]


def _main(tmp_path, *args):
    assert cli.main([*FAST, "--out", str(tmp_path), *args]) == 0
    return json.loads((tmp_path / "bench.json").read_text())


def test_batches_streams_and_checks_are_recorded(tmp_path, capsys):
    res = _main(tmp_path, "--workloads", "axpy,mlp", "--streams", "1,2", "--batch", "32,16",
                "--baselines", "python_threads,numpy")
    assert res["schema"] == 2
    assert res["settings"]["batch"] == [16, 32] and res["settings"]["streams"] == [1, 2]
    r = res["results"]
    assert "launch_rate_per_s" not in r and "memory" not in r  # only the chosen workloads ran
    mlp = r["throughput"]["mlp"]["batches"]
    assert set(mlp) == {"16", "32"}
    for b, entry in mlp.items():
        assert entry["items_per_launch"] == int(b)
        assert set(entry["npurt"]) == {"1", "2"}
        assert set(entry["baselines"]["python_threads"]) == {"1", "2"}
        assert set(entry["baselines"]["numpy"]) == {"1"}
        assert entry["npurt"]["2"]["n"] == 1 and entry["npurt"]["2"]["median"] > 0
        for name in ("npurt", "python_threads", "numpy"):  # every runner checked once, at its largest S
            chk = entry["check"][name]
            assert chk["streams"] == (1 if name == "numpy" else 2)
            assert 0 <= chk["max_abs_err"] < 1e-3
    assert set(r["throughput"]["axpy"]["batches"]) == {"1"}  # --batch is the MLP's rows only
    out = capsys.readouterr().out
    assert "MLP layer" in out and ", batch 16;" in out and ", batch 32;" in out and "rows/s" in out
    assert "axpys/s" in out and "npurt/" in out
    if importlib.util.find_spec("matplotlib"):
        for name in ("bench.png", "bench-axpy.png", "bench-mlp.png"):
            assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_matmul_batch_is_a_stack_of_matrices(tmp_path):
    res = _main(tmp_path, "--workloads", "matmul256", "--streams", "2", "--matmul-batch", "1,3", "--baselines", "none")
    b = res["results"]["throughput"]["matmul256"]["batches"]
    assert set(b) == {"1", "3"} and b["3"]["items_per_launch"] == 3
    assert b["3"]["check"]["npurt"]["max_abs_err"] < 1e-2
    assert res["settings"]["matmul_batch"] == [1, 3]


def _wrong_axpy(alpha, x, y, out=None, stream=None):
    return npurt.add(x, y, out=out, stream=stream)  # forgets alpha


def _skipped_matmul(*args, **kwargs):
    return None  # never runs: the outputs stay NaN


@pytest.mark.parametrize("workload,attr,fake", [
    ("axpy", "axpy", _wrong_axpy),
    ("mlp", "gelu", lambda h, approximate=None, out=None, stream=None: npurt.relu(h, out=out, stream=stream)),
    ("matmul256", "matmul", _skipped_matmul),
])
def test_a_fast_wrong_answer_fails_the_run(monkeypatch, workload, attr, fake):
    monkeypatch.setattr(npurt, attr, fake)
    with pytest.raises(RuntimeError, match=f"{workload} .*differs from numpy"):
        cli.run(True, [1, 2], 1, workloads=[workload], baselines=[])


def test_a_busy_kernel_that_does_not_spin_fails(monkeypatch):
    empty = npurt.kernels.empty
    monkeypatch.setattr(npurt.kernels, "busy", lambda seconds, stream=None: empty(stream=stream))
    with pytest.raises(RuntimeError, match="faster than"):
        cli.run(True, [2], 1, workloads=["busy"], baselines=[])


def test_check_catches_outputs_of_the_wrong_stream():
    r = tp.NumpyThreads(tp.spec("axpy"), 2, threaded=False)
    tp.sample(r, 2)
    assert tp.check(r, 2)["max_abs_err"] < 1e-5
    r.outs.reverse()  # stream 0 and 1 use different alphas
    with pytest.raises(RuntimeError, match="stream 0 of 2"):
        tp.check(r, 2)


@pytest.mark.parametrize("args", [
    ["--batch", "0"], ["--batch", "x"], ["--matmul-batch", "-1"], ["--streams", ""],
    ["--workloads", "bogus"], ["--baselines", "cuda"], ["--reps", "0"], ["--compare", "/nonexistent.json"],
])
def test_bad_options_are_rejected(args, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(args)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def test_missing_numba_is_skipped_with_a_message(monkeypatch, capsys):
    def missing():
        raise ImportError("No module named 'numba'")

    monkeypatch.setattr(cli, "_AVAILABLE", {})
    monkeypatch.setattr(baselines, "_numba_sim", missing)
    res = cli.run(True, [1], 1, workloads=["empty"], baselines=["numba_cudasim"])
    assert "numba_cudasim" not in res["results"]["throughput"]["empty"]["batches"]["1"]["baselines"]
    assert any(s.startswith("numba CUDA simulator baseline: ImportError") and "pip install numba" in s
               for s in res["skipped"])
    assert "skipped: numba CUDA simulator baseline" in cli.report(res)


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
def test_numba_simulator_baseline_small_streams_only():
    res = cli.run(True, [1, 2, 8], 1, workloads=["empty"], baselines=["numba_cudasim"])
    entry = res["results"]["throughput"]["empty"]["batches"]["1"]
    assert set(entry["baselines"]["numba_cudasim"]) == {"1", "2"}  # S <= 4 only: the simulator is slow
    assert entry["launches_by_runner"]["numba_cudasim"] == {"1": 100, "2": 100}
    assert entry["check"]["numba_cudasim"]["streams"] == 2


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
def test_numba_simulator_axpy_is_checked():
    class SmallAxpy(tp.Axpy):
        n = 2048

    r = baselines.NumbaSimStreams(SmallAxpy(), 2)
    with pytest.raises(RuntimeError, match="differs from numpy"):
        tp.check(r, 2)  # nothing ran yet: NaN outputs
    tp.sample(r, 2)
    assert tp.check(r, 2)["max_abs_err"] < 1e-5


def test_pocl_baseline_by_streams(tmp_path):
    if not cli._available("pocl", []):
        pytest.skip("PoCL unavailable")
    res = _main(tmp_path, "--workloads", "axpy", "--streams", "1,2", "--baselines", "pocl")
    entry = res["results"]["throughput"]["axpy"]["batches"]["1"]
    assert set(entry["baselines"]["pocl"]) == {"1", "2"}
    assert entry["check"]["pocl"]["max_abs_err"] < 1e-5


def test_compare_reads_schema_1_and_2(tmp_path, capsys):
    old = {"results": {"busy_1ms_kernels_per_s_by_streams": {"1": {"median": 500.0, "min": 1, "max": 1, "n": 1}},
                       "launch_rate_per_s": {"median": 1.0, "min": 1, "max": 1, "n": 1}}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    res = _main(tmp_path, "--workloads", "busy", "--streams", "1", "--baselines", "none",
                "--compare", str(tmp_path / "old.json"))
    out = capsys.readouterr().out
    now = res["results"]["throughput"]["busy"]["batches"]["1"]["npurt"]["1"]["median"]
    line = next(ln for ln in out.splitlines() if ln.startswith("throughput.busy.batches.1.npurt.1 "))
    assert line.split()[-1] == f"{now / 500.0:.2f}x"
    same = cli.compare(res, tmp_path / "bench.json")  # against itself: every ratio is 1
    ratios = [ln.split()[-1] for ln in same.splitlines()[1:]]
    assert ratios and set(ratios) == {"1.00x"}


def test_progress_bar_builtin_and_quiet():
    f = io.StringIO()
    p = runner.Progress(3, True, file=f, use_tqdm=False)
    p.describe("axpy S=2")
    p.advance()
    p.advance(2)
    p.close()
    text = f.getvalue()
    assert "33%" in text and "100% 3/3" in text and "axpy S=2" in text
    f = io.StringIO()
    p = runner.Progress(3, False, file=f)
    p.describe("x")
    p.advance(3)
    p.close()
    assert f.getvalue() == ""


def test_no_progress_output_when_stderr_is_not_a_terminal(tmp_path, capsys):
    assert cli.main(["--quick", "--reps", "1", "--out", str(tmp_path), "--workloads", "empty",
                       "--streams", "1", "--baselines", "none"]) == 0
    assert capsys.readouterr().err == ""


def test_execute_warmup_check_and_samples():
    calls = []
    seen_by_check = []

    class Obj:
        closed = False

        def close(self):
            self.closed = True

    obj = Obj()
    steps = [
        runner.Step(("a", "x"), "a", lambda o: calls.append(1) or float(len(calls)), 3, True, make=lambda: obj,
                     check=lambda o: seen_by_check.append(len(calls)) or "ok", check_path=("a", "check")),
        runner.Step(("b",), "b", lambda: 2.0, 2, False),
    ]
    res = {}
    runner.execute(steps, res, runner.Progress(sum(s.units for s in steps), False))
    assert res["a"]["x"] == {"median": 3.0, "min": 2.0, "max": 4.0, "n": 3}  # the warm-up (1.0) is not a sample
    assert seen_by_check == [1] and res["a"]["check"] == "ok" and obj.closed
    assert res["b"]["n"] == 2 and np.isclose(res["b"]["median"], 2.0)


def test_memory_workload_reports_every_figure(tmp_path, capsys):
    res = _main(tmp_path, "--workloads", "memory")
    m = res["results"]["memory"]
    ft = m["first_touch_ms"]
    assert ft["bytes"] == 128 << 20
    for key in ("huge_first", "normal_only", "cold_huge_first", "cold_normal_only"):
        assert ft[key] > 0
    fr = m["fragmentation"]
    assert fr["ooms"] == 0 and 1.0 <= fr["reserved_over_peak_allocated"] <= 1.25
    assert m["pool_alloc_free_1mib_ns"] > 0 and m["baseline_raw_mmap_alloc_free_1mib_ns"] > 0
    out = capsys.readouterr().out
    assert "first touch 128 MiB" in out and "(first round, VM backing memory too)" in out
    assert npurt.memory_allocated() == 0  # every buffer of the workload was freed


def test_report_names_numpys_blas_kernels_and_what_caps_them(monkeypatch):
    report = cli.rep  # npurt.bench.report (the package exports a function of that name)
    pytest.importorskip("threadpoolctl")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    m = cli.machine()
    blas = m["numpy_blas"]
    assert blas["env"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert blas["internal_api"] and blas["num_threads"] >= 1
    lines = report.where(m).splitlines()
    assert lines[0].startswith("CPU: ") and "gemm=" in lines[0]
    assert lines[1].startswith(f"numpy baseline: {blas['internal_api']}")
    assert "OPENBLAS_CORETYPE=Haswell set" in lines[1]
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert "OPENBLAS_CORETYPE" not in report.where(cli.machine())


def test_report_says_how_long_a_cache_line_takes_between_two_cores():
    """The machine record holds the core-to-core probe (None with one CPU), the report
    prints it, and with the end-of-run figure both; the probe itself answers in time."""
    report = cli.rep
    m = cli.machine()
    c2c = m["core_to_core_ns"]
    if len(os.sched_getaffinity(0)) >= 2:
        assert isinstance(c2c["start"], float) and 1.0 < c2c["start"] < 100_000.0, c2c
    else:
        assert c2c["start"] is None
    line = report.where(m).splitlines()[-1]
    assert line.startswith("core-to-core cache line: ") and "one-way" in line and "at the end" not in line
    assert "at the start, 190 ns at the end" in report.core_to_core_line({"start": 45.2, "end": 190.4})
    assert "n/a (one CPU)" in report.core_to_core_line({"start": None})
