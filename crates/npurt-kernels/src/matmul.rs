//! Matrix multiplication (the Cube path): `matmul` and `gemm` over 2-D and 3-D (batched)
//! operands with transpose flags and numpy broadcasting of a batch of 1.
//!
//! The output is cut into a grid of tiles that depends on the shapes only (never on the
//! block count or core count), so each output element is computed by exactly one call of
//! the `gemm` crate (single-threaded: the executor owns the threads) with a fixed
//! summation order: results are bitwise identical whatever the block count. Blocks take
//! contiguous ranges of tiles. f16/bf16 tiles are converted to f32, multiplied in f32 and
//! rounded once; integer matmul accumulates in i64 (wrapping) with a plain loop.

use crate::plan::BLOCKS_PER_CORE;
use crate::tensor::{broadcast_shapes, check_dtype, check_output};
use crate::{dispatch_dtype, DType, Elem, KernelArgError, Launch, Scalar, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::Arc;

/// Flops below which a tile is not split further (≈ 0.1-0.2 ms on one core).
const MIN_TILE_FLOPS: usize = 16 << 20;
/// Tiles of one launch at most (the grid is shape-determined, see the module docs).
const MAX_TILES: usize = 8;
/// Tiles are at least this many rows/columns (except a dimension smaller than it).
const MIN_TILE_DIM: usize = 64;
/// Tile boundaries are multiples of this.
const TILE_ALIGN: usize = 16;

/// Options of [`gemm()`]: `out = alpha * op(a) @ op(b) + beta * C + bias`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmArgs {
    /// op(a) = a with its last two dims swapped.
    pub trans_a: bool,
    /// op(b) = b with its last two dims swapped.
    pub trans_b: bool,
    pub alpha: f64,
    /// Scales C (`c`, or `out`'s previous contents when `c` is `None`); 0 means C is not
    /// read at all (NaNs in it do not propagate).
    pub beta: f64,
}

impl Default for GemmArgs {
    fn default() -> Self {
        GemmArgs {
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 0.0,
        }
    }
}

fn rank_ok(op: &'static str, what: &'static str, t: &TensorView) -> Result<(), KernelArgError> {
    if !(2..=3).contains(&t.ndim()) {
        return Err(KernelArgError::Rank {
            op,
            what,
            expected: "2 or 3",
            got: t.ndim(),
        });
    }
    Ok(())
}

fn op_shape(s: &[usize], t: bool) -> (usize, usize, usize) {
    let n = s.len();
    let batch = if n == 3 { s[0] } else { 1 };
    if t {
        (batch, s[n - 1], s[n - 2])
    } else {
        (batch, s[n - 2], s[n - 1])
    }
}

/// The output shape of `op(a) @ op(b)` for 2-D or 3-D shapes: `[M, N]` when both are 2-D,
/// else `[B, M, N]` (a batch of 1 broadcasts).
pub fn matmul_out_shape(a: &[usize], b: &[usize], trans_a: bool, trans_b: bool) -> Result<Vec<usize>, KernelArgError> {
    let op = "matmul";
    for (what, s) in [("a", a), ("b", b)] {
        if !(2..=3).contains(&s.len()) {
            return Err(KernelArgError::Rank {
                op,
                what,
                expected: "2 or 3",
                got: s.len(),
            });
        }
    }
    let (ba, m, ka) = op_shape(a, trans_a);
    let (bb, kb, n) = op_shape(b, trans_b);
    if ka != kb {
        return Err(KernelArgError::ShapeMismatch {
            op,
            detail: format!(
                "inner dimensions differ: op(a) is {m}x{ka}, op(b) is {kb}x{n} (a {a:?}{}, b {b:?}{})",
                if trans_a { " transposed" } else { "" },
                if trans_b { " transposed" } else { "" }
            ),
        });
    }
    if ba != bb && ba != 1 && bb != 1 {
        return Err(KernelArgError::Broadcast {
            op,
            a: a.to_vec(),
            b: b.to_vec(),
        });
    }
    let batch = if ba == 1 { bb } else { ba };
    Ok(if a.len() == 2 && b.len() == 2 {
        vec![m, n]
    } else {
        vec![batch, m, n]
    })
}

