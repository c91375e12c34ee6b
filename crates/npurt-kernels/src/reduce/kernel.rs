//! Running a planned reduction: contiguous runs in 8 lanes, strided runs in row-major
//! order, columns of outputs advanced together, and chunked reductions merged in order by
//! the block that finishes last.

use super::accum::*;
use super::{ReduceKernel, ReduceOp, CHUNK};
use crate::{dispatch_dtype, Elem};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::atomic::Ordering;

const LANES: usize = 8;
/// Outputs advanced together on the column path.
const COLS: usize = 64;

/// Reduces a contiguous run: 8 interleaved lanes, merged by a fixed tree.
#[inline(always)]
fn reduce_contig<T: Elem, R: Red<T>>(r: R, xs: &[T], base: usize) -> R::Acc {
    let mut acc = [r.init(); LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for (ci, c) in chunks.enumerate() {
        for j in 0..LANES {
            acc[j] = r.step(acc[j], c[j], base + ci * LANES + j);
        }
    }
    let t0 = xs.len() - tail.len();
    for (j, &v) in tail.iter().enumerate() {
        acc[j] = r.step(acc[j], v, base + t0 + j);
    }
    let m = |a, b| r.merge(a, b);
    m(
        m(m(acc[0], acc[1]), m(acc[2], acc[3])),
        m(m(acc[4], acc[5]), m(acc[6], acc[7])),
    )
}

impl ReduceKernel {
    /// Reduces elements `[s, e)` (row-major over the reduced dims) of the output whose x
    /// offset is `xoff`; indices count from `s`'s position in the whole reduction.
    #[inline(always)]
    fn reduce_range<T: Elem, R: Red<T>>(&self, r: R, xoff: isize, s: usize, e: usize) -> R::Acc {
        let px = self.x.ptr::<T>() as *const T;
        let [rs] = self.inner.inner_strides();
        let mut acc = r.init();
        let mut idx = s;
        for (off, n) in self.inner.runs(s, e) {
            let p = px.wrapping_offset(xoff + off[0]);
            let part = if rs == 1 {
                // SAFETY: n contiguous elements addressed by x (contract); x is only read
                // while this kernel runs (it does not overlap the output).
                let xs = unsafe { std::slice::from_raw_parts(p, n) };
                reduce_contig(r, xs, idx)
            } else {
                let mut a = r.init();
                for i in 0..n {
                    // SAFETY: element i of the run is addressed by x (contract).
                    a = r.step(a, unsafe { p.wrapping_offset(i as isize * rs).read() }, idx + i);
                }
                a
            };
            acc = r.merge(acc, part);
            idx += n;
        }
        acc
    }

    #[inline(always)]
    fn write<O: Elem>(&self, ooff: isize, v: Val) {
        // SAFETY: the output element is addressed by out (contract), written by exactly
        // one block (units are disjoint; the merge runs in one block), and out overlaps no
        // input.
        unsafe { self.out.ptr::<O>().wrapping_offset(ooff).write(v.to::<O>()) }
    }

    /// [`ReduceKernel::run`] on the reduce family's ISA path.
    /// Sums and means along contiguous runs take the family's path; max/min/argmax and the
    /// column path run the portable code (their vector copies measured slower).
    fn run_best<T: Elem, R: Red<T>>(&self, r: R, blk: BlockCtx) {
        let [rs] = self.inner.inner_strides();
        let sum = matches!(self.op, ReduceOp::Sum | ReduceOp::Mean);
        let level = if sum && rs == 1 {
            crate::isa::path(crate::isa::Family::Reduce)
        } else {
            crate::isa::Isa::Scalar
        };
        crate::isa::isa_call!(level, ReduceKernel, self, run::<T: Elem, R: Red<T>>(r: R, blk: BlockCtx))
    }

    #[inline(always)]
    fn run<T: Elem, R: Red<T>>(&self, r: R, blk: BlockCtx) {
        let outputs = self.outer.numel();
        let (s, e) = blk.split(outputs * self.nchunks);
        let odt = self.out.dtype();
        if self.nchunks == 1 {
            if s >= e {
                return;
            }
            let [_, xi] = self.outer.inner_strides();
            let [rs] = self.inner.inner_strides();
            let columns = rs != 1 && xi == 1 && self.len > 0;
            let one_run = rs == 1 && self.inner.dims().0.len() == 1;
            for (off, n) in self.outer.runs(s, e) {
                let [oi, xi] = self.outer.inner_strides();
                if columns {
                    self.columns::<T, R>(r, off, oi, n);
                } else if one_run {
                    // Each output's elements are one contiguous run (a global pool's plane):
                    // no run iteration per output, the output dtype matched once per run.
                    let px = self.x.ptr::<T>() as *const T;
                    dispatch_dtype!(odt, O => for j in 0..n as isize {
                        // SAFETY: the output's len elements are contiguous from this offset,
                        // addressed by x (contract); x is only read while this kernel runs.
                        let xs = unsafe { std::slice::from_raw_parts(px.wrapping_offset(off[1] + j * xi), self.len) };
                        self.write::<O>(off[0] + j * oi, r.finish(reduce_contig(r, xs, 0), self.len));
                    });
                } else {
                    for j in 0..n as isize {
                        let acc = self.reduce_range::<T, R>(r, off[1] + j * xi, 0, self.len);
                        dispatch_dtype!(odt, O => self.write::<O>(off[0] + j * oi, r.finish(acc, self.len)));
                    }
                }
            }
            return;
        }
        // Split mode: unit u = (output u / nchunks, chunk u % nchunks).
        // Each unit's slot is written by the one block owning it; the AcqRel count below
        // makes every block's stores visible to the last block.
        let nc = self.nchunks;
        for u in s..e {
            let (o, c) = (u / nc, u % nc);
            let mut xoff = 0;
            self.outer.for_each_run(o, o + 1, |off, _| xoff = off[1]);
            let (cs, ce) = (c * CHUNK, ((c + 1) * CHUNK).min(self.len));
            let (lo, hi) = R::pack(self.reduce_range::<T, R>(r, xoff, cs, ce));
            self.partials[u][0].store(lo, Ordering::Relaxed);
            self.partials[u][1].store(hi, Ordering::Relaxed);
        }
        // The last block of the launch merges the chunks in order and writes the outputs.
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 == blk.block_dim.max(1) {
            self.done.store(0, Ordering::Relaxed);
            let partial = |u: usize| {
                let [lo, hi] = &self.partials[u];
                R::unpack((lo.load(Ordering::Relaxed), hi.load(Ordering::Relaxed)))
            };
            for o in 0..outputs {
                let mut ooff = 0;
                self.outer.for_each_run(o, o + 1, |off, _| ooff = off[0]);
                let mut acc = partial(o * nc);
                for c in 1..nc {
                    acc = r.merge(acc, partial(o * nc + c));
                }
                dispatch_dtype!(odt, O => self.write::<O>(ooff, r.finish(acc, self.len)));
            }
        }
    }

    /// Column path: `n` outputs contiguous in x (stride 1) reduced together, each in the
    /// row-major order of the reduced dims.
    #[inline(always)]
    fn columns<T: Elem, R: Red<T>>(&self, r: R, off: [isize; 2], oi: isize, n: usize) {
        let px = self.x.ptr::<T>() as *const T;
        let [rs] = self.inner.inner_strides();
        let odt = self.out.dtype();
        for c0 in (0..n).step_by(COLS) {
            let w = COLS.min(n - c0);
            let mut acc = [r.init(); COLS];
            let mut idx = 0usize;
            let base = off[1] + c0 as isize;
            for (roff, m) in self.inner.runs(0, self.len) {
                for i in 0..m {
                    let row = px.wrapping_offset(base + roff[0] + i as isize * rs);
                    // SAFETY: w elements contiguous in x starting at this reduced index
                    // (the outputs' x stride is 1), addressed by x (contract).
                    let xs = unsafe { std::slice::from_raw_parts(row, w) };
                    for (a, &v) in acc[..w].iter_mut().zip(xs) {
                        *a = r.step(*a, v, idx);
                    }
                    idx += 1;
                }
            }
            for (j, &a) in acc[..w].iter().enumerate() {
                dispatch_dtype!(odt, O => self.write::<O>(off[0] + (c0 + j) as isize * oi, r.finish(a, self.len)));
            }
        }
    }
}

impl Kernel for ReduceKernel {
    fn name(&self) -> &str {
        self.op.name()
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let float = self.x.dtype().is_float();
        let mean = self.op == ReduceOp::Mean;
        dispatch_dtype!(self.x.dtype(), T => match (self.op, float) {
            (ReduceOp::Sum | ReduceOp::Mean, true) => self.run_best::<T, _>(SumF { mean }, blk),
            (ReduceOp::Sum | ReduceOp::Mean, false) => self.run_best::<T, _>(SumI { mean }, blk),
            (ReduceOp::Max, true) => self.run_best::<T, _>(ExtF::<true>, blk),
            (ReduceOp::Max, false) => self.run_best::<T, _>(ExtI::<true>, blk),
            (ReduceOp::Min, true) => self.run_best::<T, _>(ExtF::<false>, blk),
            (ReduceOp::Min, false) => self.run_best::<T, _>(ExtI::<false>, blk),
            (ReduceOp::Argmax, true) => self.run_best::<T, _>(ArgF, blk),
            (ReduceOp::Argmax, false) => self.run_best::<T, _>(ArgI, blk),
        });
        Ok(())
    }
}
