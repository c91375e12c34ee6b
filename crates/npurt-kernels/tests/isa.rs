//! Every kernel family under each ISA path this CPU can run (`isa::force`, the test
//! override): the hand-written SIMD families (elementwise, cast, softmax, norm, reduce;
//! 2-D pools and direct convolutions) give bitwise the same results on every path as on the portable (scalar) one; the GEMM
//! paths each match an f64 reference within the matmul tolerances and are bitwise
//! deterministic across block counts; the report follows the override.
//!
//! The override is process-wide, so the tests of this binary take one lock (and no other
//! test binary changes it).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::*;
use npurt_kernels::isa::{self, Family, Isa};
use npurt_kernels::nn::{self, Epilogue, PoolKind};
use npurt_kernels::{
    axpy, binary, cast, fill, gemm, layer_norm, log_softmax, matmul, reduce, rms_norm, softmax, unary, BinaryOp, DType,
    GemmArgs, HostTensor, ReduceOp, UnaryOp,
};
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

/// Holds the lock and removes the override when dropped (also on a failed assertion).
struct Forced(#[allow(dead_code)] MutexGuard<'static, ()>);

impl Forced {
    fn new(level: Isa) -> Forced {
        let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        isa::force(Some(level));
        Forced(g)
    }
}

impl Drop for Forced {
    fn drop(&mut self) {
        isa::force(None);
    }
}

fn bits(v: Vec<f64>) -> Vec<u64> {
    v.into_iter().map(f64::to_bits).collect()
}

/// Results of every hand-written family on the current path, as bit patterns.
fn simd_families() -> Vec<(String, Vec<u64>)> {
    let mut rng = Rng::new(52);
    let mut res = vec![];
    let mut push = |what: String, v: Vec<f64>| res.push((what, bits(v)));
    let floats = [DType::F32, DType::F16, DType::BF16];
    let xs: Vec<_> = floats
        .iter()
        .map(|&d| random(&mut rng, d, &[37, 300], -9.0, 9.0).0)
        .collect();
    let ys: Vec<_> = floats
        .iter()
        .map(|&d| random(&mut rng, d, &[37, 300], -9.0, 9.0).0)
        .collect();
    let (xi, _) = random(&mut rng, DType::I32, &[37, 300], -1000.0, 1000.0);
    let (yi, _) = random(&mut rng, DType::I32, &[37, 300], -1000.0, 1000.0);
    let (row, _) = random(&mut rng, DType::F32, &[1, 300], -2.0, 2.0);
    let (w, _) = random(&mut rng, DType::F32, &[300], 0.5, 1.5);
    let (b, _) = random(&mut rng, DType::F32, &[300], -1.0, 1.0);
    for (x, y) in xs.iter().zip(&ys).chain([(&xi, &yi)]) {
        let dt = x.dtype();
        let out = HostTensor::zeros(dt, x.shape());
        for op in UnaryOp::ALL.into_iter().filter(|op| op.supports(dt)) {
            push(
                format!("{op:?} {dt:?}"),
                run_all(&out, 0.0, || unary(op, &v(x), &v(&out), 2)),
            );
        }
        for op in BinaryOp::ALL.into_iter().filter(|op| op.supports(dt)) {
            push(
                format!("{op:?} {dt:?}"),
                run_all(&out, 0.0, || binary(op, &v(x), &v(y), &v(&out), 2)),
            );
            push(
                format!("{op:?} {dt:?} scalar"),
                run_all(&out, 0.0, || binary(op, &v(x), 3i64, &v(&out), 2)),
            );
        }
        push(
            format!("axpy {dt:?}"),
            run_all(&out, 0.0, || axpy(3i64, &v(x), &v(y), &v(&out), 2)),
        );
        for odt in [
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::I8,
            DType::U8,
            DType::Bool,
        ] {
            let o = HostTensor::zeros(odt, x.shape());
            push(
                format!("cast {dt:?}->{odt:?}"),
                run_all(&o, 0.0, || cast(&v(x), &v(&o), 2)),
            );
        }
        push(format!("fill {dt:?}"), run_all(&out, 0.0, || fill(&v(&out), 7i64, 2)));
        let sum_dt = if dt.is_float() { DType::F32 } else { DType::I64 };
        for (op, odt) in [
            (ReduceOp::Sum, sum_dt),
            (ReduceOp::Max, dt),
            (ReduceOp::Argmax, DType::I64),
        ] {
            for axes in [None, Some(&[-1isize][..]), Some(&[0isize][..])] {
                if op == ReduceOp::Argmax && axes.is_none() {
                    continue;
                }
                let shape = npurt_kernels::reduce_out_shape(x.shape(), axes, false).unwrap();
                let o = HostTensor::zeros(odt, &shape);
                push(
                    format!("{op:?} {dt:?} {axes:?}"),
                    run_all(&o, 0.0, || reduce(op, &v(x), axes, &v(&o), 2)),
                );
            }
        }
        if dt.is_float() {
            for axis in [-1, 0] {
                push(
                    format!("softmax {dt:?} {axis}"),
                    run_all(&out, 0.0, || softmax(&v(x), axis, &v(&out), 2)),
                );
                push(
                    format!("log_softmax {dt:?} {axis}"),
                    run_all(&out, 0.0, || log_softmax(&v(x), axis, &v(&out), 2)),
                );
            }
        }
    }
    let x = &xs[0];
    let out = HostTensor::zeros(DType::F32, x.shape());
    push(
        "binary broadcast row".into(),
        run_all(&out, 0.0, || binary(BinaryOp::Mul, &v(x), &v(&row), &v(&out), 2)),
    );
    for (wp, bp) in [(None, None), (Some(&w), Some(&b))] {
        let (wv, bv) = (wp.map(v), bp.map(v));
        push(
            format!("layer_norm {}", wp.is_some()),
            run_all(&out, 0.0, || {
                layer_norm(&v(x), wv.as_ref(), bv.as_ref(), 1e-5, &v(&out), 2)
            }),
        );
        push(
            format!("rms_norm {}", wp.is_some()),
            run_all(&out, 0.0, || rms_norm(&v(x), wv.as_ref(), 1e-6, &v(&out), 2)),
        );
    }
    for dt in [DType::F16, DType::BF16] {
        let (xh, _) = random(&mut rng, dt, &[9, 130], -4.0, 4.0);
        let o = HostTensor::zeros(dt, xh.shape());
        push(
            format!("layer_norm {dt:?}"),
            run_all(&o, 0.0, || layer_norm(&v(&xh), None, None, 1e-5, &v(&o), 2)),
        );
    }
    // Pools (2-D rows and whole-window loops) and direct convolutions (few taps and
    // depthwise, with fused activations): compiled per path, the same bits on each.
    let (img, _) = random(&mut rng, DType::F32, &[2, 5, 13, 37], -3.0, 3.0);
    type P = ([usize; 2], [usize; 2], [usize; 4]);
    let pools: [P; 4] = [
        ([2, 2], [2, 2], [0; 4]),
        ([3, 3], [2, 2], [0; 4]),
        ([3, 3], [1, 1], [0; 4]),
        ([3, 3], [2, 2], [1; 4]),
    ];
    for (k, st, pd) in pools {
        for kind in [
            PoolKind::Max,
            PoolKind::Avg {
                count_include_pad: false,
            },
        ] {
            let sp: Vec<usize> = (0..2)
                .map(|d| nn::window_out_len(img.shape()[2 + d], k[d], st[d], pd[d], pd[2 + d], false).unwrap())
                .collect();
            let o = HostTensor::zeros(DType::F32, &[2, 5, sp[0], sp[1]]);
            push(
                format!("pool {kind:?} {k:?}/{st:?} {pd:?}"),
                run_all(&o, 0.0, || {
                    nn::pool(kind, &v(&img), &v(&o), &k, Some(&st), Some(&pd), None, false, 2)
                }),
            );
        }
    }
    // (w shape, group, strides, activation)
    type C = ([usize; 4], usize, [usize; 2], Epilogue);
    let (x3, _) = random(&mut rng, DType::F32, &[1, 3, 19, 37], -2.0, 2.0);
    let (x6, _) = random(&mut rng, DType::F32, &[1, 6, 19, 37], -2.0, 2.0);
    let convs: [C; 3] = [
        ([13, 3, 3, 3], 1, [1, 1], Epilogue::Relu),
        ([6, 1, 3, 3], 6, [1, 1], Epilogue::HardSwish),
        ([6, 1, 5, 5], 6, [2, 1], Epilogue::Clip { lo: 0.0, hi: 6.0 }),
    ];
    for (ws, g, st, epi) in convs {
        let x = if ws[1] * g == 3 { &x3 } else { &x6 };
        let (w, _) = random(&mut rng, DType::F32, &ws, -1.0, 1.0);
        let (b, _) = random(&mut rng, DType::F32, &[ws[0]], -1.0, 1.0);
        let pads = [ws[2] / 2, ws[3] / 2, ws[2] / 2, ws[3] / 2];
        let sp: Vec<usize> = (0..2)
            .map(|d| nn::window_out_len(x.shape()[2 + d], ws[2 + d], st[d], pads[d], pads[2 + d], false).unwrap())
            .collect();
        let o = HostTensor::zeros(DType::F32, &[1, ws[0], sp[0], sp[1]]);
        push(
            format!("conv {ws:?} group {g} {epi:?}"),
            run_all(&o, 0.0, || {
                nn::conv(
                    &v(x),
                    &v(&w),
                    Some(&v(&b)),
                    &v(&o),
                    Some(&st),
                    Some(&pads),
                    None,
                    g,
                    epi,
                    2,
                )
            }),
        );
    }
    res
}

#[test]
fn hand_written_families_give_the_portable_bits_on_every_path() {
    let want = {
        let _f = Forced::new(Isa::Scalar);
        assert_eq!(isa::level(), Isa::Scalar);
        simd_families()
    };
    for level in isa::available() {
        let _f = Forced::new(level);
        for fam in [
            Family::Elementwise,
            Family::Cast,
            Family::Softmax,
            Family::Norm,
            Family::Reduce,
        ] {
            assert_eq!(isa::path(fam), level.min(fam.best()), "{fam:?}");
        }
        let got = simd_families();
        assert_eq!(got.len(), want.len());
        for ((what, g), (_, w)) in got.iter().zip(&want) {
            assert!(g == w, "{what}: the {level} path differs from the portable one");
        }
    }
}

/// An f64 reference of `alpha·op(a)@op(b) + beta·c + bias` for 2-D operands.
#[allow(clippy::too_many_arguments)]
fn reference(
    a: &[f64],
    b: &[f64],
    (m, n, k): (usize, usize, usize),
    ta: bool,
    tb: bool,
    args: GemmArgs,
    c: &[f64],
    bias: &[f64],
) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0;
            for kk in 0..k {
                let av = if ta { a[kk * m + i] } else { a[i * k + kk] };
                let bv = if tb { b[j * k + kk] } else { b[kk * n + j] };
                acc += av * bv;
            }
            let cv = if args.beta != 0.0 {
                args.beta * c[i * n + j]
            } else {
                0.0
            };
            out[i * n + j] = args.alpha * acc + cv + bias.get(j).copied().unwrap_or(0.0);
        }
    }
    out
}

