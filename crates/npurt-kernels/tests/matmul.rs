//! matmul / batched matmul / gemm against an f64 reference: all transpose flags, batch
//! broadcasting, alpha/beta with C = out or a separate broadcast C, bias, non-contiguous
//! operands, k = 0 and empty outputs, f16/bf16/int, and bitwise determinism across block
//! counts (also on shapes big enough to be tiled).
//!
//! Tolerances: f32 relative 1e-5 of the f64 result plus 1e-5·sqrt(k)·max|a||b| absolute
//! (f32 accumulation over k terms); f16/bf16 one rounding of the f32 result (2 ulp).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::*;
use npurt_kernels::{gemm, matmul, matmul_out_shape, DType, GemmArgs, HostTensor};

/// op(x) element (b, i, j) of a logical tensor `x` (2-D or 3-D row-major), with transpose.
fn at(x: &[f64], shape: &[usize], t: bool, b: usize, i: usize, j: usize) -> f64 {
    let n = shape.len();
    let (r, c) = if t { (j, i) } else { (i, j) };
    let b = if n == 3 && shape[0] > 1 { b } else { 0 };
    let (rows, cols) = (shape[n - 2], shape[n - 1]);
    x[b * rows * cols + r * cols + c]
}

#[allow(clippy::too_many_arguments)]
fn reference(
    a: &[f64],
    sa: &[usize],
    b: &[f64],
    sb: &[usize],
    args: GemmArgs,
    c: Option<(&[f64], &[usize])>,
    bias: Option<&[f64]>,
    oshape: &[usize],
) -> Vec<f64> {
    let (batch, m, n) = if oshape.len() == 3 {
        (oshape[0], oshape[1], oshape[2])
    } else {
        (1, oshape[0], oshape[1])
    };
    let k = if args.trans_a {
        sa[sa.len() - 2]
    } else {
        sa[sa.len() - 1]
    };
    let mut out = vec![0.0; batch * m * n];
    for bi in 0..batch {
        let opa: Vec<f64> = (0..m * k)
            .map(|f| at(a, sa, args.trans_a, bi, f / k.max(1), f % k.max(1)))
            .collect();
        let opb: Vec<f64> = (0..k * n)
            .map(|f| at(b, sb, args.trans_b, bi, f / n.max(1), f % n.max(1)))
            .collect();
        let o = &mut out[bi * m * n..(bi + 1) * m * n];
        for i in 0..m {
            let row = &mut o[i * n..(i + 1) * n];
            for kk in 0..k {
                let aik = opa[i * k + kk];
                for (r, &bv) in row.iter_mut().zip(&opb[kk * n..(kk + 1) * n]) {
                    *r += aik * bv;
                }
            }
        }
    }
    for (flat, o) in out.iter_mut().enumerate() {
        let j = flat % n.max(1);
        *o *= args.alpha;
        if let Some((cd, cs)) = c {
            if args.beta != 0.0 {
                *o += args.beta * bcast_get(cd, cs, oshape, flat);
            }
        }
        if let Some(bias) = bias {
            *o += bias[j];
        }
    }
    out
}

fn shape_of(batch: Option<usize>, r: usize, c: usize, t: bool) -> Vec<usize> {
    let (r, c) = if t { (c, r) } else { (r, c) };
    match batch {
        Some(b) => vec![b, r, c],
        None => vec![r, c],
    }
}

/// Stores a reference value as `dt` would: integers wrap, floats round.
fn store(dt: DType, w: f64) -> f64 {
    match dt {
        DType::I32 => w as i64 as i32 as f64,
        DType::I8 => w as i64 as i8 as f64,
        DType::U8 => w as i64 as u8 as f64,
        _ => round_to(dt, w),
    }
}

/// A reference result as stored in `dt` (see [`store`]).
fn stored(dt: DType, reference: Vec<f64>) -> Vec<f64> {
    reference.into_iter().map(|w| store(dt, w)).collect()
}

fn check_close(dt: DType, got: &[f64], want: &[f64], k: usize, what: &str) {
    let (rtol, atol) = match dt {
        DType::F32 => (1e-5, 1e-5 * (k as f64).sqrt() * 4.0),
        DType::F16 => (2f64.powi(-9), 2e-3 * (k as f64).sqrt()),
        DType::BF16 => (2f64.powi(-6), 2e-2 * (k as f64).sqrt()),
        _ => (0.0, 0.0),
    };
    assert_close(got, want, rtol, atol, what);
}

