//! One process-wide timer thread for device-side deadlines (a stream waiting on an event
//! with a timeout). Callbacks run on the timer thread and must be quick.

use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Instant;

type Callback = Box<dyn FnOnce() + Send>;

/// Names one scheduled callback (for [`cancel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TimerKey(Instant, u64);

struct Timer {
    /// Entries by deadline (then by schedule order), and the last sequence number used.
    entries: Mutex<(BTreeMap<TimerKey, Callback>, u64)>,
    cv: Condvar,
}

static TIMER_STARTED: OnceLock<&'static Timer> = OnceLock::new();

fn timer() -> &'static Timer {
    TIMER_STARTED.get_or_init(|| {
        let t: &'static Timer = Box::leak(Box::new(Timer {
            entries: Mutex::new((BTreeMap::new(), 0)),
            cv: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("npurt-timer".into())
            .spawn(move || run(t))
            .expect("failed to start the npurt timer thread");
        t
    })
}

fn run(t: &'static Timer) {
    crate::thread_role::mark_runtime_thread();
    let mut g = t.entries.lock();
    loop {
        let now = Instant::now();
        match g.0.first_key_value().map(|(k, _)| *k) {
            Some(k) if k.0 <= now => {
                let cb = g.0.remove(&k).expect("first key");
                drop(g);
                cb();
                g = t.entries.lock();
            }
            Some(k) => {
                t.cv.wait_until(&mut g, k.0);
            }
            None => t.cv.wait(&mut g),
        }
    }
}

/// Runs `cb` on the timer thread at (or soon after) `at`, unless [`cancel`]led first.
pub(crate) fn schedule(at: Instant, cb: Callback) -> TimerKey {
    let t = timer();
    let mut g = t.entries.lock();
    g.1 += 1;
    let key = TimerKey(at, g.1);
    let first = g.0.first_key_value().is_none_or(|(k, _)| key < *k);
    g.0.insert(key, cb);
    drop(g);
    if first {
        t.cv.notify_one(); // the timer thread sleeps until a later deadline: wake it
    }
    key
}

/// Drops a scheduled callback that has not run (a wait that completed before its deadline
/// must not keep its stream in the timer until then). Unknown keys are ignored.
pub(crate) fn cancel(key: TimerKey) {
    let Some(t) = TIMER_STARTED.get().copied() else { return };
    let cb = t.entries.lock().0.remove(&key);
    drop(cb); // outside the lock
}

/// Callbacks scheduled and not yet run or cancelled (diagnostics and leak tests).
pub(crate) fn pending() -> usize {
    TIMER_STARTED.get().map_or(0, |t| t.entries.lock().0.len())
}
