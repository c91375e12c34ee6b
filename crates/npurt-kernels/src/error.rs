//! Argument errors: every kernel constructor checks its arguments before anything is queued.

use crate::DType;

/// Why a kernel could not be built from its arguments. Raised at launch (before the kernel
/// is queued), never inside a worker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelArgError {
    /// Operand shapes cannot be broadcast together (numpy's rules).
    #[error("{op}: shapes {a:?} and {b:?} cannot be broadcast together")]
    Broadcast {
        op: &'static str,
        a: Vec<usize>,
        b: Vec<usize>,
    },
    /// Operand shapes are incompatible for the operation (matmul inner dimensions, concat
    /// sizes, weight length...).
    #[error("{op}: shape mismatch: {detail}")]
    ShapeMismatch { op: &'static str, detail: String },
    /// The output tensor does not have the shape the operation produces.
    #[error("{op}: output has shape {got:?}, expected {expected:?}")]
    OutputShape {
        op: &'static str,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    /// An operand has the wrong dtype.
    #[error("{op}: {what} has dtype {got}, expected {expected}")]
    DTypeMismatch {
        op: &'static str,
        what: &'static str,
        expected: DType,
        got: DType,
    },
    /// The operation is not defined for this dtype.
    #[error("{op}: dtype {dtype} is not supported{hint}")]
    UnsupportedDType {
        op: &'static str,
        dtype: DType,
        hint: &'static str,
    },
    /// An axis is out of range (negative axes count from the end).
    #[error("{op}: axis {axis} is out of range for a tensor of {ndim} dimension(s)")]
    BadAxis { op: &'static str, axis: isize, ndim: usize },
    /// A tensor has the wrong number of dimensions.
    #[error("{op}: {what} must have {expected} dimension(s), got {got}")]
    Rank {
        op: &'static str,
        what: &'static str,
        expected: &'static str,
        got: usize,
    },
    /// The output overlaps an input in memory (other than being exactly the same view
    /// where the operation allows in-place use).
    #[error("{op}: {output} overlaps {input} in memory{hint}")]
    Aliasing {
        op: &'static str,
        output: &'static str,
        input: &'static str,
        hint: &'static str,
    },
    /// The output has elements that share memory (a zero or overlapping stride), so it
    /// cannot be written deterministically.
    #[error("{op}: {what} has elements sharing memory (zero or overlapping strides) and cannot be written")]
    SelfOverlap { op: &'static str, what: &'static str },
    /// A reduction without identity (max, min, argmax) over an empty axis.
    #[error("{op}: zero-size reduction has no identity")]
    EmptyReduction { op: &'static str },
    /// A copy needs the array's bytes as one range, and the array is a strided view.
    #[error("{op}: the array (shape {shape:?}, strides {strides:?}) is not contiguous; copy it with ascontiguousarray() first")]
    NotContiguous {
        op: &'static str,
        shape: Vec<usize>,
        strides: Vec<isize>,
    },
    /// A view could not be built (bad strides, alignment, permutation, slice, reshape).
    #[error("view: {0}")]
    BadView(String),
    /// Any other invalid argument.
    #[error("{op}: {detail}")]
    Invalid { op: &'static str, detail: String },
}
