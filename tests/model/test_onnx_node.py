"""ONNX's conformance cases (``onnx.backend.test.case.node.collect_testcases()``) through
the npurt backend: every case whose ops npurt supports must match ONNX's stored outputs,
except the cases excluded by name in ``onnx_cases.EXCLUDED`` (with the reason) and those
using dtypes npurt devices do not hold; those must be refused with a typed npurt error
(never a wrong result or a crash). ``tools/onnx_report.py`` prints the counts per op."""

from __future__ import annotations

import os
import sys

import pytest

onnx = pytest.importorskip("onnx")

sys.path.insert(0, os.path.dirname(__file__))
import npurt  # noqa: E402
import onnx_cases as oc  # noqa: E402

_SUPPORTED = set(npurt.model.supported_ops())
_CASES = sorted((c for c in oc.all_cases() if oc.runnable(c, _SUPPORTED)), key=lambda c: c.name)


def _device_dtype_gap(case) -> str:
    """The reason npurt cannot hold this case's tensors ('' if it can)."""
    from npurt.model import dtypes

    g = case.model.graph
    for v in list(g.input) + list(g.output) + list(g.value_info):
        t = v.type
        if t.HasField("tensor_type") and dtypes.npurt_dtype(t.tensor_type.elem_type) is None:
            return f"{dtypes.onnx_name(t.tensor_type.elem_type)} tensors: no npurt device dtype"
        if not t.HasField("tensor_type"):
            return "sequence / optional values: npurt runs tensors"
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and dtypes.npurt_dtype(a.i) is None:
                return f"{dtypes.onnx_name(a.i)} tensors: no npurt device dtype"
    return ""


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_onnx_node_case(case):
    why = oc.excluded(case.name) or _device_dtype_gap(case)
    if why:
        # Not a pass: npurt must refuse it with a typed error naming the problem.
        with pytest.raises((npurt.NotSupportedError, npurt.InvalidValueError, npurt.InvalidTypeError)):
            oc.run_case(case)
        return
    ok, msg = oc.run_case(case)
    assert ok, msg
