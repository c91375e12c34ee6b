//! Bad arguments are typed errors at construction (before anything could be queued);
//! views reject invalid layouts; kernel names; the fault kernel.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::*;
use npurt_kernels::{
    axpy, binary, cast, concat, copy, fill, gemm, layer_norm, log_softmax, matmul, permute, reduce, rms_norm, slice,
    softmax, transpose2d, unary, BinaryOp, DType, Fault, GemmArgs, HostTensor, Keep, KernelArgError as E, ReduceOp,
    Scalar, TensorView, UnaryOp,
};
use std::sync::Arc;

fn t(dt: DType, shape: &[usize]) -> HostTensor {
    HostTensor::zeros(dt, shape)
}

macro_rules! assert_err {
    ($e:expr, $pat:pat) => {
        match $e {
            Err(err @ $pat) => {
                let msg = err.to_string();
                assert!(!msg.is_empty());
            }
            Err(other) => panic!("expected {}, got {other:?}", stringify!($pat)),
            Ok(_) => panic!("expected {}, got Ok", stringify!($pat)),
        }
    };
}

#[test]
fn elementwise_errors() {
    let (a, b, o) = (t(DType::F32, &[3, 4]), t(DType::F32, &[5]), t(DType::F32, &[3, 4]));
    assert_err!(binary(BinaryOp::Add, &v(&a), &v(&b), &v(&o), 2), E::Broadcast { .. });
    let o2 = t(DType::F32, &[4]);
    assert_err!(binary(BinaryOp::Add, &v(&a), 1.0, &v(&o2), 2), E::OutputShape { .. });
    let i = t(DType::I32, &[3, 4]);
    assert_err!(
        binary(BinaryOp::Add, &v(&a), &v(&i), &v(&o), 2),
        E::DTypeMismatch { what: "b", .. }
    );
    let io = t(DType::I32, &[3, 4]);
    assert_err!(
        binary(BinaryOp::Div, &v(&i), &v(&i), &v(&io), 2),
        E::UnsupportedDType { .. }
    );
    assert_err!(binary(BinaryOp::Add, &v(&i), 1.5, &v(&io), 2), E::Invalid { .. });
    let u8t = t(DType::U8, &[2]);
    assert_err!(
        binary(BinaryOp::Add, &v(&u8t), Scalar::Int(300), &v(&u8t), 2),
        E::Invalid { .. }
    );
    let bo = t(DType::Bool, &[2]);
    assert_err!(
        binary(BinaryOp::Sub, &v(&bo), &v(&bo), &v(&bo), 2),
        E::UnsupportedDType { .. }
    );
    assert_err!(unary(UnaryOp::Exp, &v(&i), &v(&io), 2), E::UnsupportedDType { .. });
    assert_err!(unary(UnaryOp::Exp, &v(&a), &v(&io), 2), E::DTypeMismatch { .. });
    assert_err!(unary(UnaryOp::Relu, &v(&bo), &v(&bo), 2), E::UnsupportedDType { .. });
    assert_err!(axpy(1.0, &v(&a), &v(&a), &v(&io), 2), E::DTypeMismatch { .. });
    assert_err!(axpy(true, &v(&bo), &v(&bo), &v(&bo), 2), E::UnsupportedDType { .. });
    assert_err!(copy(&v(&a), &v(&io), 2), E::DTypeMismatch { .. });
    assert_err!(cast(&v(&a), &v(&o2), 2), E::OutputShape { .. });
    assert_err!(fill(&v(&io), 0.5, 2), E::Invalid { .. });
}

