//! Reductions along axes (or all): sum, mean, max, min, argmax.
//!
//! Order (so results are deterministic and independent of the block count): each output
//! element reduces its elements in a fixed order decided by the layout alone. A contiguous
//! run is split into 8 interleaved lanes merged by a fixed tree; otherwise elements are
//! taken in row-major order of the reduced dims (when the reduced axis is strided but the
//! outputs are contiguous in `x`, several outputs advance together in that same order).
//! A long reduction with few outputs is split into chunks of fixed size (shape-determined);
//! each block reduces whole chunks and the block that finishes last merges the chunks in
//! order. Float sums accumulate in f64, integer sums in i64 (wrapping).

use crate::layout::Strided;
use crate::plan::{blocks_for, GRAIN_ELEMENTWISE};
use crate::tensor::{check_output, normalize_axis};
use crate::{dispatch_dtype, DType, Elem, KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Reduction operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum; the output may be any non-bool dtype (numpy's `sum(dtype=...)`); accumulates
    /// in f64 for float inputs and i64 for integer/bool inputs.
    Sum,
    /// Mean; float output; NaN for an empty reduction.
    Mean,
    /// Maximum (NaN propagates); output dtype = input dtype; error on an empty reduction.
    Max,
    /// Minimum (NaN propagates); output dtype = input dtype; error on an empty reduction.
    Min,
    /// Index of the first maximum (of the first NaN if any), int64 or int32 output; over
    /// all axes it indexes the row-major flattened tensor. One axis or all.
    Argmax,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Argmax,
    ];
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Argmax => "argmax",
        }
    }
}

/// Elements per chunk when a long reduction is split across blocks.
const CHUNK: usize = 1 << 15;
/// Reductions with fewer outputs than this are split into chunks (if long enough).
const SPLIT_BELOW_OUTPUTS: usize = 16;

/// The reduced dims (sorted, unique) for `axes` (`None` = all).
fn reduced_dims(op: &'static str, ndim: usize, axes: Option<&[isize]>) -> Result<Vec<bool>, KernelArgError> {
    let mut red = vec![axes.is_none(); ndim];
    if let Some(axes) = axes {
        for &a in axes {
            let d = normalize_axis(op, a, ndim)?;
            if std::mem::replace(&mut red[d], true) {
                return Err(KernelArgError::Invalid {
                    op,
                    detail: format!("duplicate axis {a}"),
                });
            }
        }
    }
    Ok(red)
}

/// The output shape of reducing `shape` over `axes` (`None` = all), numpy's rules.
pub fn reduce_out_shape(shape: &[usize], axes: Option<&[isize]>, keepdims: bool) -> Result<Vec<usize>, KernelArgError> {
    let red = reduced_dims("reduce", shape.len(), axes)?;
    Ok(shape
        .iter()
        .zip(&red)
        .filter_map(|(&n, &r)| if r { keepdims.then_some(1) } else { Some(n) })
        .collect())
}

