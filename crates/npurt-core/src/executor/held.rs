//! Streams a worker keeps owning after draining them ("held": scheduled, on no ready list).
//!
//! Launches spread round-robin over many streams from one thread find each stream idle
//! again by the time they come back to it. Each launch then put its stream on the ready
//! list and poked the notifier, and the worker took it off and gave it up again: three
//! cache lines shared by the two threads (the ready list, the notifier word, the stream's
//! scheduling word) written per launch, where launches to one stream touch none of them
//! (the stream stays scheduled while the worker lingers on it).
//!
//! A worker that ran only tiny tasks on a stream ([`crate::Kernel::is_tiny`], records,
//! waits, engine hand-offs) keeps the drained stream instead: a push finds it still
//! scheduled and does nothing more, and the worker polls its held streams between its
//! other work. Nothing else knows about them, so the worker gives them all back before
//! anything that may take long (a kernel not known to be tiny, a job's blocks), before it
//! parks, and when it falls behind (a held stream found with a backlog, which other
//! workers should help with): a held stream never waits on a busy or sleeping worker for
//! longer than one tiny task. Giving back is the owner's usual try-idle protocol
//! ([`give_up`]), so a push racing with it is never stranded (loom model below).

use super::Scheduler;
use crate::stream::queue::TaskQueue;
use crate::stream::sched_state::SchedState;
use crate::stream::StreamInner;
use std::sync::Arc;

/// Streams one worker holds at most (more are given up as before). Few: a worker holding
/// many streams keeps the other workers asleep, and launches spread over 64 streams ran at
/// 0.75x when one worker held them all (the rings of 64 streams, 4 MiB, outgrow its L2).
const MAX_HELD: usize = 8;
/// Queued tasks on a held stream that mean its worker is falling behind.
const BACKLOG: u64 = 8;

/// Held streams, least recently run first: a stream taken to run goes back at the end, so
/// with launches round-robin over the streams the next one with work is the first scanned.
pub(super) struct Held {
    streams: Vec<Arc<StreamInner>>,
}

impl Held {
    pub(super) fn new() -> Self {
        Self {
            streams: Vec::with_capacity(MAX_HELD),
        }
    }

    /// Keeps `s` (drained and still scheduled by this worker); gives it back when full.
    pub(super) fn keep(&mut self, s: Arc<StreamInner>) -> Result<(), Arc<StreamInner>> {
        if self.streams.len() >= MAX_HELD {
            return Err(s);
        }
        self.streams.push(s);
        Ok(())
    }

    /// Removes and returns the least recently run held stream with queued work, and
    /// whether it has a backlog.
    pub(super) fn take_ready(&mut self) -> Option<(Arc<StreamInner>, bool)> {
        let i = self.streams.iter().position(|s| !s.queue.is_empty())?;
        let s = self.streams.remove(i);
        let behind = s.queue.len() >= BACKLOG;
        Some((s, behind))
    }

    /// True when some held stream has queued work.
    pub(super) fn has_work(&self) -> bool {
        self.streams.iter().any(|s| !s.queue.is_empty())
    }

    /// Gives every held stream back: idle, or on the ready list if work came meanwhile.
    pub(super) fn release_all(&mut self, dev: &Scheduler) {
        for s in self.streams.drain(..) {
            give_up(&s.queue, &s.sched, || dev.make_ready(s.clone()));
        }
    }
}

/// Gives up a stream its caller owns with an empty-looking queue: idles it (a later push
/// then makes it ready), or calls `make_ready` once if a task is (or arrives) in the queue.
pub(super) fn give_up<T>(queue: &TaskQueue<T>, sched: &SchedState, make_ready: impl FnOnce()) {
    loop {
        if !queue.is_empty() {
            make_ready();
            return;
        }
        if sched.try_idle() {
            return;
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{lock, Arc, Mutex};
    use loom::thread;

    /// A worker gives up a held stream while a producer pushes to it: the task is made
    /// ready exactly once (by the producer's notify or by the give-up), never stranded.
    #[test]
    fn loom_give_up_races_a_push() {
        loom::model(|| {
            let q = Arc::new(TaskQueue::new(4));
            let st = Arc::new(SchedState::new());
            let ready = Arc::new(Mutex::new(0usize));
            // Held: scheduled by an earlier push, whose task the worker already ran.
            q.push(0u32).unwrap();
            assert!(st.notify());
            assert_eq!(q.pop(), Some(0));
            let producer = {
                let (q, st, ready) = (q.clone(), st.clone(), ready.clone());
                thread::spawn(move || {
                    q.push(1).unwrap();
                    if st.notify() {
                        *lock(&ready) += 1;
                    }
                })
            };
            give_up(&q, &st, || *lock(&ready) += 1);
            producer.join().unwrap();
            // Exactly one party owns the stream with the task in it.
            assert_eq!(*lock(&ready), 1);
            assert_eq!(q.pop(), Some(1));
            assert!(st.try_idle() || st.try_idle());
            assert!(st.is_idle());
        });
    }
}
