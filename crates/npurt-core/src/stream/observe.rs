//! What a stream reports: its sticky error (the first failure, raised by every later
//! check), and what observers see — the profiler (a task's submit time and call site, the
//! launch note) and the logs (a line per queued task, one for the failure). The observer
//! parts are off the hot path: the pushers call them only when `profiler::active()` or
//! `log`'s level check said so.

use super::task::{Op, Task};
use super::StreamInner;
use crate::error::{Result, StreamError, TaskError};
use std::sync::atomic::Ordering::{Acquire, Release};

impl StreamInner {
    /// Records the first failure; later tasks on this stream are skipped.
    #[allow(dead_code)] // for failures without a launch (fault injection)
    pub(crate) fn set_error(&self, e: TaskError) {
        self.set_error_at(e, 0);
    }

    /// [`set_error`](Self::set_error) for a task launched at call site `meta`
    /// ([`crate::profiler::site`]): the error raised later names that launch.
    pub(crate) fn set_error_at(&self, e: TaskError, meta: u32) {
        let mut slot = self.error.lock();
        if slot.is_none() {
            if log::log_enabled!(log::Level::Error) {
                self.log_failure(&e, meta);
            }
            *slot = Some((e, meta));
        }
        self.failed.store(true, Release);
    }

    pub(super) fn sticky(&self) -> Result<()> {
        if self.failed.load(Acquire) {
            if let Some((e, meta)) = self.error.lock().clone() {
                return Err(StreamError::TaskFailed {
                    stream: self.id,
                    source: e,
                    launched_at: crate::error::LaunchSite(crate::profiler::site::describe(meta)),
                }
                .into());
            }
        }
        Ok(())
    }

    /// A task created while a profiler observes some device or call sites are captured:
    /// the submit time (observed devices only) and the launch's call site.
    #[cold]
    pub(super) fn observed_task(&self, op: Op) -> Task {
        let observed = self.dev.profiler.enabled();
        let submit_ns = if observed { crate::clock::now_ns() } else { 0 };
        let meta = crate::profiler::site::capture(observed, matches!(op, Op::Kernel { .. }));
        Task { op, submit_ns, meta }
    }

    #[cold]
    pub(super) fn note_launch(&self, seq: u64, submit_ns: u64, meta: u32) {
        self.dev.profiler.launched(crate::profiler::LaunchNote {
            device: self.dev.ordinal,
            stream: self.id,
            seq,
            thread: crate::profiler::thread_id(),
            submit_ns,
            queued_ns: crate::clock::now_ns(),
            meta,
        });
    }

    /// The debug line of a queued task (`what` from [`describe`]).
    #[cold]
    pub(super) fn log_queued(&self, what: &str, seq: u64, meta: u32) {
        let at = crate::profiler::site::describe(meta).map_or_else(String::new, |s| format!(" at {s}"));
        log::debug!(
            "queued {what}: device {} context {} stream {} task {seq}{at}",
            self.dev.ordinal,
            self.ctx_id,
            self.id
        );
    }

    /// The error line of a task failure. The failing task is the stream's oldest
    /// unfinished one: tasks complete in order and a failure is set before its task counts.
    #[cold]
    pub(super) fn log_failure(&self, e: &TaskError, meta: u32) {
        let at = crate::profiler::site::describe(meta).map_or_else(String::new, |s| format!(" (launched at {s})"));
        log::error!(
            "task failed: device {} context {} stream {} task {}: {e}{at}",
            self.dev.ordinal,
            self.ctx_id,
            self.id,
            self.timeline.completed()
        );
    }
}

/// What a queued task is, for its log line.
pub(super) fn describe(op: &Op) -> String {
    match op {
        Op::Kernel { kernel, blocks } => format!("kernel {:?} ({blocks} blocks)", kernel.name()),
        Op::Record(_) => "timing event record".to_string(),
        Op::Wait { on, target, .. } => format!("wait for stream {} task {}", on.id, target.saturating_sub(1)),
        Op::WaitExternal { .. } => "wait for an interprocess event".to_string(),
        Op::Engine(_, _, d) if d.bytes > 0 => format!("{} of {} B", d.kind.label(), d.bytes),
        Op::Engine(_, _, d) => d.kind.label().to_string(),
    }
}
