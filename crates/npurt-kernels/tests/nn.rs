//! The nn kernels against naive f64 references, each run with several block counts in
//! both orders (bitwise identical results: the tile grid depends on the shapes only):
//! pools (ceil_mode, count_include_pad; the 2-D fast path against the n-d loop) and
//! argument errors. Convolutions: `conv.rs`.

mod common;

use common::*;
use npurt_kernels::nn::{self, Epilogue, PoolKind};

const E0: Epilogue = Epilogue::None;
use npurt_kernels::{DType, HostTensor, KernelArgError as E};

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
        // Windows wholly inside the input (2x2/2: pool2d's `Whole` loop), odd sizes included.
        ([1, 3, 9, 11], [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], false),
        ([2, 2, 7, 35], [3, 3], [1, 1], [0, 0, 0, 0], [1, 1], false),
        ([1, 4, 5, 37], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], false),
        // Two blocks whose boundary falls inside a row and a plane (the whole-row runs).
        ([1, 7, 82, 122], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], false),
        // Max pools on prepared rows (`pool_max.rs`): rows of several tile groups split
        // between blocks mid-row, asymmetric pads wider than half the kernel, a 7x7/2
        // window in ceil mode, even left pads (the phases swap).
        ([1, 5, 40, 130], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], false),
        ([1, 3, 11, 50], [2, 4], [1, 1], [1, 3, 0, 2], [1, 1], false),
        ([1, 2, 23, 29], [7, 7], [2, 2], [3, 2, 3, 3], [1, 1], true),
    ];
    for (i, &(xs, k, st, pd, dl, ceil)) in cases.iter().enumerate() {
        let (mut x, _) = random(&mut rng, DType::F32, &xs, -1.0, 1.0);
        if i % 2 == 0 {
            // Ties of +0 and -0 and NaNs: which one a window keeps depends on the order
            // its taps are visited in, so the paths must visit them alike.
            let mut vals = x.to_f64_vec();
            for (j, v) in vals.iter_mut().enumerate() {
                match j % 7 {
                    0 => *v = 0.0,
                    3 => *v = -0.0,
                    5 if j % 3 == 0 => *v = f64::NAN,
                    _ => *v = -v.abs(),
                }
            }
            x = HostTensor::from_f64(DType::F32, &vals, &xs);
        }
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
    assert!(nn::conv(&v(&x), &v(&w), None, &v(&o), None, None, None, 1, E0, 1).is_ok());
    assert!(matches!(
        nn::conv(&v(&x), &v(&w), None, &v(&o), None, None, None, 3, E0, 1),
        Err(E::ShapeMismatch { .. })
    ));
    assert!(matches!(
        nn::conv(&v(&x), &v(&w), None, &v(&o), Some(&[2, 2]), None, None, 1, E0, 1),
        Err(E::OutputShape { .. })
    ));
    assert!(matches!(
        nn::conv(&v(&x), &v(&w), None, &v(&x), None, None, None, 1, E0, 1),
        Err(E::OutputShape { .. })
    ));
    let xi = HostTensor::zeros(DType::I32, &[1, 4, 5, 5]);
    assert!(matches!(
        nn::conv(&v(&xi), &v(&w), None, &v(&o), None, None, None, 1, E0, 1),
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
