//! The AI-Core executor of one device: worker threads with stable core ids, per-priority
//! ready lists of streams, multi-block jobs, and the engine threads.
//!
//! Flow of a launch: the submitting thread pushes a task into the stream's ring; if the
//! stream was idle it goes on `ready[priority]` and, if no worker is searching, one sleeping
//! worker is unparked. A worker pops the stream and drains up to `BUDGET` tasks: single-block
//! kernels, records and satisfied waits run inline; a multi-block kernel is published as a
//! [`job::Job`] that every idle core helps with; engine tasks go to their engine thread; an
//! unsatisfied wait parks the stream on the other stream's timeline. See docs/ARCHITECTURE.md.

mod engine;
pub(crate) mod extwait;
mod held;
mod job;
mod notifier;
mod start;
mod state;
pub(crate) mod timer;
mod worker;

use crate::config::ExecConfig;
use crate::error::{DeviceError, Result};
use crate::stream::task::Engine;
use crate::stream::StreamInner;
use crossbeam_queue::SegQueue;
use engine::{EngineJob, HostPool};
use job::Job;
use notifier::Notifier;
use parking_lot::Mutex;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::mpsc::Sender;
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// Number of priority levels (ACL: 0 highest .. 7 lowest).
pub(crate) const PRIORITY_LEVELS: usize = 8;

pub(crate) use start::{start, start_pushed};
pub(crate) use state::DeviceState;

/// A device's scheduler, shared by its workers, engines and streams: ready lists, jobs,
/// notifier, engines, and (through `Deref`) the [`DeviceState`] that events and contexts
/// hold on their own.
pub(crate) struct Scheduler {
    pub(crate) state: Arc<DeviceState>,
    pub(crate) queue_depth: usize,
    pub(crate) spin_iters: u32,
    worker_spin: Duration,
    worker_policy: crate::config::WorkerPolicy,
    ready: [SegQueue<Arc<StreamInner>>; PRIORITY_LEVELS],
    jobs: Mutex<Vec<Arc<Job>>>,
    jobs_len: AtomicUsize,
    notifier: Notifier,
    threads: OnceLock<Vec<Thread>>,
    engines: Mutex<Option<[Sender<EngineJob>; 2]>>,
    host: HostPool,
    shutdown: AtomicBool,
}

impl std::ops::Deref for Scheduler {
    type Target = DeviceState;
    #[inline]
    fn deref(&self) -> &DeviceState {
        &self.state
    }
}

impl Scheduler {
    /// Puts a (scheduled) stream on its ready list and wakes a worker if needed.
    #[inline]
    pub(crate) fn make_ready(&self, s: Arc<StreamInner>) {
        let p = (s.priority as usize).min(PRIORITY_LEVELS - 1);
        self.ready[p].push(s);
        self.wake_one();
    }

    #[inline]
    fn wake_one(&self) {
        if let Some(idx) = self.notifier.notify_one() {
            if let Some(t) = self.threads.get().and_then(|v| v.get(idx)) {
                t.unpark();
            }
        }
    }

    fn has_work(&self) -> bool {
        self.jobs_len.load(Acquire) > 0 || self.ready.iter().any(|q| !q.is_empty())
    }

    /// Pops a ready stream: highest priority first, but every eighth pick starts from the
    /// lowest level so low-priority streams cannot starve.
    fn pop_ready(&self, picks: &mut u32) -> Option<Arc<StreamInner>> {
        *picks = picks.wrapping_add(1);
        if picks.is_multiple_of(8) {
            self.ready.iter().rev().find_map(|q| q.pop())
        } else {
            self.ready.iter().find_map(|q| q.pop())
        }
    }

    fn publish(&self, job: Arc<Job>) {
        let mut jobs = self.jobs.lock();
        jobs.push(job);
        self.jobs_len.store(jobs.len(), Release);
        drop(jobs);
        self.wake_one();
    }

