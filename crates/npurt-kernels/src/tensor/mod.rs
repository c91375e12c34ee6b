//! [`TensorView`]: a strided description of memory, independent of the memory layer.
//!
//! Files: `mod.rs` (the type, its unsafe constructors, accessors and overlap tests),
//! `views.rs` (safe derived views: permute, broadcast, slice, reshape...), `checks.rs`
//! (shape helpers and the argument checks every kernel constructor uses).

mod checks;
mod views;

pub use checks::broadcast_shapes;
pub(crate) use checks::{check_dtype, check_out_shape, check_output};
pub use views::nocopy_reshape_strides;

use crate::{DType, KernelArgError};
use smallvec::SmallVec;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// What keeps a view's memory alive (a device buffer, a pinned host buffer, a Python
/// buffer export...). Kernels hold a clone until they are dropped.
pub type Keep = Arc<dyn Any + Send + Sync>;

/// Dims of a view, inline up to 6 (cloning a view for a launch allocates nothing).
pub(crate) type Dims = SmallVec<[usize; 6]>;
/// Strides of a view (elements), inline up to 6.
pub(crate) type Strides = SmallVec<[isize; 6]>;

/// A strided tensor: `addr` is the address of element `[0, 0, ...]`; element `idx` lives at
/// `addr + Σ idx[d] * strides[d] * itemsize` (strides in elements, may be zero or
/// negative). `keep` keeps the memory alive for as long as the view (and any kernel holding
/// it) lives.
///
/// A view is only a description: building one is `unsafe` (its contract is what makes the
/// kernels' raw reads and writes sound); deriving views from a view (permute, slice,
/// broadcast, reshape) is safe because the result addresses a subset of the same elements.
pub struct TensorView {
    addr: usize,
    dtype: DType,
    shape: Dims,
    strides: Strides,
    keep: Keep,
}

impl Clone for TensorView {
    /// Copies the dims as slices (a derived `clone` pushes them one by one: a launch clones
    /// a view or two, and that loop was a tenth of a tiny launch under callgrind).
    #[inline]
    fn clone(&self) -> Self {
        Self {
            addr: self.addr,
            dtype: self.dtype,
            shape: Dims::from_slice(&self.shape),
            strides: Strides::from_slice(&self.strides),
            keep: self.keep.clone(),
        }
    }
}

impl fmt::Debug for TensorView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorView")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .finish_non_exhaustive()
    }
}

/// Row-major (C-order) strides, in elements.
pub fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc = acc.saturating_mul(shape[d].max(1) as isize);
    }
    strides
}

fn bad(msg: impl Into<String>) -> KernelArgError {
    KernelArgError::BadView(msg.into())
}

/// Normalises a possibly negative axis.
pub fn normalize_axis(op: &'static str, axis: isize, ndim: usize) -> Result<usize, KernelArgError> {
    let n = ndim as isize;
    let a = if axis < 0 { axis + n } else { axis };
    if a < 0 || a >= n {
        return Err(KernelArgError::BadAxis { op, axis, ndim });
    }
    Ok(a as usize)
}

/// Normalises several axes (numpy's `axis=(...)`), in the order given; a repeated axis is
/// an error.
pub fn normalize_axes(op: &'static str, axes: &[isize], ndim: usize) -> Result<Vec<usize>, KernelArgError> {
    let mut seen = vec![false; ndim];
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let d = normalize_axis(op, a, ndim)?;
        if std::mem::replace(&mut seen[d], true) {
            return Err(KernelArgError::Invalid {
                op,
                detail: format!("duplicate axis {a}"),
            });
        }
        out.push(d);
    }
    Ok(out)
}

