"""ISA paths: every kernel family under each level this CPU can run (the test override
``_npurt._isa_override``) against numpy with the documented tolerances; the hand-written
families give the same bits on every path; ``NPURT_ISA`` caps the level in a fresh
process (an invalid value is logged and ignored); the report is where users see it."""

import math

import npurt
import numpy as np
import pytest
from helpers import run_python
from npurt import _npurt

ORDER = ["scalar", "avx2", "avx512"]
INFO = npurt.isa_info()
LEVELS = ORDER[: ORDER.index(INFO["detected"]) + 1]
FAMILIES = {"gemm", "elementwise", "cast", "softmax", "norm", "reduce", "collective"}
_erf = np.vectorize(math.erf, otypes=[np.float64])


@pytest.fixture(params=LEVELS)
def level(request):
    _npurt._isa_override(request.param)
    yield request.param
    _npurt._isa_override(None)


def _families(rng_seed=3):
    """Every family once, on small shapes: {name: (npurt result, numpy reference, rtol, atol)}."""
    rng = np.random.default_rng(rng_seed)
    x = rng.standard_normal((37, 300)).astype(np.float32)
    y = rng.standard_normal((37, 300)).astype(np.float32)
    a = rng.standard_normal((70, 129)).astype(np.float32)
    b = rng.standard_normal((129, 45)).astype(np.float32)
    w = rng.standard_normal(300).astype(np.float32)
    bias = rng.standard_normal(300).astype(np.float32)
    dx, dy, da, db = (npurt.to_device(t) for t in (x, y, a, b))
    dw, dbias = npurt.to_device(w), npurt.to_device(bias)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    f32 = dict(rtol=2e-6, atol=1e-6)
    res = {
        "exp": (npurt.exp(dx), np.exp(x64), f32),
        "tanh": (npurt.tanh(dx), np.tanh(x64), dict(rtol=1e-6, atol=5e-7)),
        "gelu": (npurt.gelu(dx), 0.5 * x64 * (1 + _erf(x64 / math.sqrt(2))), dict(rtol=1e-6, atol=1e-6)),
        "add": (npurt.add(dx, dy), x + y, f32),
        "divide": (npurt.divide(dx, dy), x / y, f32),
        "maximum": (npurt.maximum(dx, 0.5), np.maximum(x, 0.5), f32),
        "axpy": (npurt.axpy(2.0, dx, dy), 2 * x + y, f32),
        "cast f16": (npurt.cast(dx, "float16"), x.astype(np.float16), dict(rtol=0, atol=0)),
        "cast i32": (npurt.cast(npurt.multiply(dx, 100.0), "int32"), (x * np.float32(100)).astype(np.int32), dict(rtol=0, atol=0)),
        "softmax": (npurt.softmax(dx), e / e.sum(-1, keepdims=True), dict(rtol=1e-5, atol=1e-7)),
        "log_softmax": (npurt.log_softmax(dx, axis=0), x64 - x64.max(0) - np.log(np.exp(x64 - x64.max(0)).sum(0)), dict(rtol=1e-5, atol=1e-6)),
        "layer_norm": (npurt.layer_norm(dx, dw, dbias, eps=1e-5), (x64 - mu) / np.sqrt(var + 1e-5) * w + bias, dict(rtol=1e-5, atol=1e-5)),
        "rms_norm": (npurt.rms_norm(dx, dw), x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * w, dict(rtol=1e-5, atol=1e-5)),
        "sum": (npurt.sum(dx, axis=0), x64.sum(0), dict(rtol=1e-6, atol=1e-5)),
        "max": (npurt.max(dx, axis=-1), x.max(-1), dict(rtol=0, atol=0)),
        "argmax": (npurt.argmax(dx, axis=-1), x.argmax(-1), dict(rtol=0, atol=0)),
        "matmul": (npurt.matmul(da, db), a.astype(np.float64) @ b, dict(rtol=1e-5, atol=4e-5 * math.sqrt(129))),
    }
    return res


