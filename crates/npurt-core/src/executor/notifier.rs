//! Parking and waking the AI-Core workers (an event-count in the tokio/Eigen style).
//!
//! An idle worker first *searches* (spins over the ready lists for a short while), then
//! *sleeps* (parks). At most `max_searching` workers search at once, so on a small machine
//! idle cores do not burn the CPU the submitting thread needs. A producer that makes work
//! ready wakes a sleeper only when nobody is searching. Both counts live in one word that
//! every party updates with read-modify-writes, which is what makes the hand-off free of
//! lost wake-ups: a worker's "go to sleep" RMW either precedes the producer's RMW (which
//! then sees the sleeper) or follows it (and then sees the producer's push on its re-check).

use crate::sync::{lock, AtomicBool, AtomicU64, Mutex};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

const SEARCH: u64 = 1;
const SLEEP: u64 = 1 << 32;

fn searching(s: u64) -> u64 {
    s & 0xffff_ffff
}
fn sleeping(s: u64) -> u64 {
    s >> 32
}

pub(crate) struct Notifier {
    state: AtomicU64,
    sleepers: Mutex<Vec<usize>>,
    tokens: Box<[AtomicBool]>,
    max_searching: u64,
}

impl Notifier {
    pub(crate) fn new(workers: usize) -> Self {
        Self {
            state: AtomicU64::new(0),
            sleepers: Mutex::new(Vec::with_capacity(workers)),
            tokens: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            max_searching: (workers as u64 / 2).max(1),
        }
    }

    /// Tries to become a searcher; false when enough workers already search.
    pub(crate) fn start_search(&self) -> bool {
        let mut cur = self.state.load(Acquire);
        loop {
            if searching(cur) >= self.max_searching {
                return false;
            }
            match self.state.compare_exchange_weak(cur, cur + SEARCH, AcqRel, Acquire) {
                Ok(_) => return true,
                Err(c) => cur = c,
            }
        }
    }

    /// A searcher found work. Returns true if it was the last searcher (the caller then
    /// wakes another worker if more work is waiting, so parallel work spreads).
    pub(crate) fn end_search(&self) -> bool {
        searching(self.state.fetch_sub(SEARCH, AcqRel)) == 1
    }

    /// Announces that worker `idx` is about to sleep (`from_search`: it was searching).
    /// The caller must re-check for work afterwards and call [`cancel_sleep`] if it finds
    /// some, else [`sleep`].
    pub(crate) fn prepare_sleep(&self, idx: usize, from_search: bool) {
        let mut list = lock(&self.sleepers);
        list.push(idx);
        let delta = if from_search { SLEEP - SEARCH } else { SLEEP };
        self.state.fetch_add(delta, AcqRel);
    }

    /// Withdraws a prepared sleep. False means a producer already picked this worker (its
    /// token is set and is consumed by the next [`take_token`]).
    pub(crate) fn cancel_sleep(&self, idx: usize) -> bool {
        let mut list = lock(&self.sleepers);
        if let Some(pos) = list.iter().position(|&i| i == idx) {
            list.swap_remove(pos);
            self.state.fetch_sub(SLEEP, AcqRel);
            true
        } else {
            false
        }
    }

    /// Consumes worker `idx`'s wake token.
    pub(crate) fn take_token(&self, idx: usize) -> bool {
        self.tokens[idx].swap(false, AcqRel)
    }

    /// Wakes one sleeping worker if work was made ready and nobody is searching. Returns the
    /// index of the worker to unpark.
    #[inline]
    pub(crate) fn notify_one(&self) -> Option<usize> {
        // A read-modify-write (not a load) so that it is ordered against prepare_sleep.
        let s = self.state.fetch_add(0, AcqRel);
        if searching(s) > 0 || sleeping(s) == 0 {
            return None;
        }
        self.wake_one()
    }

    #[cold]
    fn wake_one(&self) -> Option<usize> {
        let mut list = lock(&self.sleepers);
        let idx = list.pop()?;
        self.state.fetch_sub(SLEEP, AcqRel);
        self.tokens[idx].store(true, Release);
        Some(idx)
    }

    /// Wakes everybody (shutdown). Returns the indices to unpark.
    pub(crate) fn wake_all(&self) -> Vec<usize> {
        let mut list = lock(&self.sleepers);
        let all: Vec<usize> = list.drain(..).collect();
        for &i in &all {
            self.state.fetch_sub(SLEEP, AcqRel);
            self.tokens[i].store(true, Release);
        }
        all
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::Arc;
    use loom::thread;

    /// A worker going to sleep races a producer making work ready: either the worker sees
    /// the work on its re-check, or the producer picks it to wake. Never both missed.
    #[test]
    fn loom_no_lost_worker_wakeup() {
        loom::model(|| {
            let n = Arc::new(Notifier::new(1));
            let work = Arc::new(AtomicBool::new(false));
            let (n2, w2) = (n.clone(), work.clone());
            let producer = thread::spawn(move || {
                w2.store(true, Release);
                n2.notify_one()
            });
            // worker 0: searching, finds nothing, goes to sleep
            assert!(n.start_search());
            n.prepare_sleep(0, true);
            let saw_work = work.load(Acquire);
            let cancelled = saw_work && n.cancel_sleep(0);
            let woken = producer.join().unwrap();
            if !saw_work {
                // Must have been chosen by the producer.
                assert_eq!(woken, Some(0));
                assert!(n.take_token(0));
            } else if !cancelled {
                assert_eq!(woken, Some(0));
            }
        });
    }
}
