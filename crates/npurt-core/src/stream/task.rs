//! What a stream queue holds.

use crate::error::TaskError;
use crate::kernel::Kernel;
use crate::profiler::TaskKind;
use crate::stream::StreamInner;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Work that runs on an engine thread (copy engine or host-callback thread).
pub type EngineOp = Box<dyn FnOnce() -> Result<(), TaskError> + Send>;

/// What an engine task does, for profiles: its kind, the bytes it moves and, where the
/// kind's label says too little, its name (a collective: `HcclAllReduce`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineDesc {
    pub kind: TaskKind,
    pub bytes: u64,
    /// A thin pointer (8 bytes), so the description keeps a task in one 64-byte ring slot.
    pub name: Option<&'static &'static str>,
}

impl EngineDesc {
    pub fn new(kind: TaskKind, bytes: u64) -> Self {
        Self {
            kind,
            bytes,
            name: None,
        }
    }

    /// The description of an engine task queued without one.
    pub fn of(engine: Engine) -> Self {
        let kind = match engine {
            Engine::Copy => TaskKind::Copy,
            Engine::Host => TaskKind::HostFunc,
        };
        Self::new(kind, 0)
    }

    /// The name profiles show: the task's own, else its kind's label.
    pub fn label(&self) -> &'static str {
        self.name.map_or(self.kind.label(), |n| n)
    }
}

/// Which engine thread runs an [`EngineOp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The copy engine (DMA): copies overlap compute on the AI cores.
    Copy,
    /// The host-callback thread.
    Host,
}

pub(crate) enum Op {
    /// A kernel split into `blocks` blocks.
    Kernel { kernel: Arc<dyn Kernel>, blocks: u32 },
    /// A timing event: stamp the time when every earlier task has finished.
    Record(Arc<AtomicU64>),
    /// Block this stream until `on` has completed `target` tasks (or, with a timeout, fail
    /// the stream with a wait timeout once it passes).
    Wait {
        on: Arc<StreamInner>,
        target: u64,
        timeout: Option<std::time::Duration>,
    },
    /// Block this stream until an outside condition holds (an interprocess event's record
    /// in another process), polled by the external-wait thread, not a worker.
    WaitExternal {
        cond: Arc<dyn ExternalCond>,
        timeout: Option<std::time::Duration>,
    },
    /// Run on an engine thread.
    Engine(Engine, EngineOp, EngineDesc),
}

/// A condition outside this process's timelines that a stream can wait on
/// (`executor/extwait.rs` polls it).
pub(crate) trait ExternalCond: Send + Sync {
    /// True once it holds; an error when it never will. `thorough`: also run the slower
    /// checks (is the other process alive?), done every few milliseconds.
    fn poll(&self, thorough: bool) -> Result<bool, TaskError>;
    /// A value that changes whenever the condition may have changed (read before `poll`).
    fn seq(&self) -> u32;
    /// Sleeps until `seq` moves from `seen` or `timeout` passes.
    fn sleep(&self, seen: u32, timeout: std::time::Duration);
}

impl Op {
    pub(crate) fn kind(&self) -> TaskKind {
        match self {
            Op::Kernel { .. } => TaskKind::Kernel,
            Op::Record(_) => TaskKind::Record,
            Op::Wait { .. } | Op::WaitExternal { .. } => TaskKind::Wait,
            Op::Engine(_, _, d) => d.kind,
        }
    }
}

pub(crate) struct Task {
    pub(crate) op: Op,
    /// Submit time when profiling is on, else 0.
    pub(crate) submit_ns: u64,
    /// The launch's call site ([`crate::profiler::site`]), 0 when none was captured.
    pub(crate) meta: u32,
}

#[cfg(test)]
mod tests {
    /// A task fills one 64-byte ring slot (the rings' footprint is what many-stream launch
    /// rates pay for).
    #[test]
    fn a_task_fits_one_ring_slot() {
        assert!(
            std::mem::size_of::<super::Task>() <= 64,
            "{}",
            std::mem::size_of::<super::Task>()
        );
    }
}