def test_every_family_matches_numpy_on_each_path(level):
    assert npurt.isa_info()["level"] == level
    assert npurt.isa_info()["override"] == level
    for name, (got, want, tol) in _families().items():
        got = got.to_host()
        np.testing.assert_allclose(got.astype(np.float64), want, err_msg=f"{name} on {level}", **tol)


def test_hand_written_families_give_the_same_bits_on_every_path():
    def bits(lvl):
        _npurt._isa_override(lvl)
        try:
            return {k: v[0].to_host() for k, v in _families().items() if not k.startswith("matmul")}
        finally:
            _npurt._isa_override(None)

    want = bits("scalar")
    for lvl in LEVELS[1:]:
        got = bits(lvl)
        for k in want:
            assert got[k].tobytes() == want[k].tobytes(), f"{k}: {lvl} differs from scalar"


def test_gemm_paths_agree_within_tolerance():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((96, 250)).astype(np.float32)
    b = rng.standard_normal((250, 130)).astype(np.float32)
    want = a.astype(np.float64) @ b
    for lvl in LEVELS:
        _npurt._isa_override(lvl)
        try:
            assert npurt.Device(0).isa["gemm"] == lvl
            da, db = npurt.to_device(a), npurt.to_device(b)
            got = npurt.matmul(da, db).to_host()
            ha, hb = npurt.cast(da, "float16"), npurt.cast(db, "float16")
            got16 = npurt.matmul(ha, hb).to_host().astype(np.float64)
            want16 = ha.to_host().astype(np.float64) @ hb.to_host().astype(np.float64)
        finally:
            _npurt._isa_override(None)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=4e-5 * math.sqrt(250), err_msg=lvl)
        np.testing.assert_allclose(got16, want16, rtol=2**-9, atol=2e-3 * math.sqrt(250), err_msg=lvl)


def test_report_names_the_cpu_and_every_family():
    info = npurt.isa_info()
    assert info["cpu_model"] and info["cpu_model"] != "unknown"
    assert info["detected"] in ORDER and info["level"] in ORDER
    assert set(info["paths"]) == FAMILIES
    assert all(p in ORDER and ORDER.index(p) <= ORDER.index(info["level"]) for p in info["paths"].values())
    assert info["cpu_model"] in info["summary"] and "gemm=" in info["summary"]
    props = npurt.get_device_properties(0)
    assert props["cpu_model"] == info["cpu_model"]
    assert props["isa"] == info["paths"] == npurt.Device(0).isa


def test_override_rejects_unknown_levels():
    with pytest.raises(npurt.InvalidValueError, match="not one of auto"):
        _npurt._isa_override("avx-512")
    assert npurt.isa_info()["override"] is None


@pytest.mark.parametrize("value", LEVELS + ["auto"])
def test_npurt_isa_caps_the_level_in_a_fresh_process(value):
    code = """
        import npurt, numpy as np
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        got = npurt.matmul(npurt.to_device(a), npurt.to_device(a.T.copy())).to_host()
        assert (got == a @ a.T).all()
        i = npurt.isa_info()
        print(i["requested"], i["cap"], i["level"], i["paths"]["gemm"])
    """
    r = run_python(code, env={"NPURT_ISA": value})
    assert r.returncode == 0, r.stderr
    want_level = INFO["detected"] if value == "auto" else value
    cap = None if value == "auto" else value
    assert r.stdout.split() == [value, str(cap), want_level, want_level]


def test_invalid_npurt_isa_is_logged_and_ignored():
    r = run_python("import npurt; i = npurt.isa_info(); print(i['level'], i['warning'] is not None)", env={"NPURT_ISA": "sse9"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [INFO["detected"], "True"]
    assert 'NPURT_ISA="sse9" is not one of auto, avx512, avx2, scalar; using auto' in r.stderr
