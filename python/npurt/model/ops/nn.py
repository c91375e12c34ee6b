"""Convolution, pooling and the other CNN ops on ``npurt.nn``'s kernels (Conv,
ConvTranspose, MaxPool, AveragePool, BatchNormalization, LRN, Pad, Resize, TopK). The
lowering resolves ``auto_pad`` into explicit pads and computes every output shape; the
kernels get ONNX's pads layout ``[b0, b1, ..., e0, e1, ...]``."""

from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple

import npurt

from ... import _npurt
from ...exceptions import InvalidValueError
from .. import fuse
from ..ir import Ctx, Unsupported, Val
from . import FLOATS, ints, kernel, need_dtype, op, resolve


def _spatial(ctx: Ctx, attrs: dict, x: Val, kernel_shape: List[int], transpose: bool = False) -> Tuple[List[int], List[int], List[int]]:
    """(strides, dilations, explicit pads) of a conv / pool node, ``auto_pad`` resolved."""
    nd = len(kernel_shape)
    strides = list(attrs.get("strides", [1] * nd))
    dil = list(attrs.get("dilations", [1] * nd))
    pads = list(attrs.get("pads", [0] * (2 * nd)))
    auto = attrs.get("auto_pad", "NOTSET")
    if len(strides) != nd or len(dil) != nd or len(pads) != 2 * nd:
        raise InvalidValueError(f"{ctx.node}: strides/dilations/pads do not match a {nd}-d kernel")
    if auto in ("SAME_UPPER", "SAME_LOWER") and not transpose:
        pads = [0] * (2 * nd)
        for i in range(nd):
            size = x.shape[2 + i]
            want = -(-size // strides[i])
            total = max((want - 1) * strides[i] + (kernel_shape[i] - 1) * dil[i] + 1 - size, 0)
            small, big = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, big) if auto == "SAME_UPPER" else (big, small)
    elif auto == "VALID":
        pads = [0] * (2 * nd)
    elif auto not in ("NOTSET", "SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"{ctx.node}: auto_pad={auto!r}")
    return strides, dil, pads


def _out_dim(size: int, k: int, s: int, d: int, pb: int, pe: int, ceil: bool = False) -> int:
    span = size + pb + pe - ((k - 1) * d + 1)
    n = (-(-span // s) if ceil else span // s) + 1
    if ceil and (n - 1) * s >= size + pb:  # the last window must start inside the input or left pad
        n -= 1
    return max(n, 0)


@op("Conv", needs=("nn.conv",))
def _conv(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    need_dtype(ctx, x, FLOATS)
    ks = list(attrs.get("kernel_shape", w.shape[2:]))
    group = int(attrs.get("group", 1))
    strides, dil, pads = _spatial(ctx, attrs, x, ks)
    nd = len(ks)
    if len(x.shape) != nd + 2 or x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise InvalidValueError(f"{ctx.node}: Conv of {x.shape} with weights {w.shape}, group {group}")
    spatial = [_out_dim(x.shape[2 + i], ks[i], strides[i], dil[i], pads[i], pads[i + nd]) for i in range(nd)]
    shape = [x.shape[0], w.shape[0]] + spatial
    conv = resolve("nn.conv")
    args = [x, w] + ([b] if b is not None else [])
    act, params = attrs.get(fuse.ACTIVATION, (None, []))

    def run(a: Any, wt: Any, *rest: Any, out: Any, stream: Any) -> None:
        conv(a, wt, rest[0] if rest else None, strides=strides, pads=pads, dilations=dil, group=group, out=out, stream=stream,
             activation=act, activation_params=params)

    return [kernel(ctx, run, args, shape, x.dtype, "Conv" if act is None else f"Conv+{act}")]


@op("ConvTranspose", needs=("nn.conv_transpose",))
def _conv_t(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    need_dtype(ctx, x, FLOATS)
    ks = list(attrs.get("kernel_shape", w.shape[2:]))
    nd = len(ks)
    group = int(attrs.get("group", 1))
    strides, dil, pads = _spatial(ctx, attrs, x, ks, transpose=True)
    opad = list(attrs.get("output_padding", [0] * nd))
    full = [strides[i] * (x.shape[2 + i] - 1) + opad[i] + (ks[i] - 1) * dil[i] + 1 for i in range(nd)]
    auto = attrs.get("auto_pad", "NOTSET")
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        target = list(attrs["output_shape"])[-nd:] if "output_shape" in attrs else [x.shape[2 + i] * strides[i] for i in range(nd)]
        for i in range(nd):
            # ONNX: total padding may be negative (an output_shape larger than the full
            # result), the end side taking the floor half; a negative end pad is extra
            # output at the end, i.e. output_padding.
            total = full[i] - target[i]
            begin, end = (total // 2, total - total // 2) if auto == "SAME_UPPER" else (total - total // 2, total // 2)
            if begin < 0:
                raise Unsupported(f"{ctx.node}: ConvTranspose output_shape needing a negative begin pad")
            if end < 0:
                opad[i] += -end
                full[i] += -end
                end = 0
            pads[i], pads[i + nd] = begin, end
    spatial = [full[i] - pads[i] - pads[i + nd] for i in range(nd)]
    shape = [x.shape[0], w.shape[1] * group] + spatial
    ct = resolve("nn.conv_transpose")
    args = [x, w] + ([b] if b is not None else [])

    def run(a: Any, wt: Any, *rest: Any, out: Any, stream: Any) -> None:
        ct(a, wt, rest[0] if rest else None, strides=strides, pads=pads, dilations=dil, group=group, output_padding=opad, out=out, stream=stream)

    return [kernel(ctx, run, args, shape, x.dtype, "ConvTranspose")]


def _pool(ctx: Ctx, attrs: dict, x: Val, name: str, fn_path: str, **extra: Any) -> Val:
    need_dtype(ctx, x, FLOATS)
    ks = list(attrs["kernel_shape"])
    nd = len(ks)
    strides, dil, pads = _spatial(ctx, attrs, x, ks)
    ceil = bool(int(attrs.get("ceil_mode", 0)))
    spatial = [_out_dim(x.shape[2 + i], ks[i], strides[i], dil[i], pads[i], pads[i + nd], ceil) for i in range(nd)]
    fn = resolve(fn_path)
    kw = dict(kernel_shape=ks, strides=strides, pads=pads, ceil_mode=ceil, **extra)
    if name == "MaxPool" or dil != [1] * nd:
        kw["dilations"] = dil
    return kernel(ctx, lambda a, out, stream: fn(a, out=out, stream=stream, **kw), [x], list(x.shape[:2]) + spatial, x.dtype, name)


@op("MaxPool", needs=("nn.max_pool",))
def _max_pool(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    if n_out > 1:
        raise Unsupported(f"{ctx.node}: MaxPool's Indices output")
    if int(attrs.get("storage_order", 0)):
        raise Unsupported(f"{ctx.node}: MaxPool storage_order=1")
    return [_pool(ctx, attrs, ins[0], "MaxPool", "nn.max_pool")]


@op("AveragePool", needs=("nn.avg_pool",))
def _avg_pool(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    return [_pool(ctx, attrs, ins[0], "AveragePool", "nn.avg_pool", count_include_pad=bool(int(attrs.get("count_include_pad", 0))))]


@op("BatchNormalization")
def _batch_norm(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x, scale, bias, mean, var = ins[:5]
    need_dtype(ctx, x, FLOATS)
    if n_out > 1 or int(attrs.get("training_mode", 0)):
        raise Unsupported(f"{ctx.node}: BatchNormalization in training mode (running statistics outputs)")
    eps = float(attrs.get("epsilon", 1e-5))
    c = x.shape[1] if len(x.shape) > 1 else 1
    for p in (scale, bias, mean, var):
        if p.size != c or p.dtype != x.dtype:
            raise Unsupported(f"{ctx.node}: BatchNormalization parameter of shape {p.shape} ({p.dtype}) for {c} channels")
    fused = resolve("nn.batch_norm")
    if fused is not None:
        return [kernel(ctx, lambda a, s, b, m, v, out, stream: fused(a, s, b, m, v, eps, out=out, stream=stream), [x, scale, bias, mean, var], x.shape, x.dtype, "BatchNormalization")]
    # y = x * k + (bias - mean * k), k = scale / sqrt(var + eps): per-channel vectors on the
    # device (tiny kernels), then two broadcast kernels over x.
    bcast = [c] + [1] * (len(x.shape) - 2)
    k = ctx.new([c], x.dtype)
    shift = ctx.new([c], x.dtype)

    def params(i: List[Any], o: List[Any], s: Any) -> None:
        sc, bi, mu, va = (a.reshape(c) for a in i)
        npurt.add(va, eps, out=o[0], stream=s)
        npurt.rsqrt(o[0], out=o[0], stream=s)
        npurt.multiply(o[0], sc, out=o[0], stream=s)
        npurt.multiply(mu, o[0], out=o[1], stream=s)
        npurt.subtract(bi, o[1], out=o[1], stream=s)

    ctx.emit(params, [scale, bias, mean, var], [k, shift], "BatchNormalization")
    kv, sv = ctx.view(k, bcast), ctx.view(shift, bcast)
    y = ctx.new(x.shape, x.dtype)

    def apply(i: List[Any], o: List[Any], s: Any) -> None:
        npurt.multiply(i[0], i[1], out=o[0], stream=s)
        npurt.add(o[0], i[2], out=o[0], stream=s)

    if y.size:
        ctx.emit(apply, [x, kv, sv], [y], "BatchNormalization")
    return [y]


@op("LRN", needs=("nn.lrn",))
def _lrn(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS)
    size, alpha, beta, bias = int(attrs["size"]), float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75)), float(attrs.get("bias", 1.0))
    fn = resolve("nn.lrn")
    return [kernel(ctx, lambda a, out, stream: fn(a, size, alpha, beta, bias, out=out, stream=stream), [x], x.shape, x.dtype, "LRN")]


@op("Pad", needs=("pad",))
def _pad(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x)
    r = len(x.shape)
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"{ctx.node}: Pad mode={mode!r}")
    if ctx.opset < 11:
        pads, value = list(attrs.get("pads", [])), float(attrs.get("value", 0.0))
    else:
        pads = ints(ctx.host(ins[1], "Pad's pads"))
        cv = ctx.host(ins[2], "Pad's constant_value") if len(ins) > 2 and ins[2] is not None else None
        value = 0 if cv is None else cv.reshape(-1)[0].item()
        axes = ints(ctx.host(ins[3], "Pad's axes")) if len(ins) > 3 and ins[3] is not None else None
        if axes is not None:
            full = [0] * (2 * r)
            for j, a in enumerate(axes):
                a = a % r
                full[a], full[a + r] = pads[j], pads[j + len(axes)]
            pads = full
    if len(pads) != 2 * r:
        raise InvalidValueError(f"{ctx.node}: {len(pads)} pads for a rank-{r} input")
    shape = [x.shape[i] + pads[i] + pads[i + r] for i in range(r)]
    fn = resolve("pad")
    return [kernel(ctx, lambda a, out, stream: fn(a, pads, mode=mode, constant_value=value, out=out, stream=stream), [x], shape, x.dtype, "Pad")]


@op("Resize", "Upsample", needs=("nn.resize",))
def _resize(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS)
    r = len(x.shape)
    mode = attrs.get("mode", "nearest")
    if op_type == "Upsample" or ctx.opset < 11:
        scales_v = ins[1] if len(ins) > 1 else None
        scales = [float(s) for s in (ctx.host(scales_v, "scales").reshape(-1) if scales_v is not None else attrs["scales"])]
        sizes, ctm = None, "asymmetric"
        attrs = {**attrs, "nearest_mode": "floor"}  # Upsample / Resize-10: floor(x_out / scale)
    else:
        sv = ins[2] if len(ins) > 2 else None
        zv = ins[3] if len(ins) > 3 else None
        scales_a = ctx.host(sv, "Resize's scales") if sv is not None else None
        scales = [float(s) for s in scales_a.reshape(-1)] if scales_a is not None and scales_a.size else None
        sizes = ints(ctx.host(zv, "Resize's sizes")) if zv is not None else None
        ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    if attrs.get("axes") is not None or int(attrs.get("antialias", 0)) or attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise Unsupported(f"{ctx.node}: Resize axes / antialias / keep_aspect_ratio_policy")
    if mode not in ("nearest", "linear", "cubic") or ctm == "tf_crop_and_resize":
        raise Unsupported(f"{ctx.node}: Resize mode={mode!r} coordinate_transformation_mode={ctm!r}")
    sizes_given = sizes
    if sizes is None:
        if scales is None or len(scales) != r:
            raise InvalidValueError(f"{ctx.node}: Resize needs scales or sizes for every axis")
        sizes = [int(math.floor(d * s)) for d, s in zip(x.shape, scales, strict=False)]
    fn = resolve("nn.resize")
    kw = dict(mode=mode, coordinate_transformation_mode=ctm, nearest_mode=attrs.get("nearest_mode", "round_prefer_floor"),
              cubic_coeff_a=float(attrs.get("cubic_coeff_a", -0.75)), exclude_outside=bool(int(attrs.get("exclude_outside", 0))))
    if scales is not None and sizes_given is None:  # the scales drive the coordinate transform
        kw["scales"] = scales
    else:
        kw["sizes"] = sizes
    return [kernel(ctx, lambda a, out, stream: fn(a, out=out, stream=stream, **kw), [x], sizes, x.dtype, op_type)]


@op("TopK", needs=("topk",))
def _topk(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS | {"int32", "int64"})
    k = int(ctx.host(ins[1], "TopK's k").reshape(-1)[0]) if ctx.opset >= 10 else int(attrs["k"])
    axis = int(attrs.get("axis", -1)) % len(x.shape)
    largest, srt = bool(int(attrs.get("largest", 1))), bool(int(attrs.get("sorted", 1)))
    shape = list(x.shape)
    shape[axis] = k
    vals, idx = ctx.new(shape, x.dtype), ctx.new(shape, "int64")
    fn = resolve("topk")

    def run(i: List[Any], o: List[Any], s: Any) -> None:
        v, ix = fn(i[0], k, axis=axis, largest=largest, sorted=srt, stream=s)
        _npurt._copy(v._a, o[0]._a, s)
        _npurt._copy(ix._a, o[1]._a, s)

    ctx.emit(run, [x], [vals, idx], "TopK")
    return [vals, idx]
