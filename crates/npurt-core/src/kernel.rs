//! The kernel interface the kernel library implements.
//!
//! A kernel is launched on a stream with a block count (ACL's `blockDim`). The executor
//! splits it into blocks that the device's AI-Core workers claim; each call to
//! [`Kernel::run_block`] sees its block index, the block count and the id of the core that
//! runs it (`GetBlockIdx`/`GetBlockNum` in Ascend C). A kernel object owns its arguments
//! (buffers are kept alive by the `Arc` the stream holds until the kernel completes).

use std::fmt;

/// Where a block runs: its index, the launch's block count, and the core that claimed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCtx {
    pub block_idx: u32,
    pub block_dim: u32,
    pub core_id: u32,
}

impl BlockCtx {
    /// The half-open element range `[start, end)` this block owns when `len` elements are
    /// split as evenly as possible over the blocks (the first `len % block_dim` blocks get
    /// one more element).
    pub fn split(&self, len: usize) -> (usize, usize) {
        let dim = self.block_dim.max(1) as usize;
        let idx = self.block_idx as usize;
        let base = len / dim;
        let extra = len % dim;
        let start = idx * base + idx.min(extra);
        let end = start + base + usize::from(idx < extra);
        (start, end)
    }
}

/// A failure inside a block; becomes the stream's sticky error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFault(pub String);

impl fmt::Display for KernelFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<S: Into<String>> From<S> for KernelFault {
    fn from(s: S) -> Self {
        KernelFault(s.into())
    }
}

/// A kernel: code that runs once per block on an AI-Core worker.
///
/// Implementations must be safe to run concurrently for different blocks; arguments were
/// validated at launch (shapes, dtypes, devices), so `run_block` should only fail on
/// genuinely runtime conditions (or an injected fault).
pub trait Kernel: Send + Sync + 'static {
    /// A short name for errors and profiles.
    fn name(&self) -> &str;
    /// Runs one block.
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_everything_once() {
        for len in [0usize, 1, 7, 64, 1000] {
            for dim in [1u32, 2, 3, 8, 13] {
                let mut next = 0;
                for idx in 0..dim {
                    let (s, e) = BlockCtx {
                        block_idx: idx,
                        block_dim: dim,
                        core_id: 0,
                    }
                    .split(len);
                    assert_eq!(s, next);
                    assert!(e >= s && e - s <= len / dim as usize + 1);
                    next = e;
                }
                assert_eq!(next, len);
            }
        }
    }
}
