//! One AI-Core worker: claims blocks of published jobs, drains ready streams, and otherwise
//! searches briefly and then parks.

use super::held::{Held, QUICK_BATCHES, SPILL, TINY};
use super::job::{run_block, Job, JobTurn};
use super::start::exec_other;
use super::Scheduler;
use crate::error::TaskError;
use crate::kernel::BlockCtx;
use crate::profiler::{TaskKind, TaskRecord, NO_CORE};
use crate::stream::task::{Op, Task};
use crate::stream::StreamInner;
use crate::thread_role::mark_runtime_thread;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// Tasks a worker runs from one stream before giving other streams a turn.
const BUDGET: u32 = 64;
/// Polls of an empty stream before giving it up, when no other work is waiting: a producer
/// launching back to back then finds its stream still owned and skips the ready list.
const LINGER: u32 = 256;

enum Work {
    Job(Arc<Job>),
    Stream(Arc<StreamInner>),
    /// A stream this worker held (`held.rs`) that has work again.
    Held(Arc<StreamInner>),
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
    /// Emptied streams this worker still owns (`held.rs`).
    held: Held,
}

/// How a linger on an emptied stream ended.
enum Linger {
    /// Its queue has work again.
    More,
    /// Other work came (a ready stream, a job, a held stream's task): keep this one.
    Switch,
    /// Nothing came.
    Nothing,
}

pub(super) fn run(dev: Arc<Scheduler>, core: usize) {
    mark_runtime_thread();
    crate::thread_role::apply_worker_policy(dev.worker_policy);
    let mut w = Worker {
        dev,
        core: core as u32,
        picks: 0,
        searching: false,
        busy: 0,
        held: Held::default(),
    };
    w.main_loop();
}

