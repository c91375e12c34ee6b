//! Thread roles: whether this thread is one of npurt's own (a worker, engine or timer
//! thread), and the check every blocking call makes first. Per-thread state, like the
//! current context in [`current`](crate::current); the executor only marks its threads.

use crate::error::{DeviceError, Result};
use std::cell::Cell;

thread_local! {
    static RUNTIME_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a runtime thread (called once by each thread npurt starts).
pub(crate) fn mark_runtime_thread() {
    RUNTIME_THREAD.with(|c| c.set(true));
}

/// How the AI-core worker threads are scheduled by the OS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerPolicy {
    /// Linux `SCHED_BATCH` (the default): the same share of the CPU as any thread, but
    /// waking a worker never preempts the thread running on that core (the submitting
    /// thread, typically). Elsewhere: as `Normal`.
    Batch,
    /// The OS default (`SCHED_OTHER`).
    Normal,
}

impl WorkerPolicy {
    /// `"batch"` / `"normal"` (case-insensitive, trimmed).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "batch" => Some(Self::Batch),
            "normal" => Some(Self::Normal),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Batch => "batch",
            Self::Normal => "normal",
        }
    }
}

/// Applies `policy` to the calling thread. Best effort: where the OS refuses or has no
/// such policy, the thread keeps the default (what `Normal` asks for).
pub(crate) fn apply_worker_policy(policy: WorkerPolicy) {
    #[cfg(target_os = "linux")]
    if policy == WorkerPolicy::Batch {
        let p = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 names the calling thread; `p` is a valid, initialised sched_param
        // (priority 0, the only one SCHED_BATCH takes) that outlives the call.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &p) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = policy;
}

/// True on npurt's own worker and engine threads.
pub fn is_runtime_thread() -> bool {
    RUNTIME_THREAD.with(|c| c.get())
}

/// Blocking calls from a runtime thread would wait on themselves: refuse them.
pub(crate) fn forbid_runtime_thread(what: &'static str) -> Result<()> {
    if is_runtime_thread() {
        if crate::sanitizer::on() {
            crate::sanitizer::on_refused(what);
        }
        return Err(DeviceError::RuntimeThread(what).into());
    }
    Ok(())
}
