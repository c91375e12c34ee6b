//! The nn kernels against naive f64 references, each run with several block counts in
//! both orders (bitwise identical results: the tile grid depends on the shapes only):
//! conv (2-D with groups, strides, dilations, asymmetric pads; pointwise; 1-D), the
//! transposed convolution, pools (ceil_mode, count_include_pad), and argument errors.

mod common;

use common::*;
use npurt_kernels::nn::{self, PoolKind, Window};
use npurt_kernels::{DType, HostTensor, KernelArgError as E};

/// Naive 2-D convolution (`pads` = [top, left, bottom, right]).
#[allow(clippy::too_many_arguments)]
fn conv2d_ref(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    st: [usize; 2],
    pd: [usize; 4],
    dl: [usize; 2],
    g: usize,
) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [m, cg, kh, kw] = ws;
    let oh = (h + pd[0] + pd[2] - ((kh - 1) * dl[0] + 1)) / st[0] + 1;
    let ow = (wd + pd[1] + pd[3] - ((kw - 1) * dl[1] + 1)) / st[1] + 1;
    let mg = m / g;
    let mut y = vec![0.0; n * m * oh * ow];
    for b in 0..n {
        for mm in 0..m {
            let gi = mm / mg;
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = 0.0;
                    for cc in 0..cg {
                        for a in 0..kh {
                            for e in 0..kw {
                                let yy = (i * st[0] + a * dl[0]) as isize - pd[0] as isize;
                                let xx = (j * st[1] + e * dl[1]) as isize - pd[1] as isize;
                                if yy < 0 || xx < 0 || yy >= h as isize || xx >= wd as isize {
                                    continue;
                                }
                                let ci = gi * cg + cc;
                                acc += x[((b * c + ci) * h + yy as usize) * wd + xx as usize]
                                    * w[((mm * cg + cc) * kh + a) * kw + e];
                            }
                        }
                    }
                    y[((b * m + mm) * oh + i) * ow + j] = acc;
                }
            }
        }
    }
    (y, [n, m, oh, ow])
}

