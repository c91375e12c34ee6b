//! What the runtime micro-benchmarks share (`mod common;` in `micro.rs` and
//! `profiler_micro.rs`): the empty one-block kernel they launch, the median of rounds and
//! the process's CPU time.
#![allow(dead_code)] // each bench uses a part

use npurt_core::{BlockCtx, Kernel, KernelFault};

/// A kernel that does nothing: the launch path's own cost.
pub struct Nop;

impl Kernel for Nop {
    fn name(&self) -> &str {
        "nop"
    }
    fn run_block(&self, _b: BlockCtx) -> Result<(), KernelFault> {
        Ok(())
    }
}

/// The median of the rounds (the upper one for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// The process's CPU time (all threads, user + system), ns.
pub fn cpu_ns() -> u128 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given; zeroed is a valid rusage.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let t = |tv: libc::timeval| tv.tv_sec as u128 * 1_000_000_000 + tv.tv_usec as u128 * 1000;
    t(ru.ru_utime) + t(ru.ru_stime)
}
