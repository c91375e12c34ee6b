//! [`TensorView`]: a strided description of memory, independent of the memory layer.

use crate::{DType, KernelArgError};
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// What keeps a view's memory alive (a device buffer, a pinned host buffer, a Python
/// buffer export...). Kernels hold a clone until they are dropped.
pub type Keep = Arc<dyn Any + Send + Sync>;

/// A strided tensor: `addr` is the address of element `[0, 0, ...]`; element `idx` lives at
/// `addr + Σ idx[d] * strides[d] * itemsize` (strides in elements, may be zero or
/// negative). `keep` keeps the memory alive for as long as the view (and any kernel holding
/// it) lives.
///
/// A view is only a description: building one is `unsafe` (its contract is what makes the
/// kernels' raw reads and writes sound); deriving views from a view (permute, slice,
/// broadcast, reshape) is safe because the result addresses a subset of the same elements.
#[derive(Clone)]
pub struct TensorView {
    addr: usize,
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<isize>,
    keep: Keep,
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
            shape,
            strides,
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
    fn derive(&self, addr: usize, shape: Vec<usize>, strides: Vec<isize>) -> TensorView {
        TensorView {
            addr,
            dtype: self.dtype,
            shape,
            strides,
            keep: self.keep.clone(),
        }
    }

    /// Reorders the dimensions: result dim `i` is this view's dim `axes[i]`.
    pub fn permute(&self, axes: &[usize]) -> Result<TensorView, KernelArgError> {
        let n = self.ndim();
        let mut seen = vec![false; n];
        if axes.len() != n || axes.iter().any(|&a| a >= n || std::mem::replace(&mut seen[a], true)) {
            return Err(bad(format!("{axes:?} is not a permutation of {n} axes")));
        }
        Ok(self.derive(
            self.addr,
            axes.iter().map(|&a| self.shape[a]).collect(),
            axes.iter().map(|&a| self.strides[a]).collect(),
        ))
    }

    /// Swaps two dimensions (negative axes count from the end).
    pub fn transpose(&self, a: isize, b: isize) -> Result<TensorView, KernelArgError> {
        let a = normalize_axis("transpose", a, self.ndim())?;
        let b = normalize_axis("transpose", b, self.ndim())?;
        let mut axes: Vec<usize> = (0..self.ndim()).collect();
        axes.swap(a, b);
        self.permute(&axes)
    }