impl TensorView {
    /// Describes existing memory.
    ///
    /// Checks that `shape` and `strides` have the same length, that a non-empty view has a
    /// non-null address aligned to the dtype, and that its offsets do not overflow.
    ///
    /// # Safety
    /// For as long as `keep` (and so this view and every view or kernel derived from it)
    /// lives, every element the view addresses (`addr + Σ idx[d]*strides[d]*itemsize` for
    /// `idx` within `shape`) must be valid for reads, and for writes if the view is ever
    /// used as a kernel output. The caller orders access to that memory (as with any device
    /// buffer: by stream order): nothing else may write it while a kernel reading it runs,
    /// and nothing else may access it while a kernel writing it runs. Kernels only write
    /// their output views.
    pub unsafe fn new(
        addr: usize,
        dtype: DType,
        shape: Vec<usize>,
        strides: Vec<isize>,
        keep: Keep,
    ) -> Result<Self, KernelArgError> {
        if shape.len() != strides.len() {
            return Err(bad(format!("shape {shape:?} and strides {strides:?} differ in length")));
        }
        let v = TensorView {
            addr,
            dtype,
            shape: Dims::from_vec(shape),
            strides: Strides::from_vec(strides),
            keep,
        };
        let numel = v.shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s));
        let Some(numel) = numel.filter(|&n| n <= isize::MAX as usize) else {
            return Err(bad(format!("shape {:?} has too many elements", v.shape)));
        };
        if numel > 0 {
            if addr == 0 {
                return Err(bad("null address"));
            }
            #[allow(clippy::manual_is_multiple_of)] // MSRV 1.80
            if addr % dtype.itemsize() != 0 {
                return Err(bad(format!("address {addr:#x} is not aligned for {dtype}")));
            }
            let (lo, hi) = v.checked_span().ok_or_else(|| bad("offsets overflow"))?;
            let item = dtype.itemsize() as isize;
            let lo_b = lo.checked_mul(item).ok_or_else(|| bad("offsets overflow"))?;
            let hi_b = hi
                .checked_mul(item)
                .and_then(|h| h.checked_add(item))
                .ok_or_else(|| bad("offsets overflow"))?;
            if (addr as isize).checked_add(lo_b).filter(|&a| a >= 0).is_none()
                || (addr as isize).checked_add(hi_b).is_none()
            {
                return Err(bad("view extends outside the address space"));
            }
        }
        Ok(v)
    }

    /// Describes existing row-major memory.
    ///
    /// # Safety
    /// As for [`TensorView::new`] with row-major strides: `addr..addr + numel*itemsize`
    /// must stay valid (and be used only as described there) while `keep` lives.
    pub unsafe fn contiguous(addr: usize, dtype: DType, shape: Vec<usize>, keep: Keep) -> Result<Self, KernelArgError> {
        let strides = contiguous_strides(&shape);
        // SAFETY: forwarded to the caller.
        unsafe { Self::new(addr, dtype, shape, strides, keep) }
    }

    pub fn addr(&self) -> usize {
        self.addr
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }
    pub fn keep(&self) -> &Keep {
        &self.keep
    }
    /// `(first byte, length)` of the bytes the view addresses (its whole span when strided).
    pub fn byte_span(&self) -> (usize, usize) {
        let item = self.dtype.itemsize() as isize;
        if self.shape.contains(&0) {
            return (self.addr, 0);
        }
        let (mut lo, mut hi) = (0isize, 0isize);
        for (&n, &st) in self.shape.iter().zip(&self.strides) {
            let ext = st * (n as isize - 1);
            if ext < 0 {
                lo += ext;
            } else {
                hi += ext;
            }
        }
        (
            (self.addr as isize + lo * item) as usize,
            ((hi - lo + 1) * item) as usize,
        )
    }
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// Bytes of the elements (not of the span they occupy).
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype.itemsize()
    }
    /// Row-major contiguous (dims of size 1 may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut acc = 1isize;
        for d in (0..self.ndim()).rev() {
            if self.shape[d] != 1 && self.strides[d] != acc {
                return false;
            }
            acc *= self.shape[d] as isize;
        }
        true
    }

    /// Smallest and largest element offsets (in elements), `None` on overflow.
    fn checked_span(&self) -> Option<(isize, isize)> {
        let (mut lo, mut hi) = (0isize, 0isize);
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            if n == 0 {
                return Some((0, 0));
            }
            let ext = s.checked_mul(n as isize - 1)?;
            if ext < 0 {
                lo = lo.checked_add(ext)?;
            } else {
                hi = hi.checked_add(ext)?;
            }
        }
        Some((lo, hi))
    }

    /// The bytes the view's elements occupy, `start..end` (empty for an empty view).
    pub fn byte_range(&self) -> std::ops::Range<usize> {
        if self.numel() == 0 {
            return self.addr..self.addr;
        }
        let (lo, hi) = self.checked_span().expect("checked at construction");
        let item = self.dtype.itemsize() as isize;
        let start = (self.addr as isize + lo * item) as usize;
        let end = (self.addr as isize + (hi + 1) * item) as usize;
        start..end
    }

    /// Reinterprets the same elements with new shape/strides (crate-internal: callers
    /// guarantee the new layout addresses a subset of the old one's elements).
    fn derive(&self, addr: usize, shape: impl Into<Dims>, strides: impl Into<Strides>) -> TensorView {
        TensorView {
            addr,
            dtype: self.dtype,
            shape: shape.into(),
            strides: strides.into(),
            keep: self.keep.clone(),
        }
    }

    pub(crate) fn ptr<T>(&self) -> *mut T {
        self.addr as *mut T
    }

    /// Byte ranges intersect (both non-empty).
    pub(crate) fn overlaps(&self, other: &TensorView) -> bool {
        let (a, b) = (self.byte_range(), other.byte_range());
        !a.is_empty() && !b.is_empty() && a.start < b.end && b.start < a.end
    }

    /// Exactly the same elements in the same order.
    pub(crate) fn same_layout(&self, other: &TensorView) -> bool {
        self.addr == other.addr && self.dtype == other.dtype && self.shape == other.shape && {
            self.shape
                .iter()
                .zip(self.strides.iter().zip(&other.strides))
                .all(|(&n, (a, b))| n == 1 || a == b)
        }
    }

    /// Some two distinct indices address the same element (sufficient test: sorted by
    /// |stride|, each stride must exceed the span of the smaller ones).
    pub(crate) fn has_self_overlap(&self) -> bool {
        if self.numel() <= 1 || self.is_contiguous() {
            return false;
        }
        let mut dims: Vec<(usize, usize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(&n, _)| n > 1)
            .map(|(&n, &s)| (s.unsigned_abs(), n))
            .collect();
        dims.sort_unstable();
        let mut span = 0usize; // max offset reachable by the smaller dims
        for (s, n) in dims {
            if s <= span {
                return true;
            }
            span += s * (n - 1);
        }
        false
    }
}
