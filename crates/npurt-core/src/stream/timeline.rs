//! A stream's completion timeline: how many of its tasks have finished, and who waits for
//! a given count.
//!
//! Everything that "waits" in npurt waits on a timeline value: a host thread in
//! `synchronize`, an event (a `(stream, count)` pair), a stream blocked on another
//! stream's event. Completing a task is one `fetch_add` on a single word that holds
//! `completed << 1 | has_waiters`; only when the waiter bit is set does the completer take
//! the waiter lock. Registering a waiter sets the bit with a read-modify-write on the same
//! word, so completer and waiter are totally ordered on it and no wake-up is lost (this is
//! what the loom model below checks).

use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Mutex};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
use std::time::Instant;

/// What to do when a waiter's target is reached.
pub(crate) enum Wake {
    /// Wake a parked host thread.
    Thread(Arc<ThreadWaiter>),
    /// Run a continuation (e.g. put a blocked stream back on the ready list).
    Resume(Box<dyn FnOnce() + Send>),
}

impl Wake {
    fn fire(self) {
        match self {
            Wake::Thread(t) => t.notify(),
            Wake::Resume(f) => f(),
        }
    }
}

struct Entry {
    target: u64,
    wake: Wake,
}

/// Completed-task counter plus waiter list. See the module docs.
pub(crate) struct Timeline {
    word: AtomicU64,
    waiters: Mutex<Vec<Entry>>,
}

/// Outcome of [`Timeline::register`].
pub(crate) enum Registered {
    /// The waiter is queued and will be fired later.
    Queued,
    /// The target was already reached; the waiter is handed back unfired.
    #[allow(dead_code)] // callers may run it inline; the executor just continues
    AlreadyDone(Wake),
}

impl Timeline {
    pub(crate) fn new() -> Self {
        Self {
            word: AtomicU64::new(0),
            waiters: Mutex::new(Vec::new()),
        }
    }

    /// Tasks completed so far.
    #[inline]
    pub(crate) fn completed(&self) -> u64 {
        self.word.load(Acquire) >> 1
    }

    /// Marks `n` more tasks complete and fires every waiter whose target is now reached.
    #[inline]
    pub(crate) fn advance(&self, n: u64) {
        let prev = self.word.fetch_add(n << 1, AcqRel);
        if prev & 1 != 0 {
            self.fire_reached((prev >> 1) + n);
        }
    }