    fn current_job(&self) -> Option<Arc<Job>> {
        if self.jobs_len.load(Relaxed) == 0 {
            return None;
        }
        let mut jobs = self.jobs.lock();
        jobs.retain(|j| j.has_blocks());
        self.jobs_len.store(jobs.len(), Release);
        jobs.first().cloned()
    }

    fn send_engine(&self, engine: Engine, mut job: EngineJob) {
        let guard = self.engines.lock();
        if let Some(senders) = guard.as_ref() {
            let idx = match engine {
                Engine::Copy => 0,
                Engine::Host => 1,
            };
            if idx == 1 {
                self.host.count_send(true);
            }
            match senders[idx].send(job) {
                Ok(()) => {
                    drop(guard);
                    if idx == 1 {
                        self.host.after_send();
                    }
                    return;
                }
                Err(back) => {
                    if idx == 1 {
                        self.host.count_send(false);
                    }
                    job = back.0
                }
            }
        }
        // Engines are gone (device shutting down): finish the task without running it.
        drop(guard);
        let EngineJob { stream, op, .. } = job;
        drop(op);
        stream.timeline.advance(1);
    }
}

/// A running executor: owns the device's threads.
pub(crate) struct Executor {
    pub(crate) shared: Arc<Scheduler>,
    handles: Vec<JoinHandle<()>>,
}

impl Executor {
    pub(crate) fn start(ordinal: u32, cfg: &ExecConfig) -> Result<Self> {
        let workers = cfg.workers.max(1);
        let (host, host_tx) = HostPool::new(ordinal);
        let shared = Arc::new(Scheduler {
            state: Arc::new(DeviceState::new(ordinal, workers)),
            queue_depth: cfg.queue_depth,
            spin_iters: cfg.host_spin_iters,
            worker_spin: cfg.worker_spin,
            worker_policy: cfg.worker_policy,
            ready: Default::default(),
            jobs: Mutex::new(Vec::new()),
            jobs_len: AtomicUsize::new(0),
            notifier: Notifier::new(workers),
            threads: OnceLock::new(),
            engines: Mutex::new(None),
            host,
            shutdown: AtomicBool::new(false),
        });
        let spawn_err = |e: std::io::Error| DeviceError::Spawn {
            device: ordinal,
            reason: e.to_string(),
        };
        let mut handles = Vec::with_capacity(workers + 2);
        let mut threads = Vec::with_capacity(workers);
        for core in 0..workers {
            let s = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("npurt-aicore-{ordinal}.{core}"))
                .spawn(move || worker::run(s, core))
                .map_err(spawn_err)?;
            threads.push(h.thread().clone());
            handles.push(h);
        }
        let _ = shared.threads.set(threads);
        let (copy_tx, copy_h) = engine::spawn_engine(&shared, Engine::Copy).map_err(spawn_err)?;
        shared.host.grow().map_err(spawn_err)?;
        *shared.engines.lock() = Some([copy_tx, host_tx]);
        crate::lifecycle::executor_started(ordinal, &shared);
        handles.push(copy_h);
        Ok(Self { shared, handles })
    }

    /// Stops and joins every thread. Work still queued is dropped (callers synchronize
    /// first); ready lists are drained to break stream ↔ device reference cycles.
    pub(crate) fn shutdown(mut self) {
        let s = &self.shared;
        crate::lifecycle::executor_stopped(s.ordinal, s);
        s.mark_dead();
        s.shutdown.store(true, Release);
        for idx in s.notifier.wake_all() {
            let _ = idx;
        }
        if let Some(ts) = s.threads.get() {
            for t in ts {
                t.unpark();
            }
        }
        *s.engines.lock() = None; // engine threads exit when their queue closes
        let me = std::thread::current().id();
        let host = s.host.take_handles();
        for h in self.handles.drain(..).chain(host) {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
        for q in &s.ready {
            while q.pop().is_some() {}
        }
        s.jobs.lock().clear();
    }
}
