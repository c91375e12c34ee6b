//! The bounded queue between the logging threads and the bindings' forwarder.
//!
//! Any thread may log (workers, engines, host-callback threads, the allocating thread), so
//! a record is never handed to Python on the thread that logs it: it is pushed here
//! (lock-free, never blocking) and the bindings' one forwarder thread takes it with the
//! interpreter lock. A full queue drops the record and counts it ([`dropped`]), so a
//! thread that logs can never wait for the interpreter lock, whoever holds it.

use super::LogRecord;
use crossbeam_queue::ArrayQueue;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{
    fence, AtomicBool, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Records waiting for the forwarder.
pub(crate) const CAPACITY: usize = 4096;

static FORWARD: AtomicBool = AtomicBool::new(false);
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// A forwarder sleeps in [`wait`]: pushers wake it.
static SLEEPING: AtomicBool = AtomicBool::new(false);
static WOKEN: AtomicBool = AtomicBool::new(false);

struct Shared {
    queue: ArrayQueue<LogRecord>,
    lock: Mutex<()>,
    cv: Condvar,
}

fn shared() -> &'static Shared {
    static S: OnceLock<Shared> = OnceLock::new();
    S.get_or_init(|| Shared {
        queue: ArrayQueue::new(CAPACITY),
        lock: Mutex::new(()),
        cv: Condvar::new(),
    })
}

/// Turns queueing for the bindings on or off (off: records go to the other sinks only).
pub fn set_forwarding(on: bool) {
    FORWARD.store(on, SeqCst);
}

#[inline]
pub(crate) fn forwarding() -> bool {
    FORWARD.load(Relaxed)
}

/// Records dropped because the queue was full, since the process started.
pub fn dropped() -> u64 {
    DROPPED.load(Relaxed)
}

/// Queues a record (never blocks; a full queue counts a drop).
pub(crate) fn push(r: LogRecord) {
    let s = shared();
    if s.queue.push(r).is_err() {
        DROPPED.fetch_add(1, Relaxed);
        return;
    }
    // Pairs with the fence in `wait`: either the sleeper sees the record, or this sees
    // the sleeper (and wakes it).
    fence(SeqCst);
    if SLEEPING.load(Relaxed) {
        let _g = s.lock.lock();
        s.cv.notify_all();
    }
}

/// Takes up to `max` queued records, oldest first.
pub fn take(max: usize) -> Vec<LogRecord> {
    let q = &shared().queue;
    let mut out = Vec::with_capacity(q.len().min(max));
    while out.len() < max {
        match q.pop() {
            Some(r) => out.push(r),
            None => break,
        }
    }
    out
}

/// Waits up to `timeout` for a record; true if one is queued. [`wake`] ends the wait early
/// (returning whether records are queued).
pub fn wait(timeout: Duration) -> bool {
    let s = shared();
    let deadline = Instant::now() + timeout;
    let mut g = s.lock.lock();
    loop {
        SLEEPING.store(true, Relaxed);
        fence(SeqCst);
        if !s.queue.is_empty() || WOKEN.swap(false, Relaxed) {
            break;
        }
        if s.cv.wait_until(&mut g, deadline).timed_out() {
            break;
        }
    }
    SLEEPING.store(false, Relaxed);
    !s.queue.is_empty()
}

/// Ends a [`wait`] in progress (shutting the forwarder down).
pub fn wake() {
    let s = shared();
    let _g = s.lock.lock();
    WOKEN.store(true, Relaxed);
    s.cv.notify_all();
}
