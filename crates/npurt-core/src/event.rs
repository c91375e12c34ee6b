//! Events: a recorded point on a stream's timeline.
//!
//! Recording an event without timing reads the stream's submitted-task count (no task is
//! queued); with timing it queues a record task that stamps the time when all earlier work
//! on the stream has finished. Querying compares the stream's completed count with the
//! recorded target: one lock-free load. Re-recording overwrites the point (as in ACL/CUDA);
//! an event never recorded counts as complete.
//!
//! An interprocess event (`create_ipc_event`, `open_ipc_event`) keeps its state in a slot
//! of the device's shared region instead (`shared/ipc_event.rs`): a record completes the
//! slot's record number when the stream reaches the point; stream waits park on the
//! external-wait thread; before any record, waits wait for the first one.

use crate::error::{DeviceError, Error, EventError, Result};
use crate::executor::DeviceState;
use crate::shared::IpcEvent;
use crate::stream::task::ExternalCond;
use crate::stream::timeline::{Registered, Wake};
use crate::stream::{Stream, StreamInner};
use parking_lot::Mutex;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::{Duration, Instant};

static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);

/// Events that exist in this process (for leak checks).
pub(crate) fn live_events() -> usize {
    LIVE_EVENTS.load(Relaxed)
}

#[derive(Clone)]
struct Point {
    stream: Arc<StreamInner>,
    target: u64,
    stamp: Option<Arc<AtomicU64>>,
}

pub(crate) struct EventInner {
    timing: bool,
    dev: Arc<DeviceState>,
    point: Mutex<Option<Point>>,
    ipc: Option<Arc<IpcEvent>>,
}

impl Drop for EventInner {
    fn drop(&mut self) {
        LIVE_EVENTS.fetch_sub(1, Relaxed);
        self.dev.live_events.fetch_sub(1, Relaxed);
    }
}

/// A handle to an event.
#[derive(Clone)]
pub struct Event(Arc<EventInner>);

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event(device={}, timing={})", self.0.dev.ordinal, self.0.timing)
    }
}

/// A stream's wait on an interprocess event's record `target`.
struct IpcWait {
    ev: Arc<IpcEvent>,
    target: u64,
}

impl ExternalCond for IpcWait {
    fn poll(&self, thorough: bool) -> std::result::Result<bool, crate::error::TaskError> {
        self.ev
            .poll(self.target, thorough)
            .map_err(crate::error::TaskError::Ipc)
    }
    fn seq(&self) -> u32 {
        self.ev.seq()
    }
    fn sleep(&self, seen: u32, timeout: Duration) {
        self.ev.sleep(seen, timeout);
    }
}

impl Event {
    pub(crate) fn new(dev: Arc<DeviceState>, timing: bool) -> Self {
        Self::with_ipc(dev, timing, None)
    }

    fn with_ipc(dev: Arc<DeviceState>, timing: bool, ipc: Option<Arc<IpcEvent>>) -> Self {
        LIVE_EVENTS.fetch_add(1, Relaxed);
        dev.live_events.fetch_add(1, Relaxed);
        Event(Arc::new(EventInner {
            timing,
            dev,
            point: Mutex::new(None),
            ipc,
        }))
    }

    /// A new interprocess event on `dev` (region of `capacity`), or one opened from a
    /// handle another process made.
    pub(crate) fn new_ipc(dev: Arc<DeviceState>, capacity: u64, handle: Option<&str>) -> Result<Self> {
        let ipc = match handle {
            None => IpcEvent::create(dev.ordinal, capacity)?,
            Some(h) => IpcEvent::open(h)?,
        };
        Ok(Self::with_ipc(dev, false, Some(Arc::new(ipc))))
    }

    /// True for an interprocess event.
    pub fn is_interprocess(&self) -> bool {
        self.0.ipc.is_some()
    }

    /// The handle another process passes to `open_ipc_event` (interprocess events only).
    pub fn ipc_handle(&self) -> Result<String> {
        let ipc = self
            .0
            .ipc
            .as_ref()
            .ok_or_else(|| Error::invalid("ipc_handle() needs an event created with interprocess=True"))?;
        Ok(ipc.handle())
    }

    /// Records an interprocess event: the slot's next record number completes when the
    /// stream reaches what was submitted so far (a waiter on the stream's timeline).
    fn record_ipc(&self, ipc: &Arc<IpcEvent>, stream: &Stream) -> Result<()> {
        let n = ipc.begin_record()?;
        let target = stream.submitted();
        let ev = ipc.clone();
        let wake = Wake::Resume(Box::new(move || ev.complete(n)));
        if let Registered::AlreadyDone(_) = stream.0.timeline.register(target, wake) {
            ipc.complete(n);
        }
        Ok(())
    }

    pub fn timing(&self) -> bool {
        self.0.timing
    }
    pub fn device(&self) -> u32 {
        self.0.dev.ordinal
    }

    fn check(&self) -> Result<()> {
        if !self.0.dev.is_alive() {
            return Err(DeviceError::gone(self.0.dev.ordinal).into());
        }
        Ok(())
    }

