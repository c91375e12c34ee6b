//! Engine threads beside the AI cores: the copy engine (so copies overlap compute) and the
//! host-callback threads (so a callback that blocks, e.g. on Python's GIL, never holds an
//! AI core). A stream whose head task is on an engine is owned by that engine until the
//! task finishes; then it goes back on the ready list with its head marked complete.
//!
//! Host callbacks are served by a small pool ([`HostPool`]) that grows when a callback
//! arrives while every callback thread is busy (up to [`MAX_HOST_THREADS`]): a callback
//! that blocks (pyACL's `ACL_CALLBACK_BLOCK` waiting for its user thread) holds up only
//! its own stream, as streams on the card are independent. Order within a stream holds
//! because a stream has at most one task on an engine at a time.

use super::Scheduler;
use crate::error::TaskError;
use crate::stream::task::{Engine, EngineDesc, EngineOp};
use crate::stream::StreamInner;
use crate::thread_role::mark_runtime_thread;
use parking_lot::Mutex;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Most host-callback threads per device.
pub(crate) const MAX_HOST_THREADS: usize = 32;

/// The host-callback threads of one device: they share one queue; [`HostPool::grow`]
/// adds a thread when none is idle.
pub(crate) struct HostPool {
    ordinal: u32,
    rx: Arc<Mutex<Receiver<EngineJob>>>,
    idle: Arc<AtomicUsize>,
    /// Jobs sent and not yet taken by a thread: more than `idle` means one would wait
    /// behind a busy (maybe blocked) callback, so the pool grows.
    queued: Arc<AtomicUsize>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl HostPool {
    /// The pool and the sender of its queue; no thread yet (see [`grow`](Self::grow)).
    pub(crate) fn new(ordinal: u32) -> (Self, Sender<EngineJob>) {
        let (tx, rx) = channel::<EngineJob>();
        let pool = HostPool {
            ordinal,
            rx: Arc::new(Mutex::new(rx)),
            idle: Arc::new(AtomicUsize::new(0)),
            queued: Arc::new(AtomicUsize::new(0)),
            handles: Mutex::new(Vec::new()),
        };
        (pool, tx)
    }

    /// Starts one more callback thread (unless the pool is at its maximum).
    pub(crate) fn grow(&self) -> std::io::Result<()> {
        let mut handles = self.handles.lock();
        if handles.len() >= MAX_HOST_THREADS {
            return Ok(());
        }
        let (rx, idle, queued, ordinal) = (self.rx.clone(), self.idle.clone(), self.queued.clone(), self.ordinal);
        let index = handles.len() as u32;
        let h = std::thread::Builder::new()
            .name(format!("npurt-callback-{ordinal}"))
            .spawn(move || host_main(ordinal, rx, idle, queued, index))?;
        handles.push(h);
        Ok(())
    }

    /// After a job was queued: adds a thread if the jobs waiting outnumber the idle
    /// threads (a job sent just before an idle thread took the previous one counts too:
    /// a blocking task such as a collective must never wait behind another).
    pub(crate) fn after_send(&self) {
        if self.idle.load(Acquire) < self.queued.load(Acquire) {
            let _ = self.grow(); // cannot spawn: the job waits for a busy thread
        }
    }

    /// Before a job is sent (counted first, so that a thread taking it at once never
    /// sees the count below zero); `sent` false: the send failed, uncount it.
    pub(crate) fn count_send(&self, sent: bool) {
        if sent {
            self.queued.fetch_add(1, AcqRel);
        } else {
            self.queued.fetch_sub(1, AcqRel);
        }
    }

    /// The threads to join at shutdown (they exit once the queue's sender is dropped).
    pub(crate) fn take_handles(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.handles.lock())
    }
}

fn host_main(
    device: u32,
    rx: Arc<Mutex<Receiver<EngineJob>>>,
    idle: Arc<AtomicUsize>,
    queued: Arc<AtomicUsize>,
    index: u32,
) {
    mark_runtime_thread();
    loop {
        idle.fetch_add(1, AcqRel);
        let job = rx.lock().recv();
        idle.fetch_sub(1, AcqRel);
        if job.is_ok() {
            queued.fetch_sub(1, AcqRel);
        }
        match job {
            Ok(job) => run_job(device, Engine::Host, job, index),
            Err(_) => return, // the device is shutting down
        }
    }
}

pub(crate) struct EngineJob {
    pub(crate) stream: Arc<StreamInner>,
    pub(crate) op: EngineOp,
    pub(crate) submit_ns: u64,
    pub(crate) meta: u32,
    pub(crate) desc: EngineDesc,
}

/// Starts one engine thread; returns its queue and handle.
pub(crate) fn spawn_engine(
    shared: &Arc<Scheduler>,
    engine: Engine,
) -> std::io::Result<(Sender<EngineJob>, JoinHandle<()>)> {
    let (tx, rx) = channel::<EngineJob>();
    let name = match engine {
        Engine::Copy => format!("npurt-copy-{}", shared.ordinal),
        Engine::Host => format!("npurt-callback-{}", shared.ordinal),
    };
    let ordinal = shared.ordinal;
    let handle = std::thread::Builder::new()
        .name(name)
        .spawn(move || engine_main(ordinal, engine, rx))?;
    Ok((tx, handle))
}

fn engine_main(device: u32, engine: Engine, rx: Receiver<EngineJob>) {
    mark_runtime_thread();
    while let Ok(job) = rx.recv() {
        run_job(device, engine, job, 0);
    }
}

/// Runs one engine task; `thread` is the engine thread's index (profiles), or
/// [`super::start::PUSHER_THREAD`] when its pusher runs it.
pub(crate) fn run_job(_device: u32, engine: Engine, job: EngineJob, thread: u32) {
    {
        let EngineJob {
            stream,
            op,
            submit_ns,
            meta,
            desc,
        } = job;
        if engine == Engine::Copy && crate::fault::armed() && crate::fault::fires(crate::fault::Fault::CopyStall) {
            // An injected stall (`NPURT_FAULT=copy_stall:N`): the copy engine holds this
            // copy until the stream is aborted, the device goes down or the limit passes.
            let dev = stream.dev.clone();
            crate::fault::stall(Some(crate::fault::STALL_LIMIT), || {
                stream.aborted() || !dev.is_alive() || crate::lifecycle::is_shut_down()
            });
        }
        if stream.skipping() {
            drop(op);
        } else {
            let start_ns = if submit_ns != 0 { crate::clock::now_ns() } else { 0 };
            if engine == Engine::Host && crate::sanitizer::on() {
                crate::sanitizer::on_callback(stream.id, stream.timeline.completed());
            }
            let result = match catch_unwind(AssertUnwindSafe(op)) {
                Ok(r) => r,
                Err(p) => Err(match engine {
                    Engine::Copy => TaskError::Copy(super::job::panic_message(&p)),
                    Engine::Host => TaskError::HostCallback(super::job::panic_message(&p)),
                }),
            };
            let failed = result.is_err();
            if let Err(e) = result {
                stream.set_error_at(e, meta);
            }
            if start_ns != 0 {
                let mut rec = super::worker::record(&stream, desc.kind, desc.label(), submit_ns, start_ns, meta);
                (rec.bytes, rec.core, rec.failed) = (desc.bytes, thread, failed);
                stream.dev.profiler.emit(rec);
            }
        }
        super::start::resume(stream);
    }
}