#[test]
fn axpy_and_shape_helper_errors() {
    let (x, o) = (t(DType::F32, &[3, 4]), t(DType::F32, &[3, 4]));
    let (y5, o4) = (t(DType::F32, &[5]), t(DType::F32, &[4]));
    assert_err!(axpy(2.0, &v(&x), &v(&y5), &v(&o), 2), E::Broadcast { .. });
    assert_err!(axpy(2.0, &v(&x), &v(&o4), &v(&o4), 2), E::OutputShape { .. });
    assert_err!(
        axpy(2.0, &v(&x), &v(&t(DType::I32, &[3, 4])), &v(&o), 2),
        E::DTypeMismatch { what: "y", .. }
    );
    let i = t(DType::I32, &[3, 4]);
    assert_err!(axpy(0.5, &v(&i), &v(&i), &v(&i), 2), E::Invalid { .. });
    let u = t(DType::U8, &[3]);
    assert_err!(axpy(Scalar::Int(300), &v(&u), &v(&u), &v(&u), 2), E::Invalid { .. });
    // Overlapping x other than exactly.
    let shifted = v(&x).slice_axis(0, 1, 2, 1).unwrap();
    let first = v(&x).slice_axis(0, 0, 2, 1).unwrap();
    assert_err!(axpy(1.0, &first, &first, &shifted, 2), E::Aliasing { .. });
    assert!(axpy(1.0, &v(&x), &v(&o), &v(&x), 2).is_ok());
    // The public shape helpers.
    assert_err!(
        npurt_kernels::reduce_out_shape(&[3, 4], Some(&[2]), false),
        E::BadAxis { .. }
    );
    assert_err!(
        npurt_kernels::reduce_out_shape(&[3, 4], Some(&[1, -1]), false),
        E::Invalid { .. }
    );
    assert_err!(
        npurt_kernels::matmul_out_shape(&[4], &[4, 3], false, false),
        E::Rank { what: "a", .. }
    );
    assert_err!(
        npurt_kernels::matmul_out_shape(&[2, 4], &[2, 3, 4, 5], false, false),
        E::Rank { what: "b", .. }
    );
    assert_err!(npurt_kernels::broadcast_shapes("t", &[2], &[3]), E::Broadcast { .. });
    assert_err!(npurt_kernels::normalize_axis("t", -3, 2), E::BadAxis { .. });
    assert_err!(log_softmax(&v(&x), -3, &v(&o), 1), E::BadAxis { .. });
    assert_err!(
        concat(&[v(&x), v(&i)], 0, &v(&t(DType::F32, &[6, 4])), 1),
        E::DTypeMismatch { .. }
    );
}

#[test]
fn aliasing_errors() {
    let x = t(DType::F32, &[4, 4]);
    // Output overlapping an input other than exactly: shifted, transposed, broadcast.
    let shifted = v(&x).slice_axis(0, 1, 3, 1).unwrap();
    let first = v(&x).slice_axis(0, 0, 3, 1).unwrap();
    assert_err!(unary(UnaryOp::Neg, &first, &shifted, 1), E::Aliasing { .. });
    assert_err!(unary(UnaryOp::Neg, &v(&x), &v(&x).mt().unwrap(), 1), E::Aliasing { .. });
    assert_err!(
        binary(BinaryOp::Add, &v(&x).slice_axis(0, 0, 1, 1).unwrap(), 1.0, &v(&x), 1),
        E::Aliasing { .. }
    );
    // An output with repeated elements.
    let row = t(DType::F32, &[4]);
    assert_err!(
        fill(&v(&row).broadcast_to(&[3, 4]).unwrap(), 1.0, 1),
        E::SelfOverlap { .. }
    );
    // Ops that never run in place.
    let y = t(DType::F32, &[4, 4]);
    assert_err!(matmul(&v(&x), &v(&y), &v(&x), false, false, 1), E::Aliasing { .. });
    assert_err!(permute(&v(&x), &[1, 0], &v(&x), 1), E::Aliasing { .. });
    assert_err!(transpose2d(&v(&x), &v(&x), 1), E::Aliasing { .. });
    assert_err!(
        reduce(ReduceOp::Sum, &v(&x), Some(&[0]), &v(&x).index_axis(0, 0).unwrap(), 1),
        E::Aliasing { .. }
    );
    assert_err!(
        layer_norm(&v(&x), Some(&v(&x).index_axis(0, 3).unwrap()), None, 1e-5, &v(&x), 1),
        E::Aliasing { .. }
    );
    let z = t(DType::F32, &[8, 4]);
    assert_err!(
        concat(&[v(&z).slice_axis(0, 4, 4, 1).unwrap(), v(&y)], 0, &v(&z), 1),
        E::Aliasing { .. }
    );
    // The same memory as exactly the same view is fine where documented.
    assert!(unary(UnaryOp::Neg, &v(&x), &v(&x), 1).is_ok());
    assert!(softmax(&v(&x), 0, &v(&x), 1).is_ok());
    assert!(gemm(
        &v(&y),
        &v(&y),
        Some(&v(&x)),
        None,
        &v(&x),
        GemmArgs {
            beta: 1.0,
            ..GemmArgs::default()
        },
        1
    )
    .is_ok());
}

