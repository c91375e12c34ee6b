"""MatMul (numpy semantics, any rank: batch dims are merged into one for npurt's 3-D
matmul, broadcast operands are materialised first; an operand made by a Transpose is read
through a strided view of the Transpose's input when the batch dims merge without a copy,
as an attention's head split and K transpose do, so the GEMM packs from it directly) and
Gemm (one ``npurt.gemm`` kernel: alpha, beta, transposes and C inside the GEMM)."""

from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

import npurt

from ... import _npurt
from ...exceptions import InvalidValueError
from .. import fuse
from ..ir import Ctx, Unsupported, Val
from . import FLOATS, bshape, copy_into, kernel, need_dtype, op


def _batched(ctx: Ctx, v: Val, batch: List[int], rows: int, cols: int) -> Val:
    """``v`` as a (prod(batch), rows, cols) value: a view when broadcasting its batch dims
    to ``batch`` repeats nothing (same element count: only size-1 dims added), else a
    broadcast copy first."""
    if math.prod(v.shape[:-2]) != math.prod(batch):
        full = ctx.new(batch + [rows, cols], v.dtype)
        copy_into(ctx, v, full, op="MatMul")
        v = full
    return ctx.view(v, [math.prod(batch), rows, cols])


View = Callable[[Any], Any]


def _untransposed(ctx: Ctx, v: Val, shape: List[int]) -> Optional[Tuple[Val, View]]:
    """For ``v`` made by a Transpose of a dynamic value: that value and the view giving
    ``v`` reshaped to ``shape`` (numpy's rule: None when the reshape would need a copy;
    None with ``NPURT_MODEL_FUSE=0``)."""
    if v.perm_of is None or not ctx.fuse:
        return None
    src, perm = v.perm_of
    # The transposed view's element strides (the source is contiguous), asked against the
    # runtime's one no-copy reshape rule (DeviceArray.reshape's).
    strides = [math.prod(src.shape[d + 1 :]) for d in range(len(src.shape))]
    if math.prod(shape) == 0 or _npurt._reshape_strides([src.shape[p] for p in perm], [strides[p] for p in perm], list(shape)) is None:
        return None
    return src, lambda a: a.transpose(perm).reshape(shape)