#[test]
fn matmul_2d_all_transposes() {
    let mut rng = Rng::new(31);
    let dims = [1usize, 3, 17, 64, 70];
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::I8] {
        for _ in 0..12 {
            let (m, n, k) = (dims[rng.below(5)], dims[rng.below(5)], dims[rng.below(5)]);
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let sa = shape_of(None, m, k, ta);
                let sb = shape_of(None, k, n, tb);
                let (lo, hi) = if dt.is_int() { (-3.0, 3.0) } else { (-1.0, 1.0) };
                let (a, ad) = random(&mut rng, dt, &sa, lo, hi);
                let (b, bd) = random(&mut rng, dt, &sb, lo, hi);
                let out = HostTensor::zeros(dt, &[m, n]);
                let got = run_all(&out, 7.0, || matmul(&v(&a), &v(&b), &v(&out), ta, tb, 2));
                let args = GemmArgs {
                    trans_a: ta,
                    trans_b: tb,
                    ..GemmArgs::default()
                };
                let want = stored(dt, reference(&ad, &sa, &bd, &sb, args, None, None, &[m, n]));
                check_close(dt, &got, &want, k, &format!("{dt} {m}x{k}x{n} ta={ta} tb={tb}"));
            }
        }
    }
}

#[test]
fn batched_matmul_with_broadcast_batch() {
    let mut rng = Rng::new(32);
    for dt in [DType::F32, DType::BF16, DType::I64] {
        for &(ba, bb) in &[
            (Some(4), Some(4)),
            (Some(1), Some(3)),
            (Some(3), Some(1)),
            (None, Some(2)),
            (Some(2), None),
        ] {
            for (ta, tb) in [(false, false), (true, true), (false, true)] {
                let (m, n, k) = (1 + rng.below(20), 1 + rng.below(20), 1 + rng.below(20));
                let sa = shape_of(ba, m, k, ta);
                let sb = shape_of(bb, k, n, tb);
                let oshape = matmul_out_shape(&sa, &sb, ta, tb).unwrap();
                let (a, ad) = random(&mut rng, dt, &sa, -2.0, 2.0);
                let (b, bd) = random(&mut rng, dt, &sb, -2.0, 2.0);
                let out = HostTensor::zeros(dt, &oshape);
                let got = run_all(&out, 7.0, || matmul(&v(&a), &v(&b), &v(&out), ta, tb, 2));
                let args = GemmArgs {
                    trans_a: ta,
                    trans_b: tb,
                    ..GemmArgs::default()
                };
                let want = stored(dt, reference(&ad, &sa, &bd, &sb, args, None, None, &oshape));
                check_close(dt, &got, &want, k, &format!("{dt} {sa:?} @ {sb:?} ta={ta} tb={tb}"));
            }
        }
    }
}