#[test]
fn reduction_and_norm_errors() {
    let x = t(DType::F32, &[3, 4]);
    let o = t(DType::F32, &[3]);
    assert_err!(reduce(ReduceOp::Sum, &v(&x), Some(&[2]), &v(&o), 1), E::BadAxis { .. });
    assert_err!(reduce(ReduceOp::Sum, &v(&x), Some(&[-3]), &v(&o), 1), E::BadAxis { .. });
    assert_err!(
        reduce(ReduceOp::Sum, &v(&x), Some(&[0, -2]), &v(&o), 1),
        E::Invalid { .. }
    );
    assert_err!(
        reduce(ReduceOp::Sum, &v(&x), Some(&[0]), &v(&o), 1),
        E::OutputShape { .. }
    );
    assert_err!(
        reduce(ReduceOp::Argmax, &v(&x), Some(&[1]), &v(&o), 1),
        E::DTypeMismatch { .. }
    );
    let oi = t(DType::I64, &[]);
    assert_err!(
        reduce(ReduceOp::Argmax, &v(&x), Some(&[0, 1]), &v(&oi), 1),
        E::Invalid { .. }
    );
    assert_err!(
        reduce(ReduceOp::Mean, &v(&x), None, &v(&oi), 1),
        E::DTypeMismatch { .. }
    );
    assert_err!(
        reduce(ReduceOp::Max, &v(&x), Some(&[1]), &v(&t(DType::F16, &[3])), 1),
        E::DTypeMismatch { .. }
    );
    let e = t(DType::F32, &[0, 4]);
    assert_err!(
        reduce(ReduceOp::Max, &v(&e), Some(&[0]), &v(&t(DType::F32, &[4])), 1),
        E::EmptyReduction { .. }
    );
    assert_err!(softmax(&v(&x), 2, &v(&x), 1), E::BadAxis { .. });
    let xi = t(DType::I32, &[3, 4]);
    assert_err!(softmax(&v(&xi), 0, &v(&xi), 1), E::UnsupportedDType { .. });
    assert_err!(
        softmax(&v(&x), 0, &v(&t(DType::F32, &[4, 3])), 1),
        E::OutputShape { .. }
    );
    let w = t(DType::F32, &[3]);
    let out = t(DType::F32, &[3, 4]);
    assert_err!(
        layer_norm(&v(&x), Some(&v(&w)), None, 1e-5, &v(&out), 1),
        E::ShapeMismatch { .. }
    );
    let w16 = t(DType::F16, &[4]);
    assert_err!(
        rms_norm(&v(&x), Some(&v(&w16)), 1e-5, &v(&out), 1),
        E::DTypeMismatch { .. }
    );
    let s = t(DType::F32, &[]);
    assert_err!(layer_norm(&v(&s), None, None, 1e-5, &v(&s), 1), E::Rank { .. });
}