/// `out = op(a) @ op(b)`; see [`gemm()`].
pub fn matmul(
    a: &TensorView,
    b: &TensorView,
    out: &TensorView,
    trans_a: bool,
    trans_b: bool,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    gemm(
        a,
        b,
        None,
        None,
        out,
        GemmArgs {
            trans_a,
            trans_b,
            ..GemmArgs::default()
        },
        cores,
    )
}

/// `out = alpha * op(a) @ op(b) + beta * C + bias`.
///
/// `a`, `b`: 2-D or 3-D of one dtype (float32, float16, bfloat16, or an integer type with
/// integral alpha/beta); a batch of 1 broadcasts. `out`: [`matmul_out_shape`], same dtype,
/// overlapping neither `a` nor `b`. `C` is `c` (broadcastable to `out`'s shape; may be
/// exactly `out`) or, when `c` is `None`, `out`'s previous contents; it is read only when
/// `beta != 0`. `bias`: optional vector of length N added to every row.
pub fn gemm(
    a: &TensorView,
    b: &TensorView,
    c: Option<&TensorView>,
    bias: Option<&TensorView>,
    out: &TensorView,
    args: GemmArgs,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let op = "matmul";
    let dt = out.dtype();
    if dt == DType::Bool {
        return Err(KernelArgError::UnsupportedDType {
            op,
            dtype: dt,
            hint: "",
        });
    }
    check_dtype(op, "a", a, dt)?;
    check_dtype(op, "b", b, dt)?;
    rank_ok(op, "a", a)?;
    rank_ok(op, "b", b)?;
    if dt.is_int() {
        Scalar::Float(args.alpha).check_for(op, dt)?;
        Scalar::Float(args.beta).check_for(op, dt)?;
    }
    let shape = matmul_out_shape(a.shape(), b.shape(), args.trans_a, args.trans_b)?;
    if out.shape() != shape.as_slice() {
        return Err(KernelArgError::OutputShape {
            op,
            expected: shape,
            got: out.shape().to_vec(),
        });
    }
    let c = match c {
        Some(c) => {
            check_dtype(op, "c", c, dt)?;
            let full = broadcast_shapes(op, c.shape(), out.shape())?;
            if full != out.shape() {
                return Err(KernelArgError::ShapeMismatch {
                    op,
                    detail: format!(
                        "c of shape {:?} does not broadcast to the output shape {:?}",
                        c.shape(),
                        out.shape()
                    ),
                });
            }
            Some(c.broadcast_to(out.shape())?)
        }
        None => None,
    };
    let n = out.shape()[out.ndim() - 1];
    if let Some(bias) = bias {
        check_dtype(op, "bias", bias, dt)?;
        if bias.shape() != [n] {
            return Err(KernelArgError::ShapeMismatch {
                op,
                detail: format!("bias has shape {:?}, expected [{n}]", bias.shape()),
            });
        }
    }
    let mut inputs = vec![("a", a), ("b", b)];
    if let Some(bias) = bias {
        inputs.push(("bias", bias));
    }
    check_output(op, out, &inputs, false)?;
    let c = match c {
        Some(c) if args.beta != 0.0 => {
            check_output(op, out, &[("c", &c)], true)?;
            if out.same_layout(&c) {
                None
            } else {
                Some(c)
            }
        }
        _ => None,
    };
    // Normalise to 3-D op(a) [Ba, M, K], op(b) [Bb, K, N], out [B, M, N].
    let to3 = |t: &TensorView, trans: bool| -> Result<TensorView, KernelArgError> {
        let t = if trans { t.mt()? } else { t.clone() };
        if t.ndim() == 2 {
            t.reshape(&[1, t.shape()[0], t.shape()[1]])
        } else {
            Ok(t)
        }
    };
    let a3 = to3(a, args.trans_a)?;
    let b3 = to3(b, args.trans_b)?;
    let o3 = to3(out, false)?;
    let c3 = c.as_ref().map(|c| to3(c, false)).transpose()?;
    let (batch, m, k) = (o3.shape()[0], o3.shape()[1], a3.shape()[2]);
    let grid = Grid::plan(batch, m, n, k);
    let units = grid.units();
    let flops = 2usize
        .saturating_mul(batch)
        .saturating_mul(m)
        .saturating_mul(n)
        .saturating_mul(k.max(1));
    let blocks = (flops / MIN_TILE_FLOPS)
        .clamp(1, BLOCKS_PER_CORE * cores.max(1) as usize)
        .min(units.max(1));
    let kern = MatmulKernel {
        a: a3,
        b: b3,
        c: c3,
        bias: bias.cloned(),
        out: o3,
        args,
        grid,
    };
    Ok((Arc::new(kern), blocks as u32))
}

