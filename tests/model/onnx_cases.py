"""ONNX's conformance cases (``onnx.backend.test.case.node.collect_testcases()``, built in
memory) for the ops npurt supports: which op each case tests, which cases are excluded
(by name, with the reason), and running one case through the npurt backend. Shared by
``test_onnx_node.py`` and ``tools/onnx_report.py``."""

from __future__ import annotations

import functools
import re
import warnings
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

# Cases excluded by name (regex, full match) -> why. Everything else of a supported op runs.
EXCLUDED: Dict[str, str] = {
    r"test_cast_.*(FLOAT8|FLOAT4|INT4|UINT4|INT2|UINT2|STRING|FLOAT_to_DOUBLE|DOUBLE|BFLOAT16_to_FLOAT16|FLOAT16_to_BFLOAT16).*": "8/4/2-bit floats and ints, strings and float64 have no device dtype",
    r"test_castlike_.*(FLOAT8|FLOAT4|INT4|UINT4|INT2|UINT2|STRING|DOUBLE).*": "8/4/2-bit floats and ints, strings and float64 have no device dtype",
    r"test_arg(max|min)_.*select_last_index": "select_last_index=1: npurt's argmax returns the first index of the extreme",
    r"test_batchnorm_.*training_mode": "BatchNormalization in training mode: npurt runs inference",
    r"test_training_dropout.*": "Dropout in training mode (random masks): npurt runs inference",
    r"test_div_(int8|int32_trunc|uint8)": "integer (truncating) Div has no npurt kernel",
    r"test_pow_types_int.*": "Pow of integer bases has no npurt kernel",
    r"test_reduce_(max|min)_(bool_inputs|empty_set_bool)": "ReduceMax/ReduceMin of bool has no npurt kernel",
    r"test_reduce_(max|min)_empty_set": "ReduceMax/ReduceMin over an empty axis (an infinite identity) has no npurt kernel",
    r"test_resize_.*(antialias|axes_\d_\d|not_larger|not_smaller)": "Resize axes / antialias / keep_aspect_ratio_policy: not in npurt.nn.resize",
    r"test_resize_tf_crop_and_resize.*": "Resize's tf_crop_and_resize coordinate mode: not in npurt.nn.resize",
    r"test_maxpool_with_argmax_.*": "MaxPool's Indices output: not in npurt.nn.max_pool",
    r"test_maxpool_2d_uint8": "pools run on float dtypes only",
    r"test_wrap_pad": "Pad mode='wrap' is not lowered yet (npurt.pad has it; opset-19 lowering open)",
    r"test_center_crop_pad_.*_expanded": "the expanded CenterCropPad needs integer (truncating) Div",
    r"test_pow_types_float32_int(32|64)": "Pow of a float base by an integer exponent tensor has no lowering",
    r"test_causal_conv_with_state.*fp16.*": "npurt.nn.conv runs float32 only (float16 Conv is refused with a typed error)",
}


def _conditional() -> Dict[str, str]:
    """Exclusions for kernels another part of npurt adds (``nn-api.md``), while missing."""
    from npurt.model.ops import resolve

    out = {}
    if resolve("power") is None:
        out[r"test_pow.*"] = "exponents other than 1, 2, 3, 0.5, -1 need npurt.power (not in this build)"
    return out


EXCLUDED.update(_conditional())

_SUFFIX = re.compile(r"(_expanded.*)$")


@functools.lru_cache(maxsize=1)
def all_cases() -> List[Any]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(collect_testcases())


def op_of(case: Any, by_name: Dict[str, Any]) -> str:
    """The op a case tests: its node's op type, or its unexpanded sibling's."""
    base = _SUFFIX.sub("", case.name)
    src = by_name.get(base, case)
    nodes = src.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    for n in nodes:  # a multi-node case: the node that is not a Constant
        if n.op_type != "Constant":
            return n.op_type
    return nodes[0].op_type


def excluded(name: str) -> Optional[str]:
    for pat, why in EXCLUDED.items():
        if re.fullmatch(pat, name):
            return why
    return None


def op_types(case: Any) -> List[str]:
    return sorted({n.op_type for n in case.model.graph.node})


def cases_by_op() -> Dict[str, List[Any]]:
    cs = all_cases()
    by_name = {c.name: c for c in cs}
    out: Dict[str, List[Any]] = {}
    for c in cs:
        out.setdefault(op_of(c, by_name), []).append(c)
    return out


def runnable(case: Any, supported: set) -> bool:
    return all(t in supported for t in op_types(case))


def _dtypes_ok(a: np.ndarray, ref: np.ndarray) -> bool:
    return a.dtype == ref.dtype


def _array(x: Any) -> np.ndarray:
    """A data-set entry as numpy (TensorProtos decoded; bfloat16 as float32, npurt's host
    type for it)."""
    if isinstance(x, (np.generic, int, float, bool)):
        x = np.asarray(x)
    if not isinstance(x, np.ndarray):
        from onnx import numpy_helper

        x = numpy_helper.to_array(x)
    if x.dtype.name == "bfloat16":
        x = x.astype(np.float32)
    return x


def run_case(case: Any) -> Tuple[bool, str]:
    """(passed, message) for one case: every data set through the npurt backend, outputs
    compared with the stored ones (ONNX's rtol / atol; exact for ints and bools)."""
    import npurt.model.backend as backend

    rep = backend.prepare(case.model)
    outputs = [o.name for o in case.model.graph.output]
    for k, (inputs, refs) in enumerate(case.data_sets):
        got = rep.run([_array(x) for x in inputs])
        if len(got) != len(refs):
            return False, f"data set {k}: {len(got)} outputs, expected {len(refs)}"
        for name, a, ref in zip(outputs, got, refs, strict=False):
            ref = _array(ref)
            if a.shape != ref.shape:
                return False, f"data set {k}, {name}: shape {a.shape}, expected {ref.shape}"
            if not _dtypes_ok(a, ref):
                return False, f"data set {k}, {name}: dtype {a.dtype}, expected {ref.dtype}"
            if ref.dtype.kind in "biu":
                if not np.array_equal(a, ref):
                    return False, f"data set {k}, {name}: values differ"
            elif not np.allclose(a, ref, rtol=case.rtol, atol=case.atol, equal_nan=True):
                err = float(np.nanmax(np.abs(a.astype(np.float64) - ref.astype(np.float64)))) if a.size else 0.0
                return False, f"data set {k}, {name}: max abs error {err:.3g} (rtol {case.rtol}, atol {case.atol})"
    return True, "ok"
