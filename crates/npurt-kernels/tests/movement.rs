//! permute / transpose / concat / slice / copy of views, against index arithmetic. Exact.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::*;
use npurt_kernels::{concat, copy, permute, slice, transpose2d, DType, HostTensor};

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = vec![];
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
fn permute_every_axis_order() {
    let mut rng = Rng::new(41);
    for dt in [DType::F32, DType::F16, DType::U8, DType::I64, DType::Bool] {
        for shape in [
            vec![2usize, 3, 4],
            vec![1, 5, 7],
            vec![33, 40, 3],
            vec![0, 2, 3],
            vec![5, 64, 70],
        ] {
            let (x, xd) = random(&mut rng, dt, &shape, -100.0, 100.0);
            for axes in permutations(3) {
                let pv = v(&x).permute(&axes).unwrap();
                let want = logical(&xd, &v(&x), &pv);
                let out = HostTensor::zeros(dt, pv.shape());
                let got = run_all(&out, 1.0, || permute(&v(&x), &axes, &v(&out), 2));
                assert_eq!(got, want, "{dt} {shape:?} {axes:?}");
            }
        }
    }
}

#[test]
fn transpose_2d_tiled_and_strided() {
    let mut rng = Rng::new(42);
    for dt in [DType::F32, DType::BF16, DType::I8, DType::I64] {
        for (r, c) in [(1, 1), (1, 300), (300, 1), (37, 45), (130, 257), (64, 64)] {
            let (x, xd) = random(&mut rng, dt, &[r, c], -100.0, 100.0);
            let out = HostTensor::zeros(dt, &[c, r]);
            let got = run_all(&out, 0.0, || transpose2d(&v(&x), &v(&out), 2));
            let want: Vec<f64> = (0..r * c).map(|f| xd[(f % r) * c + f / r]).collect();
            assert_eq!(got, want, "{dt} {r}x{c}");
        }
    }
    // Transposing a sliced view into a sliced output.
    let (x, xd) = random(&mut rng, DType::F32, &[50, 80], -1.0, 1.0);
    let xv = v(&x)
        .slice_axis(0, 1, 40, 1)
        .unwrap()
        .slice_axis(1, 79, 60, -1)
        .unwrap(); // (40, 60)
    let xl = logical(&xd, &v(&x), &xv);
    let buf = HostTensor::zeros(DType::F32, &[60, 50]);
    let got = run_all(&buf, -9.0, || {
        transpose2d(&xv, &v(&buf).slice_axis(1, 5, 40, 1).unwrap(), 2)
    });
    for i in 0..60 {
        for j in 0..50 {
            let want = if (5..45).contains(&j) {
                xl[(j - 5) * 60 + i]
            } else {
                -9.0
            };
            assert_eq!(got[i * 50 + j], want, "({i}, {j})");
        }
    }
}

#[test]
fn concat_along_each_axis() {
    let mut rng = Rng::new(43);
    for dt in [DType::F32, DType::F16, DType::I32, DType::U8] {
        for axis in 0..3usize {
            let sizes = [3usize, 0, 5, 1];
            let base = [4usize, 2, 6];
            let mut parts = vec![];
            for &s in &sizes {
                let mut shape = base.to_vec();
                shape[axis] = s;
                parts.push(random(&mut rng, dt, &shape, -50.0, 50.0));
            }
            // Make one part non-contiguous: a transposed view of the same logical shape.
            let mut shape0 = base.to_vec();
            shape0[axis] = sizes[0];
            let rev: Vec<usize> = shape0.iter().rev().copied().collect();
            let (t0, d0) = random(&mut rng, dt, &rev, -50.0, 50.0);
            let v0 = v(&t0).permute(&[2, 1, 0]).unwrap();
            let l0 = logical(&d0, &v(&t0), &v0);
            let mut oshape = base.to_vec();
            oshape[axis] = sizes.iter().sum();
            let out = HostTensor::zeros(dt, &oshape);
            let got = run_all(&out, 7.0, || {
                let mut views = vec![v0.clone()];
                views.extend(parts[1..].iter().map(|(t, _)| v(t)));
                concat(&views, axis as isize - 3, &v(&out), 2)
            });
            // Reference.
            let datas: Vec<(Vec<usize>, Vec<f64>)> = std::iter::once((shape0.clone(), l0.clone()))
                .chain(parts[1..].iter().enumerate().map(|(i, (_, d))| {
                    let mut s = base.to_vec();
                    s[axis] = sizes[i + 1];
                    (s, d.clone())
                }))
                .collect();
            let ost = strides_of(&oshape);
            let want: Vec<f64> = (0..numel(&oshape))
                .map(|f| {
                    let mut idx: Vec<usize> = (0..3).map(|d| (f / ost[d]) % oshape[d]).collect();
                    for (s, d) in &datas {
                        if idx[axis] < s[axis] {
                            let st = strides_of(s);
                            return d[idx.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>()];
                        }
                        idx[axis] -= s[axis];
                    }
                    unreachable!()
                })
                .collect();
            assert_eq!(got, want, "{dt} axis {axis}");
        }
    }
}

#[test]
fn slice_with_steps() {
    let mut rng = Rng::new(44);
    let (x, xd) = random(&mut rng, DType::F32, &[10, 12, 3], -1.0, 1.0);
    for ranges in [
        vec![(1usize, 4usize, 2isize)],
        vec![(9, 5, -2), (11, 12, -1)],
        vec![(0, 0, 1)],
        vec![(2, 3, 1), (0, 4, 3), (2, 1, 1)],
    ] {
        let mut view = v(&x);
        for (ax, &(s, c, st)) in ranges.iter().enumerate() {
            view = view.slice_axis(ax as isize, s, c, st).unwrap();
        }
        let want = logical(&xd, &v(&x), &view);
        let out = HostTensor::zeros(DType::F32, view.shape());
        let got = run_all(&out, 0.0, || slice(&v(&x), &ranges, &v(&out), 2));
        assert_eq!(got, want, "{ranges:?}");
    }
}

#[test]
fn copy_of_reshaped_and_indexed_views() {
    let mut rng = Rng::new(45);
    let (x, xd) = random(&mut rng, DType::I32, &[4, 6, 5], -1000.0, 1000.0);
    // reshape of a contiguous tensor is a view; of a transposed one it needs a copy.
    let r = v(&x).reshape(&[24, 5]).unwrap();
    assert_eq!(r.strides(), &[5, 1]);
    let r2 = v(&x).reshape(&[4, usize::MAX]).unwrap();
    assert_eq!(r2.shape(), &[4, 30]);
    assert!(v(&x).mt().unwrap().reshape(&[4, 30]).is_err());
    // Splitting an axis of a transposed view works without a copy.
    let t = v(&x).permute(&[2, 0, 1]).unwrap(); // (5, 4, 6), strides (1, 30, 5)
    let s = t.reshape(&[5, 2, 2, 6]).unwrap();
    assert_eq!(s.strides(), &[1, 60, 30, 5]);
    let iv = v(&x).index_axis(1, 2).unwrap(); // (4, 5)
    let want = logical(&xd, &v(&x), &iv);
    let out = HostTensor::zeros(DType::I32, &[4, 5]);
    assert_eq!(run_all(&out, 0.0, || copy(&iv, &v(&out), 2)), want);
}
