//! Process lifecycle: `fork()` and shutdown at exit.
//!
//! A forked child inherits the parent's memory (an "active" device registry, queued work)
//! but none of its threads: nothing would ever run, and every wait would hang. A
//! `pthread_atfork` child handler therefore marks every running device dead in the child
//! (lock-free: the handler must not take locks another thread may have held at the fork),
//! so each use fails fast with [`DeviceError::Forked`]; the registry refuses to start
//! devices in the child and teardown leaves the inherited state alone. CUDA behaves the
//! same way; use the `spawn` start method for worker processes.
//!
//! After [`crate::registry::shutdown`] (Python's `atexit`), starting a device again would
//! start threads that run Python during finalisation: the registry refuses with
//! [`DeviceError::ShutDown`] instead.

use crate::executor::Scheduler;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicPtr};
use std::sync::Once;

/// Most devices a configuration may have (`Config::validate`).
const MAX_DEVICES: usize = 64;

static FORKED: AtomicBool = AtomicBool::new(false);
static SHUT_DOWN: AtomicBool = AtomicBool::new(false);
/// The running executor of each device ordinal (null when none), for the fork handler.
static RUNNING: [AtomicPtr<Scheduler>; MAX_DEVICES] = [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_DEVICES];

/// True in a child process forked after npurt was initialised.
#[inline]
pub(crate) fn forked() -> bool {
    FORKED.load(SeqCst)
}

/// True once the runtime was shut down (process exit).
pub(crate) fn is_shut_down() -> bool {
    SHUT_DOWN.load(SeqCst)
}

pub(crate) fn mark_shut_down() {
    SHUT_DOWN.store(true, SeqCst);
}

/// Registers the fork handler (once per process; called when the runtime initialises).
pub(crate) fn install_fork_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `in_child` is an `extern "C" fn()` that only performs atomic stores on
        // statics and on executors `RUNNING` points to (see `in_child`); registering it has
        // no other precondition.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        debug_assert_eq!(rc, 0);
    });
}

extern "C" fn in_child() {
    FORKED.store(true, SeqCst);
    for slot in &RUNNING {
        let p = slot.load(SeqCst);
        if !p.is_null() {
            // SAFETY: a non-null entry points to a `Scheduler` whose executor was
            // running at the fork: `executor_stopped` clears the entry before the executor
            // (which holds an `Arc` of it) is dropped, and in the child no other thread
            // exists that could free it. Only atomics are touched.
            unsafe { (*p).mark_dead() };
        }
    }
}

pub(crate) fn executor_started(ordinal: u32, shared: &std::sync::Arc<Scheduler>) {
    if let Some(slot) = RUNNING.get(ordinal as usize) {
        slot.store(std::sync::Arc::as_ptr(shared) as *mut Scheduler, SeqCst);
    }
}

pub(crate) fn executor_stopped(ordinal: u32, shared: &std::sync::Arc<Scheduler>) {
    if let Some(slot) = RUNNING.get(ordinal as usize) {
        let _ = slot.compare_exchange(
            std::sync::Arc::as_ptr(shared) as *mut Scheduler,
            std::ptr::null_mut(),
            SeqCst,
            SeqCst,
        );
    }
}
