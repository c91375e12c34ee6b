"""The model tests shipped in the onnx wheel (``onnx/backend/test/data``): the
``pytorch-converted/``, ``pytorch-operator/`` and ``simple/`` models against their stored
test data sets, and the ``light/`` real architectures against their stored outputs (input:
``arange(n) / n`` in the input's shape, as ONNX's runner makes it). A model with an op npurt
cannot run must be refused at load time with one ``NotSupportedError`` naming the nodes;
every model npurt loads must match."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import npurt  # noqa: E402
from onnx import numpy_helper  # noqa: E402

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
_DIRS = sorted(d for sub in ("pytorch-converted", "pytorch-operator", "simple") for d in glob.glob(os.path.join(DATA, sub, "test_*")) if os.path.isfile(os.path.join(d, "model.onnx")))
_LIGHT = sorted(glob.glob(os.path.join(DATA, "light", "light_*.onnx")))
# Stored tolerances of the light models (onnx/backend/test/data/real/*/data.json).
_RTOL = {"densenet121": 2e-3}


def _read(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    a = numpy_helper.to_array(t)
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def _load_or_refusal(path):
    """The loaded model, or None after checking the refusal is the typed load-time error."""
    try:
        return npurt.Model.load(path)
    except npurt.NotSupportedError as e:
        assert any(w in str(e) for w in ("cannot run", "dtype", "not a tensor", "not in this build", "not supported")), str(e)
        return None
    except npurt.InvalidValueError as e:
        assert "not a tensor" in str(e), str(e)  # sequences / optionals
        return None


def _compare(got, ref, rtol, atol, what):
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
    if ref.dtype.kind in "biu":
        np.testing.assert_array_equal(got, ref, err_msg=what)
    else:
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("model_dir", _DIRS, ids=[f"{os.path.basename(os.path.dirname(d))}/{os.path.basename(d)}" for d in _DIRS])
def test_stored_model(model_dir):
    m = _load_or_refusal(os.path.join(model_dir, "model.onnx"))
    if m is None:
        return
    for ds in sorted(glob.glob(os.path.join(model_dir, "test_data_set_*"))):
        ins = [_read(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")))]
        refs = [_read(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")))]
        try:
            outs = m.run(ins)
        except (npurt.NotSupportedError, npurt.InvalidTypeError) as e:
            # dtypes npurt devices do not hold are refused when the run is planned
            assert "dtype" in str(e) or "devices do not hold" in str(e) or "expected" in str(e), str(e)
            return
        assert len(outs) == len(refs)
        for k, (o, r) in enumerate(zip(outs, refs, strict=False)):
            _compare(o.to_host(), r, 1e-3, 1e-7 if r.dtype != np.float16 else 1e-3, f"{os.path.basename(ds)} output {k}")


@pytest.mark.parametrize("path", _LIGHT, ids=[os.path.basename(p)[6:-5] for p in _LIGHT])
def test_light_model(path):
    m = _load_or_refusal(path)
    if m is None:
        return
    name = os.path.basename(path)[6:-5]
    feeds = []
    for info in m.inputs:
        shape = tuple(d if isinstance(d, int) else 1 for d in info.shape)
        n = int(np.prod(shape))
        feeds.append((np.arange(n).reshape(shape) / n).astype(np.float32))
    outs = m.run(feeds)
    for k, o in enumerate(outs):
        ref = _read(path[:-5] + f"_output_{k}.pb")
        _compare(o.to_host(), ref, _RTOL.get(name, 1e-3), 1e-7, f"{name} output {k}")
