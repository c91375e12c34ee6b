//! ONNX `TopK`: the `k` largest (or smallest) elements along an axis and their int64
//! indices, sorted (ties: the lower index first; NaN counts as the largest value).
//! Blocks own whole rows.

use crate::tensor::{check_dtype, check_output, normalize_axis};
use crate::{dispatch_dtype, DType, Elem, KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use smallvec::SmallVec;
use std::cmp::Ordering;
use std::sync::Arc;

/// `values, indices = topk(x, k, axis)`: `values` has x's dtype and shape with `k` on
/// `axis`, `indices` that shape and int64; neither may overlap `x` or each other.
pub fn topk(
    x: &TensorView,
    k: usize,
    axis: isize,
    largest: bool,
    values: &TensorView,
    indices: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let op = "topk";
    if x.dtype() == DType::Bool {
        return Err(KernelArgError::UnsupportedDType {
            op,
            dtype: DType::Bool,
            hint: "",
        });
    }
    check_dtype(op, "values", values, x.dtype())?;
    check_dtype(op, "indices", indices, DType::I64)?;
    let ax = normalize_axis(op, axis, x.ndim())?;
    if k > x.shape()[ax] {
        return Err(KernelArgError::Invalid {
            op,
            detail: format!("k={k} is larger than axis {ax}'s size {}", x.shape()[ax]),
        });
    }
    let mut shape = x.shape().to_vec();
    shape[ax] = k;
    for (what, t) in [("values", values), ("indices", indices)] {
        if t.shape() != shape.as_slice() {
            return Err(KernelArgError::OutputShape {
                op,
                expected: shape,
                got: t.shape().to_vec(),
            });
        }
        let _ = what;
    }
    check_output(op, values, &[("x", x), ("indices", indices)], false)?;
    check_output(op, indices, &[("x", x)], false)?;
    let rows = if x.shape()[ax] == 0 {
        0
    } else {
        x.numel() / x.shape()[ax]
    };
    let blocks = crate::plan::blocks_for(x.numel(), 1 << 15, cores).min(rows.max(1) as u32);
    Ok((
        Arc::new(TopKKernel {
            x: x.clone(),
            values: values.clone(),
            indices: indices.clone(),
            ax,
            k,
            largest,
            rows,
        }),
        blocks,
    ))
}

struct TopKKernel {
    x: TensorView,
    values: TensorView,
    indices: TensorView,
    ax: usize,
    k: usize,
    largest: bool,
    rows: usize,
}

/// Total order of the keys: NaN above everything, then by value.
fn key_cmp<T: Elem>(a: T, b: T) -> Ordering {
    if T::DTYPE.is_float() {
        let (a, b) = (a.to_f64(), b.to_f64());
        match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        }
    } else {
        a.to_i64().cmp(&b.to_i64())
    }
}

impl TopKKernel {
    fn run<T: Elem>(&self, s: usize, e: usize) {
        let nd = self.x.ndim();
        let n = self.x.shape()[self.ax];
        let mut rest: SmallVec<[usize; 6]> = self.x.shape().into();
        rest.remove(self.ax);
        let mut idx: SmallVec<[usize; 6]> = SmallVec::from_elem(0, nd - 1);
        let (xs, vs, is) = (self.x.strides(), self.values.strides(), self.indices.strides());
        let mut row: Vec<(T, usize)> = Vec::with_capacity(n);
        for r in s..e {
            super::unravel(r, &rest, &mut idx);
            let (mut xo, mut vo, mut io) = (0isize, 0isize, 0isize);
            for (j, d) in (0..nd).filter(|&d| d != self.ax).enumerate() {
                xo += idx[j] as isize * xs[d];
                vo += idx[j] as isize * vs[d];
                io += idx[j] as isize * is[d];
            }
            let px = (self.x.ptr::<T>() as *const T).wrapping_offset(xo);
            row.clear();
            // SAFETY: the row's elements are inside x's shape (contract); only read.
            row.extend((0..n).map(|i| (unsafe { px.wrapping_offset(i as isize * xs[self.ax]).read() }, i)));
            let largest = self.largest;
            let cmp = |a: &(T, usize), b: &(T, usize)| {
                let c = key_cmp(a.0, b.0);
                (if largest { c.reverse() } else { c }).then(a.1.cmp(&b.1))
            };
            if self.k < n && self.k > 0 {
                row.select_nth_unstable_by(self.k - 1, cmp);
            }
            row.truncate(self.k);
            row.sort_unstable_by(cmp);
            let (pv, pi) = (self.values.ptr::<T>(), self.indices.ptr::<i64>());
            for (j, &(v, i)) in row.iter().enumerate() {
                // SAFETY: j < k, inside both outputs' shapes; outputs overlap neither x nor
                // each other (check_output); blocks own disjoint rows.
                unsafe {
                    pv.wrapping_offset(vo + j as isize * vs[self.ax]).write(v);
                    pi.wrapping_offset(io + j as isize * is[self.ax]).write(i as i64);
                }
            }
        }
    }
}

impl Kernel for TopKKernel {
    fn name(&self) -> &str {
        "topk"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = blk.split(self.rows);
        if s < e {
            dispatch_dtype!(self.x.dtype(), T => self.run::<T>(s, e));
        }
        Ok(())
    }
}
