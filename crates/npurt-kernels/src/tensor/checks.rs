//! Shape helpers and the checks kernel constructors run before anything is queued.

use super::TensorView;
use crate::{DType, KernelArgError};

/// numpy's broadcast of two shapes.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>, KernelArgError> {
    let n = a.len().max(b.len());
    let mut out = vec![0usize; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(KernelArgError::Broadcast {
                op,
                a: a.to_vec(),
                b: b.to_vec(),
            });
        };
    }
    Ok(out)
}

/// Checks that `out` can be written: no self-overlap, and no overlap with any input unless
/// `in_place_ok` and it is exactly the same view (same elements in the same order).
pub(crate) fn check_output(
    op: &'static str,
    out: &TensorView,
    inputs: &[(&'static str, &TensorView)],
    in_place_ok: bool,
) -> Result<(), KernelArgError> {
    if out.has_self_overlap() {
        return Err(KernelArgError::SelfOverlap { op, what: "out" });
    }
    for (name, t) in inputs {
        if out.overlaps(t) && !(in_place_ok && out.same_layout(t)) {
            let hint = if in_place_ok {
                " (only an identical view may be used in place)"
            } else {
                " (in-place use is not supported)"
            };
            return Err(KernelArgError::Aliasing {
                op,
                output: "out",
                input: name,
                hint,
            });
        }
    }
    Ok(())
}

pub(crate) fn check_out_shape(op: &'static str, out: &TensorView, expected: &[usize]) -> Result<(), KernelArgError> {
    if out.shape() != expected {
        return Err(KernelArgError::OutputShape {
            op,
            expected: expected.to_vec(),
            got: out.shape().to_vec(),
        });
    }
    Ok(())
}

pub(crate) fn check_dtype(
    op: &'static str,
    what: &'static str,
    t: &TensorView,
    expected: DType,
) -> Result<(), KernelArgError> {
    if t.dtype() != expected {
        return Err(KernelArgError::DTypeMismatch {
            op,
            what,
            expected,
            got: t.dtype(),
        });
    }
    Ok(())
}
