//! The AI-Core kernel library: kernels implementing `npurt_core::Kernel`.
//!
//! * Executor kernels: [`Empty`] (launch overhead), [`Busy`] (compute-bound work for a set
//!   duration per block) and [`Fault`] (fails one block, for sticky-error tests).
//! * Tensor kernels over [`TensorView`]s (strided descriptions of memory, independent of
//!   the memory layer): elementwise ([`unary`], [`binary`], [`cast`], [`copy`], [`axpy`],
//!   [`fill`]), reductions ([`reduce`]), [`softmax`], [`log_softmax`], [`layer_norm`],
//!   [`rms_norm`], [`matmul`] / [`gemm()`] (the Cube path, tiles computed by the `gemm`
//!   crate), data movement ([`permute`], [`transpose2d`], [`concat()`], [`slice()`]) and
//!   random draws ([`random()`]: uniform and normal, from a device's counter-based
//!   [`philox::Generator`]).
//!
//! Every tensor-kernel constructor validates shapes, dtypes, axes and aliasing *before*
//! anything is queued and returns the kernel with a suggested block count
//! ([`Launch`]); launch it with `stream.launch(kernel, blocks)` (any block count is
//! correct; the suggestion comes from the work size and the `cores` hint).
//!
//! Determinism: every output element is computed by exactly one block, with a summation
//! order fixed by the shapes alone (never by the block count or which core runs a block),
//! so results are bitwise identical whatever the block count or number of cores.
//!
//! Floats compute in f32 (f16/bf16 are converted on load and rounded once on store);
//! sums accumulate in f64, integers compute in i64 and wrap like numpy. Hot loops have
//! AVX-512 and AVX2+FMA copies picked at run time ([`isa`]: the CPU's level capped by
//! `NPURT_ISA`) that give the same bits as the portable ones; the GEMM runs the `gemm`
//! crate's AVX-512, AVX2 or scalar microkernels by the same rule.
//!
//! A kernel object may be launched again once its previous launch has completed (never
//! twice concurrently: it would race on its own output anyway). See the crate's README for
//! the full API, aliasing rules and accuracy.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(unreachable_pub)]

pub mod array;
mod busy;
pub mod copies;
mod dtype;
mod elementwise;
mod error;
mod host;
pub mod isa;
mod layout;
pub mod math;
mod matmul;
mod movement;
pub mod nn;
mod norm;
pub mod philox;
pub mod plan;
mod random;
mod reduce;
pub mod replay;
mod tensor;

/// The `half` crate (f16/bf16 element types).
pub use half;

pub use array::{ArrayError, DeviceArray};
pub use busy::Busy;
pub use dtype::{Bool8, DType, Elem};
pub use elementwise::{
    activation, axpy, binary, cast, compare, copy, fill, pow, unary, where_, Activation, BinaryOp, CompareOp, Operand,
    Scalar, UnaryOp,
};
pub use error::KernelArgError;
pub use host::{AlignedBuffer, HostTensor};
pub use matmul::{gemm, matmul, matmul_out_shape, GemmArgs};
pub use movement::{concat, permute, slice, transpose2d};
pub use norm::{layer_norm, log_softmax, rms_norm, softmax};
pub use random::{blocks_needed, random, random_with_state, Distribution};
pub use reduce::{reduce, reduce_out_shape, ReduceOp};
pub use tensor::{
    broadcast_shapes, contiguous_strides, nocopy_reshape_strides, normalize_axes, normalize_axis, Keep, TensorView,
};

use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::{Arc, OnceLock};

/// A validated kernel and its suggested block count: `stream.launch(kernel, blocks)`.
pub type Launch = (Arc<dyn Kernel>, u32);

/// A kernel that does nothing: measures launch and scheduling cost.
pub struct Empty;

impl Kernel for Empty {
    fn name(&self) -> &str {
        "empty"
    }
    #[inline]
    fn run_block(&self, _blk: BlockCtx) -> Result<(), KernelFault> {
        Ok(())
    }
}

/// The shared empty kernel (launching it allocates nothing).
pub fn empty() -> Arc<dyn Kernel> {
    static EMPTY: OnceLock<Arc<dyn Kernel>> = OnceLock::new();
    EMPTY.get_or_init(|| Arc::new(Empty)).clone()
}

/// A kernel that fails in one block: for testing sticky errors.
pub struct Fault {
    pub block: u32,
    pub message: String,
}

impl Kernel for Fault {
    fn name(&self) -> &str {
        "fault"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        if blk.block_idx == self.block {
            Err(KernelFault(self.message.clone()))
        } else {
            Ok(())
        }
    }
}

/// Runs every block of a kernel on the calling thread, in index order (`reverse` runs them
/// last to first), as a core would: for tests and host-side fallbacks. Stops at the first
/// fault.
pub fn run_inline(kernel: &dyn Kernel, blocks: u32, reverse: bool) -> Result<(), KernelFault> {
    let blocks = blocks.max(1);
    for i in 0..blocks {
        let idx = if reverse { blocks - 1 - i } else { i };
        kernel.run_block(BlockCtx {
            block_idx: idx,
            block_dim: blocks,
            core_id: 0,
        })?;
    }
    Ok(())
}