#[test]
fn gemm_alpha_beta_c_and_bias() {
    let mut rng = Rng::new(33);
    let (m, n, k) = (13, 21, 9);
    for dt in [DType::F32, DType::F16, DType::I32] {
        let (a, ad) = random(&mut rng, dt, &[m, k], -2.0, 2.0);
        let (b, bd) = random(&mut rng, dt, &[n, k], -2.0, 2.0);
        let (bias, biasd) = random(&mut rng, dt, &[n], -2.0, 2.0);
        let (alpha, beta) = if dt.is_int() { (2.0, -3.0) } else { (0.5, -1.5) };
        let args = GemmArgs {
            trans_a: false,
            trans_b: true,
            alpha,
            beta,
        };
        // C = out's previous contents (preset by run_all to the sentinel 4.0).
        let out = HostTensor::zeros(dt, &[m, n]);
        let got = run_all(&out, 4.0, || {
            gemm(&v(&a), &v(&b), None, Some(&v(&bias)), &v(&out), args, 2)
        });
        let cfull = vec![4.0; m * n];
        let want = stored(
            dt,
            reference(
                &ad,
                &[m, k],
                &bd,
                &[n, k],
                args,
                Some((&cfull, &[m, n])),
                Some(&biasd),
                &[m, n],
            ),
        );
        check_close(dt, &got, &want, k, &format!("{dt} gemm C=out"));
        // A separate C broadcast from a column (m, 1) and from a row (n,).
        for cs in [vec![m, 1], vec![n]] {
            let (c, cd) = random(&mut rng, dt, &cs, -2.0, 2.0);
            let got = run_all(&out, 4.0, || {
                gemm(&v(&a), &v(&b), Some(&v(&c)), None, &v(&out), args, 2)
            });
            let want = stored(
                dt,
                reference(&ad, &[m, k], &bd, &[n, k], args, Some((&cd, &cs)), None, &[m, n]),
            );
            check_close(dt, &got, &want, k, &format!("{dt} gemm C {cs:?}"));
        }
        // beta = 0 ignores C entirely, even NaN (int: any sentinel).
        let args0 = GemmArgs { beta: 0.0, ..args };
        let got = run_all(&out, f64::NAN, || gemm(&v(&a), &v(&b), None, None, &v(&out), args0, 2));
        let want = stored(dt, reference(&ad, &[m, k], &bd, &[n, k], args0, None, None, &[m, n]));
        check_close(dt, &got, &want, k, &format!("{dt} gemm beta=0"));
    }
}

#[test]
fn non_contiguous_operands_and_output() {
    let mut rng = Rng::new(34);
    let (m, n, k) = (19, 23, 29);
    // a: every other row of a (2m, k) buffer; b: a transposed view of an (n, k) buffer read
    // backwards along k; out: columns of a (n, m) buffer (a transposed output).
    let (abuf, abd) = random(&mut rng, DType::F32, &[2 * m, k], -1.0, 1.0);
    let av = v(&abuf).slice_axis(0, 0, m, 2).unwrap();
    let (bbuf, bbd) = random(&mut rng, DType::F32, &[n, k], -1.0, 1.0);
    let bv = v(&bbuf).slice_axis(1, k - 1, k, -1).unwrap().mt().unwrap();
    let a = logical(&abd, &v(&abuf), &av);
    let b = logical(&bbd, &v(&bbuf), &bv);
    let obuf = HostTensor::zeros(DType::F32, &[n, m]);
    let got = run_all(&obuf, 0.0, || {
        matmul(&av, &bv, &v(&obuf).mt().unwrap(), false, false, 2)
    });
    let want = reference(&a, &[m, k], &b, &[k, n], GemmArgs::default(), None, None, &[m, n]);
    let got_logical: Vec<f64> = (0..m * n).map(|f| got[(f % n) * m + f / n]).collect();
    check_close(DType::F32, &got_logical, &want, k, "strided matmul");
}

#[test]
fn gemm_bias_epilogue_into_a_transposed_output() {
    // out is a transposed view (column stride != 1: the strided epilogue path), C a
    // separate (m, n) tensor copied into the tile first, alpha/beta/bias all non-trivial.
    let mut rng = Rng::new(36);
    let (m, n, k) = (17, 26, 11);
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let (a, ad) = random(&mut rng, dt, &[m, k], -1.0, 1.0);
        let (b, bd) = random(&mut rng, dt, &[k, n], -1.0, 1.0);
        let (c, cd) = random(&mut rng, dt, &[m, n], -1.0, 1.0);
        let (bias, biasd) = random(&mut rng, dt, &[n], -1.0, 1.0);
        let args = GemmArgs {
            alpha: 1.5,
            beta: -0.5,
            ..GemmArgs::default()
        };
        let obuf = HostTensor::zeros(dt, &[n, m]);
        let got = run_all(&obuf, 3.0, || {
            gemm(
                &v(&a),
                &v(&b),
                Some(&v(&c)),
                Some(&v(&bias)),
                &v(&obuf).mt().unwrap(),
                args,
                2,
            )
        });
        let want = stored(
            dt,
            reference(
                &ad,
                &[m, k],
                &bd,
                &[k, n],
                args,
                Some((&cd, &[m, n])),
                Some(&biasd),
                &[m, n],
            ),
        );
        let got_logical: Vec<f64> = (0..m * n).map(|f| got[(f % n) * m + f / n]).collect();
        check_close(dt, &got_logical, &want, k, &format!("{dt} gemm into a transposed out"));
    }
}

