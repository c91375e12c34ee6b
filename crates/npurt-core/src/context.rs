//! Contexts: each device has a default context; users may create more. A context owns its
//! default stream and keeps a registry of the streams created in it, so that tearing a
//! device down can finish and release all of them.

use crate::error::{DeviceError, Error, Result};
use crate::executor::Scheduler;
use crate::memory::CtxQuota;
use crate::stream::{Stream, StreamInner, StreamList, LOWEST_PRIORITY};
use parking_lot::Mutex;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, OnceLock, Weak};

static NEXT_CTX_ID: AtomicU64 = AtomicU64::new(1);
static LIVE_CONTEXTS: AtomicUsize = AtomicUsize::new(0);

/// Shared state of a context.
pub(crate) struct ContextInner {
    pub(crate) id: u64,
    pub(crate) device: u32,
    pub(crate) dev: Arc<Scheduler>,
    /// The device's memory (allocations on the current context come from it).
    pub(crate) mem: Arc<crate::memory::DeviceMemory>,
    default_stream: Arc<StreamInner>,
    /// The user streams (each holds a Weak to this list).
    streams: Arc<StreamList>,
    alive: AtomicBool,
    explicit: bool,
    /// Memory limit of the context, created when one is first set.
    pub(crate) quota: OnceLock<Arc<CtxQuota>>,
    /// The device's list of explicit contexts (empty Weak for a default context): `destroy`
    /// takes the context off it without reaching up into the registry.
    owner: Weak<ContextList>,
}

/// A device's explicit contexts (the device owns the list; each context holds a Weak to it).
#[derive(Default)]
pub(crate) struct ContextList(Mutex<Vec<Arc<ContextInner>>>);

impl ContextList {
    /// A new explicit context on the list's device.
    pub(crate) fn create(
        self: &Arc<Self>,
        dev: Arc<Scheduler>,
        mem: Arc<crate::memory::DeviceMemory>,
    ) -> Arc<ContextInner> {
        let ctx = ContextInner::new(dev, mem, Arc::downgrade(self));
        self.0.lock().push(ctx.clone());
        log::debug!("context {} created: device {}", ctx.id, ctx.device);
        ctx
    }

    fn forget(&self, ctx: &Arc<ContextInner>) {
        self.0.lock().retain(|c| !Arc::ptr_eq(c, ctx));
    }

    /// The contexts on the list now.
    pub(crate) fn snapshot(&self) -> Vec<Arc<ContextInner>> {
        self.0.lock().clone()
    }

    /// Empties the list (device teardown), returning what was on it.
    pub(crate) fn take(&self) -> Vec<Arc<ContextInner>> {
        std::mem::take(&mut *self.0.lock())
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        LIVE_CONTEXTS.fetch_sub(1, Relaxed);
    }
}

/// Contexts that exist in this process (for leak checks).
pub(crate) fn live_contexts() -> usize {
    LIVE_CONTEXTS.load(Relaxed)
}

impl ContextInner {
    /// A context on `dev`; `owner` is the device's list for an explicit context, an empty
    /// Weak for the default one.
    pub(crate) fn new(
        dev: Arc<Scheduler>,
        mem: Arc<crate::memory::DeviceMemory>,
        owner: Weak<ContextList>,
    ) -> Arc<Self> {
        let explicit = owner.strong_count() > 0;
        LIVE_CONTEXTS.fetch_add(1, Relaxed);
        let id = NEXT_CTX_ID.fetch_add(1, Relaxed);
        Arc::new(ContextInner {
            id,
            device: dev.ordinal,
            default_stream: StreamInner::new(dev.clone(), Weak::new(), id, 0, true),
            dev,
            mem,
            streams: Arc::default(),
            alive: AtomicBool::new(true),
            explicit,
            quota: OnceLock::new(),
            owner,
        })
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Acquire) && self.dev.is_alive()
    }

    pub(crate) fn check(&self) -> Result<()> {
        if !self.dev.is_alive() {
            return Err(DeviceError::gone(self.device).into());
        }
        if !self.alive.load(Acquire) {
            return Err(DeviceError::ContextDestroyed(self.id).into());
        }
        Ok(())
    }

    /// Every stream whose work a synchronize must wait for.
    pub(crate) fn all_streams(&self) -> Vec<Arc<StreamInner>> {
        let mut all = vec![self.default_stream.clone()];
        all.extend(self.streams.all());
        all
    }

    /// User streams still registered (not destroyed).
    pub(crate) fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// Waits for all streams of this context; true if all finished before `deadline`.
    pub(crate) fn wait_all(&self, deadline: Option<std::time::Instant>) -> bool {
        let done = self.all_streams().iter().all(|s| {
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            s.wait_all(left)
        });
        if done {
            self.streams.prune_draining();
        }
        done
    }

    /// First sticky error among this context's streams.
    pub(crate) fn first_error(&self) -> Result<()> {
        let streams = self.streams.user();
        for s in std::iter::once(&self.default_stream).chain(streams.iter()) {
            s.check_usable()?;
        }
        Ok(())
    }

    /// Marks the context and all its streams dead and drops the registry.
    pub(crate) fn retire(&self, force: bool) {
        self.alive.store(false, Release);
        let streams = self.streams.take();
        for s in &streams {
            s.retire(force);
        }
        self.default_stream.retire(force);
    }
}