impl Worker {
    /// The next work: a published job's blocks first (a multi-block launch gets every
    /// idle core), else a ready stream, else a held one with work.
    fn find(&mut self) -> Option<Work> {
        if let Some(j) = self.dev.current_job() {
            return Some(Work::Job(j));
        }
        if let Some(s) = self.dev.pop_ready(&mut self.picks) {
            return Some(Work::Stream(s));
        }
        self.held.take_ready().map(Work::Held)
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
            // Nothing anywhere: give the held streams up (a push may have come meanwhile:
            // then look again) before searching or sleeping.
            if !self.held.is_empty() && self.held.release() {
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
            // Sleep: announce, re-check, park.
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
                self.held.spill(&self.dev); // a job may be long: the held streams go to other workers
                if let JobTurn::Finished(err) = job.work(self.core) {
                    self.finish_job(&job, err);
                    self.run_stream(job.stream.clone());
                }
            }
            Work::Stream(s) | Work::Held(s) => self.run_stream(s),
        }
    }

    fn finish_job(&self, job: &Job, err: Option<crate::error::TaskError>) {
        let failed = err.is_some();
        if let Some(e) = err {
            job.stream.set_error_at(e, job.meta);
        }
        if job.start_ns != 0 {
            let mut rec = record(
                &job.stream,
                TaskKind::Kernel,
                job.kernel.name(),
                job.submit_ns,
                job.start_ns,
                job.meta,
            );
            rec.blocks = job.blocks;
            rec.spans = std::mem::take(&mut *job.spans.lock());
            rec.spans.sort_by_key(|s| (s.core, s.start_ns));
            rec.failed = failed;
            job.stream.dev.profiler.emit(rec);
        }
        job.stream.timeline.advance(1);
    }

    /// Drains up to `BUDGET` tasks of a stream this worker owns.
    fn run_stream(&mut self, mut s: Arc<StreamInner>) {
        s.complete_inflight();
        let mut budget = BUDGET;
        let began = Instant::now();
        loop {
            let Some(task) = s.queue.pop() else {
                let hold = match self.linger(&s) {
                    Linger::More => continue,
                    // other work came: keep this stream if the recent batches were tiny
                    Linger::Switch => self.held.quick(began.elapsed() < TINY) >= QUICK_BATCHES,
                    Linger::Nothing => false,
                };
                let back = if hold {
                    match self.held.keep(s) {
                        Ok(()) => return,
                        Err(back) => back, // the set is full
                    }
                } else {
                    s
                };
                if back.sched.try_idle() {
                    return;
                }
                s = back; // a push came meanwhile
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
            if !self.exec(&s, task) {
                return; // ownership moved to a job, an engine or a waiter
            }
            if !self.held.is_empty() && began.elapsed() >= SPILL {
                self.held.spill(&self.dev); // long work: other workers take the held streams
                self.held.quick(false);
            }
            budget -= 1;
            if budget == 0 {
                if !self.dev.has_work() {
                    budget = BUDGET; // nobody else is waiting: keep going
                    continue;
                }
                self.dev.make_ready(s);
                return;
            }
        }
    }

    /// Briefly waits for more work on `s` while nothing else is ready or held with work.
    /// Lingering counts as searching (when the notifier allows it): a producer making
    /// another stream ready meanwhile leaves the sleepers asleep, since this worker sees
    /// that stream within a few polls — with tiny kernels one worker keeps up and the
    /// others stay parked instead of spinning on the cores the submitting threads need.
    fn linger(&mut self, s: &StreamInner) -> Linger {
        self.begin_search();
        for i in 0..LINGER {
            if !s.queue.is_empty() {
                self.finish_search();
                return Linger::More;
            }
            if i % 8 == 0 && self.held.has_work() {
                return Linger::Switch;
            }
            if i % 32 == 0 && self.dev.has_work() {
                return Linger::Switch;
            }
            std::hint::spin_loop();
        }
        Linger::Nothing
    }

    /// An injected fault for this kernel launch (`NPURT_FAULT=kernel:N` / `hang:N`); true
    /// if one fired (the kernel then does not run). A failure sets the stream's sticky
    /// error as a real kernel fault does; a hang holds this core until the stream is
    /// aborted or the device goes down (a forced destroy or reset ends it).
    #[cold]
    fn injected(&self, s: &StreamInner, kernel: &dyn crate::kernel::Kernel, blocks: u32) -> bool {
        use crate::fault::{fires, stall, Fault};
        if fires(Fault::Kernel) {
            s.set_error(TaskError::Kernel {
                kernel: kernel.name().to_string(),
                block: 0,
                blocks,
                message: "injected fault (NPURT_FAULT kernel)".to_string(),
            });
            return true;
        }
        if fires(Fault::Hang) {
            stall(None, || {
                s.aborted() || self.dev.shutdown.load(Acquire) || crate::lifecycle::is_shut_down()
            });
            return true;
        }
        false
    }

    /// Runs one task. Returns false when the stream was handed to someone else. Kernels
    /// run here; every other task as on any owner of a stream ([`exec_other`]).
    fn exec(&mut self, s: &Arc<StreamInner>, task: Task) -> bool {
        let Task { op, submit_ns, meta } = task;
        let (kernel, blocks) = match op {
            Op::Kernel { kernel, blocks } => (kernel, blocks),
            op => return exec_other(s, Task { op, submit_ns, meta }),
        };
        if crate::fault::armed() && self.injected(s, &*kernel, blocks) {
            s.timeline.advance(1);
            return true;
        }
        if blocks > 1 {
            self.held.spill(&self.dev);
            let job = Arc::new(Job::new(kernel, blocks, s.clone(), submit_ns, meta));
            self.dev.publish(job.clone());
            return match job.work(self.core) {
                JobTurn::Finished(err) => {
                    self.finish_job(&job, err);
                    true
                }
                JobTurn::Released => false,
            };
        }
        // A task created while its device was observed carries its submit time.
        let start_ns = if submit_ns != 0 { crate::clock::now_ns() } else { 0 };
        let blk = BlockCtx {
            block_idx: 0,
            block_dim: 1,
            core_id: self.core,
        };
        let r = run_block(&*kernel, blk);
        let failed = r.is_err();
        if let Err(e) = r {
            s.set_error_at(e, meta);
        }
        if submit_ns != 0 {
            let mut rec = record(s, TaskKind::Kernel, kernel.name(), submit_ns, start_ns, meta);
            (rec.core, rec.failed) = (self.core, failed);
            s.dev.profiler.emit(rec);
        }
        s.timeline.advance(1);
        true
    }
}

/// A record of a task of `s` that ends now (the fields every kind has; the caller fills
/// in the rest). The task's sequence number is the stream's completed count: tasks
/// complete in order and this one has not been counted yet.
pub(super) fn record(
    s: &StreamInner,
    kind: TaskKind,
    name: &str,
    submit_ns: u64,
    start_ns: u64,
    meta: u32,
) -> TaskRecord {
    TaskRecord {
        device: s.dev.ordinal,
        context: s.ctx_id,
        stream: s.id,
        seq: s.timeline.completed(),
        kind,
        name: crate::profiler::intern_name(name),
        blocks: 1,
        bytes: 0,
        core: NO_CORE,
        spans: Vec::new(),
        submit_ns,
        start_ns,
        end_ns: crate::clock::now_ns(),
        meta,
        wait_on: None,
        failed: false,
    }
}
