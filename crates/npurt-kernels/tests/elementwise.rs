//! Elementwise kernels against f64 references: every op and dtype, broadcasting, scalars,
//! empty and 1-element tensors, non-contiguous inputs and outputs, in-place use.
//!
//! Tolerances: f32 add/sub/mul/div/sqrt, casts, abs/neg/relu are exact (f64 reference rounded
//! once); f32 transcendental ops within 2e-6 relative + 1e-6 absolute (our exp is ≤ 2 ulp,
//! tanh/erf ≤ 5e-7 absolute); f16 within 2 ulp (2^-9 relative) + 1e-3, bf16 within 2 ulp
//! (2^-6 relative) + 1e-2 (inputs exact in the dtype, computed in f32, rounded once).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::*;
use npurt_kernels::{axpy, binary, cast, copy, fill, unary, BinaryOp, DType, HostTensor, Scalar, TensorView, UnaryOp};

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
const INTS: [DType; 4] = [DType::I32, DType::I64, DType::I8, DType::U8];

fn unary_ref(op: UnaryOp, x: f64) -> f64 {
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    match op {
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => sig(x),
        UnaryOp::Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        UnaryOp::Gelu => 0.5 * x * (1.0 + libm::erf(x / 2f64.sqrt())),
        UnaryOp::GeluTanh => {
            0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        }
        UnaryOp::Silu => x * sig(x),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Neg => -x,
    }
}

fn int_wrap(dtype: DType, v: i64) -> f64 {
    match dtype {
        DType::I32 => v as i32 as f64,
        DType::I8 => v as i8 as f64,
        DType::U8 => v as u8 as f64,
        _ => v as f64,
    }
}

fn domain(op: UnaryOp) -> (f64, f64) {
    match op {
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => (0.01, 20.0),
        UnaryOp::Exp => (-20.0, 20.0),
        _ => (-8.0, 8.0),
    }
}

const SHAPES: &[&[usize]] = &[
    &[],
    &[1],
    &[0],
    &[7],
    &[3, 5],
    &[2, 3, 4],
    &[33, 17],
    &[0, 4],
    &[5, 1, 9],
];

/// Layout variants of an input of logical shape `shape` (all derived from bigger buffers).
/// Returns (base tensor, its data, the view) per variant.
fn layouts(rng: &mut Rng, dtype: DType, shape: &[usize], lo: f64, hi: f64) -> Vec<(HostTensor, Vec<f64>, TensorView)> {
    let mut out = vec![];
    // Contiguous.
    let (t, d) = random(rng, dtype, shape, lo, hi);
    let view = v(&t);
    out.push((t, d, view));
    if shape.len() >= 2 {
        // Transposed: a buffer of the reversed shape, viewed reversed.
        let rev: Vec<usize> = shape.iter().rev().copied().collect();
        let (t, d) = random(rng, dtype, &rev, lo, hi);
        let axes: Vec<usize> = (0..shape.len()).rev().collect();
        let view = v(&t).permute(&axes).unwrap();
        out.push((t, d, view));
    }
    if !shape.is_empty() {
        // Every other element along the last axis, walked backwards.
        let mut big = shape.to_vec();
        let last = big.len() - 1;
        big[last] = shape[last] * 2 + 1;
        let (t, d) = random(rng, dtype, &big, lo, hi);
        let n = shape[last];
        let view = if n == 0 {
            v(&t).slice_axis(-1, 0, 0, 1).unwrap()
        } else {
            v(&t).slice_axis(-1, 2 * n - 1, n, -2).unwrap()
        };
        out.push((t, d, view));
    }
    out
}

