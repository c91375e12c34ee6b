//! Fault injection for reliability tests: `NPURT_FAULT=alloc:N,kernel:N,hang:N,copy_stall:N`
//! (read when the runtime initialises) or [`set`] (the test-only `_npurt._fault_set`).
//!
//! Each entry arms one fault for the N-th matching operation from now (1 = the next):
//! * `alloc` — a device allocation fails with `OutOfMemory` (207001);
//! * `kernel` — a kernel fails (sticky `TaskFailed` on its stream, 507015);
//! * `hang` — a kernel never ends, until its stream is aborted (`destroy(force=True)`,
//!   `reset_device(force=True)`): timeouts fire and a forced reset recovers;
//! * `copy_stall` — the copy engine stalls on a copy until its stream is aborted or
//!   [`STALL_LIMIT`] passes.
//!
//! When nothing is armed a hot path pays one relaxed load ([`armed`]).

use crate::error::{Error, Result};
use std::sync::atomic::Ordering::{AcqRel, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

/// Longest stall of an injected `copy_stall`.
pub const STALL_LIMIT: Duration = Duration::from_secs(30);

/// The kinds of injected faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Alloc = 0,
    Kernel = 1,
    Hang = 2,
    CopyStall = 3,
}

const NAMES: [&str; 4] = ["alloc", "kernel", "hang", "copy_stall"];

static ARMED: AtomicBool = AtomicBool::new(false);
/// Per kind: operations left before the fault fires (0: not armed).
static COUNTDOWN: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
/// Per kind: faults injected so far.
static INJECTED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// True if any fault is armed (the one relaxed load of the hot paths).
#[inline(always)]
pub(crate) fn armed() -> bool {
    ARMED.load(Relaxed)
}

/// Counts one operation of kind `f`; true if the fault fires for it. Call only when
/// [`armed`].
#[cold]
pub(crate) fn fires(f: Fault) -> bool {
    let c = &COUNTDOWN[f as usize];
    let fired = c
        .fetch_update(AcqRel, Relaxed, |n| if n == 0 { None } else { Some(n - 1) })
        .is_ok_and(|prev| prev == 1);
    if fired {
        INJECTED[f as usize].fetch_add(1, Relaxed);
        if COUNTDOWN.iter().all(|c| c.load(Relaxed) == 0) {
            ARMED.store(false, Relaxed);
        }
    }
    fired
}

/// Arms faults from a spec like `"alloc:3,kernel:1"`; `""` or `"off"` disarms all.
pub fn set(spec: &str) -> Result<()> {
    let mut counts = [0u64; 4];
    let spec = spec.trim();
    if !spec.is_empty() && spec != "off" {
        for item in spec.split(',') {
            let (name, n) = item.trim().split_once(':').ok_or_else(|| bad(item))?;
            let i = NAMES.iter().position(|&k| k == name.trim()).ok_or_else(|| bad(item))?;
            counts[i] = n.trim().parse::<u64>().map_err(|_| bad(item))?;
        }
    }
    for (c, n) in COUNTDOWN.iter().zip(counts) {
        c.store(n, Relaxed);
    }
    ARMED.store(counts.iter().any(|&n| n > 0), Relaxed);
    Ok(())
}

fn bad(item: &str) -> Error {
    Error::invalid(format!(
        "bad NPURT_FAULT entry {item:?}: expected kind:N with kind one of alloc, kernel, hang, copy_stall"
    ))
}

/// Arms faults from `NPURT_FAULT` (called once when the runtime initialises).
pub(crate) fn from_env() -> Result<()> {
    match std::env::var("NPURT_FAULT") {
        Ok(v) => set(&v),
        Err(_) => Ok(()),
    }
}

/// Faults injected so far, by kind name.
pub fn injected() -> Vec<(&'static str, u64)> {
    NAMES
        .iter()
        .zip(&INJECTED)
        .map(|(&n, c)| (n, c.load(Relaxed)))
        .collect()
}

/// Blocks until `stop()` is true (an injected hang or stall), polling every millisecond,
/// or until `limit` passes.
pub(crate) fn stall(limit: Option<Duration>, stop: impl Fn() -> bool) {
    let start = Instant::now();
    while !stop() && limit.is_none_or(|l| start.elapsed() < l) {
        std::thread::sleep(Duration::from_millis(1));
    }
}