/// The shape-determined tile grid.
#[derive(Debug, Clone, Copy)]
struct Grid {
    batch: usize,
    m: usize,
    n: usize,
    tm: usize,
    tn: usize,
}

impl Grid {
    fn plan(batch: usize, m: usize, n: usize, k: usize) -> Grid {
        let flops = 2usize
            .saturating_mul(batch)
            .saturating_mul(m)
            .saturating_mul(n)
            .saturating_mul(k.max(1));
        let target = (flops / MIN_TILE_FLOPS).clamp(1, MAX_TILES);
        let mut best = (1, 1);
        if batch > 0 && batch < target && m * n > 0 {
            let per = target / batch;
            let max_tm = (m / MIN_TILE_DIM).max(1);
            let max_tn = (n / MIN_TILE_DIM).max(1);
            let mut best_cost = usize::MAX;
            // Most tiles (up to `per`), then least packing: each tile packs its rows of
            // op(a) and its columns of op(b), K deep.
            for tm in 1..=per.min(max_tm) {
                let tn = (per / tm).min(max_tn);
                let tiles = tm * tn;
                let cost = tn * m + tm * n;
                let better = tiles > best.0 * best.1 || (tiles == best.0 * best.1 && cost < best_cost);
                if better {
                    best = (tm, tn);
                    best_cost = cost;
                }
            }
        }
        Grid {
            batch,
            m,
            n,
            tm: best.0,
            tn: best.1,
        }
    }

    fn units(&self) -> usize {
        self.batch * self.tm * self.tn
    }

    fn bound(len: usize, parts: usize, i: usize) -> usize {
        if i >= parts {
            return len;
        }
        (i * len / parts).next_multiple_of(TILE_ALIGN).min(len)
    }

    /// (batch, rows, cols) of unit `u`.
    fn tile(&self, u: usize) -> (usize, (usize, usize), (usize, usize)) {
        let per = self.tm * self.tn;
        let (bi, t) = (u / per, u % per);
        let (i, j) = (t / self.tn, t % self.tn);
        (
            bi,
            (Self::bound(self.m, self.tm, i), Self::bound(self.m, self.tm, i + 1)),
            (Self::bound(self.n, self.tn, j), Self::bound(self.n, self.tn, j + 1)),
        )
    }
}

struct MatmulKernel {
    /// op(a) as [Ba, M, K].
    a: TensorView,
    /// op(b) as [Bb, K, N].
    b: TensorView,
    /// C when it is not `out` itself, [B, M, N] (broadcast).
    c: Option<TensorView>,
    bias: Option<TensorView>,
    /// [B, M, N].
    out: TensorView,
    args: GemmArgs,
    grid: Grid,
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

    fn bias_f32<T: Elem>(&self, c0: usize, c1: usize) -> Option<Vec<f32>> {
        self.bias.as_ref().map(|b| {
            let p = b.ptr::<T>() as *const T;
            let s = b.strides()[0];
            // SAFETY: the bias elements are addressed by its view (contract) and only read.
            (c0..c1)
                .map(|j| unsafe { p.wrapping_offset(j as isize * s).read() }.to_f32())
                .collect()
        })
    }

    /// Whether C (or the bias) must be applied before the product is accumulated.
    fn needs_init(&self) -> bool {
        self.args.beta != 0.0 || self.bias.is_some()
    }