#[test]
fn unary_ops_match_reference() {
    let mut rng = Rng::new(1);
    for op in UnaryOp::ALL {
        for dtype in FLOATS.iter().chain(INTS.iter()).copied().filter(|&d| op.supports(d)) {
            for &shape in SHAPES {
                let (lo, hi) = if dtype.is_int() { (-100.0, 100.0) } else { domain(op) };
                let (lo, hi) = if dtype == DType::U8 { (0.0, 255.0) } else { (lo, hi) };
                for (t, data, xv) in layouts(&mut rng, dtype, shape, lo, hi) {
                    let x = logical(&data, &v(&t), &xv);
                    let out = HostTensor::zeros(dtype, shape);
                    let got = run_all(&out, 7.0, || unary(op, &xv, &v(&out), 2));
                    let want: Vec<f64> = x
                        .iter()
                        .map(|&x| {
                            if dtype.is_int() {
                                let r = unary_ref(op, x);
                                int_wrap(dtype, r as i64)
                            } else {
                                round_to(dtype, unary_ref(op, x))
                            }
                        })
                        .collect();
                    let exact =
                        matches!(op, UnaryOp::Relu | UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Sqrt) || dtype.is_int();
                    let (rtol, atol) = if exact && dtype == DType::F32 || dtype.is_int() {
                        (0.0, 0.0)
                    } else {
                        tol(dtype)
                    };
                    assert_close(
                        &got,
                        &want,
                        rtol,
                        atol,
                        &format!("{op:?} {dtype} {shape:?} strides {:?}", xv.strides()),
                    );
                }
            }
        }
    }
}

#[test]
fn unary_special_values() {
    let xs = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-30,
        -1e-30,
        100.0,
        -100.0,
    ];
    let x = HostTensor::from_slice(&xs, &[xs.len()]);
    for op in UnaryOp::ALL {
        let out = HostTensor::zeros(DType::F32, &[xs.len()]);
        let got = run_all(&out, 7.0, || unary(op, &v(&x), &v(&out), 1));
        for (i, &xi) in xs.iter().enumerate() {
            let want = round_to(DType::F32, unary_ref(op, xi as f64));
            assert!(
                close(got[i], want, 2e-6, 1e-37),
                "{op:?}({xi}) = {}, want {want}",
                got[i]
            );
        }
    }
}

#[test]
fn unary_broadcasts_into_out_and_writes_only_the_view() {
    let mut rng = Rng::new(2);
    let (x, xd) = random(&mut rng, DType::F32, &[1, 5], -3.0, 3.0);
    // out: columns 1..6 of a (4, 8) buffer.
    let buf = HostTensor::zeros(DType::F32, &[4, 8]);
    let got = run_all(&buf, -99.0, || {
        unary(UnaryOp::Neg, &v(&x), &v(&buf).slice_axis(1, 1, 5, 1).unwrap(), 3)
    });
    for r in 0..4 {
        for c in 0..8 {
            let want = if (1..6).contains(&c) { -xd[c - 1] } else { -99.0 };
            assert_eq!(got[r * 8 + c], want, "({r}, {c})");
        }
    }
}

#[test]
fn unary_in_place() {
    let mut rng = Rng::new(3);
    for dtype in FLOATS {
        let (x, xd) = random(&mut rng, dtype, &[37, 11], -4.0, 4.0);
        run_once(|| unary(UnaryOp::Sigmoid, &v(&x), &v(&x), 4));
        let want: Vec<f64> = xd
            .iter()
            .map(|&a| round_to(dtype, unary_ref(UnaryOp::Sigmoid, a)))
            .collect();
        let (rtol, atol) = tol(dtype);
        assert_close(&x.to_f64_vec(), &want, rtol, atol, "in-place sigmoid");
        // In place through a transposed view of the same memory.
        let (y, yd) = random(&mut rng, dtype, &[6, 9], -4.0, 4.0);
        run_once(|| unary(UnaryOp::Neg, &v(&y).mt().unwrap(), &v(&y).mt().unwrap(), 4));
        let want: Vec<f64> = yd.iter().map(|a| -a).collect();
        assert_eq!(y.to_f64_vec(), want);
    }
}

fn binary_ref(op: BinaryOp, dtype: DType, a: f64, b: f64) -> f64 {
    if dtype == DType::Bool {
        let (a, b) = (a != 0.0, b != 0.0);
        return match op {
            BinaryOp::Add | BinaryOp::Maximum => (a | b) as u8 as f64,
            BinaryOp::Mul | BinaryOp::Minimum => (a & b) as u8 as f64,
            _ => unreachable!(),
        };
    }
    if dtype.is_int() {
        let (a, b) = (a as i64, b as i64);
        let r = match op {
            BinaryOp::Add => a.wrapping_add(b),
            BinaryOp::Sub => a.wrapping_sub(b),
            BinaryOp::Mul => a.wrapping_mul(b),
            BinaryOp::Maximum => a.max(b),
            BinaryOp::Minimum => a.min(b),
            BinaryOp::Div => unreachable!(),
        };
        return int_wrap(dtype, r);
    }
    let r = match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Maximum => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        }
        BinaryOp::Minimum => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.min(b)
            }
        }
    };
    // f32 arithmetic on f32 inputs is the f64 result rounded once; f16/bf16 compute in f32
    // and round again.
    let r32 = round_to(DType::F32, r);
    round_to(dtype, r32)
}

