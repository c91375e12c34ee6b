//! Index kernels: `take` (numpy's `take` along an axis = ONNX `Gather`, negative indices
//! counted from the end) and `arange` (ONNX `Range`).
//!
//! An index out of range is known only when the kernel reads it (indices live in device
//! memory), so it is a kernel fault: the stream's sticky error names the index.

use crate::elementwise::split_aligned;
use crate::layout::{by_size, copy_run, Strided};
use crate::plan::{blocks_for, GRAIN_ELEMENTWISE};
use crate::tensor::{check_out_shape, check_output, normalize_axis};
use crate::{dispatch_dtype, DType, Elem, KernelArgError, Launch, Scalar, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use smallvec::SmallVec;
use std::sync::Arc;

/// `x.shape[:axis] + indices.shape + x.shape[axis+1:]`.
pub fn take_out_shape(x: &[usize], indices: &[usize], axis: isize) -> Result<Vec<usize>, KernelArgError> {
    let ax = normalize_axis("take", axis, x.len())?;
    let mut s = x[..ax].to_vec();
    s.extend(indices);
    s.extend(&x[ax + 1..]);
    Ok(s)
}

/// `out = take(x, indices, axis)`: any dtype for `x` (out has it), integer `indices`
/// (negative ones count from the end; out of range is a kernel fault); `out` must not
/// overlap an input.
pub fn take(
    x: &TensorView,
    indices: &TensorView,
    axis: isize,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let op = "take";
    if !indices.dtype().is_int() {
        return Err(KernelArgError::UnsupportedDType {
            op,
            dtype: indices.dtype(),
            hint: " for indices (use an integer dtype)",
        });
    }
    crate::tensor::check_dtype(op, "x", x, out.dtype())?;
    let ax = normalize_axis(op, axis, x.ndim())?;
    check_out_shape(op, out, &take_out_shape(x.shape(), indices.shape(), axis)?)?;
    check_output(op, out, &[("x", x), ("indices", indices)], false)?;
    let ni = indices.ndim();
    let inner = Strided::new(
        &x.shape()[ax + 1..],
        [&out.strides()[ax + ni..], &x.strides()[ax + 1..]],
    );
    let outer: usize = x.shape()[..ax].iter().product();
    let units = outer * indices.numel();
    let blocks = blocks_for(out.numel(), GRAIN_ELEMENTWISE, cores).min(units.max(1) as u32);
    Ok((
        Arc::new(TakeKernel {
            x: x.clone(),
            idx: indices.clone(),
            out: out.clone(),
            ax,
            inner,
            units,
        }),
        blocks,
    ))
}

struct TakeKernel {
    x: TensorView,
    idx: TensorView,
    out: TensorView,
    ax: usize,
    inner: Strided<2>,
    units: usize,
}

impl TakeKernel {
    fn run<T: Copy, I: Elem>(&self, s: usize, e: usize) -> Result<(), KernelFault> {
        let (ax, ni) = (self.ax, self.idx.ndim());
        let (xs, os, is) = (self.x.strides(), self.out.strides(), self.idx.strides());
        let n_ax = self.x.shape()[ax] as i64;
        let nidx = self.idx.numel();
        let mut oi: SmallVec<[usize; 6]> = SmallVec::from_elem(0, ax);
        let mut ii: SmallVec<[usize; 6]> = SmallVec::from_elem(0, ni);
        let [so, sx] = self.inner.inner_strides();
        for u in s..e {
            let (o, j) = (u / nidx, u % nidx);
            super::unravel(o, &self.x.shape()[..ax], &mut oi);
            super::unravel(j, self.idx.shape(), &mut ii);
            let ioff: isize = ii.iter().zip(is).map(|(&i, &st)| i as isize * st).sum();
            // SAFETY: ii is inside the indices' shape, so the element is addressed by that
            // view (contract); only read.
            let raw = unsafe { (self.idx.ptr::<I>() as *const I).wrapping_offset(ioff).read() }.to_i64();
            let v = if raw < 0 { raw + n_ax } else { raw };
            if v < 0 || v >= n_ax {
                return Err(KernelFault(format!(
                    "take: index {raw} is out of bounds for axis {ax} with size {n_ax}"
                )));
            }
            let mut xoff = v as isize * xs[ax];
            let mut ooff = 0isize;
            for d in 0..ax {
                xoff += oi[d] as isize * xs[d];
                ooff += oi[d] as isize * os[d];
            }
            for d in 0..ni {
                ooff += ii[d] as isize * os[ax + d];
            }
            let (po, px) = (self.out.ptr::<T>().wrapping_offset(ooff), self.x.ptr::<T>() as *const T);
            let px = px.wrapping_offset(xoff);
            for (off, n) in self.inner.runs(0, self.inner.numel()) {
                // SAFETY: the unit's slice of out and the selected slice of x (v is in
                // range, checked above) lie inside their views (contract); out overlaps no
                // input (check_output); units write disjoint slices of out.
                unsafe { copy_run(po.wrapping_offset(off[0]), so, px.wrapping_offset(off[1]), sx, n) }
            }
        }
        Ok(())
    }
}

impl Kernel for TakeKernel {
    fn name(&self) -> &str {
        "take"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = blk.split(self.units);
        if s >= e || self.inner.numel() == 0 {
            return Ok(());
        }
        let it = self.idx.dtype();
        by_size!(self.out.dtype().itemsize(), T => dispatch_dtype!(it, I => self.run::<T, I>(s, e)))
    }
}

/// ONNX `Range`'s length, `max(ceil((stop - start) / step), 0)` (exact for integers);
/// a zero step is an error.
pub fn arange_len(start: Scalar, stop: Scalar, step: Scalar) -> Result<usize, KernelArgError> {
    let f = |s: Scalar| match s {
        Scalar::Float(v) => Some(v),
        _ => None,
    };
    let i = |s: Scalar| match s {
        Scalar::Int(v) => v as i128,
        Scalar::Bool(b) => b as i128,
        Scalar::Float(v) => v as i128,
    };
    let zero = match step {
        Scalar::Float(v) => v == 0.0 || !v.is_finite(),
        s => i(s) == 0,
    };
    if zero {
        return Err(KernelArgError::Invalid {
            op: "arange",
            detail: format!("step must be a finite non-zero number, got {step:?}"),
        });
    }
    let n = if f(start).is_some() || f(stop).is_some() || f(step).is_some() {
        let g = |s: Scalar| f(s).unwrap_or(i(s) as f64);
        let n = ((g(stop) - g(start)) / g(step)).ceil();
        if !n.is_finite() {
            return Err(KernelArgError::Invalid {
                op: "arange",
                detail: "the range is not finite".into(),
            });
        }
        n.max(0.0) as i128
    } else {
        let (a, b, st) = (i(start), i(stop), i(step));
        let d = b - a;
        (if (d > 0) == (st > 0) && d != 0 {
            (d.abs() + st.abs() - 1) / st.abs()
        } else {
            0
        })
        .max(0)
    };
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| KernelArgError::Invalid {
            op: "arange",
            detail: format!("{n} elements are too many"),
        })
}

