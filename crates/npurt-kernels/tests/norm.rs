//! softmax / log_softmax / layer_norm / rms_norm against f64 references, along every axis,
//! with non-contiguous inputs and outputs, in place, f16/bf16.
//!
//! Tolerances: f32 within 1e-5 relative + 1e-6 absolute (f32 accumulation over rows of up
//! to a few hundred elements); f16/bf16 two ulp of the dtype (see `common::tol`).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::*;
use npurt_kernels::{layer_norm, log_softmax, rms_norm, softmax, DType, HostTensor, TensorView};

fn tols(dt: DType) -> (f64, f64) {
    if dt == DType::F32 {
        (1e-5, 1e-6)
    } else {
        tol(dt)
    }
}

/// Applies `f` to each lane along `axis` of a row-major (shape) array.
fn along(x: &[f64], shape: &[usize], axis: usize, f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let st = strides_of(shape);
    let n = shape[axis];
    let mut out = vec![0.0; x.len()];
    for start in 0..x.len() {
        #[allow(clippy::manual_is_multiple_of)]
        if (start / st[axis]) % n != 0 {
            continue;
        }
        let lane: Vec<f64> = (0..n).map(|i| x[start + i * st[axis]]).collect();
        for (i, y) in f(&lane).into_iter().enumerate() {
            out[start + i * st[axis]] = y;
        }
    }
    if n == 0 {
        return vec![];
    }
    out
}

fn softmax_ref(l: &[f64], log: bool) -> Vec<f64> {
    let m = l.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = l.iter().map(|x| (x - m).exp()).sum();
    l.iter()
        .map(|x| if log { x - m - s.ln() } else { (x - m).exp() / s })
        .collect()
}

fn layer_norm_ref(l: &[f64], w: Option<&[f64]>, b: Option<&[f64]>, eps: f64) -> Vec<f64> {
    let n = l.len() as f64;
    let mean = l.iter().sum::<f64>() / n;
    let var = l.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    l.iter()
        .enumerate()
        .map(|(i, x)| (x - mean) / (var + eps).sqrt() * w.map_or(1.0, |w| w[i]) + b.map_or(0.0, |b| b[i]))
        .collect()
}

fn rms_ref(l: &[f64], w: Option<&[f64]>, eps: f64) -> Vec<f64> {
    let ms = l.iter().map(|x| x * x).sum::<f64>() / l.len() as f64;
    l.iter()
        .enumerate()
        .map(|(i, x)| x / (ms + eps).sqrt() * w.map_or(1.0, |w| w[i]))
        .collect()
}

/// Contiguous and transposed inputs of logical shape `shape`.
fn inputs(rng: &mut Rng, dt: DType, shape: &[usize]) -> Vec<(HostTensor, TensorView, Vec<f64>)> {
    let (t, d) = random(rng, dt, shape, -6.0, 6.0);
    let view = v(&t);
    let mut res = vec![(t, view, d)];
    if shape.len() >= 2 {
        let rev: Vec<usize> = shape.iter().rev().copied().collect();
        let (t, d) = random(rng, dt, &rev, -6.0, 6.0);
        let axes: Vec<usize> = (0..shape.len()).rev().collect();
        let view = v(&t).permute(&axes).unwrap();
        let l = logical(&d, &v(&t), &view);
        res.push((t, view, l));
    }
    res
}

const SHAPES: &[&[usize]] = &[&[1], &[7], &[3, 5], &[2, 3, 4], &[5, 130], &[4, 0], &[0, 3], &[6, 1]];