#[test]
fn conv2d_matches_the_naive_reference_for_any_block_count() {
    let mut rng = Rng::new(1);
    // (x shape, w shape, strides, pads, dilations, group)
    type Case = ([usize; 4], [usize; 4], [usize; 2], [usize; 4], [usize; 2], usize);
    let cases: &[Case] = &[
        ([2, 3, 7, 6], [4, 3, 3, 3], [1, 1], [0, 0, 0, 0], [1, 1], 1),
        ([1, 4, 9, 8], [6, 2, 3, 2], [2, 1], [1, 0, 2, 1], [1, 2], 2),
        ([1, 6, 8, 8], [6, 1, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 6),
        // depthwise (computed directly): strides, dilations, asymmetric pads, batches
        ([2, 4, 9, 7], [4, 1, 3, 2], [2, 2], [0, 1, 2, 0], [2, 1], 4),
        ([1, 5, 10, 10], [5, 1, 5, 5], [2, 2], [2, 2, 2, 2], [1, 1], 5),
        ([2, 5, 6, 6], [7, 5, 1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1),
        ([1, 32, 24, 24], [40, 32, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
    ];
    for &(xs, ws, st, pd, dl, g) in cases {
        let (x, xd) = random(&mut rng, DType::F32, &xs, -1.0, 1.0);
        let (w, wd) = random(&mut rng, DType::F32, &ws, -1.0, 1.0);
        let (b, bd) = random(&mut rng, DType::F32, &[ws[0]], -1.0, 1.0);
        let (mut want, os) = conv2d_ref(&xd, xs, &wd, ws, st, pd, dl, g);
        let hw = os[2] * os[3];
        for (i, v) in want.iter_mut().enumerate() {
            *v += bd[(i / hw) % os[1]];
        }
        let out = HostTensor::zeros(DType::F32, &os);
        let pads = [pd[0], pd[1], pd[2], pd[3]];
        let got = run_all(&out, f64::NAN, || {
            nn::conv(
                &v(&x),
                &v(&w),
                Some(&v(&b)),
                &v(&out),
                Some(&st),
                Some(&pads),
                Some(&dl),
                g,
                2,
            )
        });
        assert_close(&got, &want, 1e-5, 1e-5, &format!("conv {xs:?} {ws:?}"));
    }
}

#[test]
fn conv_transpose_is_the_adjoint_of_conv() {
    // <conv(x, w), y> == <x, conv_transpose(y, w)> for the same window.
    let mut rng = Rng::new(2);
    let (xs, ws) = ([1usize, 4, 9, 7], [6usize, 2, 3, 2]);
    let (st, pd, dl, g) = ([2usize, 1], [1usize, 0, 0, 1], [1usize, 2], 2usize);
    let (_x, xd) = random(&mut rng, DType::F32, &xs, -1.0, 1.0);
    let (w, wd) = random(&mut rng, DType::F32, &ws, -1.0, 1.0);
    let (cv, os) = conv2d_ref(&xd, xs, &wd, ws, st, pd, dl, g);
    let (y, yd) = random(&mut rng, DType::F32, &os, -1.0, 1.0);
    let lhs: f64 = cv.iter().zip(&yd).map(|(a, b)| a * b).sum();
    // conv_transpose's weight is [C_in(=conv's M), M/group(=conv's C/group), K...]: conv's w as is.
    let win = Window::new("t", 2, &ws[2..], Some(&st), Some(&pd), Some(&dl)).unwrap();
    let oshape = nn::conv_transpose_out_shape(&os, &ws, &win, g, &[0, 0]).unwrap();
    // The transposed output may be shorter than x where conv's last windows left input unread.
    assert!(oshape[2] <= xs[2] && oshape[3] <= xs[3] && oshape[1] == xs[1]);
    let op = [xs[2] - oshape[2], xs[3] - oshape[3]];
    let out = HostTensor::zeros(DType::F32, &xs);
    let got = run_all(&out, f64::NAN, || {
        nn::conv_transpose(&v(&y), &v(&w), None, &v(&out), &win, g, &op, 2)
    });
    let rhs: f64 = got.iter().zip(&xd).map(|(a, b)| a * b).sum();
    assert!((lhs - rhs).abs() < 1e-3 * lhs.abs().max(1.0), "{lhs} vs {rhs}");
}

#[test]
fn pools_2d_fast_path_matches_the_general_path_bitwise() {
    // A 2-D pool runs pool2d.rs; the same pool with a leading singleton spatial dim runs
    // the general n-d loop: both must give the same bits.
    let mut rng = Rng::new(7);
    let kinds = [
        PoolKind::Max,
        PoolKind::Avg {
            count_include_pad: false,
        },
        PoolKind::Avg {
            count_include_pad: true,
        },
    ];
    // (x [N, C, H, W], kernel, strides, pads [bh, bw, eh, ew], dilations, ceil)
    type Case = ([usize; 4], [usize; 2], [usize; 2], [usize; 4], [usize; 2], bool);
    let cases: &[Case] = &[
        ([2, 3, 8, 8], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], false),
        ([1, 2, 7, 9], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], true),
        ([1, 2, 9, 6], [3, 2], [1, 2], [2, 0, 1, 1], [2, 1], false),
        ([2, 1, 5, 5], [5, 5], [3, 3], [2, 2, 2, 2], [1, 1], true),
    ];
    for &(xs, k, st, pd, dl, ceil) in cases {
        let (x, _) = random(&mut rng, DType::F32, &xs, -1.0, 1.0);
        let x3 = HostTensor::from_f64(DType::F32, &x.to_f64_vec(), &[xs[0], xs[1], 1, xs[2], xs[3]]);
        let sp: Vec<usize> = (0..2)
            .map(|d| nn::window_out_len(xs[2 + d], (k[d] - 1) * dl[d] + 1, st[d], pd[d], pd[2 + d], ceil).unwrap())
            .collect();
        for kind in kinds {
            let out = HostTensor::zeros(DType::F32, &[xs[0], xs[1], sp[0], sp[1]]);
            let got = run_all(&out, f64::NAN, || {
                nn::pool(kind, &v(&x), &v(&out), &k, Some(&st), Some(&pd), Some(&dl), ceil, 2)
            });
            let out3 = HostTensor::zeros(DType::F32, &[xs[0], xs[1], 1, sp[0], sp[1]]);
            let pads3 = [0, pd[0], pd[1], 0, pd[2], pd[3]];
            let want = run_all(&out3, f64::NAN, || {
                nn::pool(
                    kind,
                    &v(&x3),
                    &v(&out3),
                    &[1, k[0], k[1]],
                    Some(&[1, st[0], st[1]]),
                    Some(&pads3),
                    Some(&[1, dl[0], dl[1]]),
                    ceil,
                    2,
                )
            });
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
            assert!(same, "{kind:?} {xs:?} {k:?}: {got:?} vs {want:?}");
        }
    }
}

#[test]
fn pools_count_padding_as_onnx_does() {
    // 1x1x4x4 = 1..16, kernel 3, stride 2, ceil_mode: ONNX's averagepool_2d_ceil.
    let data: Vec<f64> = (1..=16).map(|v| v as f64).collect();
    let x = HostTensor::from_f64(DType::F32, &data, &[1, 1, 4, 4]);
    let out = HostTensor::zeros(DType::F32, &[1, 1, 2, 2]);
    let avg = PoolKind::Avg {
        count_include_pad: false,
    };
    let got = run_all(&out, f64::NAN, || {
        nn::pool(avg, &v(&x), &v(&out), &[3, 3], Some(&[2, 2]), None, None, true, 2)
    });
    assert_eq!(got, vec![6.0, 7.5, 12.0, 13.5]);
    // pads 1 all round, count_include_pad: the corner window holds 4 values over 9 slots.
    let out = HostTensor::zeros(DType::F32, &[1, 1, 2, 2]);
    let cip = PoolKind::Avg {
        count_include_pad: true,
    };
    let got = run_all(&out, f64::NAN, || {
        nn::pool(
            cip,
            &v(&x),
            &v(&out),
            &[3, 3],
            Some(&[2, 2]),
            Some(&[1, 1, 1, 1]),
            None,
            false,
            2,
        )
    });
    assert_eq!(got[0], (14.0f32 / 9.0) as f64);
    let got = run_all(&out, f64::NAN, || {
        nn::pool(
            PoolKind::Max,
            &v(&x),
            &v(&out),
            &[3, 3],
            Some(&[2, 2]),
            Some(&[1, 1, 1, 1]),
            None,
            false,
            2,
        )
    });
    assert_eq!(got, vec![6.0, 8.0, 14.0, 16.0]);
}

#[test]
fn nn_argument_errors_are_typed() {
    let x = HostTensor::zeros(DType::F32, &[1, 4, 5, 5]);
    let w = HostTensor::zeros(DType::F32, &[2, 4, 3, 3]);
    let o = HostTensor::zeros(DType::F32, &[1, 2, 3, 3]);
    assert!(nn::conv(&v(&x), &v(&w), None, &v(&o), None, None, None, 1, 1).is_ok());
    assert!(matches!(
        nn::conv(&v(&x), &v(&w), None, &v(&o), None, None, None, 3, 1),
        Err(E::ShapeMismatch { .. })
    ));
    assert!(matches!(
        nn::conv(&v(&x), &v(&w), None, &v(&o), Some(&[2, 2]), None, None, 1, 1),
        Err(E::OutputShape { .. })
    ));
    assert!(matches!(
        nn::conv(&v(&x), &v(&w), None, &v(&x), None, None, None, 1, 1),
        Err(E::OutputShape { .. })
    ));
    let xi = HostTensor::zeros(DType::I32, &[1, 4, 5, 5]);
    assert!(matches!(
        nn::conv(&v(&xi), &v(&w), None, &v(&o), None, None, None, 1, 1),
        Err(E::UnsupportedDType { .. })
    ));
    assert!(matches!(
        nn::pool(PoolKind::Max, &v(&x), &v(&o), &[7, 7], None, None, None, false, 1),
        Err(E::Invalid { .. })
    ));
    let idx = HostTensor::from_f64(DType::I64, &[0.0, 9.0], &[2]);
    let out = HostTensor::zeros(DType::F32, &[2, 5, 5]);
    let x3 = HostTensor::zeros(DType::F32, &[4, 5, 5]);
    let (k, blocks) = nn::take(&v(&x3), &v(&idx), 0, &v(&out), 1).unwrap();
    let fault = npurt_kernels::run_inline(k.as_ref(), blocks, false).unwrap_err();
    assert!(fault.0.contains("out of bounds"), "{}", fault.0);
}