@op("MatMul")
def _matmul(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    if fuse.EPILOGUE in attrs:
        return _fused(ctx, ins)
    a, b = ins
    need_dtype(ctx, a, FLOATS | {"int32", "int64"})
    if a.dtype != b.dtype:
        raise Unsupported(f"{ctx.node}: MatMul of {a.dtype} and {b.dtype}")
    if not a.shape or not b.shape:
        raise InvalidValueError(f"{ctx.node}: MatMul of a scalar")
    # numpy's rule for vectors: (K,) is (1, K) on the left, (K, 1) on the right, squeezed after.
    a2 = ctx.view(a, (1,) + a.shape) if len(a.shape) == 1 else a
    b2 = ctx.view(b, b.shape + (1,)) if len(b.shape) == 1 else b
    m, k = a2.shape[-2:]
    k2, n = b2.shape[-2:]
    if k != k2:
        raise InvalidValueError(f"{ctx.node}: MatMul of {a.shape} and {b.shape}: inner dims differ")
    batch = list(bshape(ctx, a2.shape[:-2], b2.shape[:-2]))
    final = batch + ([m] if len(a.shape) > 1 else []) + ([n] if len(b.shape) > 1 else [])
    out = ctx.new(final, a.dtype)
    if out.size == 0:
        return [out]
    if k == 0:
        ctx.emit(lambda i, o, s: o[0].fill(0, stream=s), [], [out], "MatMul")
        return [out]
    (lhs, fa), (rhs, fb), shape = _operands(ctx, a2, b2, batch)
    dst = ctx.view(out, shape)
    ctx.emit(lambda i, o, s: npurt.matmul(fa(i[0]), fb(i[1]), out=o[0], stream=s), [lhs, rhs], [dst], "MatMul")
    return [out]


def _operands(ctx: Ctx, a2: Val, b2: Val, batch: List[int]) -> Tuple[Tuple[Val, View], Tuple[Val, View], List[int]]:
    """The GEMM's operands of ``a2 @ b2`` (each at least 2-D) with the views reading them,
    and the shape the output is written as: one right operand folds the batch into the
    rows, ``(B*M, K) @ (K, N)`` (no copy of the right operand when it has fewer dims);
    otherwise a ``(B, M, K) @ (B, K, N)`` batch, a Transpose's output read through a view
    of its input where that needs no copy."""
    (m, k), n = a2.shape[-2:], b2.shape[-1]
    nb = math.prod(batch)
    if math.prod(b2.shape[:-2]) == 1:
        lhs = _batched(ctx, a2, batch, m, k)
        return (ctx.view(lhs, [nb * m, k]), _same), (ctx.view(b2, [k, n]), _same), [nb * m, n]
    va = _untransposed(ctx, a2, [nb, m, k]) if math.prod(a2.shape[:-2]) == nb else None
    vb = _untransposed(ctx, b2, [nb, k, n]) if math.prod(b2.shape[:-2]) == nb else None
    return va or (_batched(ctx, a2, batch, m, k), _same), vb or (_batched(ctx, b2, batch, k, n), _same), [nb, m, n]


def _fused(ctx: Ctx, ins: List[Optional[Val]]) -> List[Val]:
    """A MatMul carrying a scale and adds (``fuse.py``): one ``npurt.gemm`` when they fit
    its alpha, bias and C, else the nodes one by one (ONNX's broadcasting and errors)."""
    a, b, scale, *adds = (list(ins) + [None] * 5)[:5]
    assert a is not None and b is not None
    terms = [x for x in adds if x is not None]
    got = _as_gemm(ctx, a, b, scale, terms)
    if got is not None:
        return [got]
    from . import lower

    v = _matmul(ctx, {}, [a, b], 1)[0]
    if scale is not None:
        v = lower("Mul")(ctx, {}, [v, scale], 1, op_type="Mul")[0]
    for x in terms:
        v = lower("Add")(ctx, {}, [v, x], 1, op_type="Add")[0]
    return [v]


def _as_gemm(ctx: Ctx, a: Val, b: Val, scale: Optional[Val], terms: List[Val]) -> Optional[Val]:
    """``scale·(a @ b) + terms`` as one gemm kernel, or None when it is not one: floats of
    one dtype, 2-D or more operands, a scalar constant scale, each term a length-N vector
    (the bias) or of the output's shape (C), at most one of each."""
    if a.dtype not in FLOATS or b.dtype != a.dtype or len(a.shape) < 2 or len(b.shape) < 2:
        return None
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    try:
        batch = list(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        return None
    final = tuple(batch + [m, n])
    if k != k2 or k == 0 or math.prod(final) == 0:
        return None
    alpha = 1.0
    if scale is not None:
        if not scale.known or scale.size != 1 or len(scale.shape) > len(final) or scale.dtype != a.dtype:
            return None
        alpha = float(scale.const.reshape(()))
    bias = c = None
    for t in terms:
        if t.dtype != a.dtype or len(t.shape) > len(final):
            return None
        if bias is None and t.size == n and t.shape[-1:] == (n,):
            bias = t
        elif c is None and t.shape == final:
            c = t
        else:
            return None
    out = ctx.new(final, a.dtype)
    (lhs, fa), (rhs, fb), shape = _operands(ctx, a, b, batch)
    ins = [lhs, rhs] + ([ctx.view(c, shape)] if c is not None else []) + ([ctx.view(bias, [n])] if bias is not None else [])
    has_c, has_bias = c is not None, bias is not None

    def run(i: List[Any], o: List[Any], s: Any) -> None:
        npurt.gemm(fa(i[0]), fb(i[1]), i[2] if has_c else None, alpha=alpha, beta=1.0 if has_c else 0.0,
                   bias=i[-1] if has_bias else None, out=o[0], stream=s)

    name = "MatMul" + ("+scale" if scale is not None else "") + ("+bias" if has_bias else "") + ("+add" if has_c else "")
    ctx.emit(run, ins, [ctx.view(out, shape)], name)
    return out


def _same(a: Any) -> Any:
    return a


@op("Gemm")
def _gemm(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    need_dtype(ctx, a, FLOATS)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    ta, tb = bool(int(attrs.get("transA", 0))), bool(int(attrs.get("transB", 0)))
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise InvalidValueError(f"{ctx.node}: Gemm of {a.shape} and {b.shape} (2-D operands)")
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if k != k2:
        raise InvalidValueError(f"{ctx.node}: Gemm of {a.shape} and {b.shape}: inner dims differ")
    if c is not None:
        bshape(ctx, c.shape, (m, n))
        if c.dtype != a.dtype:
            raise Unsupported(f"{ctx.node}: Gemm C of dtype {c.dtype}")
    ins_v = [a, b]
    use_bias = c is not None and beta == 1.0 and c.size == n and (len(c.shape) == 1 or c.shape[-1] == n) and n > 1
    use_c = c is not None and beta != 0.0 and not use_bias
    if use_bias:
        ins_v.append(ctx.view(c, [n]))
    elif use_c:
        ins_v.append(c)

    def run(x: Any, y: Any, *rest: Any, out: Any, stream: Any) -> None:
        extra = rest[0] if rest else None
        npurt.gemm(x, y, extra if use_c else None, alpha=alpha, beta=beta if use_c else 0.0, bias=extra if use_bias else None, trans_a=ta, trans_b=tb, out=out, stream=stream)

    if k == 0:
        raise Unsupported(f"{ctx.node}: Gemm with an empty inner dimension")
    return [kernel(ctx, run, ins_v, [m, n], a.dtype, "Gemm")]