const PAIRS: &[(&[usize], &[usize])] = &[
    (&[3, 4], &[3, 4]),
    (&[3, 4], &[4]),
    (&[3, 1], &[1, 4]),
    (&[], &[2, 3]),
    (&[2, 1, 3], &[4, 1]),
    (&[0, 3], &[3]),
    (&[1], &[1]),
    (&[40, 33], &[40, 1]),
    (&[5, 6, 7], &[5, 6, 7]),
];

#[test]
fn binary_ops_with_broadcasting() {
    let mut rng = Rng::new(4);
    for op in BinaryOp::ALL {
        for dtype in DType::ALL.into_iter().filter(|&d| op.supports(d)) {
            let (lo, hi) = match dtype {
                DType::U8 => (0.0, 255.0),
                d if d.is_int() => (-120.0, 120.0),
                _ => (-10.0, 10.0),
            };
            for &(sa, sb) in PAIRS {
                for swap in [false, true] {
                    let (sa, sb) = if swap { (sb, sa) } else { (sa, sb) };
                    let oshape = npurt_kernels::broadcast_shapes("t", sa, sb).unwrap();
                    for (ta, da, av) in layouts(&mut rng, dtype, sa, lo, hi) {
                        let a = logical(&da, &v(&ta), &av);
                        let (tb, db) = random(&mut rng, dtype, sb, lo, hi);
                        let out = HostTensor::zeros(dtype, &oshape);
                        let got = run_all(&out, 3.0, || binary(op, &av, &v(&tb), &v(&out), 2));
                        let want: Vec<f64> = (0..numel(&oshape))
                            .map(|i| {
                                binary_ref(op, dtype, bcast_get(&a, sa, &oshape, i), bcast_get(&db, sb, &oshape, i))
                            })
                            .collect();
                        let what = format!("{op:?} {dtype} {sa:?} x {sb:?} a strides {:?}", av.strides());
                        assert_close(&got, &want, 0.0, 0.0, &what);
                    }
                }
            }
        }
    }
}

#[test]
fn binary_with_scalars_on_either_side() {
    let mut rng = Rng::new(5);
    for (dtype, s) in [
        (DType::F32, Scalar::Float(2.5)),
        (DType::F16, Scalar::Float(-1.25)),
        (DType::BF16, Scalar::Int(3)),
        (DType::I32, Scalar::Int(-7)),
        (DType::I8, Scalar::Float(100.0)),
        (DType::U8, Scalar::Int(200)),
        (DType::Bool, Scalar::Bool(true)),
    ] {
        for op in BinaryOp::ALL.into_iter().filter(|o| o.supports(dtype)) {
            let (lo, hi) = if dtype == DType::U8 {
                (0.0, 255.0)
            } else {
                (-50.0, 50.0)
            };
            let (x, xd) = random(&mut rng, dtype, &[9, 4], lo, hi);
            let sv = match s {
                Scalar::Float(f) => f,
                Scalar::Int(i) => i as f64,
                Scalar::Bool(b) => b as u8 as f64,
            };
            let out = HostTensor::zeros(dtype, &[9, 4]);
            let got = run_all(&out, 1.0, || binary(op, &v(&x), s, &v(&out), 2));
            let want: Vec<f64> = xd.iter().map(|&a| binary_ref(op, dtype, a, sv)).collect();
            assert_close(&got, &want, 0.0, 0.0, &format!("{op:?} {dtype} x, {s:?}"));
            let got = run_all(&out, 1.0, || binary(op, s, &v(&x), &v(&out), 2));
            let want: Vec<f64> = xd.iter().map(|&a| binary_ref(op, dtype, sv, a)).collect();
            assert_close(&got, &want, 0.0, 0.0, &format!("{op:?} {dtype} {s:?}, x"));
        }
    }
    // Two scalars fill the output.
    let out = HostTensor::zeros(DType::F32, &[3]);
    let got = run_all(&out, 0.0, || binary(BinaryOp::Mul, 2.0, 4.0, &v(&out), 1));
    assert_eq!(got, vec![8.0; 3]);
}

