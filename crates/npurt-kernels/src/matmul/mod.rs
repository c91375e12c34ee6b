//! Matrix multiplication (the Cube path): `matmul` and `gemm` over 2-D and 3-D (batched)
//! operands with transpose flags and numpy broadcasting of a batch of 1.
//!
//! The output is cut into a grid of tiles that depends on the shapes only (never on the
//! block count or core count), so each output element is computed by exactly one call of
//! the `gemm` crate (single-threaded: the executor owns the threads) with a fixed
//! summation order: results are bitwise identical whatever the block count. Blocks take
//! contiguous ranges of tiles. f16/bf16 tiles are converted to f32 (in per-worker scratch
//! memory), multiplied in f32 and rounded once; integer matmul accumulates in i64
//! (wrapping) with a plain loop.
//!
//! gemm's `alpha`/`beta` go into the `gemm` crate's own scaling (`dst = s·dst + t·A·B`:
//! C = `out` costs no pass, a separate C one copy per tile) and the bias is an epilogue of
//! each tile while it is in cache, so a gemm is one pass over the output, like a matmul.
//!
//! Files: `mod.rs` (arguments and checks), `grid.rs` (the tile grid), `tile.rs` (the
//! kernel: one tile = one `gemm` call).

mod grid;
mod micro;
mod tile;

use crate::plan::BLOCKS_PER_CORE;
use crate::tensor::{broadcast_shapes, check_dtype, check_output};
use crate::{DType, KernelArgError, Launch, Scalar, TensorView};
use grid::Grid;
pub(crate) use grid::{flops, MIN_TILE_FLOPS};
pub(crate) use micro::gemm_f32;
use std::sync::Arc;
use tile::MatmulKernel;

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

/// Operands are 2-D or 3-D (batched).
fn rank_ok(op: &'static str, what: &'static str, ndim: usize) -> Result<(), KernelArgError> {
    if !(2..=3).contains(&ndim) {
        return Err(KernelArgError::Rank {
            op,
            what,
            expected: "2 or 3",
            got: ndim,
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
    rank_ok(op, "a", a.len())?;
    rank_ok(op, "b", b.len())?;
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
    rank_ok(op, "a", a.ndim())?;
    rank_ok(op, "b", b.ndim())?;
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
    let blocks = (flops(batch, m, n, k) / MIN_TILE_FLOPS)
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