    /// numpy's `broadcast_to`: prepends dims and stretches size-1 dims (stride 0). The
    /// result must not be used as an output.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<TensorView, KernelArgError> {
        if shape.len() < self.ndim() {
            return Err(bad(format!("cannot broadcast {:?} to {shape:?}", self.shape)));
        }
        let lead = shape.len() - self.ndim();
        let mut strides = vec![0isize; shape.len()];
        for d in 0..self.ndim() {
            let (have, want) = (self.shape[d], shape[lead + d]);
            strides[lead + d] = if have == want {
                self.strides[d]
            } else if have == 1 {
                0
            } else {
                return Err(bad(format!("cannot broadcast {:?} to {shape:?}", self.shape)));
            };
        }
        Ok(self.derive(self.addr, shape.to_vec(), strides))
    }

    /// Elements `start, start+step, ...` (`count` of them) along `axis`; `step` may be
    /// negative (numpy's `x[a:b:s]` after `slice.indices`). All must be in range.
    pub fn slice_axis(
        &self,
        axis: isize,
        start: usize,
        count: usize,
        step: isize,
    ) -> Result<TensorView, KernelArgError> {
        let ax = normalize_axis("slice", axis, self.ndim())?;
        let n = self.shape[ax];
        if step == 0 {
            return Err(bad("slice step cannot be zero"));
        }
        if count > 0 {
            let last = start as isize + (count as isize - 1) * step;
            if start >= n || last < 0 || last >= n as isize {
                return Err(bad(format!(
                    "slice start {start}, count {count}, step {step} is out of range for axis {ax} of size {n}"
                )));
            }
        }
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        shape[ax] = count;
        strides[ax] = self.strides[ax] * step;
        let addr = if count > 0 && self.numel() > 0 {
            (self.addr as isize + start as isize * self.strides[ax] * self.dtype.itemsize() as isize) as usize
        } else {
            self.addr
        };
        Ok(self.derive(addr, shape, strides))
    }

    /// Selects index `i` along `axis`, removing the axis.
    pub fn index_axis(&self, axis: isize, i: usize) -> Result<TensorView, KernelArgError> {
        let ax = normalize_axis("index", axis, self.ndim())?;
        let v = self.slice_axis(ax as isize, i, 1, 1)?;
        let mut shape = v.shape.clone();
        let mut strides = v.strides.clone();
        shape.remove(ax);
        strides.remove(ax);
        Ok(self.derive(v.addr, shape, strides))
    }

    /// numpy's no-copy reshape: succeeds when the new shape can be expressed with strides
    /// over the same elements in row-major order (always for a contiguous view); else
    /// `BadView` (copy first). One dim may be given as `usize::MAX` to infer it.
    pub fn reshape(&self, shape: &[usize]) -> Result<TensorView, KernelArgError> {
        let numel = self.numel();
        let mut shape = shape.to_vec();
        let infer: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] == usize::MAX).collect();
        if infer.len() > 1 {
            return Err(bad("only one dimension can be inferred"));
        }
        if let Some(&d) = infer.first() {
            let rest: usize = shape
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != d)
                .map(|(_, &s)| s)
                .product();
            #[allow(clippy::manual_is_multiple_of)] // MSRV 1.80
            if rest == 0 || numel % rest != 0 {
                return Err(bad(format!("cannot reshape {:?} to {shape:?}", self.shape)));
            }
            shape[d] = numel / rest;
        }
        if shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s)) != Some(numel) {
            return Err(bad(format!(
                "cannot reshape {:?} ({numel} elements) to {shape:?}",
                self.shape
            )));
        }
        if numel == 0 {
            let strides = contiguous_strides(&shape);
            return Ok(self.derive(self.addr, shape, strides));
        }
        // numpy's _attempt_nocopy_reshape (old dims of size 1 dropped).
        let (od, os): (Vec<usize>, Vec<isize>) = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(&n, _)| n != 1)
            .map(|(&n, &s)| (n, s))
            .unzip();
        let nd = &shape;
        let mut ns = vec![0isize; nd.len()];
        let no_copy = || bad(format!("cannot reshape {:?} to {nd:?} without a copy", self.shape));
        let (mut oi, mut oj, mut ni, mut nj) = (0usize, 1usize, 0usize, 1usize);
        while ni < nd.len() && oi < od.len() {
            let (mut np, mut op) = (nd[ni], od[oi]);
            while np != op {
                if np < op {
                    np *= nd[nj];
                    nj += 1;
                } else {
                    op *= od[oj];
                    oj += 1;
                }
            }
            for ok in oi..oj - 1 {
                if od[ok + 1] as isize * os[ok + 1] != os[ok] {
                    return Err(no_copy());
                }
            }
            ns[nj - 1] = os[oj - 1];
            for nk in (ni + 1..nj).rev() {
                ns[nk - 1] = ns[nk] * nd[nk] as isize;
            }
            ni = nj;
            nj += 1;
            oi = oj;
            oj += 1;
        }
        let last = if ni >= 1 { ns[ni - 1] } else { 1 };
        for s in ns.iter_mut().skip(ni) {
            *s = last;
        }
        let new_strides = ns;
        Ok(self.derive(self.addr, shape, new_strides))
    }

    /// The same elements with the last two dims swapped (a matrix transpose view).
    pub fn mt(&self) -> Result<TensorView, KernelArgError> {
        if self.ndim() < 2 {
            return Err(bad("a matrix transpose needs at least 2 dimensions"));
        }
        self.transpose(-1, -2)
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
        if self.numel() <= 1 {
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