fn check_gemm_path(level: Isa) {
    let mut rng = Rng::new(77);
    // Edge shapes around the microkernel sizes; the tile grid (the same on every path) is
    // tested in matmul.rs.
    let shapes = [
        (1, 1, 1),
        (3, 17, 5),
        (17, 70, 64),
        (70, 3, 129),
        (33, 80, 40),
        (96, 48, 250),
    ];
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for (si, &(m, n, k)) in shapes.iter().enumerate() {
            let (ta, tb) = (si % 2 == 1, si % 3 == 2);
            let ashape = if ta { [k, m] } else { [m, k] };
            let bshape = if tb { [n, k] } else { [k, n] };
            let (a, ad) = random(&mut rng, dt, &ashape, -1.0, 1.0);
            let (b, bd) = random(&mut rng, dt, &bshape, -1.0, 1.0);
            let (c, cd) = random(&mut rng, dt, &[m, n], -1.0, 1.0);
            let (bias, biasd) = random(&mut rng, dt, &[n], -1.0, 1.0);
            let out = HostTensor::zeros(dt, &[m, n]);
            let what = format!("{level} {dt:?} {m}x{n}x{k} ta={ta} tb={tb}");
            let (rtol, atol) = match dt {
                DType::F32 => (1e-5, 4e-5 * (k as f64).sqrt()),
                DType::F16 => (2f64.powi(-9), 2e-3 * (k as f64).sqrt()),
                _ => (2f64.powi(-6), 2e-2 * (k as f64).sqrt()),
            };
            let plain = GemmArgs {
                trans_a: ta,
                trans_b: tb,
                alpha: 1.0,
                beta: 0.0,
            };
            let got = run_all(&out, f64::NAN, || matmul(&v(&a), &v(&b), &v(&out), ta, tb, 2));
            let want: Vec<f64> = reference(&ad, &bd, (m, n, k), ta, tb, plain, &[], &[])
                .into_iter()
                .map(|x| round_to(dt, x))
                .collect();
            assert_close(&got, &want, rtol, atol, &format!("matmul {what}"));
            let args = GemmArgs {
                trans_a: ta,
                trans_b: tb,
                alpha: 0.5,
                beta: -2.0,
            };
            let got = run_all(&out, 0.0, || {
                gemm(&v(&a), &v(&b), Some(&v(&c)), Some(&v(&bias)), &v(&out), args, 2)
            });
            let want: Vec<f64> = reference(&ad, &bd, (m, n, k), ta, tb, args, &cd, &biasd)
                .into_iter()
                .map(|x| round_to(dt, x))
                .collect();
            assert_close(&got, &want, rtol, 3.0 * atol, &format!("gemm {what}"));
        }
    }
}

#[test]
fn gemm_on_every_path_matches_the_reference() {
    for level in isa::available() {
        let _f = Forced::new(level);
        assert_eq!(isa::path(Family::Gemm), level);
        check_gemm_path(level);
    }
}

#[test]
fn the_report_follows_the_override() {
    let top = isa::detected();
    for level in isa::available() {
        let _f = Forced::new(level);
        let r = isa::report();
        assert_eq!((r.level, r.forced, r.detected), (level, Some(level), top));
        let gemm = r.paths.iter().find(|(n, _)| *n == "gemm").unwrap().1;
        assert_eq!(gemm, level);
        assert!(r.paths.iter().all(|&(_, p)| p <= level));
        assert!(r.to_string().contains(&format!("test override {level}")), "{r}");
    }
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    isa::force(None);
    let r = isa::report();
    assert_eq!(r.forced, None);
    assert_eq!(r.level, r.cap.map_or(top, |c| c.min(top)));
}
