//! The matmul kernel: each unit of the grid is one tile of the output, computed by one
//! single-threaded `gemm` call (the executor owns the threads; the crate is built without
//! rayon, so `Parallelism::None` is the only mode and nothing spawns threads).
//!
//! The `gemm` crate computes `dst = s·dst + t·lhs@rhs` (`s` read only with `read_dst`):
//! gemm's `beta` is `s` (C = `out` is scaled in place by the crate, a separate C is first
//! copied into the tile), its `alpha` is `t`, and the bias is added to the tile right after
//! (an epilogue while the tile is in cache). f16/bf16 tiles go through f32 copies kept in a
//! per-thread scratch buffer (one per AI-core worker, reused by every launch).

use super::grid::Grid;
use super::GemmArgs;
use crate::{dispatch_dtype, DType, Elem, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::cell::RefCell;

pub(super) struct MatmulKernel {
    /// op(a) as [Ba, M, K].
    pub(super) a: TensorView,
    /// op(b) as [Bb, K, N].
    pub(super) b: TensorView,
    /// C when it is not `out` itself, [B, M, N] (broadcast); `None` with `beta != 0` means
    /// C is `out`.
    pub(super) c: Option<TensorView>,
    pub(super) bias: Option<TensorView>,
    /// [B, M, N].
    pub(super) out: TensorView,
    pub(super) args: GemmArgs,
    pub(super) grid: Grid,
}

/// A strided matrix: pointer to element (0, 0), row stride, column stride (elements).
#[derive(Clone, Copy)]
struct Mat<T> {
    p: *mut T,
    rs: isize,
    cs: isize,
}

impl<T: Copy> Mat<T> {
    fn at(&self, i: usize, j: usize) -> *mut T {
        self.p.wrapping_offset(i as isize * self.rs + j as isize * self.cs)
    }
}

thread_local! {
    /// f32 copies of half-precision tiles (op(a) rows, op(b) columns, the result): one
    /// buffer per worker thread, grown to the largest tile seen, never shrunk.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// [`super::micro::gemm_f32`] on strided matrices: `dst = s·dst + t·lhs@rhs` (`dst` read
/// only when `read_dst`).
///
/// # Safety
/// The three strided matrices must be valid (dst for writes) for their `m×k`, `k×n`, `m×n`
/// extents, and dst must overlap neither lhs nor rhs.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_f32(
    m: usize,
    n: usize,
    k: usize,
    dst: Mat<f32>,
    read_dst: bool,
    s: f32,
    lhs: Mat<f32>,
    rhs: Mat<f32>,
    t: f32,
) {
    // SAFETY: forwarded to the caller.
    unsafe {
        super::micro::gemm_f32(
            (m, n, k),
            (dst.p, dst.rs, dst.cs),
            read_dst,
            s,
            (lhs.p as *const f32, lhs.rs, lhs.cs),
            (rhs.p as *const f32, rhs.rs, rhs.cs),
            t,
        )
    }
}

impl MatmulKernel {
    /// Matrix `bi` (a batch of 1 broadcasts) of a 3-D view, offset to (r0, c0).
    fn mat<T>(t: &TensorView, bi: usize, r0: usize, c0: usize) -> Mat<T> {
        let s = t.strides();
        let bi = if t.shape()[0] == 1 { 0 } else { bi };
        Mat {
            p: t.ptr::<T>()
                .wrapping_offset(bi as isize * s[0] + r0 as isize * s[1] + c0 as isize * s[2]),
            rs: s[1],
            cs: s[2],
        }
    }

    /// The output tile at rows `r0..`, columns `c0..` of matrix `bi`, with the op(a) rows and
    /// op(b) columns it needs: `[out, a, b]`.
    fn operands<T>(&self, bi: usize, r0: usize, c0: usize) -> [Mat<T>; 3] {
        [
            Self::mat::<T>(&self.out, bi, r0, c0),
            Self::mat::<T>(&self.a, bi, r0, 0),
            Self::mat::<T>(&self.b, bi, 0, c0),
        ]
    }

    /// Bias element `j` (absolute column), as f32.
    fn bias_at<T: Elem>(bias: &TensorView, j: usize) -> f32 {
        let p = bias.ptr::<T>() as *const T;
        // SAFETY: j < N = the bias length (checked at construction); the element is
        // addressed by the bias view (contract) and only read.
        unsafe { p.wrapping_offset(j as isize * bias.strides()[0]).read() }.to_f32()
    }

    /// f32 tile straight into `out`.
    fn tile_f32(&self, bi: usize, (r0, r1): (usize, usize), (c0, c1): (usize, usize)) {
        let (m, n, k) = (r1 - r0, c1 - c0, self.a.shape()[2]);
        let [o, a, b] = self.operands::<f32>(bi, r0, c0);
        let (alpha, beta) = (self.args.alpha as f32, self.args.beta as f32);
        let read_c = beta != 0.0;
        if let (true, Some(c)) = (read_c, &self.c) {
            let c = Self::mat::<f32>(c, bi, r0, c0);
            for i in 0..m {
                for j in 0..n {
                    // SAFETY: (i, j) is inside the tile, so both elements are addressed by
                    // their views (contract); out overlaps no input (check_output); blocks
                    // own disjoint tiles of out.
                    unsafe { o.at(i, j).write(c.at(i, j).read()) }
                }
            }
        }
        // SAFETY: the three strided matrices lie within their views (the tile is inside the
        // shapes; the contract makes the memory valid); out overlaps neither op(a) nor op(b)
        // (check_output); blocks own disjoint tiles of out.
        unsafe { gemm_f32(m, n, k, o, read_c, beta, a, b, alpha) };
        if let Some(bias) = &self.bias {
            SCRATCH.with(|scratch| {
                let mut bv = scratch.borrow_mut();
                bv.clear();
                bv.extend((c0..c1).map(|j| Self::bias_at::<f32>(bias, j)));
                for i in 0..m {
                    if o.cs == 1 {
                        // SAFETY: row i of the output tile: n elements at unit stride inside
                        // the out view, owned by this block (as above); no other reference
                        // to them exists while the slice lives.
                        let row = unsafe { std::slice::from_raw_parts_mut(o.at(i, 0), n) };
                        row.iter_mut().zip(bv.iter()).for_each(|(x, b)| *x += b);
                    } else {
                        for (j, b) in bv.iter().enumerate() {
                            // SAFETY: inside the output tile, owned by this block (as above).
                            unsafe { *o.at(i, j) += b }
                        }
                    }
                }
            });
        }
    }

    /// f16/bf16 tile: operands converted to f32 (per-thread scratch), multiplied, rounded
    /// once on the store (with the bias added).
    fn tile_half<T: Elem>(&self, bi: usize, (r0, r1): (usize, usize), (c0, c1): (usize, usize)) {
        let (m, n, k) = (r1 - r0, c1 - c0, self.a.shape()[2]);
        let [o, a, b] = self.operands::<T>(bi, r0, c0);
        let (alpha, beta) = (self.args.alpha as f32, self.args.beta as f32);
        let read_c = beta != 0.0;
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let need = m * k + k * n + m * n + n;
            if scratch.len() < need {
                scratch.resize(need, 0.0);
            }
            let (af, rest) = scratch.split_at_mut(m * k);
            let (bf, rest) = rest.split_at_mut(k * n);
            let (cf, rest) = rest.split_at_mut(m * n);
            let bv = &mut rest[..n];
            let load = |dst: &mut [f32], mt: Mat<T>, rows: usize, cols: usize| {
                for i in 0..rows {
                    for j in 0..cols {
                        // SAFETY: inside the tile / operand (see tile_f32); only read.
                        dst[i * cols + j] = unsafe { mt.at(i, j).read() }.to_f32();
                    }
                }
            };
            load(af, a, m, k);
            load(bf, b, k, n);
            if read_c {
                let src = self.c.as_ref().map(|c| Self::mat::<T>(c, bi, r0, c0)).unwrap_or(o);
                load(cf, src, m, n);
            }
            let row = |p: &mut [f32], cols: usize| Mat {
                p: p.as_mut_ptr(),
                rs: cols as isize,
                cs: 1,
            };
            // SAFETY: three disjoint private buffers of the stated sizes.
            unsafe { gemm_f32(m, n, k, row(cf, n), read_c, beta, row(af, k), row(bf, n), alpha) };
            for (j, x) in bv.iter_mut().enumerate() {
                *x = self.bias.as_ref().map_or(0.0, |bias| Self::bias_at::<T>(bias, c0 + j));
            }
            for i in 0..m {
                for (j, &bj) in bv.iter().enumerate() {
                    // SAFETY: inside the output tile, owned by this block (see tile_f32).
                    unsafe { o.at(i, j).write(T::from_f32(cf[i * n + j] + bj)) }
                }
            }
        });
    }

    /// Integer tile: i64 accumulation (wrapping), row by row.
    fn tile_int<T: Elem>(&self, bi: usize, (r0, r1): (usize, usize), (c0, c1): (usize, usize)) {
        let (m, n, k) = (r1 - r0, c1 - c0, self.a.shape()[2]);
        let [o, a, b] = self.operands::<T>(bi, r0, c0);
        let (alpha, beta) = (self.args.alpha as i64, self.args.beta as i64);
        let bias: Option<Vec<i64>> = self.bias.as_ref().map(|bv| {
            let p = bv.ptr::<T>() as *const T;
            let s = bv.strides()[0];
            // SAFETY: bias elements addressed by its view; only read.
            (c0..c1)
                .map(|j| unsafe { p.wrapping_offset(j as isize * s).read() }.to_i64())
                .collect()
        });
        let src = self.c.as_ref().map(|c| Self::mat::<T>(c, bi, r0, c0)).unwrap_or(o);
        let mut row = vec![0i64; n];
        for i in 0..m {
            row.fill(0);
            for kk in 0..k {
                // SAFETY: inside op(a) / op(b) (see tile_f32); only read.
                let av = unsafe { a.at(i, kk).read() }.to_i64();
                for (j, r) in row.iter_mut().enumerate() {
                    // SAFETY: as above.
                    *r = r.wrapping_add(av.wrapping_mul(unsafe { b.at(kk, j).read() }.to_i64()));
                }
            }
            for (j, &r) in row.iter().enumerate() {
                let mut v = alpha.wrapping_mul(r);
                if beta != 0 {
                    // SAFETY: inside the tile of C.
                    v = v.wrapping_add(beta.wrapping_mul(unsafe { src.at(i, j).read() }.to_i64()));
                }
                if let Some(bias) = &bias {
                    v = v.wrapping_add(bias[j]);
                }
                // SAFETY: inside the output tile, owned by this block.
                unsafe { o.at(i, j).write(T::from_i64(v)) }
            }
        }
    }
}

impl Kernel for MatmulKernel {
    fn name(&self) -> &str {
        "matmul"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = blk.split(self.grid.units());
        for u in s..e {
            let (bi, rows, cols) = self.grid.tile(u);
            if rows.0 >= rows.1 || cols.0 >= cols.1 {
                continue;
            }
            match self.out.dtype() {
                DType::F32 => self.tile_f32(bi, rows, cols),
                DType::F16 => self.tile_half::<half::f16>(bi, rows, cols),
                DType::BF16 => self.tile_half::<half::bf16>(bi, rows, cols),
                d => dispatch_dtype!(d, T => self.tile_int::<T>(bi, rows, cols)),
            }
        }
        Ok(())
    }
}
