//! [`StreamInner`]'s own side: creation, the state checks, pushing tasks (lock-free, or
//! waiting for room), waiting for all of them, and retiring (destroyed / aborted).

use super::queue::TaskQueue;
use super::sched_state::SchedState;
use super::task::{Op, Task};
use super::timeline::Timeline;
use super::{observe, StreamInner, StreamList, ABORTED, ALIVE, DESTROYED, NEXT_STREAM_ID};
use crate::error::{DeviceError, Result, StreamError};
use crate::executor::Scheduler;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU8};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

impl StreamInner {
    pub(crate) fn new(
        dev: Arc<Scheduler>,
        list: Weak<StreamList>,
        ctx_id: u64,
        priority: u8,
        is_default: bool,
    ) -> Arc<Self> {
        let depth = dev.queue_depth;
        Arc::new(Self {
            id: NEXT_STREAM_ID.fetch_add(1, Relaxed),
            priority,
            dev,
            list,
            ctx_id,
            queue: TaskQueue::new(depth),
            sched: CachePadded::new(SchedState::new()),
            timeline: CachePadded::new(Timeline::new()),
            inflight: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            status: AtomicU8::new(ALIVE),
            is_default,
        })
    }

    /// The new owner's first step: counts the head task complete if it finished on the
    /// thread that handed the stream over (an engine, a wait's completer). Only the owner
    /// writes the flag, so a load (no read-modify-write) leaves the stream's line shared
    /// with the pushers that read its state on every launch.
    #[inline]
    pub(crate) fn complete_inflight(&self) {
        if self.inflight.load(Acquire) {
            self.inflight.store(false, Relaxed);
            self.timeline.advance(1);
        }
    }

    /// True when queued tasks must be dropped instead of run (sticky error or abort).
    #[inline]
    pub(crate) fn skipping(&self) -> bool {
        self.failed.load(Relaxed) || self.status.load(Relaxed) == ABORTED
    }

    /// True once the stream was aborted (forced destroy or forced device reset).
    pub(crate) fn aborted(&self) -> bool {
        self.status.load(Acquire) == ABORTED
    }

    /// Fails if the stream (or its device) can no longer be used.
    #[inline]
    pub(crate) fn check_usable(&self) -> Result<()> {
        if !self.dev.is_alive() {
            return Err(DeviceError::gone(self.dev.ordinal).into());
        }
        match self.status.load(Acquire) {
            ALIVE => {}
            DESTROYED => return Err(StreamError::Destroyed(self.id).into()),
            _ => return Err(StreamError::Aborted(self.id).into()),
        }
        self.sticky()
    }

    /// Pushes without blocking; gives the task back when the ring is full.
    #[inline]
    pub(crate) fn try_push(self: &Arc<Self>, task: Task) -> std::result::Result<u64, Task> {
        self.try_push_as(task, false)
    }

    /// [`try_push`](Self::try_push); `run_here`: if the stream was idle, this thread may run
    /// the task itself when it is a host-engine op (`executor::start_pushed`).
    #[inline]
    pub(crate) fn try_push_as(self: &Arc<Self>, task: Task, run_here: bool) -> std::result::Result<u64, Task> {
        let (submit_ns, meta) = (task.submit_ns, task.meta);
        let what = log::log_enabled!(log::Level::Debug).then(|| observe::describe(&task.op));
        let san = crate::sanitizer::on().then(|| task.op.kind());
        let pos = self.queue.push(task)?;
        if let Some(kind) = san {
            crate::sanitizer::on_submit(self, pos, meta, kind);
        }
        if submit_ns != 0 {
            self.note_launch(pos, submit_ns, meta);
        }
        if let Some(what) = what {
            self.log_queued(&what, pos, meta);
        }
        if self.sched.notify() {
            // It was idle: this thread owns it now.
            if run_here {
                crate::executor::start_pushed(self.clone(), pos);
            } else {
                crate::executor::start(self.clone());
            }
        }
        Ok(pos)
    }

    /// Pushes, waiting for room when the ring is full (back-pressure).
    pub(crate) fn push_blocking(self: &Arc<Self>, mut task: Task) -> Result<u64> {
        loop {
            match self.try_push(task) {
                Ok(pos) => return Ok(pos),
                Err(back) => task = back,
            }
            self.check_usable()?;
            // Room appears once the oldest queued task has completed.
            let target = self.queue.tail().saturating_sub(self.queue.capacity()) + 1;
            self.timeline.wait_for(target, None, self.dev.spin_iters);
        }
    }

    #[inline]
    pub(crate) fn task(&self, op: Op) -> Task {
        if crate::profiler::active() {
            return self.observed_task(op);
        }
        Task {
            op,
            submit_ns: 0,
            meta: 0,
        }
    }

    /// Waits until everything submitted so far has finished.
    pub(crate) fn wait_all(&self, timeout: Option<Duration>) -> bool {
        let target = self.queue.tail();
        let deadline = timeout.map(|t| Instant::now() + t);
        let done = self.timeline.wait_for(target, deadline, self.dev.spin_iters);
        if done && crate::sanitizer::on() {
            crate::sanitizer::on_host_sync(self.id, target);
        }
        done
    }

    /// Drops queued tasks and marks them complete; only once the device's threads are gone.
    pub(crate) fn abandon(&self) {
        self.retire(true);
        while self.queue.pop().is_some() {}
        let (tail, done) = (self.queue.tail(), self.timeline.completed());
        if tail > done {
            self.timeline.advance(tail - done);
        }
    }

    /// Marks the stream destroyed (`force`: also drop its queued work).
    /// A forced retire also aborts a stream already destroyed or released whose work is
    /// still queued (a forced device reset drops everything queued).
    pub(crate) fn retire(&self, force: bool) {
        if force {
            self.status.store(ABORTED, Release);
        } else {
            let _ = self.status.compare_exchange(ALIVE, DESTROYED, AcqRel, Acquire);
        }
    }
}
