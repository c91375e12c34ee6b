"""Shape and movement ops: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity,
Dropout (inference) — views, no kernel; Transpose, Slice, Split, Expand, Tile — a copy
kernel from a strided or broadcast view; Concat, Gather, ConstantOfShape, Range — npurt
kernels. Shape parameters (Reshape's shape, Slice's starts...) must be known when the
model is planned: constants, shape arithmetic, or graph inputs (their values key the plan).
"""

from __future__ import annotations

import math
from typing import Any, List, Optional

import numpy as np

import npurt

from ... import _npurt
from ...exceptions import InvalidValueError
from ..ir import Ctx, Unsupported, Val
from . import axis_of, bshape, copy_into, ints, kernel, need_dtype, op, resolve


def _known(shape: List[int], dtype: str, value: Any) -> Val:
    return Val(tuple(shape), dtype, const=np.asarray(value))


@op("Shape")
def _shape(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    sh = list(ins[0].shape)
    r = len(sh)
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    start = min(max(start + r if start < 0 else start, 0), r)
    end = r if end is None else min(max(int(end) + r if int(end) < 0 else int(end), 0), r)
    v = np.array(sh[start:end], dtype=np.int64)
    return [_known([v.size], "int64", v)]


@op("Size")
def _size(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    return [_known([], "int64", np.int64(ins[0].size))]


@op("Reshape")
def _reshape(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    want = ints(ctx.host(ins[1], "Reshape's shape")) if ctx.opset >= 5 else list(attrs.get("shape", []))
    allowzero = int(attrs.get("allowzero", 0))
    shape = []
    for i, d in enumerate(want):
        if d == 0 and not allowzero:
            if i >= len(x.shape):
                raise InvalidValueError(f"{ctx.node}: shape {want} copies dim {i} of a rank-{len(x.shape)} input")
            d = x.shape[i]
        shape.append(d)
    if shape.count(-1) > 1:
        raise InvalidValueError(f"{ctx.node}: shape {want} has more than one -1")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or x.size % known:
            raise InvalidValueError(f"{ctx.node}: cannot reshape {x.shape} to {want}")
        shape[shape.index(-1)] = x.size // known
    if math.prod(shape) != x.size or any(d < 0 for d in shape):
        raise InvalidValueError(f"{ctx.node}: cannot reshape {x.shape} to {want}")
    return [ctx.view(x, shape)]


@op("Flatten")
def _flatten(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    r = len(x.shape)
    axis = int(attrs.get("axis", 1))
    if not -r <= axis <= r:
        raise InvalidValueError(f"{ctx.node}: Flatten axis {axis} out of range for rank {r}")
    axis = axis + r if axis < 0 else axis
    return [ctx.view(x, [math.prod(x.shape[:axis]), math.prod(x.shape[axis:])])]


def _axes_arg(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], first_input_opset: int) -> Optional[List[int]]:
    if ctx.opset >= first_input_opset:
        return ints(ctx.host(ins[1], "axes")) if len(ins) > 1 else None
    a = attrs.get("axes")
    return None if a is None else [int(x) for x in a]


@op("Squeeze")
def _squeeze(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    axes = _axes_arg(ctx, attrs, ins, 13)
    r = len(x.shape)
    if axes is None:
        drop = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        drop = {axis_of(ctx, a, r) for a in axes}
        if any(x.shape[a] != 1 for a in drop):
            raise InvalidValueError(f"{ctx.node}: cannot squeeze axes {axes} of shape {x.shape}")
    return [ctx.view(x, [d for i, d in enumerate(x.shape) if i not in drop])]


@op("Unsqueeze")
def _unsqueeze(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    axes = _axes_arg(ctx, attrs, ins, 13) or []
    r = len(x.shape) + len(axes)
    norm = sorted(axis_of(ctx, a, r) for a in axes)
    if len(set(norm)) != len(norm):
        raise InvalidValueError(f"{ctx.node}: repeated axes {axes}")
    shape, it = [], iter(x.shape)
    for i in range(r):
        shape.append(1 if i in norm else next(it))
    return [ctx.view(x, shape)]


@op("Identity")
def _identity(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    return [ctx.view(ins[0], ins[0].shape)]


@op("Dropout")
def _dropout(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    training = ctx.host(ins[2], "training_mode") if len(ins) > 2 and ins[2] is not None else None
    if training is not None and bool(np.asarray(training).reshape(-1)[0]):
        raise Unsupported(f"{ctx.node}: Dropout in training mode (npurt runs inference)")
    outs = [ctx.view(x, x.shape)]
    if n_out > 1:
        outs.append(kernel(ctx, lambda out, stream: out.fill(True, stream=stream), [], x.shape, "bool", "Dropout"))
    return outs


@op("Transpose")
def _transpose(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    r = len(x.shape)
    perm = [int(p) for p in attrs.get("perm", list(range(r))[::-1])]
    if sorted(axis_of(ctx, p, r) for p in perm) != list(range(r)):
        raise InvalidValueError(f"{ctx.node}: perm {perm} is not a permutation of {r} axes")
    perm = [axis_of(ctx, p, r) for p in perm]
    out = ctx.new([x.shape[p] for p in perm], need_dtype(ctx, x))
    copy_into(ctx, x, out, lambda a: a.transpose(perm), "Transpose")
    if not x.known:
        out.perm_of = (x, tuple(perm))
    return [out]


@op("Concat")
def _concat(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    xs = [v for v in ins if v is not None]
    r = len(xs[0].shape)
    axis = axis_of(ctx, int(attrs.get("axis", 0)), r)
    for v in xs:
        need_dtype(ctx, v)
        if len(v.shape) != r or v.dtype != xs[0].dtype or any(a != b for i, (a, b) in enumerate(zip(v.shape, xs[0].shape, strict=False)) if i != axis):
            raise InvalidValueError(f"{ctx.node}: cannot concatenate {[x.shape for x in xs]} ({[x.dtype for x in xs]}) on axis {axis}")
    shape = list(xs[0].shape)
    shape[axis] = sum(v.shape[axis] for v in xs)
    xs = [v for v in xs if v.size] or xs[:1]
    return [kernel(ctx, lambda *a, out, stream: npurt.concat(list(a), axis, out=out, stream=stream), xs, shape, xs[0].dtype, "Concat")]


def _slice_of(ctx: Ctx, dim: int, start: int, end: int, step: int) -> slice:
    if step == 0:
        raise InvalidValueError(f"{ctx.node}: slice step 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
    else:
        start, end = min(max(start, -1), dim - 1), min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


def _sliced(ctx: Ctx, x: Val, slices: List[slice], name: str) -> Val:
    shape = [len(range(*sl.indices(d))) for sl, d in zip(slices, x.shape, strict=False)]
    out = ctx.new(shape, need_dtype(ctx, x))
    key = tuple(slices)
    copy_into(ctx, x, out, lambda a: a[key], name)
    return out


@op("Slice")
def _slice(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    r = len(x.shape)
    if ctx.opset < 10:
        starts, ends, axes, steps = attrs.get("starts", []), attrs.get("ends", []), attrs.get("axes"), None
    else:
        get = [ints(ctx.host(v, "Slice's " + w)) if v is not None else None for v, w in zip((ins + [None] * 5)[1:5], ("starts", "ends", "axes", "steps"), strict=False)]
        starts, ends, axes, steps = get
    axes = list(range(len(starts))) if axes is None else [axis_of(ctx, a, r) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    slices = [slice(None)] * r
    for a, s, e, st in zip(axes, starts, ends, steps, strict=False):
        slices[a] = _slice_of(ctx, x.shape[a], int(s), int(e), int(st))
    return [_sliced(ctx, x, slices, "Slice")]


@op("Split")
def _split(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    r = len(x.shape)
    axis = axis_of(ctx, int(attrs.get("axis", 0)), r)
    dim = x.shape[axis]
    split = ints(ctx.host(ins[1], "Split's split")) if ctx.opset >= 13 and len(ins) > 1 and ins[1] is not None else attrs.get("split")
    if split is None:
        n = int(attrs.get("num_outputs", n_out))
        size = -(-dim // n)
        split = [min(size, dim - i * size) for i in range(n)]
    if sum(split) != dim or len(split) != n_out:
        raise InvalidValueError(f"{ctx.node}: split {list(split)} does not cut dim {dim} into {n_out} outputs")
    outs, at = [], 0
    for n in split:
        sl = [slice(None)] * r
        sl[axis] = slice(at, at + int(n))
        outs.append(_sliced(ctx, x, sl, "Split"))
        at += int(n)
    return outs


@op("Expand")
def _expand(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    shape = bshape(ctx, x.shape, ints(ctx.host(ins[1], "Expand's shape")))
    out = ctx.new(shape, need_dtype(ctx, x))
    copy_into(ctx, x, out, op="Expand")
    return [out]


@op("Tile")
def _tile(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    reps = ints(ctx.host(ins[1], "Tile's repeats"))
    if len(reps) != len(x.shape) or any(n < 0 for n in reps):
        raise InvalidValueError(f"{ctx.node}: repeats {reps} for a rank-{len(x.shape)} input")
    need_dtype(ctx, x)
    out = ctx.new([n * d for n, d in zip(reps, x.shape, strict=False)], x.dtype)
    inter = [v for n, d in zip(reps, x.shape, strict=False) for v in (n, d)]
    dst = ctx.view(out, inter)

    def spread(a: Any) -> Any:  # (r0, d0, r1, d1, ...) with stride 0 on the repeats
        st = [v for s in a._a.strides for v in (0, s)]
        return a._view(inter, st)

    copy_into(ctx, x, dst, spread, "Tile")
    return [out]


@op("Gather", needs=("take",))
def _gather(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x, idx = ins
    axis = axis_of(ctx, int(attrs.get("axis", 0)), len(x.shape))
    need_dtype(ctx, x)
    need_dtype(ctx, idx, {"int32", "int64"}, "indices")
    shape = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1 :])
    take = resolve("take")
    return [kernel(ctx, lambda a, i, out, stream: take(a, i, axis, out=out, stream=stream), [x, idx], shape, x.dtype, "Gather")]


@op("ConstantOfShape")
def _const_of_shape(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    from .. import dtypes

    shape = ints(ctx.host(ins[0], "ConstantOfShape's shape"))
    value = attrs.get("value", np.zeros(1, np.float32))
    dt = dtypes.from_numpy(value.dtype)
    if dt is None:
        raise Unsupported(f"{ctx.node}: ConstantOfShape of {value.dtype} (no such device dtype)")
    v = value.reshape(-1)[0].item()
    return [kernel(ctx, lambda out, stream: out.fill(v, stream=stream), [], shape, dt, "ConstantOfShape")]


@op("Range", needs=("arange",))
def _range(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    start, limit, delta = (ctx.host(v, "Range's " + w).reshape(()).item() for v, w in zip(ins, ("start", "limit", "delta"), strict=False))
    need_dtype(ctx, ins[0])
    n = max(int(math.ceil((limit - start) / delta)), 0) if delta else 0
    dt = ins[0].dtype
    arange = resolve("arange")
    def _range(out: Any, stream: Any) -> None:
        _npurt._copy(arange(start, start + n * delta, delta, dtype=dt, stream=stream)._a, out._a, stream)

    return [kernel(ctx, _range, [], [n], dt, "Range")]


@op("Constant")
def _constant(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    # Constants have no inputs, so the planner folds them on the host; this is the same value.
    for key, dt in (("value", None), ("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            a = np.asarray(attrs[key], dtype=dt)
            from .. import dtypes

            return [Val(tuple(a.shape), dtypes.from_numpy(a.dtype) or a.dtype.name, const=a)]
    raise Unsupported(f"{ctx.node}: Constant without a tensor value")