#[test]
fn degenerate_shapes() {
    let mut rng = Rng::new(35);
    // k = 0: the product is zero; with beta it is beta * C + bias.
    let a = HostTensor::zeros(DType::F32, &[3, 0]);
    let b = HostTensor::zeros(DType::F32, &[0, 4]);
    let out = HostTensor::zeros(DType::F32, &[3, 4]);
    assert_eq!(
        run_all(&out, 9.0, || matmul(&v(&a), &v(&b), &v(&out), false, false, 2)),
        vec![0.0; 12]
    );
    let args = GemmArgs {
        beta: 2.0,
        ..GemmArgs::default()
    };
    assert_eq!(
        run_all(&out, 9.0, || gemm(&v(&a), &v(&b), None, None, &v(&out), args, 2)),
        vec![18.0; 12]
    );
    // Empty outputs.
    let (a, _) = random(&mut rng, DType::F32, &[0, 5], -1.0, 1.0);
    let (b, _) = random(&mut rng, DType::F32, &[5, 4], -1.0, 1.0);
    let out = HostTensor::zeros(DType::F32, &[0, 4]);
    run_all(&out, 0.0, || matmul(&v(&a), &v(&b), &v(&out), false, false, 2));
    let out = HostTensor::zeros(DType::F32, &[0, 2, 2]);
    let a = HostTensor::zeros(DType::F32, &[0, 2, 3]);
    let b = HostTensor::zeros(DType::F32, &[3, 2]);
    run_all(&out, 0.0, || matmul(&v(&a), &v(&b), &v(&out), false, false, 2));
    // 1x1x1.
    let a = HostTensor::from_slice(&[3.0f32], &[1, 1]);
    let b = HostTensor::from_slice(&[-2.0f32], &[1, 1]);
    let out = HostTensor::zeros(DType::F32, &[1, 1]);
    assert_eq!(
        run_all(&out, 0.0, || matmul(&v(&a), &v(&b), &v(&out), false, false, 2)),
        vec![-6.0]
    );
}

fn tiled_case(dt: DType, batch: Option<usize>, m: usize, n: usize, k: usize) {
    let mut rng = Rng::new((m * 31 + n * 7 + k) as u64);
    let sa = shape_of(batch, m, k, false);
    let sb = shape_of(None, k, n, true);
    let oshape = matmul_out_shape(&sa, &sb, false, true).unwrap();
    let (a, ad) = random(&mut rng, dt, &sa, -1.0, 1.0);
    let (b, bd) = random(&mut rng, dt, &sb, -1.0, 1.0);
    let (bias, biasd) = random(&mut rng, dt, &[n], -1.0, 1.0);
    let out = HostTensor::zeros(dt, &oshape);
    let args = GemmArgs {
        trans_a: false,
        trans_b: true,
        alpha: 1.5,
        beta: 0.5,
    };
    let (_, blocks) = gemm(&v(&a), &v(&b), None, Some(&v(&bias)), &v(&out), args, 2).unwrap();
    assert!(blocks > 1, "{m}x{n}x{k} should be split, got {blocks} block(s)");
    // run_all checks bitwise equality across block counts and orders.
    let got = run_all(&out, 1.0, || {
        gemm(&v(&a), &v(&b), None, Some(&v(&bias)), &v(&out), args, 2)
    });
    let c = vec![1.0; numel(&oshape)];
    let want = stored(
        dt,
        reference(&ad, &sa, &bd, &sb, args, Some((&c, &oshape)), Some(&biasd), &oshape),
    );
    check_close(dt, &got, &want, k, &format!("tiled {dt} {sa:?} x {sb:?}"));
}

#[test]
fn tiled_matmul_is_deterministic_and_correct_f32() {
    tiled_case(DType::F32, None, 200, 330, 260);
}

#[test]
fn tiled_matmul_is_deterministic_and_correct_bf16() {
    tiled_case(DType::BF16, None, 260, 270, 250);
}

#[test]
fn tiled_batched_matmul_is_deterministic_and_correct() {
    tiled_case(DType::F32, Some(6), 128, 128, 200);
    tiled_case(DType::F32, Some(2), 256, 256, 256);
}
