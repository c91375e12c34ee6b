//! Engine threads beside the AI cores: the copy engine (so copies overlap compute) and the
//! host-callback thread (so a callback that blocks, e.g. on Python's GIL, never holds an
//! AI core). A stream whose head task is on an engine is owned by that engine until the
//! task finishes; then it goes back on the ready list with its head marked complete.

use super::DeviceShared;
use crate::error::TaskError;
use crate::profiler::{TaskKind, TaskRecord};
use crate::stream::task::{Engine, EngineOp};
use crate::stream::StreamInner;
use crate::thread_role::mark_runtime_thread;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Release;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

pub(crate) struct EngineJob {
    pub(crate) stream: Arc<StreamInner>,
    pub(crate) op: EngineOp,
    pub(crate) submit_ns: u64,
}

/// Starts one engine thread; returns its queue and handle.
pub(crate) fn spawn_engine(
    shared: &Arc<DeviceShared>,
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
        let EngineJob { stream, op, submit_ns } = job;
        if stream.skipping() {
            drop(op);
        } else {
            let start_ns = if stream.dev.profiler.enabled() {
                crate::clock::now_ns()
            } else {
                0
            };
            let result = match catch_unwind(AssertUnwindSafe(op)) {
                Ok(r) => r,
                Err(p) => Err(match engine {
                    Engine::Copy => TaskError::Copy(super::job::panic_message(&p)),
                    Engine::Host => TaskError::HostCallback(super::job::panic_message(&p)),
                }),
            };
            if let Err(e) = result {
                stream.set_error(e);
            }
            if start_ns != 0 {
                let kind = if engine == Engine::Copy {
                    TaskKind::Copy
                } else {
                    TaskKind::HostFunc
                };
                stream.dev.profiler.emit(TaskRecord {
                    device,
                    stream: stream.id,
                    kind,
                    name: format!("{kind:?}"),
                    blocks: 1,
                    submit_ns,
                    start_ns,
                    end_ns: crate::clock::now_ns(),
                    core_id: u32::MAX,
                });
            }
        }
        stream.inflight.store(true, Release);
        let dev = stream.dev.clone();
        dev.make_ready(stream);
    }
}
