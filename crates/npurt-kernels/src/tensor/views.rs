//! Views derived from a view: safe, because the result addresses a subset of the same
//! elements (and keeps the same memory alive).

use super::{bad, contiguous_strides, normalize_axis, Dims, Strides, TensorView};
use crate::KernelArgError;

impl TensorView {
    /// Reorders the dimensions: result dim `i` is this view's dim `axes[i]`.
    pub fn permute(&self, axes: &[usize]) -> Result<TensorView, KernelArgError> {
        let n = self.ndim();
        let mut seen = vec![false; n];
        if axes.len() != n || axes.iter().any(|&a| a >= n || std::mem::replace(&mut seen[a], true)) {
            return Err(bad(format!("{axes:?} is not a permutation of {n} axes")));
        }
        Ok(self.derive(
            self.addr,
            axes.iter().map(|&a| self.shape[a]).collect::<Dims>(),
            axes.iter().map(|&a| self.strides[a]).collect::<Strides>(),
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
        let mut strides = Strides::from_elem(0, shape.len());
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
        Ok(self.derive(self.addr, Dims::from_slice(shape), strides))
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
        match nocopy_reshape_strides(&self.shape, &self.strides, &shape) {
            Some(strides) => Ok(self.derive(self.addr, shape, strides)),
            None => Err(bad(format!(
                "cannot reshape {:?} to {shape:?} without a copy",
                self.shape
            ))),
        }
    }

    /// The same elements with the last two dims swapped (a matrix transpose view).
    pub fn mt(&self) -> Result<TensorView, KernelArgError> {
        if self.ndim() < 2 {
            return Err(bad("a matrix transpose needs at least 2 dimensions"));
        }
        self.transpose(-1, -2)
    }
}

/// numpy's no-copy reshape rule (`_attempt_nocopy_reshape`): the strides (elements) that
/// give the elements of `shape` / `strides` in row-major order with shape `new` (same
/// element count, at least one element), or None when that needs a copy. The one owner of
/// the rule: `TensorView::reshape` and the model planner (`_npurt._reshape_strides`) ask it.
pub fn nocopy_reshape_strides(shape: &[usize], strides: &[isize], new: &[usize]) -> Option<Vec<isize>> {
    let numel = |d: &[usize]| d.iter().try_fold(1usize, |a, &n| a.checked_mul(n));
    if shape.len() != strides.len() || numel(shape)? != numel(new)? || new.contains(&0) {
        return None;
    }
    // Old dims of size 1 dropped.
    let (od, os): (Vec<usize>, Vec<isize>) = shape
        .iter()
        .zip(strides)
        .filter(|(&n, _)| n != 1)
        .map(|(&n, &s)| (n, s))
        .unzip();
    let nd = new;
    let mut ns = vec![0isize; nd.len()];
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
                return None;
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
    Some(ns)
}
