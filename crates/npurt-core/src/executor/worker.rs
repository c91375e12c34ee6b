//! One AI-Core worker: claims blocks of published jobs, drains ready streams, and otherwise
//! searches briefly and then parks.

use super::engine::EngineJob;
use super::held::Held;
use super::job::{run_block, Job, JobTurn};
use super::Scheduler;
use crate::error::TaskError;
use crate::kernel::BlockCtx;
use crate::profiler::{TaskKind, TaskRecord, NO_CORE};
use crate::stream::task::{Op, Task};
use crate::stream::timeline::{Registered, Wake};
use crate::stream::StreamInner;
use crate::thread_role::mark_runtime_thread;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::Arc;
use std::time::Instant;

mod exec;
use exec::is_tiny;
pub(super) use exec::record;

/// Hands a stream whose head task finished elsewhere back to its device's ready list.
pub(super) fn resume(s: Arc<StreamInner>) {
    s.inflight.store(true, Release);
    let dev = s.dev.clone();
    dev.make_ready(s);
}

/// Tasks a worker runs from one stream before giving other streams a turn.
const BUDGET: u32 = 64;
/// Polls of an empty stream before giving it up, when no other work is waiting: a producer
/// launching back to back then finds its stream still owned and skips the ready list.
const LINGER: u32 = 256;

enum Work {
    Job(Arc<Job>),
    Stream(Arc<StreamInner>),
}

struct Worker {
    dev: Arc<Scheduler>,
    core: u32,
    picks: u32,
    /// This worker counts as a searcher in the notifier (spinning for work, or lingering
    /// on an emptied stream): producers then leave sleepers asleep, trusting it to look.
    searching: bool,
    /// Nanoseconds spent in `run` (published to `dev.busy[core]`).
    busy: u64,
    /// Drained streams this worker still owns while it runs only tiny tasks (`held.rs`).
    held: Held,
    /// Which of held streams and ready lists `find` looks at first this time.
    held_first: bool,
}

pub(super) fn run(dev: Arc<Scheduler>, core: usize) {
    mark_runtime_thread();
    let mut w = Worker {
        dev,
        core: core as u32,
        picks: 0,
        searching: false,
        busy: 0,
        held: Held::new(),
        held_first: false,
    };
    w.main_loop();
}

impl Worker {
    /// The next work: a published job's blocks first (a multi-block launch gets every
    /// idle core), else a ready stream.
    fn find(&mut self) -> Option<Work> {
        if let Some(j) = self.dev.current_job() {
            return Some(Work::Job(j));
        }
        // Held streams and the ready lists take turns, so neither starves the other.
        self.held_first = !self.held_first;
        if self.held_first {
            if let Some(w) = self.find_held() {
                return Some(w);
            }
        }
        if let Some(s) = self.dev.pop_ready(&mut self.picks) {
            return Some(Work::Stream(s));
        }
        if self.held_first {
            return None;
        }
        self.find_held()
    }

    /// A held stream with queued work.
    fn find_held(&mut self) -> Option<Work> {
        let (s, behind) = self.held.take_ready()?;
        if behind {
            // Falling behind: the other held streams go to the ready list (waking a
            // sleeper), where every worker can help.
            self.held.release_all(&self.dev);
        }
        Some(Work::Stream(s))
    }

    /// Becomes a searcher if the notifier allows one more (true if this worker is one).
    fn begin_search(&mut self) -> bool {
        if !self.searching {
            self.searching = self.dev.notifier.start_search();
        }
        self.searching
    }

    /// Stops searching before running work. The last searcher to stop wakes a sleeper if
    /// more work is waiting: a producer that saw it searching woke nobody.
    fn finish_search(&mut self) {
        if std::mem::take(&mut self.searching) && self.dev.notifier.end_search() && self.dev.has_work() {
            self.dev.wake_one();
        }
    }

