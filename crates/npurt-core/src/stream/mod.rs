//! Streams: in-order task queues that run in parallel with each other.
//!
//! [`StreamInner`] is the shared state (queue, scheduling word, completion timeline, sticky
//! error); [`Stream`] is the user's handle. Submitting is lock-free: push into the ring,
//! then one `fetch_or` on the scheduling word; only the push that wakes an idle stream
//! touches the device's ready list.

mod inner;
mod list;
mod observe;
pub(crate) mod queue;
pub(crate) mod sched_state;
pub(crate) mod task;
pub(crate) mod timeline;
mod writer;

use crate::error::{DeviceError, Error, Result, StreamError, TaskError};
use crate::executor::Scheduler;
use crate::kernel::Kernel;
use crossbeam_utils::CachePadded;
pub(crate) use list::StreamList;
use parking_lot::Mutex;
use queue::TaskQueue;
use sched_state::SchedState;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};
use std::sync::{Arc, Weak};
use std::time::Duration;
use task::{Engine, EngineDesc, EngineOp, Op, Task};
use timeline::Timeline;

const ALIVE: u8 = 0;
const DESTROYED: u8 = 1;
const ABORTED: u8 = 2;

/// Lowest (numerically largest) ACL stream priority.
pub const LOWEST_PRIORITY: u8 = 7;
/// Largest block count of one launch (ACL's `blockDim` limit).
pub const MAX_BLOCKS: u32 = 65_535;

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);
static LIVE_USER_STREAMS: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

/// User-created streams not yet destroyed (for leak checks).
pub(crate) fn live_user_streams() -> usize {
    LIVE_USER_STREAMS.load(Relaxed).max(0) as usize
}

pub(crate) fn count_user_streams(delta: isize) {
    LIVE_USER_STREAMS.fetch_add(delta, Relaxed);
}

/// Shared state of one stream.
pub(crate) struct StreamInner {
    pub(crate) id: u64,
    pub(crate) priority: u8,
    pub(crate) dev: Arc<Scheduler>,
    /// The user-stream list of the stream's context (empty for a default stream).
    pub(crate) list: Weak<StreamList>,
    pub(crate) ctx_id: u64,
    pub(crate) queue: TaskQueue<Task>,
    /// `sched` and `timeline` on lines of their own: the owning worker writes them at
    /// every completion and every hand-back, and a launch reads `dev`, `status` and
    /// `failed`. Packed together, each launch's first read of the stream missed (one
    /// stream of empty kernels on 2 cores: a quarter of the submitting thread's cost).
    pub(crate) sched: CachePadded<SchedState>,
    pub(crate) timeline: CachePadded<Timeline>,
    /// The head task finished on another thread; the next owner must count it complete.
    pub(crate) inflight: AtomicBool,
    failed: AtomicBool,
    /// The first failure and the call site of the task that failed.
    error: Mutex<Option<(TaskError, u32)>>,
    status: AtomicU8,
    is_default: bool,
}

/// A handle to a stream. Cloning the handle does not create a stream.
#[derive(Clone)]
pub struct Stream(pub(crate) Arc<StreamInner>);

impl PartialEq for Stream {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Stream {}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Stream(id={}, device={}, priority={})",
            self.0.id, self.0.dev.ordinal, self.0.priority
        )
    }
}

/// A launch that found the stream's ring full; finish it with [`Stream::push_pending`]
/// (which blocks, so bindings release their interpreter lock first).
pub struct Pending(Task);

impl Stream {
    pub fn id(&self) -> u64 {
        self.0.id
    }
    pub fn priority(&self) -> u8 {
        self.0.priority
    }
    pub fn device(&self) -> u32 {
        self.0.dev.ordinal
    }
    pub fn context_id(&self) -> u64 {
        self.0.ctx_id
    }
    pub fn is_default(&self) -> bool {
        self.0.is_default
    }

    /// Launches `kernel` split into `blocks` blocks; returns the task's sequence number.
    pub fn launch(&self, kernel: Arc<dyn Kernel>, blocks: u32) -> Result<u64> {
        match self.try_launch(kernel, blocks)? {
            Ok(seq) => Ok(seq),
            Err(p) => self.push_pending(p),
        }
    }