    /// f32 tile straight into `out`.
    fn tile_f32(&self, bi: usize, (r0, r1): (usize, usize), (c0, c1): (usize, usize)) {
        let (m, n, k) = (r1 - r0, c1 - c0, self.a.shape()[2]);
        let o = Self::mat::<f32>(&self.out, bi, r0, c0);
        let a = Self::mat::<f32>(&self.a, bi, r0, 0);
        let b = Self::mat::<f32>(&self.b, bi, 0, c0);
        let (alpha, beta) = (self.args.alpha as f32, self.args.beta as f32);
        let init = self.needs_init();
        if init {
            let bias = self.bias_f32::<f32>(c0, c1);
            let c = self.c.as_ref().map(|c| Self::mat::<f32>(c, bi, r0, c0));
            for i in 0..m {
                for j in 0..n {
                    // SAFETY: (i, j) is inside the tile, so the elements are addressed by
                    // out / c (contract); out overlaps no input except being exactly C;
                    // blocks own disjoint tiles.
                    unsafe {
                        let src = match c {
                            Some(c) => c.at(i, j),
                            None => o.at(i, j),
                        };
                        let mut v = if beta != 0.0 { beta * src.read() } else { 0.0 };
                        if let Some(bias) = &bias {
                            v += bias[j];
                        }
                        o.at(i, j).write(v);
                    }
                }
            }
        }
        // SAFETY: the three strided matrices lie within their views (the tile is inside
        // the shapes; contract makes the memory valid); dst overlaps neither lhs nor rhs
        // (check_output); blocks own disjoint tiles of dst.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                o.p,
                o.cs,
                o.rs,
                init,
                a.p as *const f32,
                a.cs,
                a.rs,
                b.p as *const f32,
                b.cs,
                b.rs,
                if init { 1.0 } else { 0.0 },
                alpha,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    }

    /// f16/bf16 tile: operands converted to f32, multiplied, rounded once.
    fn tile_half<T: Elem>(&self, bi: usize, (r0, r1): (usize, usize), (c0, c1): (usize, usize)) {
        let (m, n, k) = (r1 - r0, c1 - c0, self.a.shape()[2]);
        let o = Self::mat::<T>(&self.out, bi, r0, c0);
        let a = Self::mat::<T>(&self.a, bi, r0, 0);
        let b = Self::mat::<T>(&self.b, bi, 0, c0);
        let load = |mt: Mat<T>, rows: usize, cols: usize| -> Vec<f32> {
            let mut v = Vec::with_capacity(rows * cols);
            for i in 0..rows {
                for j in 0..cols {
                    // SAFETY: inside the tile / operand (see tile_f32); only read.
                    v.push(unsafe { mt.at(i, j).read() }.to_f32());
                }
            }
            v
        };
        let af = load(a, m, k);
        let bf = load(b, k, n);
        let (alpha, beta) = (self.args.alpha as f32, self.args.beta as f32);
        let init = self.needs_init();
        let mut cf = vec![0f32; m * n];
        if init {
            let bias = self.bias_f32::<T>(c0, c1);
            let src = self.c.as_ref().map(|c| Self::mat::<T>(c, bi, r0, c0)).unwrap_or(o);
            for i in 0..m {
                for j in 0..n {
                    // SAFETY: inside the tile of C (see tile_f32).
                    let mut v = if beta != 0.0 {
                        beta * unsafe { src.at(i, j).read() }.to_f32()
                    } else {
                        0.0
                    };
                    if let Some(bias) = &bias {
                        v += bias[j];
                    }
                    cf[i * n + j] = v;
                }
            }
        }
        // SAFETY: three private contiguous buffers of the stated sizes.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                cf.as_mut_ptr(),
                1,
                n as isize,
                init,
                af.as_ptr(),
                1,
                k as isize,
                bf.as_ptr(),
                1,
                n as isize,
                if init { 1.0 } else { 0.0 },
                alpha,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
        for i in 0..m {
            for j in 0..n {
                // SAFETY: inside the output tile, owned by this block (see tile_f32).
                unsafe { o.at(i, j).write(T::from_f32(cf[i * n + j])) }
            }
        }
    }

    /// Integer tile: i64 accumulation (wrapping), row by row.
    fn tile_int<T: Elem>(&self, bi: usize, (r0, r1): (usize, usize), (c0, c1): (usize, usize)) {
        let (m, n, k) = (r1 - r0, c1 - c0, self.a.shape()[2]);
        let o = Self::mat::<T>(&self.out, bi, r0, c0);
        let a = Self::mat::<T>(&self.a, bi, r0, 0);
        let b = Self::mat::<T>(&self.b, bi, 0, c0);
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
