//! The futex: sleep while a 32-bit word holds a value, wake its sleepers. One place for the
//! system calls (the shared region's interprocess events, the collective board), and one
//! model of them for loom.
//!
//! Both operations are the *shared* (not `_PRIVATE`) kind: the words live in memory other
//! processes map (a memfd segment, the shared status file). Sleeps are bounded by a timeout
//! and may return spuriously (a wake, a signal, the word already changed): callers re-check
//! their condition in a loop.

use crate::sync::AtomicU32;
use std::time::Duration;

/// Sleeps until `word` no longer holds `seen`, a wake, or `timeout` passes.
#[cfg(not(loom))]
pub(crate) fn wait(word: &AtomicU32, seen: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on the aligned u32 behind `word`, which lives for the call, with a
    // relative timeout we own; the kernel returns at once if the word is not `seen`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            seen,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every sleeper on `word` (in every process).
#[cfg(not(loom))]
pub(crate) fn wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on the aligned u32 behind `word` (valid for the call); the kernel
    // only uses the address to find sleepers, touching no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            0usize,
            0usize,
            0u32,
        );
    }
}

// The model: the kernel's check-and-sleep is atomic with respect to wakes (its hash-bucket
// lock), modelled by one mutex and condition variable. Model sleeps have no timeout, so a
// lost wake-up shows as a deadlock.
#[cfg(loom)]
loom::lazy_static! {
    static ref BUCKET: (loom::sync::Mutex<()>, loom::sync::Condvar) =
        (loom::sync::Mutex::new(()), loom::sync::Condvar::new());
}

#[cfg(loom)]
pub(crate) fn wait(word: &AtomicU32, seen: u32, _timeout: Duration) {
    let g = BUCKET.0.lock().unwrap();
    if word.load(std::sync::atomic::Ordering::Relaxed) == seen {
        drop(BUCKET.1.wait(g).unwrap());
    }
}

#[cfg(loom)]
pub(crate) fn wake(_word: &AtomicU32) {
    let _g = BUCKET.0.lock().unwrap();
    BUCKET.1.notify_all();
}
