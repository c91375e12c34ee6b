//! Reductions against f64 references: every axis, all axes, several axes, keepdims, every
//! dtype, non-contiguous inputs, long reductions split into chunks, NaN and ties, empty axes.
//!
//! Tolerances: sums and means accumulate in f64, so the result is the f64 reference rounded
//! to the output dtype up to f64 reassociation: relative 1e-6 for f32 outputs, one ulp of
//! f16/bf16 (2^-10 / 2^-7 relative); integer sums, max, min and argmax are exact.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::*;
use npurt_kernels::{reduce, reduce_out_shape, DType, HostTensor, KernelArgError, ReduceOp, TensorView};

fn reference(op: ReduceOp, x: &[f64], shape: &[usize], red: &[bool]) -> Vec<f64> {
    let out_shape: Vec<usize> = shape.iter().zip(red).filter(|(_, &r)| !r).map(|(&n, _)| n).collect();
    let nout = numel(&out_shape);
    let mut groups: Vec<Vec<f64>> = vec![vec![]; nout];
    let st = strides_of(shape);
    for (flat, &val) in x.iter().enumerate() {
        let mut o = 0;
        for d in 0..shape.len() {
            if !red[d] {
                o = o * shape[d] + (flat / st[d]) % shape[d];
            }
        }
        groups[o].push(val);
    }
    groups
        .iter()
        .map(|g| match op {
            ReduceOp::Sum => g.iter().sum(),
            ReduceOp::Mean => g.iter().sum::<f64>() / g.len() as f64,
            ReduceOp::Max => g.iter().copied().fold(f64::NEG_INFINITY, |a, b| {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            }),
            ReduceOp::Min => g.iter().copied().fold(f64::INFINITY, |a, b| {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.min(b)
                }
            }),
            ReduceOp::Argmax => {
                let mut best = 0;
                for (i, &v) in g.iter().enumerate() {
                    if g[best].is_nan() {
                        break;
                    }
                    if v.is_nan() || v > g[best] {
                        best = i;
                    }
                }
                best as f64
            }
        })
        .collect()
}

fn out_dtype(op: ReduceOp, x: DType) -> DType {
    match op {
        ReduceOp::Sum if x.is_int() || x == DType::Bool => DType::I64,
        ReduceOp::Sum => x,
        ReduceOp::Mean if x.is_float() => x,
        ReduceOp::Mean => DType::F32,
        ReduceOp::Max | ReduceOp::Min => x,
        ReduceOp::Argmax => DType::I64,
    }
}

fn check(op: ReduceOp, xv: &TensorView, x: &[f64], axes: Option<&[isize]>, keepdims: bool, what: &str) {
    let shape = xv.shape().to_vec();
    let nd = shape.len();
    let mut red = vec![axes.is_none(); nd];
    for &a in axes.unwrap_or(&[]) {
        red[if a < 0 { (a + nd as isize) as usize } else { a as usize }] = true;
    }
    let oshape = reduce_out_shape(&shape, axes, keepdims).unwrap();
    let odt = out_dtype(op, xv.dtype());
    let out = HostTensor::zeros(odt, &oshape);
    let got = run_all(&out, -5.0, || reduce(op, xv, axes, &v(&out), 2));
    let want: Vec<f64> = reference(op, x, &shape, &red)
        .into_iter()
        .map(|w| round_to(odt, w))
        .collect();
    let (rtol, atol) = match odt {
        DType::F32 => (1e-6, 1e-6),
        DType::F16 => (2f64.powi(-10), 1e-3),
        DType::BF16 => (2f64.powi(-7), 1e-2),
        _ => (0.0, 0.0),
    };
    let (rtol, atol) = if matches!(op, ReduceOp::Max | ReduceOp::Min | ReduceOp::Argmax) {
        (0.0, 0.0)
    } else {
        (rtol, atol)
    };
    assert_close(
        &got,
        &want,
        rtol,
        atol,
        &format!("{op:?} {what} axes {axes:?} keepdims {keepdims}"),
    );
}

