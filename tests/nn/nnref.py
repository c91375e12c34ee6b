"""numpy references of the ONNX operators the npurt.nn tests compare against (written for
the tests: plain loops over windows, float64)."""

import itertools

import numpy as np


def out_len(n, k, s, pb, pe, d, ceil=False):
    ext = (k - 1) * d + 1
    span = n + pb + pe - ext
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= n + pb:
        o -= 1
    return o


def conv(x, w, b=None, strides=None, pads=None, dilations=None, group=1):
    x, w = x.astype(np.float64), w.astype(np.float64)
    k = x.ndim - 2
    st, dl = strides or [1] * k, dilations or [1] * k
    pd = pads or [0] * (2 * k)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pd[i], pd[k + i]) for i in range(k)])
    n, c = x.shape[:2]
    m = w.shape[0]
    osz = [out_len(x.shape[2 + i], w.shape[2 + i], st[i], pd[i], pd[k + i], dl[i]) for i in range(k)]
    y = np.zeros((n, m, *osz))
    cg, mg = c // group, m // group
    for o in itertools.product(*[range(v) for v in osz]):
        sl = tuple(slice(o[i] * st[i], o[i] * st[i] + (w.shape[2 + i] - 1) * dl[i] + 1, dl[i]) for i in range(k))
        for g in range(group):
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]  # n, cg, K...
            wg = w[g * mg:(g + 1) * mg]  # mg, cg, K...
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + o] = np.tensordot(patch, wg, axes=(list(range(1, k + 2)), list(range(1, k + 2))))
    if b is not None:
        y += b.reshape((1, m) + (1,) * k)
    return y


def conv_transpose(x, w, b=None, strides=None, pads=None, dilations=None, group=1, output_padding=None):
    x, w = x.astype(np.float64), w.astype(np.float64)
    k = x.ndim - 2
    st, dl = strides or [1] * k, dilations or [1] * k
    pd, op = pads or [0] * (2 * k), output_padding or [0] * k
    n, c = x.shape[:2]
    mg = w.shape[1]
    m, cg = mg * group, c // group
    full = [st[i] * (x.shape[2 + i] - 1) + op[i] + (w.shape[2 + i] - 1) * dl[i] + 1 for i in range(k)]
    y = np.zeros((n, m, *full))
    for i in itertools.product(*[range(v) for v in x.shape[2:]]):
        for kk in itertools.product(*[range(v) for v in w.shape[2:]]):
            o = tuple(i[d] * st[d] + kk[d] * dl[d] for d in range(k))
            for g in range(group):
                xv = x[(slice(None), slice(g * cg, (g + 1) * cg)) + i]  # n, cg
                wv = w[(slice(g * cg, (g + 1) * cg), slice(None)) + kk]  # cg, mg
                y[(slice(None), slice(g * mg, (g + 1) * mg)) + o] += xv @ wv
    y = y[(slice(None), slice(None)) + tuple(slice(pd[d], full[d] - pd[k + d]) for d in range(k))]
    if b is not None:
        y += b.reshape((1, m) + (1,) * k)
    return y


def pool(x, kind, kernel, strides=None, pads=None, dilations=None, ceil=False, count_include_pad=False):
    x = x.astype(np.float64)
    k = x.ndim - 2
    st, dl = strides or [1] * k, dilations or [1] * k
    pd = pads or [0] * (2 * k)
    osz = [out_len(x.shape[2 + i], kernel[i], st[i], pd[i], pd[k + i], dl[i], ceil) for i in range(k)]
    y = np.zeros(x.shape[:2] + tuple(osz))
    for o in itertools.product(*[range(v) for v in osz]):
        vals, padded = [], 1
        for d in range(k):
            pos = [o[d] * st[d] - pd[d] + j * dl[d] for j in range(kernel[d])]
            padded *= sum(1 for p in pos if -pd[d] <= p < x.shape[2 + d] + pd[k + d])
            vals.append([p for p in pos if 0 <= p < x.shape[2 + d]])
        win = x[(slice(None), slice(None)) + np.ix_(*vals)].reshape(x.shape[:2] + (-1,))
        if kind == "max":
            y[(slice(None), slice(None)) + o] = win.max(-1)
        else:
            y[(slice(None), slice(None)) + o] = win.sum(-1) / (padded if count_include_pad else win.shape[-1])
    return y