#[test]
fn matmul_errors() {
    let (a, b) = (t(DType::F32, &[3, 4]), t(DType::F32, &[5, 6]));
    let o = t(DType::F32, &[3, 6]);
    assert_err!(matmul(&v(&a), &v(&b), &v(&o), false, false, 1), E::ShapeMismatch { .. });
    let b2 = t(DType::F32, &[4, 6]);
    assert_err!(
        matmul(&v(&a), &v(&b2), &v(&t(DType::F32, &[6, 3])), false, false, 1),
        E::OutputShape { .. }
    );
    assert_err!(matmul(&v(&a), &v(&b2), &v(&o), true, false, 1), E::ShapeMismatch { .. });
    let v1 = t(DType::F32, &[4]);
    assert_err!(matmul(&v(&v1), &v(&b2), &v(&o), false, false, 1), E::Rank { .. });
    let (ba, bb) = (t(DType::F32, &[2, 3, 4]), t(DType::F32, &[3, 4, 6]));
    assert_err!(
        matmul(&v(&ba), &v(&bb), &v(&t(DType::F32, &[3, 3, 6])), false, false, 1),
        E::Broadcast { .. }
    );
    let b16 = t(DType::F16, &[4, 6]);
    assert_err!(
        matmul(&v(&a), &v(&b16), &v(&o), false, false, 1),
        E::DTypeMismatch { .. }
    );
    let bias = t(DType::F32, &[3]);
    assert_err!(
        gemm(&v(&a), &v(&b2), None, Some(&v(&bias)), &v(&o), GemmArgs::default(), 1),
        E::ShapeMismatch { .. }
    );
    let c = t(DType::F32, &[2, 6]);
    let args = GemmArgs {
        beta: 1.0,
        ..GemmArgs::default()
    };
    assert_err!(
        gemm(&v(&a), &v(&b2), Some(&v(&c)), None, &v(&o), args, 1),
        E::Broadcast { .. }
    );
    let c2 = t(DType::F32, &[2, 3, 6]);
    assert_err!(
        gemm(&v(&a), &v(&b2), Some(&v(&c2)), None, &v(&o), args, 1),
        E::ShapeMismatch { .. }
    );
    let (ai, bi, oi) = (t(DType::I32, &[3, 4]), t(DType::I32, &[4, 6]), t(DType::I32, &[3, 6]));
    let frac = GemmArgs {
        alpha: 0.5,
        ..GemmArgs::default()
    };
    assert_err!(gemm(&v(&ai), &v(&bi), None, None, &v(&oi), frac, 1), E::Invalid { .. });
    let bo = t(DType::Bool, &[3, 3]);
    assert_err!(
        matmul(&v(&bo), &v(&bo), &v(&t(DType::Bool, &[3, 3])), false, false, 1),
        E::UnsupportedDType { .. }
    );
}

#[test]
fn movement_errors() {
    let x = t(DType::F32, &[3, 4]);
    assert_err!(permute(&v(&x), &[0, 0], &v(&t(DType::F32, &[3, 3])), 1), E::BadView(_));
    assert_err!(
        permute(&v(&x), &[1, 0], &v(&t(DType::F32, &[3, 4])), 1),
        E::OutputShape { .. }
    );
    assert_err!(
        transpose2d(&v(&t(DType::F32, &[2, 2, 2])), &v(&t(DType::F32, &[2, 2, 2])), 1),
        E::Rank { .. }
    );
    assert_err!(
        slice(&v(&x), &[(2, 2, 1)], &v(&t(DType::F32, &[2, 4])), 1),
        E::BadView(_)
    );
    assert_err!(
        slice(&v(&x), &[(0, 1, 0)], &v(&t(DType::F32, &[1, 4])), 1),
        E::BadView(_)
    );
    assert_err!(
        slice(&v(&x), &[(0, 1, 1); 3], &v(&t(DType::F32, &[1, 4])), 1),
        E::Invalid { .. }
    );
    assert_err!(concat(&[], 0, &v(&x), 1), E::Invalid { .. });
    let y = t(DType::F32, &[3, 5]);
    assert_err!(
        concat(&[v(&x), v(&y)], 0, &v(&t(DType::F32, &[6, 4])), 1),
        E::ShapeMismatch { .. }
    );
    assert_err!(
        concat(&[v(&x), v(&y)], 1, &v(&t(DType::F32, &[3, 8])), 1),
        E::OutputShape { .. }
    );
    assert_err!(concat(&[v(&x)], 2, &v(&x), 1), E::BadAxis { .. });
}

