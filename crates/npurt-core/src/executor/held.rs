//! Streams a worker keeps owning after their queues emptied (issue 11: launches over
//! several streams). With tiny kernels launched round-robin over S streams from one thread,
//! each stream's queue is empty again right after its one task; giving it up each time
//! made every launch find its stream idle, so the launching thread put it on the ready
//! list (a `SegQueue` push, `executor::start`) and often woke a second worker — the
//! launcher's extra work at S >= 2 that S = 1 never pays (its one stream stays owned while
//! the worker lingers on it). A worker that switches to other work now keeps the emptied
//! stream: a push to it finds it scheduled and only sets its notified bit, and the worker
//! looks at its held streams before the ready lists. Ownership is the usual one (the
//! stream is scheduled, only this worker pops it), so nothing changes for producers.
//!
//! Held streams must not wait behind long work, and only tiny work gains from holding
//! (with real kernels a second stream's task belongs on another core): a worker holds a
//! stream only after [`QUICK_BATCHES`] batches in a row that took under [`TINY`] each.
//! It *spills* them — hands every held stream with work to the ready lists (other workers
//! take them) and gives up the rest — before it works on a job's blocks or publishes a
//! multi-block kernel (the default plan of any large kernel), and after a batch that ran
//! for [`SPILL`] (then the count starts again); a worker that finds no work anywhere gives
//! them all up before it searches or sleeps. What remains: a held stream's task can wait
//! behind one long *single-block* kernel that this worker runs right after a run of quick
//! batches (on a held stream or one from the ready lists); after it, holding stops until
//! the batches are quick again. (Spilling also before every stream taken from the ready
//! lists cost the gain back on 2 cores: S=16 0.85x of S=1.)

use super::Scheduler;
use crate::stream::StreamInner;
use std::sync::Arc;
use std::time::Duration;

/// Streams a worker holds at most (more are given up as before).
const HELD_MAX: usize = 64;
/// A batch that ran this long spills the held streams to other workers.
pub(super) const SPILL: Duration = Duration::from_micros(20);
/// A batch (the tasks a worker ran from one stream in a row) this short counts as quick.
pub(super) const TINY: Duration = Duration::from_micros(5);
/// Quick batches in a row before a worker holds streams.
pub(super) const QUICK_BATCHES: u32 = 8;

#[derive(Default)]
pub(super) struct Held {
    streams: Vec<Arc<StreamInner>>,
    /// Where the next scan for work starts (launches come round-robin: the stream after the
    /// last one found is the likeliest to have work).
    next: usize,
    /// Quick batches in a row.
    quick: u32,
}

impl Held {
    /// Counts a batch (quick or not); returns the quick batches in a row.
    pub(super) fn quick(&mut self, quick: bool) -> u32 {
        self.quick = if quick { self.quick.saturating_add(1) } else { 0 };
        self.quick
    }

    pub(super) fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Keeps `s`, which this worker owns and whose queue it found empty; gives it back when
    /// the set is full.
    pub(super) fn keep(&mut self, s: Arc<StreamInner>) -> Result<(), Arc<StreamInner>> {
        if self.streams.len() >= HELD_MAX {
            return Err(s);
        }
        self.streams.push(s);
        Ok(())
    }

    fn find(&self) -> Option<usize> {
        let n = self.streams.len();
        (0..n)
            .map(|i| (self.next + i) % n)
            .find(|&i| !self.streams[i].queue.is_empty())
    }

    /// Whether a held stream has work.
    pub(super) fn has_work(&self) -> bool {
        self.find().is_some()
    }

    /// A held stream with work, taken out of the set.
    pub(super) fn take_ready(&mut self) -> Option<Arc<StreamInner>> {
        let i = self.find()?;
        let s = self.streams.swap_remove(i);
        self.next = if self.streams.is_empty() {
            0
        } else {
            i % self.streams.len()
        };
        Some(s)
    }

    /// Gives up every held stream whose queue is still empty; those with work (a push came
    /// in) stay. True if any stayed.
    pub(super) fn release(&mut self) -> bool {
        self.streams.retain(|s| loop {
            if !s.queue.is_empty() {
                break true;
            }
            if s.sched.try_idle() {
                break false;
            }
            // notified meanwhile: the push is visible now, or a later look gives it up
        });
        self.next = 0;
        !self.streams.is_empty()
    }

    /// Hands every held stream with work to the ready lists and gives up the rest.
    pub(super) fn spill(&mut self, dev: &Scheduler) {
        if !self.streams.is_empty() && self.release() {
            for s in self.streams.drain(..) {
                dev.make_ready(s);
            }
        }
    }
}