#[test]
fn reductions_over_each_axis_and_all() {
    let mut rng = Rng::new(11);
    let shapes: &[&[usize]] = &[
        &[],
        &[1],
        &[9],
        &[4, 7],
        &[3, 1, 5],
        &[2, 3, 4],
        &[17, 70],
        &[70, 17],
        &[3, 0],
    ];
    for dtype in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I8,
        DType::U8,
        DType::Bool,
    ] {
        for &shape in shapes {
            let (lo, hi) = if dtype == DType::U8 {
                (0.0, 255.0)
            } else if dtype.is_int() {
                (-100.0, 100.0)
            } else {
                (-10.0, 10.0)
            };
            let (t, d) = random(&mut rng, dtype, shape, lo, hi);
            // Plus a transposed layout of the same logical shape.
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            let (tt, td) = random(&mut rng, dtype, &rev, lo, hi);
            let axes_rev: Vec<usize> = (0..shape.len()).rev().collect();
            let tv = v(&tt).permute(&axes_rev).unwrap();
            let tlog = logical(&td, &v(&tt), &tv);
            for (xv, x) in [(v(&t), d.clone()), (tv, tlog)] {
                for op in ReduceOp::ALL {
                    let mut axis_sets: Vec<Option<Vec<isize>>> = vec![None];
                    for a in 0..shape.len() as isize {
                        axis_sets.push(Some(vec![a]));
                        axis_sets.push(Some(vec![a - shape.len() as isize]));
                    }
                    if shape.len() >= 2 && op != ReduceOp::Argmax {
                        axis_sets.push(Some(vec![0, shape.len() as isize - 1]));
                    }
                    for axes in &axis_sets {
                        let len: usize = match axes {
                            None => xv.numel(),
                            Some(a) => a
                                .iter()
                                .map(|&a| shape[(a + shape.len() as isize) as usize % shape.len()])
                                .product(),
                        };
                        if len == 0 && matches!(op, ReduceOp::Max | ReduceOp::Min | ReduceOp::Argmax) {
                            let out = HostTensor::zeros(
                                out_dtype(op, dtype),
                                &reduce_out_shape(shape, axes.as_deref(), false).unwrap(),
                            );
                            let e = reduce(op, &xv, axes.as_deref(), &v(&out), 1).err();
                            assert!(
                                matches!(e, Some(KernelArgError::EmptyReduction { .. })),
                                "{op:?} {shape:?} {axes:?}: {e:?}"
                            );
                            continue;
                        }
                        for keepdims in [false, true] {
                            check(
                                op,
                                &xv,
                                &x,
                                axes.as_deref(),
                                keepdims,
                                &format!("{dtype} {shape:?} strides {:?}", xv.strides()),
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn long_reductions_split_into_chunks() {
    let mut rng = Rng::new(12);
    for &(shape, axes) in &[
        (&[150_001usize][..], None),
        (&[3, 70_000][..], Some(&[1isize][..])),
        (&[70_000, 3][..], Some(&[0isize][..])),
        (&[2, 40_000, 2][..], Some(&[1isize][..])),
    ] {
        let (t, d) = random(&mut rng, DType::F32, shape, -1.0, 1.0);
        for op in ReduceOp::ALL {
            check(op, &v(&t), &d, axes, false, &format!("{shape:?}"));
        }
    }
    // Argmax across chunk boundaries: the max placed late, ties resolved to the first.
    let mut data = vec![0.0f32; 200_000];
    data[131_072] = 5.0;
    data[190_000] = 5.0;
    let t = HostTensor::from_slice(&data, &[200_000]);
    let out = HostTensor::zeros(DType::I64, &[]);
    let got = run_all(&out, -1.0, || reduce(ReduceOp::Argmax, &v(&t), None, &v(&out), 2));
    assert_eq!(got, vec![131_072.0]);
}

#[test]
fn nan_and_ties() {
    let data = [1.0f32, 3.0, f32::NAN, 3.0, f32::NAN, -1.0, 2.0, 2.0, 0.5];
    let t = HostTensor::from_slice(&data, &[3, 3]);
    let run = |op: ReduceOp, axis: isize, dt: DType| {
        let out = HostTensor::zeros(dt, &[3]);
        run_all(&out, -7.0, || reduce(op, &v(&t), Some(&[axis]), &v(&out), 2))
    };
    let got = run(ReduceOp::Argmax, 1, DType::I32);
    assert_eq!(got, vec![2.0, 1.0, 0.0]); // the first NaN wins; a tie goes to the first
    let got = run(ReduceOp::Argmax, 0, DType::I64);
    assert_eq!(got, vec![1.0, 1.0, 0.0]);
    let got = run(ReduceOp::Max, 1, DType::F32);
    assert!(got[0].is_nan() && got[1].is_nan() && got[2] == 2.0, "{got:?}");
    let got = run(ReduceOp::Min, 0, DType::F32);
    assert!(got[0] == 1.0 && got[1].is_nan() && got[2].is_nan(), "{got:?}");
}

#[test]
fn empty_sum_and_mean() {
    let t = HostTensor::zeros(DType::F32, &[4, 0]);
    let out = HostTensor::zeros(DType::F32, &[4]);
    assert_eq!(
        run_all(&out, 9.0, || reduce(ReduceOp::Sum, &v(&t), Some(&[1]), &v(&out), 2)),
        vec![0.0; 4]
    );
    let got = run_all(&out, 9.0, || reduce(ReduceOp::Mean, &v(&t), Some(&[1]), &v(&out), 2));
    assert!(got.iter().all(|x| x.is_nan()));
    let out0 = HostTensor::zeros(DType::F32, &[0]);
    run_all(&out0, 9.0, || reduce(ReduceOp::Max, &v(&t), Some(&[0]), &v(&out0), 2));
}

#[test]
fn sum_into_other_dtypes() {
    let data: Vec<i8> = (0..100).map(|i| (i % 120) as i8).collect();
    let t = HostTensor::from_slice(&data, &[100]);
    for (dt, want) in [
        (DType::I64, 4950.0),
        (DType::I32, 4950.0),
        (DType::F32, 4950.0),
        (DType::I8, (4950i64 as i8) as f64),
    ] {
        let out = HostTensor::zeros(dt, &[]);
        assert_eq!(
            run_all(&out, 0.0, || reduce(ReduceOp::Sum, &v(&t), None, &v(&out), 1)),
            vec![want],
            "{dt}"
        );
    }
}