#[test]
fn view_construction_is_checked() {
    let keep: Keep = Arc::new(());
    // SAFETY (all): the views are rejected or never used by a kernel.
    unsafe {
        assert_err!(
            TensorView::new(64, DType::F32, vec![2, 2], vec![2], keep.clone()),
            E::BadView(_)
        );
        assert_err!(
            TensorView::new(2, DType::F32, vec![2], vec![1], keep.clone()),
            E::BadView(_)
        );
        assert_err!(
            TensorView::new(0, DType::F32, vec![2], vec![1], keep.clone()),
            E::BadView(_)
        );
        assert_err!(
            TensorView::new(64, DType::F32, vec![2], vec![isize::MAX], keep.clone()),
            E::BadView(_)
        );
        assert_err!(
            TensorView::new(64, DType::F32, vec![usize::MAX, 2], vec![1, 1], keep.clone()),
            E::BadView(_)
        );
        assert_err!(
            TensorView::new(64, DType::F32, vec![3], vec![-100], keep.clone()),
            E::BadView(_)
        );
        assert!(TensorView::new(0, DType::F32, vec![0, 3], vec![3, 1], keep.clone()).is_ok());
        let tv = TensorView::new(4096, DType::F16, vec![3, 4], vec![4, 1], keep.clone()).unwrap();
        assert_eq!(tv.byte_range(), 4096..4096 + 24);
        assert!(tv.is_contiguous());
        assert!(!tv.mt().unwrap().is_contiguous());
        assert_eq!(tv.nbytes(), 24);
    }
    let x = t(DType::F32, &[3, 4]);
    assert_err!(v(&x).broadcast_to(&[4]), E::BadView(_));
    assert_err!(v(&x).broadcast_to(&[2, 4, 4]), E::BadView(_));
    assert_err!(v(&x).reshape(&[5, 2]), E::BadView(_));
    assert_err!(v(&x).slice_axis(0, 1, 3, 1), E::BadView(_));
    assert_err!(v(&x).slice_axis(0, 1, 3, -1), E::BadView(_));
    assert!(v(&x).slice_axis(0, 2, 3, -1).is_ok());
    assert!(v(&x).slice_axis(-1, 3, 4, -1).is_ok());
    assert_err!(v(&x).transpose(0, 2), E::BadAxis { .. });
}

#[test]
fn kernel_names_and_fast_paths() {
    let x = t(DType::F32, &[64, 64]);
    let o = t(DType::F32, &[64, 64]);
    assert_eq!(transpose2d(&v(&x), &v(&o), 1).unwrap().0.name(), "transpose");
    assert_eq!(permute(&v(&x), &[0, 1], &v(&o), 1).unwrap().0.name(), "permute");
    assert_eq!(
        binary(BinaryOp::Sub, &v(&x), 1.0, &v(&o), 1).unwrap().0.name(),
        "subtract"
    );
    assert_eq!(
        unary(UnaryOp::GeluTanh, &v(&x), &v(&o), 1).unwrap().0.name(),
        "gelu_tanh"
    );
    assert_eq!(
        matmul(&v(&x), &v(&x), &v(&o), false, false, 1).unwrap().0.name(),
        "matmul"
    );
    assert_eq!(
        reduce(ReduceOp::Argmax, &v(&x), None, &v(&t(DType::I64, &[])), 1)
            .unwrap()
            .0
            .name(),
        "argmax"
    );
}

#[test]
fn fault_kernel_fails_its_block_only() {
    let f = Fault {
        block: 2,
        message: "injected".into(),
    };
    let err = npurt_kernels::run_inline(&f, 4, false).unwrap_err();
    assert_eq!(err.0, "injected");
    assert!(npurt_kernels::run_inline(&f, 2, false).is_ok());
}