    /// Like [`launch`](Self::launch) but never blocks: a full ring returns `Err(Pending)`.
    #[inline]
    pub fn try_launch(&self, kernel: Arc<dyn Kernel>, blocks: u32) -> Result<std::result::Result<u64, Pending>> {
        if blocks == 0 || blocks > MAX_BLOCKS {
            return Err(Error::invalid(format!(
                "block count {blocks} is out of range 1..={MAX_BLOCKS}"
            )));
        }
        self.try_op(Op::Kernel { kernel, blocks })
    }

    #[inline]
    fn try_op(&self, op: Op) -> Result<std::result::Result<u64, Pending>> {
        self.0.check_usable()?;
        Ok(self.0.try_push(self.0.task(op)).map_err(Pending))
    }

    /// Finishes a launch that found the ring full, waiting for room.
    pub fn push_pending(&self, p: Pending) -> Result<u64> {
        crate::thread_role::forbid_runtime_thread("wait for room on a full stream")?;
        self.0.push_blocking(p.0)
    }

    fn submit(&self, op: Op) -> Result<u64> {
        match self.try_op(op)? {
            Ok(seq) => Ok(seq),
            Err(p) => self.push_pending(p),
        }
    }

    /// Runs `op` on an engine thread in stream order (host callbacks, copies).
    pub fn launch_engine(&self, engine: Engine, op: EngineOp) -> Result<u64> {
        self.submit(Op::Engine(engine, op, EngineDesc::of(engine)))
    }

    /// Non-blocking variant of [`launch_engine`](Self::launch_engine).
    pub fn try_launch_engine(&self, engine: Engine, op: EngineOp) -> Result<std::result::Result<u64, Pending>> {
        self.try_op(Op::Engine(engine, op, EngineDesc::of(engine)))
    }

    /// [`try_launch_engine`](Self::try_launch_engine) with a description for profiles
    /// (a copy's direction and size).
    pub fn try_launch_described(
        &self,
        engine: Engine,
        op: EngineOp,
        desc: EngineDesc,
    ) -> Result<std::result::Result<u64, Pending>> {
        self.try_op(Op::Engine(engine, op, desc))
    }

    /// [`try_launch_described`](Self::try_launch_described) of a host-engine op that the
    /// calling thread runs itself if the stream is idle (nothing queued or in flight): the
    /// call then returns once `op` ran (host-synchronous, like gloo's collectives), and the
    /// stream carries on as if the host engine had run it (its failure is the stream's
    /// sticky error, profiles show it). Otherwise it is queued as usual. From a runtime
    /// thread (which must not block) it is always queued. Bindings release their
    /// interpreter lock around it (see [`is_idle`](Self::is_idle)).
    pub fn try_launch_host_here(&self, op: EngineOp, desc: EngineDesc) -> Result<std::result::Result<u64, Pending>> {
        self.0.check_usable()?;
        let task = self.0.task(Op::Engine(Engine::Host, op, desc));
        let here = !crate::thread_role::is_runtime_thread();
        Ok(self.0.try_push_as(task, here).map_err(Pending))
    }

    /// True when nothing is queued on the stream or in flight (a hint: another thread may
    /// push at once).
    pub fn is_idle(&self) -> bool {
        self.0.sched.is_idle()
    }

