//! A compute-bound kernel: each block does real arithmetic until its time is up.

use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::time::{Duration, Instant};

/// Each block busy-works (integer hashing on one core) for `per_block`.
pub struct Busy {
    pub per_block: Duration,
}

impl Busy {
    pub fn new(per_block: Duration) -> Self {
        Self { per_block }
    }
}

/// One unit of work: a few hundred nanoseconds of dependent multiply-xorshift steps.
#[inline(never)]
fn work_unit(mut x: u64) -> u64 {
    for _ in 0..256 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    x
}

impl Kernel for Busy {
    fn name(&self) -> &str {
        "busy"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let start = Instant::now();
        let mut x = u64::from(blk.block_idx) | 1;
        while start.elapsed() < self.per_block {
            x = work_unit(x);
        }
        std::hint::black_box(x);
        Ok(())
    }
}
