//! Convolutions against a naive f64 reference, each run with several block counts in both
//! orders (bitwise identical results): 2-D with groups, strides, dilations and asymmetric
//! pads on each path (few-tap direct, depthwise direct, im2col + GEMM, pointwise), the
//! direct paths against the n-d GEMM path (the same convolution with a leading singleton
//! spatial dim), fused epilogues bitwise equal to the convolution followed by the
//! activation kernel, and the transposed convolution (the adjoint of conv).

mod common;

use common::*;
use npurt_kernels::nn::{self, Epilogue, Window};
use npurt_kernels::{DType, HostTensor};

const E0: Epilogue = Epilogue::None;

/// (x shape, w shape, strides, pads [top, left, bottom, right], dilations, group)
type Case = ([usize; 4], [usize; 4], [usize; 2], [usize; 4], [usize; 2], usize);

/// Geometries of the direct paths (few taps; depthwise): rows wider than a chunk and not
/// a multiple of it, column strides, pads wider than the kernel or the image, channel
/// counts that leave a partial block of 8, several row bands.
const DIRECT: &[Case] = &[
    ([1, 3, 32, 32], [32, 3, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
    ([1, 3, 33, 37], [13, 3, 3, 3], [1, 2], [2, 1, 0, 3], [1, 1], 1),
    ([2, 1, 20, 19], [9, 1, 5, 5], [2, 1], [2, 2, 2, 2], [1, 1], 1),
    ([1, 4, 12, 40], [16, 2, 2, 3], [1, 1], [0, 3, 1, 0], [2, 2], 2),
    ([1, 2, 5, 4], [3, 2, 3, 3], [1, 1], [4, 5, 4, 5], [1, 1], 1),
    ([1, 32, 16, 16], [32, 1, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 32),
    ([2, 6, 23, 21], [6, 1, 3, 3], [2, 2], [1, 0, 1, 2], [1, 2], 6),
    ([1, 3, 40, 9], [3, 1, 7, 7], [1, 1], [3, 3, 3, 3], [1, 1], 3),
    // Depthwise 3x3 / 5x5 at unit strides (input rows loaded once per tile of output
    // rows): column dilation, a row count no multiple of the tile, a partial last chunk,
    // several bands (1000 columns).
    ([1, 4, 23, 37], [4, 1, 5, 5], [1, 1], [2, 1, 2, 3], [1, 2], 4),
    ([1, 2, 30, 1000], [2, 1, 3, 3], [1, 1], [1, 0, 1, 2], [1, 1], 2),
    // Depthwise with output rows not a multiple of the 4-row register tile; and several
    // bands per plane (the last one short) sharing one block's zeroed scratch.
    ([1, 5, 11, 13], [5, 1, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 5),
    ([1, 2, 30, 300], [2, 1, 7, 7], [1, 1], [3, 3, 3, 3], [1, 1], 2),
];

/// The n-d (GEMM) path's view of a 2-D case: a leading singleton spatial dim.
fn as_3d(x: &HostTensor, w: &HostTensor, c: &Case) -> (HostTensor, HostTensor, [usize; 3], [usize; 6], [usize; 3]) {
    let (xs, ws, st, pd, dl, _) = *c;
    let x3 = HostTensor::from_f64(DType::F32, &x.to_f64_vec(), &[xs[0], xs[1], 1, xs[2], xs[3]]);
    let w3 = HostTensor::from_f64(DType::F32, &w.to_f64_vec(), &[ws[0], ws[1], 1, ws[2], ws[3]]);
    (
        x3,
        w3,
        [1, st[0], st[1]],
        [0, pd[0], pd[1], 0, pd[2], pd[3]],
        [1, dl[0], dl[1]],
    )
}

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
    for &(xs, ws, st, pd, dl, g) in cases.iter().chain(DIRECT) {
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
                E0,
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
fn direct_paths_match_the_nd_gemm_path() {
    // The same convolution with a leading singleton spatial dim runs im2col + GEMM: the
    // direct paths (fused multiply-adds in tap order) agree to float rounding.
    let mut rng = Rng::new(3);
    for c in DIRECT {
        let (xs, ws, st, pd, dl, g) = *c;
        let (x, _) = random(&mut rng, DType::F32, &xs, -1.0, 1.0);
        let (w, _) = random(&mut rng, DType::F32, &ws, -1.0, 1.0);
        let (b, _) = random(&mut rng, DType::F32, &[ws[0]], -1.0, 1.0);
        let (_, os) = conv2d_ref(&x.to_f64_vec(), xs, &w.to_f64_vec(), ws, st, pd, dl, g);
        let out = HostTensor::zeros(DType::F32, &os);
        let got = run_all(&out, f64::NAN, || {
            nn::conv(
                &v(&x),
                &v(&w),
                Some(&v(&b)),
                &v(&out),
                Some(&st),
                Some(&pd),
                Some(&dl),
                g,
                E0,
                2,
            )
        });
        let (x3, w3, st3, pd3, dl3) = as_3d(&x, &w, c);
        let out3 = HostTensor::zeros(DType::F32, &[os[0], os[1], 1, os[2], os[3]]);
        let want = run_all(&out3, f64::NAN, || {
            nn::conv(
                &v(&x3),
                &v(&w3),
                Some(&v(&b)),
                &v(&out3),
                Some(&st3),
                Some(&pd3),
                Some(&dl3),
                g,
                E0,
                2,
            )
        });
        assert_close(&got, &want, 1e-5, 1e-6, &format!("direct vs n-d {xs:?} {ws:?}"));
    }
}

#[test]
fn fused_epilogues_equal_conv_then_the_activation_kernel_bitwise() {
    use npurt_kernels::{activation, unary, Activation, Scalar, UnaryOp};
    let mut rng = Rng::new(4);
    // One case per path: direct, depthwise (direct), GEMM (deep taps), pointwise, n-d.
    let cases: &[([usize; 5], [usize; 5], usize)] = &[
        ([1, 3, 1, 17, 19], [8, 3, 1, 3, 3], 1),
        ([1, 6, 1, 9, 10], [6, 1, 1, 3, 3], 6),
        ([1, 8, 1, 9, 9], [5, 8, 1, 3, 3], 1),
        ([2, 6, 1, 5, 5], [4, 6, 1, 1, 1], 1),
        ([1, 3, 2, 6, 7], [4, 3, 2, 3, 3], 1),
    ];
    let epis = [
        (Epilogue::Relu, None),
        (
            Epilogue::LeakyRelu { alpha: 0.1 },
            Some(Activation::LeakyRelu { alpha: 0.1 }),
        ),
        (
            Epilogue::Clip { lo: 0.0, hi: 0.5 },
            Some(Activation::Clip {
                lo: Some(Scalar::Float(0.0)),
                hi: Some(Scalar::Float(0.5)),
            }),
        ),
        (
            Epilogue::HardSigmoid { alpha: 0.2, beta: 0.5 },
            Some(Activation::HardSigmoid { alpha: 0.2, beta: 0.5 }),
        ),
        (Epilogue::HardSwish, Some(Activation::HardSwish)),
    ];
    for &(xs5, ws5, g) in cases {
        // 2-D cases drop the singleton dim (direct / GEMM / pointwise paths); the last is 3-D.
        let two_d = xs5[2] == 1;
        let xs: Vec<usize> = if two_d {
            vec![xs5[0], xs5[1], xs5[3], xs5[4]]
        } else {
            xs5.to_vec()
        };
        let ws: Vec<usize> = if two_d {
            vec![ws5[0], ws5[1], ws5[3], ws5[4]]
        } else {
            ws5.to_vec()
        };
        let k = xs.len() - 2;
        let (x, _) = random(&mut rng, DType::F32, &xs, -3.0, 3.0);
        let (w, _) = random(&mut rng, DType::F32, &ws, -1.0, 1.0);
        let (b, _) = random(&mut rng, DType::F32, &[ws[0]], -1.0, 1.0);
        let pads = vec![1usize; 2 * k];
        let win = Window::new("conv", k, &ws[2..], None, Some(&pads), None).unwrap();
        let mut os = vec![xs[0], ws[0]];
        os.extend(win.out_shape("conv", &xs[2..], false).unwrap());
        for (epi, act) in epis {
            let out = HostTensor::zeros(DType::F32, &os);
            let fused = run_all(&out, f64::NAN, || {
                nn::conv(
                    &v(&x),
                    &v(&w),
                    Some(&v(&b)),
                    &v(&out),
                    None,
                    Some(&pads),
                    None,
                    g,
                    epi,
                    2,
                )
            });
            let plain = HostTensor::zeros(DType::F32, &os);
            run_once(|| {
                nn::conv(
                    &v(&x),
                    &v(&w),
                    Some(&v(&b)),
                    &v(&plain),
                    None,
                    Some(&pads),
                    None,
                    g,
                    E0,
                    2,
                )
            });
            run_once(|| match act {
                None => unary(UnaryOp::Relu, &v(&plain), &v(&plain), 2),
                Some(a) => activation(a, &v(&plain), &v(&plain), 2),
            });
            let want = plain.to_f64_vec();
            assert!(
                fused.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{epi:?} on {xs:?} x {ws:?}: the fused result differs from conv then the activation"
            );
            // The activation did something (values on both sides of its kinks).
            assert!(
                want.iter()
                    .zip(&plain_conv(&x, &w, &b, &os, &pads, g))
                    .any(|(a, b)| a != b),
                "{epi:?}"
            );
        }
    }
}

fn plain_conv(x: &HostTensor, w: &HostTensor, b: &HostTensor, os: &[usize], pads: &[usize], g: usize) -> Vec<f64> {
    let out = HostTensor::zeros(DType::F32, os);
    run_once(|| nn::conv(&v(x), &v(w), Some(&v(b)), &v(&out), None, Some(pads), None, g, E0, 2));
    out.to_f64_vec()
}

#[test]
fn activation_names_are_refused_when_unknown() {
    assert!(Epilogue::parse("relu", &[]).is_ok());
    assert!(Epilogue::parse("swish", &[]).is_err());
    assert!(Epilogue::parse("leaky_relu", &[0.1, 0.2]).is_err());
}
