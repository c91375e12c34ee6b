//! Scalar operands of the elementwise kernels: [`Scalar`] (a Python-style number checked
//! against the tensor dtype at launch), [`Operand`] (a tensor or a scalar) and the
//! zero-stride view a scalar becomes.

use crate::{dispatch_dtype, AlignedBuffer, DType, Elem, Keep, KernelArgError, TensorView};
use std::sync::Arc;

/// A Python-style scalar operand, converted to the tensor dtype at launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Float(f64),
    Int(i64),
    Bool(bool),
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::Float(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Float(v as f64)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::Int(v)
    }
}
impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Scalar::Int(v as i64)
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

impl Scalar {
    /// The value as an element of `T` (numpy's cast rules).
    pub fn to_elem<T: Elem>(self) -> T {
        match self {
            Scalar::Float(v) => T::from_f64(v),
            Scalar::Int(v) => T::from_i64(v),
            Scalar::Bool(v) => T::from_i64(v as i64),
        }
    }

    /// Checks that the value is representable in `dtype` without changing it (an integral
    /// float for an integer dtype, in range; 0/1 for bool).
    pub fn check_for(self, op: &'static str, dtype: DType) -> Result<(), KernelArgError> {
        let ok = match (self, dtype) {
            (_, d) if d.is_float() => true,
            (Scalar::Bool(_), _) => true,
            (Scalar::Int(v), d) => dispatch_dtype!(d, T => T::from_i64(v).to_i64() == v),
            (Scalar::Float(v), d) => {
                v.is_finite() && v.fract() == 0.0 && dispatch_dtype!(d, T => T::from_f64(v).to_f64() == v)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(KernelArgError::Invalid {
                op,
                detail: format!("scalar {self:?} is not representable as {dtype} (cast the tensor first)"),
            })
        }
    }
}

/// An operand of [`binary`]: a tensor or a scalar.
#[derive(Debug, Clone)]
pub enum Operand {
    Tensor(TensorView),
    Scalar(Scalar),
}

impl From<TensorView> for Operand {
    fn from(t: TensorView) -> Self {
        Operand::Tensor(t)
    }
}
impl From<&TensorView> for Operand {
    fn from(t: &TensorView) -> Self {
        Operand::Tensor(t.clone())
    }
}
impl<S: Into<Scalar>> From<S> for Operand {
    fn from(s: S) -> Self {
        Operand::Scalar(s.into())
    }
}

/// A one-element buffer holding `s` as `dtype`, viewed with zero strides over `shape`.
pub(crate) fn scalar_view(dtype: DType, s: Scalar, shape: &[usize]) -> TensorView {
    let buf = AlignedBuffer::zeroed(dtype.itemsize());
    let addr = buf.addr();
    dispatch_dtype!(dtype, T => {
        // SAFETY: the buffer is freshly allocated, 64-byte aligned, one element of T long,
        // and not shared yet.
        unsafe { (addr as *mut T).write(s.to_elem::<T>()) }
    });
    let keep: Keep = Arc::new(buf);
    // SAFETY: every index addresses the one element, valid while `keep` lives; this view
    // is only ever an input.
    unsafe { TensorView::new(addr, dtype, shape.to_vec(), vec![0; shape.len()], keep) }.expect("a scalar view is valid")
}