    fn main_loop(&mut self) {
        let idx = self.core as usize;
        loop {
            if let Some(work) = self.find() {
                self.finish_search();
                self.run(work);
                continue;
            }
            if self.dev.shutdown.load(Acquire) {
                if std::mem::take(&mut self.searching) {
                    self.dev.notifier.end_search();
                }
                return;
            }
            if self.begin_search() {
                if let Some(work) = self.search() {
                    self.finish_search();
                    self.run(work);
                    continue;
                }
            }
            // Sleep: give back held streams, announce, re-check, park.
            self.held.release_all(&self.dev);
            self.dev
                .notifier
                .prepare_sleep(idx, std::mem::take(&mut self.searching));
            if self.dev.has_work() || self.dev.shutdown.load(Acquire) {
                if !self.dev.notifier.cancel_sleep(idx) {
                    self.dev.notifier.take_token(idx);
                }
                continue;
            }
            while !self.dev.notifier.take_token(idx) {
                if self.dev.shutdown.load(Acquire) {
                    self.dev.notifier.cancel_sleep(idx);
                    return;
                }
                std::thread::park();
            }
        }
    }

    /// Spins over the ready lists for up to the configured time.
    fn search(&mut self) -> Option<Work> {
        let deadline = Instant::now() + self.dev.worker_spin;
        let mut i: u32 = 0;
        loop {
            if let Some(w) = self.find() {
                return Some(w);
            }
            i = i.wrapping_add(1);
            if i.is_multiple_of(64) {
                if Instant::now() >= deadline || self.dev.shutdown.load(Acquire) {
                    return None;
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Runs `work`, counting the time as busy (two clock reads per piece of work: a job's
    /// blocks, or a drained batch of up to `BUDGET` tasks).
    fn run(&mut self, work: Work) {
        let t0 = crate::clock::now_ns();
        self.run_untimed(work);
        self.busy += crate::clock::now_ns().saturating_sub(t0);
        if let Some(b) = self.dev.busy.get(self.core as usize) {
            b.store(self.busy, Relaxed);
        }
    }

    fn run_untimed(&mut self, work: Work) {
        match work {
            Work::Job(job) => {
                self.held.release_all(&self.dev);
                if let JobTurn::Finished(err) = job.work(self.core) {
                    self.finish_job(&job, err);
                    self.run_stream(job.stream.clone());
                }
            }
            Work::Stream(s) => self.run_stream(s),
        }
    }

    /// Drains up to `BUDGET` tasks of a stream this worker owns.
    fn run_stream(&mut self, mut s: Arc<StreamInner>) {
        if s.inflight.swap(false, AcqRel) {
            s.timeline.advance(1);
        }
        let mut budget = BUDGET;
        // Every task of this turn was tiny: the drained stream may be held.
        let mut tiny = true;
        loop {
            let Some(task) = s.queue.pop() else {
                if tiny {
                    match self.held.keep(s) {
                        Ok(()) => return,
                        Err(back) => s = back,
                    }
                }
                if self.linger(&s) {
                    continue;
                }
                if s.sched.try_idle() {
                    return;
                }
                continue;
            };
            if s.skipping() {
                drop(task);
                s.timeline.advance(1);
                continue;
            }
            if self.searching {
                self.finish_search();
            }
            if tiny && !is_tiny(&task.op) {
                tiny = false;
                self.held.release_all(&self.dev);
            }
            if !self.exec(&s, task) {
                return; // ownership moved to a job, an engine or a waiter
            }
            budget -= 1;
            if budget == 0 {
                if !self.dev.has_work() && !self.held.has_work() {
                    budget = BUDGET; // nobody else is waiting: keep going
                    continue;
                }
                self.dev.make_ready(s);
                return;
            }
        }
    }

    /// Briefly waits for more work on `s` while nothing else is ready. True if some arrived.
    /// Lingering counts as searching (when the notifier allows it): a producer making
    /// another stream ready meanwhile leaves the sleepers asleep, since this worker sees
    /// that stream within a few polls — with tiny kernels one worker keeps up and the
    /// others stay parked instead of spinning on the cores the submitting threads need.
    fn linger(&mut self, s: &StreamInner) -> bool {
        self.begin_search();
        for i in 0..LINGER {
            if !s.queue.is_empty() {
                self.finish_search();
                return true;
            }
            if i % 32 == 0 && self.dev.has_work() {
                return false;
            }
            std::hint::spin_loop();
        }
        false
    }
}
