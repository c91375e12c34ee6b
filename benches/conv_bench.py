"""Conv 3x3 (1x64x56x56 -> 64 channels, pad 1) GFLOP/s: npurt.nn.conv (im2col tiles + the
matmul's GEMM, all AI cores) against a numpy im2col + matmul baseline (numpy's BLAS, its
default threads) in the same run; also a pointwise 1x1 and a depthwise 3x3.

    python benches/conv_bench.py [rounds=7]

Prints the CPU model and npurt.isa_info() first. On a shared machine the best-of figures
estimate the machine when it is free; ratios are between figures of the same run."""

import sys
import time

import npurt
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
rng = np.random.default_rng(0)




def numpy_conv(x, w, pad, group):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))  # n, c, oh, ow, kh, kw
    oh, ow = win.shape[2:4]
    mg = m // group
    out = np.empty((n, m, oh, ow), np.float32)
    for g in range(group):
        cols = np.ascontiguousarray(win[:, g * cg:(g + 1) * cg].transpose(0, 1, 4, 5, 2, 3)).reshape(n, cg * kh * kw, oh * ow)
        out[:, g * mg:(g + 1) * mg] = (w[g * mg:(g + 1) * mg].reshape(mg, -1) @ cols).reshape(n, mg, oh, ow)
    return out


def best(f) -> float:
    f()
    ts = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def case(name, xs, ws, pad, group):
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal(ws, dtype=np.float32)
    xd, wd = npurt.to_device(x), npurt.to_device(w)
    s = npurt.Stream()
    out = npurt.nn.conv(xd, wd, pads=[pad] * 4, group=group, stream=s)
    s.synchronize()
    np.testing.assert_allclose(out.to_host(), numpy_conv(x, w, pad, group), rtol=1e-3, atol=1e-3)
    flops = 2 * out.size * ws[1] * ws[2] * ws[3]

    def run_npurt():
        npurt.nn.conv(xd, wd, pads=[pad] * 4, group=group, out=out, stream=s)
        s.synchronize()

    tn = best(run_npurt)
    tb = best(lambda: numpy_conv(x, w, pad, group))
    print(f"{name:34s} npurt {flops / tn / 1e9:7.1f} GFLOP/s ({tn * 1e3:7.2f} ms)   "
          f"numpy im2col+matmul {flops / tb / 1e9:7.1f} GFLOP/s ({tb * 1e3:7.2f} ms)   ratio {tb / tn:5.2f}x")
    s.destroy()


if __name__ == "__main__":
    print(npurt.isa_info()["summary"])
    print("AI cores:", npurt.get_device_properties(0).aicore_num if hasattr(npurt.get_device_properties(0), "aicore_num") else "?")
    case("conv3x3 1x64x56x56 -> 64, pad 1", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1)
    case("conv1x1 1x64x56x56 -> 256", (1, 64, 56, 56), (256, 64, 1, 1), 0, 1)
    case("depthwise3x3 1x64x56x56", (1, 64, 56, 56), (64, 1, 3, 3), 1, 64)
