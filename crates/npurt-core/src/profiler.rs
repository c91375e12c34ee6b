//! The hook a profiler attaches to: one record per task with its submit, start and end
//! times and the core that ran it. With no observer installed the task path pays one
//! relaxed atomic load per task and per launch.

use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// What kind of task a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    Kernel,
    Record,
    Wait,
    HostFunc,
    Copy,
}

/// One finished task.
#[derive(Debug, Clone)]
pub struct TaskRecord {
    pub device: u32,
    pub stream: u64,
    pub kind: TaskKind,
    /// Kernel name, or a fixed label for other kinds.
    pub name: String,
    pub blocks: u32,
    pub submit_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The AI core that ran (the last block of) the task; `u32::MAX` for engine tasks.
    pub core_id: u32,
}

/// Receives task records; called on runtime threads, so it must be quick.
pub trait TaskObserver: Send + Sync {
    fn on_task(&self, record: TaskRecord);
}

/// Per-device slot for the observer.
#[derive(Default)]
pub(crate) struct ProfilerSlot {
    enabled: AtomicBool,
    observer: RwLock<Option<Arc<dyn TaskObserver>>>,
}

impl ProfilerSlot {
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    pub(crate) fn set(&self, obs: Option<Arc<dyn TaskObserver>>) {
        let on = obs.is_some();
        *self.observer.write() = obs;
        self.enabled.store(on, Relaxed);
    }

    pub(crate) fn emit(&self, rec: TaskRecord) {
        if let Some(o) = self.observer.read().as_ref() {
            o.on_task(rec);
        }
    }
}