    /// Records the point "everything submitted to `stream` so far".
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.check()?;
        stream.0.check_usable()?;
        if let Some(ipc) = &self.0.ipc {
            return self.record_ipc(ipc, stream);
        }
        let point = if self.0.timing {
            let stamp = Arc::new(AtomicU64::new(0));
            let target = stream.record_timing(stamp.clone())?;
            Point {
                stream: stream.0.clone(),
                target,
                stamp: Some(stamp),
            }
        } else {
            Point {
                stream: stream.0.clone(),
                target: stream.submitted(),
                stamp: None,
            }
        };
        log::debug!(
            "event {:p} recorded at stream {} task {}: device {} context {}",
            Arc::as_ptr(&self.0),
            point.stream.id,
            point.target.saturating_sub(1),
            self.0.dev.ordinal,
            point.stream.ctx_id
        );
        *self.0.point.lock() = Some(point);
        Ok(())
    }

    /// The event's identity for the sanitizer (its shared state's address).
    pub fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    pub(crate) fn point(&self) -> Result<Option<(Arc<StreamInner>, u64)>> {
        self.check()?;
        Ok(self.0.point.lock().as_ref().map(|p| (p.stream.clone(), p.target)))
    }

    /// True once the recorded work has finished (or if never recorded).
    pub fn query(&self) -> Result<bool> {
        self.check()?;
        if let Some(ipc) = &self.0.ipc {
            return Ok(ipc.poll(ipc.target(), true)?);
        }
        Ok(match &*self.0.point.lock() {
            None => true,
            Some(p) => {
                let done = p.stream.timeline.completed() >= p.target;
                if done && crate::sanitizer::on() {
                    crate::sanitizer::on_host_sync(p.stream.id, p.target);
                }
                done
            }
        })
    }

    /// Waits up to `timeout` for the recorded work; true when it is done (for waits done
    /// in slices, so that a binding can check for signals between them).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        crate::thread_role::forbid_runtime_thread("synchronize an event")?;
        if let Some(ipc) = &self.0.ipc {
            self.check()?;
            return Ok(ipc.wait(ipc.target(), timeout.map(|t| Instant::now() + t))?);
        }
        let Some((stream, target)) = self.point()? else {
            return Ok(true);
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let done = stream.timeline.wait_for(target, deadline, stream.dev.spin_iters);
        if done && crate::sanitizer::on() {
            crate::sanitizer::on_host_sync(stream.id, target);
        }
        Ok(done)
    }

    /// The error a [`synchronize`](Self::synchronize) with `timeout` gives when it passes.
    pub fn timeout_error(timeout: Duration) -> Error {
        EventError::SyncTimeout {
            secs: timeout.as_secs_f64(),
        }
        .into()
    }

    /// Waits for the recorded work, up to `timeout`.
    pub fn synchronize(&self, timeout: Option<Duration>) -> Result<()> {
        crate::thread_role::forbid_runtime_thread("synchronize an event")?;
        if self.0.ipc.is_some() {
            return match self.wait(timeout)? {
                true => Ok(()),
                false => Err(Self::timeout_error(timeout.unwrap_or_default())),
            };
        }
        let Some((stream, target)) = self.point()? else {
            return Ok(());
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        if !stream.timeline.wait_for(target, deadline, stream.dev.spin_iters) {
            return Err(EventError::SyncTimeout {
                secs: timeout.map_or(0.0, |t| t.as_secs_f64()),
            }
            .into());
        }
        if crate::sanitizer::on() {
            crate::sanitizer::on_host_sync(stream.id, target);
        }
        Ok(())
    }

    fn stamp(&self) -> Result<u64> {
        let guard = self.0.point.lock();
        let p = guard.as_ref().ok_or(EventError::NotRecorded)?;
        let stamp = p.stamp.as_ref().ok_or(EventError::NotRecorded)?;
        if p.stream.timeline.completed() < p.target {
            return Err(EventError::NotComplete.into());
        }
        Ok(stamp.load(Acquire))
    }

    /// Milliseconds from this event to `end` (both timing-enabled, recorded, complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        self.check()?;
        end.check()?;
        if !self.0.timing || !end.0.timing {
            return Err(EventError::TimingDisabled.into());
        }
        let (a, b) = (self.stamp()?, end.stamp()?);
        Ok((b as f64 - a as f64) / 1e6)
    }
}

/// Stream-side waits on events (here, above the stream layer, so streams need not know events).
impl Stream {
    /// Makes later work on this stream wait until `event`'s recorded work is done.
    /// An event that was never recorded imposes no wait.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.wait_event_timeout(event, None)
    }

    /// Like [`wait_event`](Self::wait_event), but if the event's work is not done within
    /// `timeout` of the wait reaching the head of this stream, the stream fails with a wait
    /// timeout (ACL 107019, sticky) instead of waiting forever.
    pub fn wait_event_timeout(&self, event: &Event, timeout: Option<Duration>) -> Result<()> {
        self.0.check_usable()?;
        if let Some(ipc) = &event.0.ipc {
            event.check()?;
            let cond = Arc::new(IpcWait {
                ev: ipc.clone(),
                target: ipc.target(),
            });
            return self.wait_external(cond, timeout);
        }
        let point = event.point()?;
        if crate::sanitizer::on() {
            crate::sanitizer::on_event_wait(&self.0, event.key(), point.as_ref());
        }
        if let Some((on, target)) = point {
            log::debug!(
                "stream {} waits for event {:p} (stream {} task {}): device {} context {}",
                self.0.id,
                Arc::as_ptr(&event.0),
                on.id,
                target.saturating_sub(1),
                self.0.dev.ordinal,
                self.0.ctx_id
            );
            self.wait_point(on, target, timeout)?;
        }
        Ok(())
    }
}