/// A handle to a context.
#[derive(Clone)]
pub struct Context(pub(crate) Arc<ContextInner>);

impl PartialEq for Context {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Context {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context(id={}, device={})", self.0.id, self.0.device)
    }
}

impl Context {
    pub fn id(&self) -> u64 {
        self.0.id
    }
    pub fn device(&self) -> u32 {
        self.0.device
    }
    pub fn is_explicit(&self) -> bool {
        self.0.explicit
    }
    pub fn is_alive(&self) -> bool {
        self.0.is_alive()
    }

    /// Limits the device memory allocated in this context (`None` removes the limit).
    /// Counted are the block sizes (512-byte rounded) of buffers allocated while this
    /// context is current and a limit is set; going over is OutOfMemory (207001) and the
    /// context stays usable. Set it before allocating: buffers made earlier are not counted.
    pub fn set_memory_limit(&self, limit: Option<usize>) -> Result<()> {
        self.0.check()?;
        if limit.is_none() && self.0.quota.get().is_none() {
            return Ok(());
        }
        let id = self.0.id;
        self.0.quota.get_or_init(|| CtxQuota::new(id)).set_limit(limit);
        Ok(())
    }

    /// The context's memory limit, if any.
    pub fn memory_limit(&self) -> Option<usize> {
        self.0.quota.get().and_then(|q| q.limit())
    }

    /// Bytes allocated in this context and counted against its limit, and their peak.
    pub fn memory_charged(&self) -> (usize, usize) {
        self.0.quota.get().map_or((0, 0), |q| (q.used(), q.peak()))
    }

    /// The context's default stream.
    pub fn default_stream(&self) -> Result<Stream> {
        self.0.check()?;
        Ok(Stream(self.0.default_stream.clone()))
    }

    /// Creates a stream with ACL priority `priority` (0 highest .. 7 lowest).
    pub fn create_stream(&self, priority: i64) -> Result<Stream> {
        self.0.check()?;
        if !(0..=LOWEST_PRIORITY as i64).contains(&priority) {
            return Err(crate::error::StreamError::Priority(priority).into());
        }
        let s = StreamInner::new(
            self.0.dev.clone(),
            Arc::downgrade(&self.0.streams),
            self.0.id,
            priority as u8,
            false,
        );
        self.0.streams.push(s.clone());
        log::debug!(
            "stream {} created (priority {priority}): device {} context {}",
            s.id,
            self.0.device,
            self.0.id
        );
        Ok(Stream(s))
    }

    /// Creates an event on this context's device.
    pub fn create_event(&self, timing: bool) -> Result<crate::event::Event> {
        self.0.check()?;
        Ok(crate::event::Event::new(self.0.dev.state.clone(), timing))
    }

    /// Creates an interprocess event on this context's device (its state lives in the
    /// device's shared region; timing is off, as in torch and CUDA).
    pub fn create_ipc_event(&self) -> Result<crate::event::Event> {
        self.0.check()?;
        crate::event::Event::new_ipc(self.0.dev.state.clone(), self.0.mem.capacity() as u64, None)
    }

    /// Opens an interprocess event from the handle of `Event::ipc_handle` (another
    /// process's, usually); this context's streams can then wait on its records.
    pub fn open_ipc_event(&self, handle: &str) -> Result<crate::event::Event> {
        self.0.check()?;
        crate::event::Event::new_ipc(self.0.dev.state.clone(), self.0.mem.capacity() as u64, Some(handle))
    }

    /// Waits for every stream of the context; raises the first sticky error.
    pub fn synchronize(&self, timeout: Option<std::time::Duration>) -> Result<()> {
        crate::thread_role::forbid_runtime_thread("synchronize")?;
        self.0.check()?;
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        if !self.0.wait_all(deadline) {
            return Err(DeviceError::SyncTimeout {
                device: self.0.device,
                secs: timeout.map_or(0.0, |t| t.as_secs_f64()),
            }
            .into());
        }
        self.0.first_error()
    }

    /// Destroys an explicit context: waits for its streams, then releases them.
    pub fn destroy(&self) -> Result<()> {
        if !self.0.explicit {
            return Err(Error::invalid(
                "a device's default context is released by resetting the device",
            ));
        }
        crate::thread_role::forbid_runtime_thread("destroy a context")?;
        self.0.check()?;
        self.0.wait_all(None);
        self.0.retire(false);
        if let Some(list) = self.0.owner.upgrade() {
            list.forget(&self.0);
        }
        log::debug!("context {} destroyed: device {}", self.0.id, self.0.device);
        Ok(())
    }
}