#[test]
fn softmax_and_log_softmax_along_every_axis() {
    let mut rng = Rng::new(21);
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for &shape in SHAPES {
            for (_t, xv, x) in inputs(&mut rng, dt, shape) {
                for axis in 0..shape.len() {
                    for log in [false, true] {
                        let out = HostTensor::zeros(dt, shape);
                        let ax = if axis % 2 == 0 {
                            axis as isize
                        } else {
                            axis as isize - shape.len() as isize
                        };
                        let got = run_all(&out, 3.0, || {
                            if log {
                                log_softmax(&xv, ax, &v(&out), 2)
                            } else {
                                softmax(&xv, ax, &v(&out), 2)
                            }
                        });
                        let want: Vec<f64> = along(&x, shape, axis, |l| softmax_ref(l, log))
                            .into_iter()
                            .map(|w| round_to(dt, w))
                            .collect();
                        let (rtol, atol) = tols(dt);
                        assert_close(
                            &got,
                            &want,
                            rtol,
                            atol,
                            &format!("softmax log={log} {dt} {shape:?} axis {ax} strides {:?}", xv.strides()),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn softmax_in_place_and_into_strided_out() {
    let mut rng = Rng::new(22);
    let (t, d) = random(&mut rng, DType::F32, &[8, 33], -20.0, 20.0);
    run_once(|| softmax(&v(&t), -1, &v(&t), 3));
    let want = along(&d, &[8, 33], 1, |l| softmax_ref(l, false));
    assert_close(&t.to_f64_vec(), &want, 1e-5, 1e-7, "in-place softmax");
    // Output: a transposed view of a (33, 8) buffer.
    let (x, xd) = random(&mut rng, DType::F32, &[8, 33], -3.0, 3.0);
    let buf = HostTensor::zeros(DType::F32, &[33, 8]);
    let got = run_all(&buf, 0.0, || log_softmax(&v(&x), 1, &v(&buf).mt().unwrap(), 2));
    let want = along(&xd, &[8, 33], 1, |l| softmax_ref(l, true));
    for r in 0..8 {
        for c in 0..33 {
            assert!(close(got[c * 8 + r], want[r * 33 + c], 1e-5, 1e-6), "({r}, {c})");
        }
    }
    // Extreme values: -inf entries get probability 0.
    let x = HostTensor::from_slice(&[0.0f32, f32::NEG_INFINITY, 1000.0, -1000.0], &[4]);
    let out = HostTensor::zeros(DType::F32, &[4]);
    let got = run_all(&out, 0.0, || softmax(&v(&x), 0, &v(&out), 1));
    assert_eq!(got, vec![0.0, 0.0, 1.0, 0.0]);
}

#[test]
fn layer_norm_and_rms_norm() {
    let mut rng = Rng::new(23);
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for &shape in &[&[1usize][..], &[9], &[4, 16], &[2, 3, 40], &[3, 1], &[0, 5], &[6, 257]] {
            let n = *shape.last().unwrap();
            let (w, wd) = random(&mut rng, dt, &[n], 0.5, 2.0);
            let (b, bd) = random(&mut rng, dt, &[n], -1.0, 1.0);
            for (_t, xv, x) in inputs(&mut rng, dt, shape) {
                for (use_w, use_b) in [(true, true), (false, false), (true, false), (false, true)] {
                    let out = HostTensor::zeros(dt, shape);
                    let (wv, bv) = (v(&w), v(&b));
                    let got = run_all(&out, 3.0, || {
                        layer_norm(&xv, use_w.then_some(&wv), use_b.then_some(&bv), 1e-5, &v(&out), 2)
                    });
                    let want: Vec<f64> = along(&x, shape, shape.len() - 1, |l| {
                        layer_norm_ref(l, use_w.then_some(&wd[..]), use_b.then_some(&bd[..]), 1e-5)
                    })
                    .into_iter()
                    .map(|w| round_to(dt, w))
                    .collect();
                    let (rtol, atol) = tols(dt);
                    // Normalised values are O(1): compare with an absolute tolerance of the
                    // same order as the relative one.
                    let atol = atol.max(rtol * 4.0);
                    assert_close(
                        &got,
                        &want,
                        rtol,
                        atol,
                        &format!(
                            "layer_norm {dt} {shape:?} w={use_w} b={use_b} strides {:?}",
                            xv.strides()
                        ),
                    );
                }
                for use_w in [true, false] {
                    let out = HostTensor::zeros(dt, shape);
                    let wv = v(&w);
                    let got = run_all(&out, 3.0, || rms_norm(&xv, use_w.then_some(&wv), 1e-6, &v(&out), 2));
                    let want: Vec<f64> = along(&x, shape, shape.len() - 1, |l| {
                        rms_ref(l, use_w.then_some(&wd[..]), 1e-6)
                    })
                    .into_iter()
                    .map(|w| round_to(dt, w))
                    .collect();
                    let (rtol, atol) = tols(dt);
                    let atol = atol.max(rtol * 4.0);
                    assert_close(&got, &want, rtol, atol, &format!("rms_norm {dt} {shape:?} w={use_w}"));
                }
            }
        }
    }
}

#[test]
fn layer_norm_in_place_with_strided_weight() {
    let mut rng = Rng::new(24);
    let (x, xd) = random(&mut rng, DType::F32, &[5, 12], -3.0, 3.0);
    let (wbuf, wbd) = random(&mut rng, DType::F32, &[24], 0.5, 1.5);
    let wv = v(&wbuf).slice_axis(0, 23, 12, -2).unwrap();
    let w = logical(&wbd, &v(&wbuf), &wv);
    run_once(|| layer_norm(&v(&x), Some(&wv), None, 1e-5, &v(&x), 2));
    let want = along(&xd, &[5, 12], 1, |l| layer_norm_ref(l, Some(&w), None, 1e-5));
    assert_close(&x.to_f64_vec(), &want, 1e-5, 1e-5, "in-place layer_norm");
}

#[test]
fn softmax_rows_with_nan_inf_and_signed_zeros() {
    // A NaN anywhere in a row makes the whole row NaN (softmax and log_softmax: the shift
    // skips NaNs, the sum does not); +inf with finite values gives NaN for the infinite
    // element's peers' shift inf - inf; ±0 maxima shift alike. Rows of 19 cover the lanes
    // and the tail.
    let n = 19;
    let nan = f64::NAN;
    let mut rows: Vec<Vec<f64>> = vec![vec![0.5; n]; 5];
    rows[0][7] = nan;
    rows[1][18] = nan;
    rows[2] = (0..n).map(|i| if i % 2 == 0 { 0.0 } else { -0.0 }).collect();
    rows[3] = vec![nan; n];
    rows[4][3] = f64::NEG_INFINITY;
    let flat: Vec<f64> = rows.concat();
    let x = HostTensor::from_f64(DType::F32, &flat, &[5, n]);
    for log in [false, true] {
        let out = HostTensor::zeros(DType::F32, &[5, n]);
        let got = run_all(&out, 0.0, || {
            if log {
                log_softmax(&v(&x), -1, &v(&out), 2)
            } else {
                softmax(&v(&x), -1, &v(&out), 2)
            }
        });
        for (r, row) in got.chunks(n).enumerate() {
            if r == 0 || r == 1 || r == 3 {
                assert!(row.iter().all(|y| y.is_nan()), "row {r} (log {log}): {row:?}");
            } else {
                let want = softmax_ref(&rows[r], log);
                for (y, w) in row.iter().zip(&want) {
                    let close = (y - w).abs() <= 1e-6 + 1e-5 * w.abs() || y == w;
                    assert!(close, "row {r} (log {log}): {row:?} vs {want:?}");
                }
            }
        }
    }
}
