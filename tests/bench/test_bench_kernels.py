"""The bench's kernels section (npurt vs numpy, all cores and one core), the tiny-kernel
launch and event-hop figures, and the CPU/ISA line every report starts with. Tiny sample
counts keep these fast; no test asserts a speed."""

import json

import pytest
from npurt.bench import cli, workloads
from npurt.bench import kernels as kb

FAST = ["--quick", "--reps", "1", "--no-progress"]


def test_kernels_section_all_cores_and_one_core(tmp_path, capsys):
    assert cli.main([*FAST, "--out", str(tmp_path), "--workloads", "kernels", "--baselines", "none"]) == 0
    res = json.loads((tmp_path / "bench.json").read_text())
    assert res["machine"]["isa"]["paths"]["gemm"] in ("avx512", "avx2", "scalar")
    ks = res["results"]["kernels"]
    assert set(ks) == set(kb.CASES)
    for name, per in ks.items():
        assert per["check"] == "ok"
        for where in ("all_cores", "one_core"):  # one_core comes from the child process
            assert per[where]["npurt"]["median"] > 0 and per[where]["numpy"]["median"] > 0, (name, where)
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("CPU: ") and "gemm=" in out.splitlines()[0]
    assert "matmul1024   one core" in out and "layer_norm   all cores" in out


def test_a_wrong_kernel_fails_the_kernels_check():
    c = kb.Case("softmax", quick=True)
    try:
        assert c.check() == "ok"
        c._npurt = lambda: c.dev_out.fill(0.5, stream=c.s)  # a fast wrong answer
        with pytest.raises(RuntimeError, match="kernels/softmax: npurt differs from numpy"):
            c.check()
    finally:
        c.close()


def test_tiny_kernel_figures_count_every_launch():
    assert workloads.tiny_launch_rate(2000) > 0  # raises if a launch was lost
    assert workloads.numpy_tiny_rate(2000) > 0
    assert workloads.tiny_event_hop_us(50) > 0


def test_runtime_report_has_the_tiny_kernel_lines(tmp_path, capsys):
    assert cli.main([*FAST, "--out", str(tmp_path), "--workloads", "runtime", "--baselines", "numpy"]) == 0
    out = capsys.readouterr().out
    assert "tiny add (1 elem, out=) launch+run" in out and "(numpy inline)" in out
    assert "tiny op -> record -> wait -> tiny op" in out
    r = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert r["tiny_launch_rate_per_s"]["median"] > 0 and r["baseline_numpy_tiny_rate_per_s"]["median"] > 0
