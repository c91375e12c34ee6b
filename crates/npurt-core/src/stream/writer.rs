//! The parts of [`Stream`] that the device-array bookkeeping and the bindings' sliced
//! waits use: ordering after a (possibly released) last-writer stream without blocking,
//! launches deferred behind such a wait, and waits that report instead of raising a
//! timeout (so that a binding can wait in slices and check for signals in between).

use super::task::Op;
use super::{Pending, Stream, MAX_BLOCKS};
use crate::error::{DeviceError, Error, Result, StreamError};
use crate::kernel::Kernel;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Stream {
    /// Orders this stream after everything queued on `writer` so far, for the last-writer
    /// bookkeeping of device arrays. Unlike [`wait_stream`](Self::wait_stream), `writer`
    /// may have been released or destroyed: its queued work still runs, so it still counts
    /// (its sticky error is raised). Never blocks: a full ring returns the wait as
    /// `Some(Pending)`, to be pushed with [`push_pending`](Self::push_pending) before any
    /// later task of this launch.
    #[inline]
    pub fn try_wait_writer(&self, writer: &Stream) -> Result<Option<Pending>> {
        let w = &writer.0;
        if Arc::ptr_eq(w, &self.0) || !w.dev.is_alive() {
            return Ok(None); // same stream, or a reset device (its work ran or was dropped)
        }
        w.sticky()?;
        let target = w.queue.tail();
        if crate::sanitizer::on() {
            crate::sanitizer::on_wait(&self.0, w, target);
        }
        if w.timeline.completed() >= target {
            return Ok(None);
        }
        self.0.check_usable()?;
        let op = Op::Wait {
            on: w.clone(),
            target,
            timeout: None,
        };
        Ok(self.0.try_push(self.0.task(op)).err().map(Pending))
    }

    /// A kernel launch checked like [`try_launch`](Self::try_launch) but not queued: push it
    /// with [`push_pending`](Self::push_pending) (used when earlier tasks of the same launch
    /// are themselves still pending).
    pub fn pending_launch(&self, kernel: Arc<dyn Kernel>, blocks: u32) -> Result<Pending> {
        if blocks == 0 || blocks > MAX_BLOCKS {
            return Err(Error::invalid(format!(
                "block count {blocks} is out of range 1..={MAX_BLOCKS}"
            )));
        }
        self.0.check_usable()?;
        Ok(Pending(self.0.task(Op::Kernel { kernel, blocks })))
    }

    /// Waits up to `timeout` for the first `target` tasks (see
    /// [`submitted_count`](Self::submitted_count)) to complete, whatever the stream's status
    /// (released streams still run their queued work); true when they did. Raises the sticky
    /// error. For waits done in slices (so that a binding can check for signals between them).
    pub fn wait_completed(&self, target: u64, timeout: Option<Duration>) -> Result<bool> {
        crate::thread_role::forbid_runtime_thread("synchronize")?;
        if !self.0.dev.is_alive() {
            return Err(DeviceError::gone(self.0.dev.ordinal).into());
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let done = self.0.timeline.wait_for(target, deadline, self.0.dev.spin_iters);
        if done && crate::sanitizer::on() {
            crate::sanitizer::on_host_sync(self.0.id, target);
        }
        self.0.sticky()?;
        Ok(done)
    }

    /// Tasks submitted so far: the target of a [`wait_completed`](Self::wait_completed)
    /// that waits for everything queued now.
    pub fn submitted_count(&self) -> u64 {
        self.0.queue.tail()
    }

    /// True if the stream has work queued or running (whatever its status).
    #[inline]
    pub fn has_pending_work(&self) -> bool {
        let tail = self.0.queue.tail();
        let pending = self.0.dev.is_alive() && self.0.timeline.completed() < tail;
        if !pending && crate::sanitizer::on() {
            crate::sanitizer::on_host_sync(self.0.id, tail); // the host saw it all complete
        }
        pending
    }

    /// The error a [`synchronize`](Self::synchronize) with `timeout` gives when it passes.
    pub fn timeout_error(&self, timeout: Duration) -> Error {
        StreamError::SyncTimeout {
            stream: self.0.id,
            secs: timeout.as_secs_f64(),
        }
        .into()
    }

    /// Checks the stream is usable (not destroyed, device alive, no sticky error).
    pub fn check(&self) -> Result<()> {
        self.0.check_usable()
    }
}