/// `out = op(x, axis=axes)`. `axes`: `None` reduces everything; several axes are allowed
/// except for argmax. `out` has the reduced shape, with or without the reduced dims kept
/// as 1 (`keepdims`). Dtypes: see [`ReduceOp`]. `out` must not overlap `x`.
pub fn reduce(
    op: ReduceOp,
    x: &TensorView,
    axes: Option<&[isize]>,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let name = op.name();
    let red = reduced_dims(name, x.ndim(), axes)?;
    if op == ReduceOp::Argmax && axes.is_some_and(|a| a.len() != 1) {
        return Err(KernelArgError::Invalid {
            op: name,
            detail: "argmax takes one axis or None".into(),
        });
    }
    let odt = out.dtype();
    let dt_ok = match op {
        ReduceOp::Sum => odt != DType::Bool,
        ReduceOp::Mean => odt.is_float(),
        ReduceOp::Max | ReduceOp::Min => odt == x.dtype(),
        ReduceOp::Argmax => matches!(odt, DType::I64 | DType::I32),
    };
    if !dt_ok {
        let expected = match op {
            ReduceOp::Max | ReduceOp::Min => x.dtype(),
            ReduceOp::Argmax => DType::I64,
            _ => DType::F32,
        };
        return Err(KernelArgError::DTypeMismatch {
            op: name,
            what: "out",
            expected,
            got: odt,
        });
    }
    let kept: Vec<usize> = (0..x.ndim()).filter(|&d| !red[d]).collect();
    let rdims: Vec<usize> = (0..x.ndim()).filter(|&d| red[d]).collect();
    let short: Vec<usize> = kept.iter().map(|&d| x.shape()[d]).collect();
    let long: Vec<usize> = (0..x.ndim()).map(|d| if red[d] { 1 } else { x.shape()[d] }).collect();
    let out_strides: Vec<isize> = if out.shape() == short.as_slice() {
        out.strides().to_vec()
    } else if out.shape() == long.as_slice() {
        kept.iter().map(|&d| out.strides()[d]).collect()
    } else {
        return Err(KernelArgError::OutputShape {
            op: name,
            expected: short,
            got: out.shape().to_vec(),
        });
    };
    let len: usize = rdims.iter().map(|&d| x.shape()[d]).product();
    if len == 0 && matches!(op, ReduceOp::Max | ReduceOp::Min | ReduceOp::Argmax) {
        return Err(KernelArgError::EmptyReduction { op: name });
    }
    check_output(name, out, &[("x", x)], false)?;
    let x_kept: Vec<isize> = kept.iter().map(|&d| x.strides()[d]).collect();
    let outer = Strided::new(&short, [out_strides.as_slice(), x_kept.as_slice()]);
    let rshape: Vec<usize> = rdims.iter().map(|&d| x.shape()[d]).collect();
    let rstrides: Vec<isize> = rdims.iter().map(|&d| x.strides()[d]).collect();
    let inner = Strided::new(&rshape, [rstrides.as_slice()]);
    let outputs = outer.numel();
    let nchunks = if outputs < SPLIT_BELOW_OUTPUTS && len >= 2 * CHUNK {
        len.div_ceil(CHUNK)
    } else {
        1
    };
    let units = outputs * nchunks;
    let blocks = blocks_for(outputs.saturating_mul(len.max(1)), GRAIN_ELEMENTWISE, cores).min(units.max(1) as u32);
    let k = ReduceKernel {
        op,
        x: x.clone(),
        out: out.clone(),
        outer,
        inner,
        len,
        nchunks,
        partials: Mutex::new(vec![(0, 0); if nchunks > 1 { units } else { 0 }]),
        done: AtomicU32::new(0),
    };
    Ok((Arc::new(k), blocks))
}

struct ReduceKernel {
    op: ReduceOp,
    x: TensorView,
    out: TensorView,
    /// Output index space: [out strides, x strides].
    outer: Strided<2>,
    /// Reduced dims: x strides.
    inner: Strided<1>,
    len: usize,
    nchunks: usize,
    /// Per (output, chunk) packed accumulators when split.
    partials: Mutex<Vec<(u64, u64)>>,
    /// Blocks of the current launch that finished (split mode).
    done: AtomicU32,
}

/// A result to store: converted to the output dtype with numpy's cast rules.
#[derive(Clone, Copy)]
enum Val {
    F(f64),
    I(i64),
}

impl Val {
    #[inline(always)]
    fn to<O: Elem>(self) -> O {
        match self {
            Val::F(v) => O::from_f64(v),
            Val::I(v) => O::from_i64(v),
        }
    }
}