    #[cold]
    fn fire_reached(&self, done: u64) {
        let ready: Vec<Entry> = {
            let mut list = lock(&self.waiters);
            let mut ready = Vec::new();
            let mut i = 0;
            while i < list.len() {
                if list[i].target <= done {
                    ready.push(list.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            if list.is_empty() {
                self.word.fetch_and(!1, AcqRel);
            }
            ready
        };
        for e in ready {
            e.wake.fire();
        }
    }

    /// Queues `wake` to fire once `completed() >= target`, unless that already holds.
    pub(crate) fn register(&self, target: u64, wake: Wake) -> Registered {
        let mut list = lock(&self.waiters);
        let prev = self.word.fetch_or(1, AcqRel);
        if (prev >> 1) >= target {
            if list.is_empty() {
                self.word.fetch_and(!1, AcqRel);
            }
            return Registered::AlreadyDone(wake);
        }
        list.push(Entry { target, wake });
        Registered::Queued
    }

    /// Removes a queued thread waiter (after a timeout). Returns false if it already fired.
    fn unregister_thread(&self, waiter: &Arc<ThreadWaiter>) -> bool {
        let mut list = lock(&self.waiters);
        let before = list.len();
        list.retain(|e| !matches!(&e.wake, Wake::Thread(t) if Arc::ptr_eq(t, waiter)));
        if list.is_empty() {
            self.word.fetch_and(!1, AcqRel);
        }
        list.len() != before
    }

    /// Blocks the calling host thread until `completed() >= target` or `deadline` passes.
    /// Spins for `spin` iterations first (the common, short case), then parks.
    /// Returns whether the target was reached.
    pub(crate) fn wait_for(&self, target: u64, deadline: Option<Instant>, spin: u32) -> bool {
        for i in 0..spin {
            if self.completed() >= target {
                return true;
            }
            if i % 64 == 63 {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break; // the spin phase never outlasts the caller's timeout
                }
                std::thread::yield_now();
            } else {
                crate::sync::spin_hint();
            }
        }
        if self.completed() >= target {
            return true;
        }
        let waiter = Arc::new(ThreadWaiter::new());
        match self.register(target, Wake::Thread(waiter.clone())) {
            Registered::AlreadyDone(_) => return true,
            Registered::Queued => {}
        }
        loop {
            if waiter.is_notified() {
                return true;
            }
            if !waiter.park(deadline) {
                // Timed out; a racing completion may still have fired us.
                return !self.unregister_thread(&waiter) || waiter.is_notified();
            }
        }
    }
}

/// A parked host thread waiting for a timeline target.
pub(crate) struct ThreadWaiter {
    notified: AtomicBool,
    thread: ThreadHandle,
}

#[cfg(not(loom))]
type ThreadHandle = std::thread::Thread;
#[cfg(loom)]
type ThreadHandle = loom::thread::Thread;

impl ThreadWaiter {
    fn new() -> Self {
        #[cfg(not(loom))]
        let thread = std::thread::current();
        #[cfg(loom)]
        let thread = loom::thread::current();
        Self {
            notified: AtomicBool::new(false),
            thread,
        }
    }

    fn is_notified(&self) -> bool {
        self.notified.load(Acquire)
    }

    fn notify(&self) {
        self.notified.store(true, Release);
        self.thread.unpark();
    }

    /// Parks until notified or the deadline; returns false once the deadline has passed.
    fn park(&self, deadline: Option<Instant>) -> bool {
        #[cfg(loom)]
        {
            let _ = deadline;
            loom::thread::park();
            true
        }
        #[cfg(not(loom))]
        match deadline {
            None => {
                std::thread::park();
                true
            }
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return false;
                }
                std::thread::park_timeout(d - now);
                true
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn wait_returns_when_reached_and_times_out_otherwise() {
        let t = Arc::new(Timeline::new());
        assert!(t.wait_for(0, None, 0));
        let start = Instant::now();
        assert!(!t.wait_for(1, Some(start + Duration::from_millis(30)), 10));
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(30), "{waited:?}");
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.wait_for(3, None, 0));
        std::thread::sleep(Duration::from_millis(5));
        t.advance(2);
        t.advance(1);
        assert!(h.join().unwrap());
        assert_eq!(t.completed(), 3);
    }

    #[test]
    fn resume_waiters_fire_in_any_order_once() {
        let t = Timeline::new();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        for target in [3u64, 1, 2] {
            let h = hits.clone();
            let r = t.register(
                target,
                Wake::Resume(Box::new(move || {
                    h.fetch_add(target, std::sync::atomic::Ordering::SeqCst);
                })),
            );
            assert!(matches!(r, Registered::Queued));
        }
        t.advance(1);
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
        t.advance(2);
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 6);
        assert!(matches!(
            t.register(2, Wake::Resume(Box::new(|| {}))),
            Registered::AlreadyDone(_)
        ));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::thread;

    /// A completer and a registering waiter race: the waiter always fires exactly once.
    #[test]
    fn loom_no_lost_wakeup() {
        loom::model(|| {
            let t = Arc::new(Timeline::new());
            let fired = Arc::new(AtomicU64::new(0));
            let t2 = t.clone();
            let completer = thread::spawn(move || t2.advance(1));
            let f = fired.clone();
            match t.register(
                1,
                Wake::Resume(Box::new(move || {
                    f.fetch_add(1, AcqRel);
                })),
            ) {
                Registered::AlreadyDone(w) => w.fire(),
                Registered::Queued => {}
            }
            completer.join().unwrap();
            assert_eq!(fired.load(Acquire), 1);
            assert_eq!(t.completed(), 1);
        });
    }

    /// A host thread parks on the timeline while two completers advance it.
    #[test]
    fn loom_thread_waiter_wakes() {
        loom::model(|| {
            let t = Arc::new(Timeline::new());
            let a = {
                let t = t.clone();
                thread::spawn(move || t.advance(1))
            };
            let b = {
                let t = t.clone();
                thread::spawn(move || t.advance(1))
            };
            assert!(t.wait_for(2, None, 0));
            a.join().unwrap();
            b.join().unwrap();
        });
    }
}
