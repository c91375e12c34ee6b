//! The AI-Core kernel library: kernels implementing `npurt_core::Kernel`.
//!
//! For now it holds the kernels that exercise the executor: [`Empty`] (launch overhead),
//! [`Busy`] (compute-bound work for a set duration per block) and [`Fill`] (a block-split
//! write into memory). The tensor kernels (elementwise, reductions, matmul) come next.

#![deny(unsafe_op_in_unsafe_fn)]

mod busy;
mod fill;

pub use busy::Busy;
pub use fill::{Fill, FillTarget};

use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::{Arc, OnceLock};

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