trait Red<T: Elem>: Copy {
    type Acc: Copy;
    fn init(self) -> Self::Acc;
    fn step(self, a: Self::Acc, x: T, i: usize) -> Self::Acc;
    /// Merges two partial results (of any index sets: order-aware reducers compare indices).
    fn merge(self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn finish(self, a: Self::Acc, len: usize) -> Val;
    fn pack(a: Self::Acc) -> (u64, u64);
    fn unpack(p: (u64, u64)) -> Self::Acc;
}

#[derive(Clone, Copy)]
struct SumF {
    mean: bool,
}
impl<T: Elem> Red<T> for SumF {
    type Acc = f64;
    #[inline(always)]
    fn init(self) -> f64 {
        0.0
    }
    #[inline(always)]
    fn step(self, a: f64, x: T, _: usize) -> f64 {
        a + x.to_f64()
    }
    #[inline(always)]
    fn merge(self, a: f64, b: f64) -> f64 {
        a + b
    }
    fn finish(self, a: f64, len: usize) -> Val {
        Val::F(if self.mean { a / len as f64 } else { a })
    }
    fn pack(a: f64) -> (u64, u64) {
        (a.to_bits(), 0)
    }
    fn unpack(p: (u64, u64)) -> f64 {
        f64::from_bits(p.0)
    }
}

#[derive(Clone, Copy)]
struct SumI {
    mean: bool,
}
impl<T: Elem> Red<T> for SumI {
    type Acc = i64;
    #[inline(always)]
    fn init(self) -> i64 {
        0
    }
    #[inline(always)]
    fn step(self, a: i64, x: T, _: usize) -> i64 {
        a.wrapping_add(x.to_i64())
    }
    #[inline(always)]
    fn merge(self, a: i64, b: i64) -> i64 {
        a.wrapping_add(b)
    }
    fn finish(self, a: i64, len: usize) -> Val {
        if self.mean {
            Val::F(a as f64 / len as f64)
        } else {
            Val::I(a)
        }
    }
    fn pack(a: i64) -> (u64, u64) {
        (a as u64, 0)
    }
    fn unpack(p: (u64, u64)) -> i64 {
        p.0 as i64
    }
}

/// Max (`MAX = true`) or min over floats in f32, NaN propagating.
#[derive(Clone, Copy)]
struct ExtF<const MAX: bool>;
impl<T: Elem, const MAX: bool> Red<T> for ExtF<MAX> {
    type Acc = f32;
    #[inline(always)]
    fn init(self) -> f32 {
        if MAX {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        }
    }
    #[inline(always)]
    fn step(self, a: f32, x: T, _: usize) -> f32 {
        <Self as Red<f32>>::merge(self, a, x.to_f32())
    }
    #[inline(always)]
    fn merge(self, a: f32, b: f32) -> f32 {
        let better = if MAX { b > a } else { b < a };
        if better || b.is_nan() {
            b
        } else {
            a
        }
    }
    fn finish(self, a: f32, _: usize) -> Val {
        Val::F(a as f64)
    }
    fn pack(a: f32) -> (u64, u64) {
        (a.to_bits() as u64, 0)
    }
    fn unpack(p: (u64, u64)) -> f32 {
        f32::from_bits(p.0 as u32)
    }
}

/// Max or min over integers (and bools) in i64.
#[derive(Clone, Copy)]
struct ExtI<const MAX: bool>;
impl<T: Elem, const MAX: bool> Red<T> for ExtI<MAX> {
    type Acc = i64;
    #[inline(always)]
    fn init(self) -> i64 {
        if MAX {
            i64::MIN
        } else {
            i64::MAX
        }
    }
    #[inline(always)]
    fn step(self, a: i64, x: T, _: usize) -> i64 {
        <Self as Red<i64>>::merge(self, a, x.to_i64())
    }
    #[inline(always)]
    fn merge(self, a: i64, b: i64) -> i64 {
        if MAX {
            a.max(b)
        } else {
            a.min(b)
        }
    }
    fn finish(self, a: i64, _: usize) -> Val {
        Val::I(a)
    }
    fn pack(a: i64) -> (u64, u64) {
        (a as u64, 0)
    }
    fn unpack(p: (u64, u64)) -> i64 {
        p.0 as i64
    }
}

const NO_INDEX: usize = usize::MAX;

/// Argmax over floats: (value, index); the first NaN wins, else the first maximum.
#[derive(Clone, Copy)]
struct ArgF;
impl<T: Elem> Red<T> for ArgF {
    type Acc = (f32, usize);
    #[inline(always)]
    fn init(self) -> (f32, usize) {
        (f32::NEG_INFINITY, NO_INDEX)
    }
    #[inline(always)]
    fn step(self, a: (f32, usize), x: T, i: usize) -> (f32, usize) {
        <Self as Red<f32>>::merge(self, a, (x.to_f32(), i))
    }
    #[inline(always)]
    fn merge(self, a: (f32, usize), b: (f32, usize)) -> (f32, usize) {
        if a.1 == NO_INDEX {
            return b;
        }
        if b.1 == NO_INDEX {
            return a;
        }
        let (an, bn) = (a.0.is_nan(), b.0.is_nan());
        let b_wins = match (an, bn) {
            (true, true) => b.1 < a.1,
            (true, false) => false,
            (false, true) => true,
            (false, false) => b.0 > a.0 || (b.0 == a.0 && b.1 < a.1),
        };
        if b_wins {
            b
        } else {
            a
        }
    }
    fn finish(self, a: (f32, usize), _: usize) -> Val {
        Val::I(a.1 as i64)
    }
    fn pack(a: (f32, usize)) -> (u64, u64) {
        (a.0.to_bits() as u64, a.1 as u64)
    }
    fn unpack(p: (u64, u64)) -> (f32, usize) {
        (f32::from_bits(p.0 as u32), p.1 as usize)
    }
}

/// Argmax over integers: the first maximum.
#[derive(Clone, Copy)]
struct ArgI;
impl<T: Elem> Red<T> for ArgI {
    type Acc = (i64, usize);
    #[inline(always)]
    fn init(self) -> (i64, usize) {
        (i64::MIN, NO_INDEX)
    }
    #[inline(always)]
    fn step(self, a: (i64, usize), x: T, i: usize) -> (i64, usize) {
        <Self as Red<i64>>::merge(self, a, (x.to_i64(), i))
    }
    #[inline(always)]
    fn merge(self, a: (i64, usize), b: (i64, usize)) -> (i64, usize) {
        if a.1 == NO_INDEX {
            return b;
        }
        if b.1 == NO_INDEX {
            return a;
        }
        if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) {
            b
        } else {
            a
        }
    }
    fn finish(self, a: (i64, usize), _: usize) -> Val {
        Val::I(a.1 as i64)
    }
    fn pack(a: (i64, usize)) -> (u64, u64) {
        (a.0 as u64, a.1 as u64)
    }
    fn unpack(p: (u64, u64)) -> (i64, usize) {
        (p.0 as i64, p.1 as usize)
    }
}

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
        self.inner.for_each_run(s, e, |off, n| {
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
        });
        acc
    }

    fn write<O: Elem>(&self, ooff: isize, v: Val) {
        // SAFETY: the output element is addressed by out (contract), written by exactly
        // one block (units are disjoint; the merge runs in one block), and out overlaps no
        // input.
        unsafe { self.out.ptr::<O>().wrapping_offset(ooff).write(v.to::<O>()) }
    }

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
            self.outer.for_each_run(s, e, |off, n| {
                let [oi, xi] = self.outer.inner_strides();
                if columns {
                    self.columns::<T, R>(r, off, oi, n);
                } else {
                    for j in 0..n as isize {
                        let acc = self.reduce_range::<T, R>(r, off[1] + j * xi, 0, self.len);
                        dispatch_dtype!(odt, O => self.write::<O>(off[0] + j * oi, r.finish(acc, self.len)));
                    }
                }
            });
            return;
        }
        // Split mode: unit u = (output u / nchunks, chunk u % nchunks).
        let nc = self.nchunks;
        let mut mine = Vec::with_capacity(e.saturating_sub(s));
        for u in s..e {
            let (o, c) = (u / nc, u % nc);
            let mut xoff = 0;
            self.outer.for_each_run(o, o + 1, |off, _| xoff = off[1]);
            let (cs, ce) = (c * CHUNK, ((c + 1) * CHUNK).min(self.len));
            mine.push((u, R::pack(self.reduce_range::<T, R>(r, xoff, cs, ce))));
        }
        {
            let mut p = self.partials.lock().unwrap_or_else(|p| p.into_inner());
            for (u, v) in mine {
                p[u] = v;
            }
        }
        // The last block of the launch merges the chunks in order and writes the outputs.
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 == blk.block_dim.max(1) {
            self.done.store(0, Ordering::Relaxed);
            let p = self.partials.lock().unwrap_or_else(|p| p.into_inner());
            for o in 0..outputs {
                let mut ooff = 0;
                self.outer.for_each_run(o, o + 1, |off, _| ooff = off[0]);
                let mut acc = R::unpack(p[o * nc]);
                for c in 1..nc {
                    acc = r.merge(acc, R::unpack(p[o * nc + c]));
                }
                dispatch_dtype!(odt, O => self.write::<O>(ooff, r.finish(acc, self.len)));
            }
        }
    }

    /// Column path: `n` outputs contiguous in x (stride 1) reduced together, each in the
    /// row-major order of the reduced dims.
    fn columns<T: Elem, R: Red<T>>(&self, r: R, off: [isize; 2], oi: isize, n: usize) {
        let px = self.x.ptr::<T>() as *const T;
        let [rs] = self.inner.inner_strides();
        let odt = self.out.dtype();
        for c0 in (0..n).step_by(COLS) {
            let w = COLS.min(n - c0);
            let mut acc = [r.init(); COLS];
            let mut idx = 0usize;
            let base = off[1] + c0 as isize;
            self.inner.for_each_run(0, self.len, |roff, m| {
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
            });
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
            (ReduceOp::Sum | ReduceOp::Mean, true) => self.run::<T, _>(SumF { mean }, blk),
            (ReduceOp::Sum | ReduceOp::Mean, false) => self.run::<T, _>(SumI { mean }, blk),
            (ReduceOp::Max, true) => self.run::<T, _>(ExtF::<true>, blk),
            (ReduceOp::Max, false) => self.run::<T, _>(ExtI::<true>, blk),
            (ReduceOp::Min, true) => self.run::<T, _>(ExtF::<false>, blk),
            (ReduceOp::Min, false) => self.run::<T, _>(ExtI::<false>, blk),
            (ReduceOp::Argmax, true) => self.run::<T, _>(ArgF, blk),
            (ReduceOp::Argmax, false) => self.run::<T, _>(ArgI, blk),
        });
        Ok(())
    }
}