    /// Whether the stream is idle, waiting a little (yielding, at most `max`) when all of
    /// its work has completed but its owner has not let go of it yet: the thread that ran
    /// its last task may have been preempted right after completing it, which a thread
    /// woken by that completion does at once on a busy machine. False at once when work is
    /// pending.
    pub fn settle(&self, max: Duration) -> bool {
        let start = std::time::Instant::now();
        loop {
            if self.is_idle() {
                return true;
            }
            if self.0.timeline.completed() < self.0.queue.tail() || start.elapsed() >= max {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// Makes later work on this stream wait for everything submitted to `other` so far.
    pub fn wait_stream(&self, other: &Stream) -> Result<()> {
        self.0.check_usable()?;
        other.0.check_usable()?;
        if self == other {
            return Err(StreamError::SelfWait.into());
        }
        self.wait_point(other.0.clone(), other.0.queue.tail(), None)
    }

    /// Queues a wait on an outside condition (see [`task::ExternalCond`]).
    pub(crate) fn wait_external(&self, cond: Arc<dyn task::ExternalCond>, timeout: Option<Duration>) -> Result<()> {
        self.0.check_usable()?;
        self.submit(Op::WaitExternal { cond, timeout }).map(|_| ())
    }

    /// Orders later work on this stream after `on` reached `target` (a device-side wait).
    pub(crate) fn wait_point(&self, on: Arc<StreamInner>, target: u64, timeout: Option<Duration>) -> Result<()> {
        if Arc::ptr_eq(&on, &self.0) {
            return Ok(()); // already ordered
        }
        if crate::sanitizer::on() {
            crate::sanitizer::on_wait(&self.0, &on, target);
        }
        if on.timeline.completed() >= target {
            return Ok(()); // already satisfied
        }
        self.submit(Op::Wait { on, target, timeout }).map(|_| ())
    }

    pub(crate) fn record_timing(&self, stamp: Arc<AtomicU64>) -> Result<u64> {
        self.submit(Op::Record(stamp)).map(|seq| seq + 1)
    }

    /// Tasks submitted so far (the target an event recorded now waits for).
    pub(crate) fn submitted(&self) -> u64 {
        self.0.queue.tail()
    }

    /// Tasks completed so far.
    pub fn completed(&self) -> u64 {
        self.0.timeline.completed()
    }

    /// True when all submitted work has finished; raises the stream's sticky error.
    pub fn query(&self) -> Result<bool> {
        self.0.check_usable()?;
        let tail = self.0.queue.tail();
        let done = self.0.timeline.completed() >= tail;
        if done && crate::sanitizer::on() {
            crate::sanitizer::on_host_sync(self.0.id, tail);
        }
        Ok(done)
    }

    /// Waits for all submitted work (or the timeout); raises the stream's sticky error.
    pub fn synchronize(&self, timeout: Option<Duration>) -> Result<()> {
        crate::thread_role::forbid_runtime_thread("synchronize")?;
        self.0.check_usable()?;
        if !self.0.wait_all(timeout) {
            let secs = timeout.map_or(0.0, |t| t.as_secs_f64());
            return Err(StreamError::SyncTimeout {
                stream: self.0.id,
                secs,
            }
            .into());
        }
        self.0.check_usable()
    }

    /// Destroys the stream. `force == false` waits for its work first (ACL's
    /// `aclrtDestroyStream`); `force == true` drops queued work (`aclrtDestroyStreamForce`).
    /// The default stream of a context cannot be destroyed.
    pub fn destroy(&self, force: bool) -> Result<()> {
        if self.0.is_default {
            return Err(Error::invalid("the default stream of a context cannot be destroyed"));
        }
        if !self.0.dev.is_alive() {
            return Err(DeviceError::gone(self.0.dev.ordinal).into());
        }
        match self.0.status.load(Acquire) {
            ALIVE => {}
            _ => return Err(StreamError::Destroyed(self.0.id).into()),
        }
        if !force {
            crate::thread_role::forbid_runtime_thread("destroy a stream")?;
            self.0.wait_all(None);
        } else if crate::sanitizer::on() {
            crate::sanitizer::on_force_destroy(&self.0);
        }
        self.0.retire(force);
        if let Some(list) = self.0.list.upgrade() {
            list.forget(&self.0);
        }
        log::debug!(
            "stream {} destroyed{}: device {} context {}",
            self.0.id,
            if force { " (forced)" } else { "" },
            self.0.dev.ordinal,
            self.0.ctx_id
        );
        Ok(())
    }

    /// Releases the stream without waiting (`cudaStreamDestroy` semantics): no new work is
    /// accepted, already queued work still runs. Does nothing if it is already gone.
    pub fn release(&self) {
        if self.0.is_default || self.0.status.load(Acquire) != ALIVE {
            return;
        }
        self.0.retire(false);
        if let Some(list) = self.0.list.upgrade() {
            list.forget(&self.0);
        }
        log::debug!(
            "stream {} released: device {} context {}",
            self.0.id,
            self.0.dev.ordinal,
            self.0.ctx_id
        );
    }

    /// Whether the stream is still usable (not destroyed, device not reset).
    pub fn is_alive(&self) -> bool {
        self.0.dev.is_alive() && self.0.status.load(Acquire) == ALIVE
    }

    /// Whether work can be queued: alive and without a sticky error.
    pub fn is_usable(&self) -> bool {
        self.0.check_usable().is_ok()
    }
}