#[test]
fn binary_in_place_variants() {
    let mut rng = Rng::new(6);
    let (a, ad) = random(&mut rng, DType::F32, &[50, 31], -5.0, 5.0);
    let (b, bd) = random(&mut rng, DType::F32, &[50, 31], -5.0, 5.0);
    run_once(|| binary(BinaryOp::Sub, &v(&a), &v(&b), &v(&a), 3));
    let a1: Vec<f64> = ad.iter().zip(&bd).map(|(x, y)| round_to(DType::F32, x - y)).collect();
    assert_eq!(a.to_f64_vec(), a1);
    run_once(|| binary(BinaryOp::Sub, &v(&a), &v(&b), &v(&b), 3));
    let b1: Vec<f64> = a1.iter().zip(&bd).map(|(x, y)| round_to(DType::F32, x - y)).collect();
    assert_eq!(b.to_f64_vec(), b1);
    run_once(|| binary(BinaryOp::Mul, &v(&a), &v(&a), &v(&a), 3));
    let a2: Vec<f64> = a1.iter().map(|x| round_to(DType::F32, x * x)).collect();
    assert_eq!(a.to_f64_vec(), a2);
    // In place with a broadcast row.
    let (r, rd) = random(&mut rng, DType::F32, &[31], -5.0, 5.0);
    run_once(|| binary(BinaryOp::Add, &v(&a), &v(&r), &v(&a), 3));
    let a3: Vec<f64> = a2
        .iter()
        .enumerate()
        .map(|(i, x)| round_to(DType::F32, x + rd[i % 31]))
        .collect();
    assert_eq!(a.to_f64_vec(), a3);
}

fn cast_ref(from: DType, to: DType, x: f64) -> f64 {
    match to {
        DType::Bool => (x != 0.0) as u8 as f64,
        DType::F32 | DType::F16 | DType::BF16 => round_to(to, x),
        _ if x.is_nan() => 0.0,
        // Integers from integers wrap; from floats truncate and saturate.
        _ if from.is_int() || from == DType::Bool => int_wrap(to, x as i64),
        DType::I32 => (x as i32) as f64,
        DType::I64 => (x as i64) as f64,
        DType::I8 => (x as i8) as f64,
        DType::U8 => (x as u8) as f64,
    }
}

#[test]
fn casts_between_all_dtypes() {
    let vals = [
        0.0,
        1.0,
        -1.0,
        2.7,
        -2.7,
        127.0,
        128.0,
        255.0,
        300.0,
        -129.0,
        0.5,
        65504.0,
        1e10,
        f64::NAN,
        f64::INFINITY,
    ];
    for from in DType::ALL {
        let x = HostTensor::from_f64(from, &vals, &[vals.len()]);
        let xd = x.to_f64_vec();
        for to in DType::ALL {
            let out = HostTensor::zeros(to, &[vals.len()]);
            let got = run_all(&out, 9.0, || cast(&v(&x), &v(&out), 1));
            let want: Vec<f64> = xd.iter().map(|&a| cast_ref(from, to, a)).collect();
            // f32 -> f16/bf16 via f64 may differ from a double rounding by one ulp.
            assert_close(&got, &want, 0.0, 0.0, &format!("cast {from} -> {to}"));
        }
    }
}

#[test]
fn cast_and_copy_strided_and_broadcast() {
    let mut rng = Rng::new(7);
    let (t, td) = random(&mut rng, DType::F32, &[6, 10], -100.0, 100.0);
    let view = v(&t).mt().unwrap().slice_axis(0, 9, 4, -2).unwrap(); // (4, 6)
    let x = logical(&td, &v(&t), &view);
    for to in [DType::F16, DType::I32, DType::U8, DType::F32] {
        let out = HostTensor::zeros(to, &[3, 4, 6]);
        let got = run_all(&out, 1.0, || cast(&view, &v(&out), 2));
        let want: Vec<f64> = (0..72).map(|i| cast_ref(DType::F32, to, x[i % 24])).collect();
        assert_close(&got, &want, 0.0, 0.0, &format!("cast to {to}"));
    }
    let out = HostTensor::zeros(DType::F32, &[4, 6]);
    let got = run_all(&out, 1.0, || copy(&view, &v(&out), 2));
    assert_eq!(got, x);
}