/// `out[i] = start + i·step` (computed in f64 for floats, i64 for integers, then stored as
/// out's dtype); `out` is 1-D.
pub fn arange(start: Scalar, step: Scalar, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    if out.ndim() != 1 {
        return Err(KernelArgError::Rank {
            op: "arange",
            what: "out",
            expected: "1",
            got: out.ndim(),
        });
    }
    if out.dtype() == DType::Bool {
        return Err(KernelArgError::UnsupportedDType {
            op: "arange",
            dtype: DType::Bool,
            hint: "",
        });
    }
    start.check_for("arange", out.dtype())?;
    step.check_for("arange", out.dtype())?;
    check_output("arange", out, &[], false)?;
    let blocks = blocks_for(out.numel(), GRAIN_ELEMENTWISE, cores);
    Ok((
        Arc::new(ArangeKernel {
            start,
            step,
            out: out.clone(),
        }),
        blocks,
    ))
}

struct ArangeKernel {
    start: Scalar,
    step: Scalar,
    out: TensorView,
}

impl ArangeKernel {
    fn run<T: Elem>(&self, s: usize, e: usize) {
        let st = self.out.strides()[0];
        let p = self.out.ptr::<T>();
        let as_f = |v: Scalar| match v {
            Scalar::Float(f) => f,
            Scalar::Int(i) => i as f64,
            Scalar::Bool(b) => b as i64 as f64,
        };
        let as_i = |v: Scalar| match v {
            Scalar::Float(f) => f as i64,
            Scalar::Int(i) => i,
            Scalar::Bool(b) => b as i64,
        };
        for i in s..e {
            let v = if T::DTYPE.is_float() {
                T::from_f64(as_f(self.start) + i as f64 * as_f(self.step))
            } else {
                T::from_i64(as_i(self.start).wrapping_add((i as i64).wrapping_mul(as_i(self.step))))
            };
            // SAFETY: i < out's length, so the element is addressed by out (contract); blocks
            // own disjoint ranges.
            unsafe { p.wrapping_offset(i as isize * st).write(v) }
        }
    }
}

impl Kernel for ArangeKernel {
    fn name(&self) -> &str {
        "arange"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = split_aligned(blk, self.out.numel(), 16);
        dispatch_dtype!(self.out.dtype(), T => self.run::<T>(s, e));
        Ok(())
    }
}