#[test]
fn fill_writes_only_its_view() {
    for dtype in DType::ALL {
        let buf = HostTensor::zeros(dtype, &[5, 7]);
        let val = if dtype == DType::Bool {
            Scalar::Bool(true)
        } else {
            Scalar::Int(3)
        };
        let got = run_all(&buf, 0.0, || {
            fill(
                &v(&buf).slice_axis(0, 1, 2, 2).unwrap().slice_axis(1, 6, 3, -3).unwrap(),
                val,
                2,
            )
        });
        for r in 0..5 {
            for c in 0..7 {
                let inside = (r == 1 || r == 3) && (c == 6 || c == 3 || c == 0);
                let want = if inside {
                    if dtype == DType::Bool {
                        1.0
                    } else {
                        3.0
                    }
                } else {
                    0.0
                };
                assert_eq!(got[r * 7 + c], want, "{dtype} ({r}, {c})");
            }
        }
    }
    let big = HostTensor::zeros(DType::F32, &[300_000]);
    let got = run_all(&big, 0.0, || fill(&v(&big), 1.5, 2));
    assert!(got.iter().all(|&x| x == 1.5));
}

#[test]
fn axpy_matches_reference() {
    let mut rng = Rng::new(8);
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::I8] {
        for &(sx, sy) in PAIRS {
            let (lo, hi) = if dtype.is_int() { (-50.0, 50.0) } else { (-10.0, 10.0) };
            let oshape = npurt_kernels::broadcast_shapes("t", sx, sy).unwrap();
            let (x, xd) = random(&mut rng, dtype, sx, lo, hi);
            let (y, yd) = random(&mut rng, dtype, sy, lo, hi);
            let alpha = if dtype.is_int() {
                Scalar::Int(-3)
            } else {
                Scalar::Float(0.75)
            };
            let out = HostTensor::zeros(dtype, &oshape);
            let got = run_all(&out, 5.0, || axpy(alpha, &v(&x), &v(&y), &v(&out), 2));
            let want: Vec<f64> = (0..numel(&oshape))
                .map(|i| {
                    let (a, b) = (bcast_get(&xd, sx, &oshape, i), bcast_get(&yd, sy, &oshape, i));
                    if dtype.is_int() {
                        int_wrap(dtype, -3 * a as i64 + b as i64)
                    } else {
                        let p = round_to(DType::F32, 0.75 * a);
                        round_to(dtype, round_to(DType::F32, p + b))
                    }
                })
                .collect();
            assert_close(&got, &want, 0.0, 0.0, &format!("axpy {dtype} {sx:?} {sy:?}"));
        }
    }
    // In place: y = 2x + y over a big vector (several blocks).
    let (x, xd) = random(&mut rng, DType::F32, &[200_003], -1.0, 1.0);
    let (y, yd) = random(&mut rng, DType::F32, &[200_003], -1.0, 1.0);
    run_once(|| axpy(2.0, &v(&x), &v(&y), &v(&y), 2));
    let want: Vec<f64> = xd
        .iter()
        .zip(&yd)
        .map(|(a, b)| round_to(DType::F32, round_to(DType::F32, 2.0 * a) + b))
        .collect();
    assert_eq!(y.to_f64_vec(), want);
}

#[test]
fn suggested_block_counts_scale_with_work() {
    let small = HostTensor::zeros(DType::F32, &[100]);
    let big = HostTensor::zeros(DType::F32, &[1 << 22]);
    let (_, b) = unary(UnaryOp::Relu, &v(&small), &v(&small), 8).unwrap();
    assert_eq!(b, 1);
    let (_, b) = unary(UnaryOp::Relu, &v(&big), &v(&big), 2).unwrap();
    assert!((2..=8).contains(&b), "{b}");
    let (_, b) = unary(UnaryOp::Relu, &v(&big), &v(&big), 1).unwrap();
    assert!((1..=4).contains(&b), "{b}");
}
