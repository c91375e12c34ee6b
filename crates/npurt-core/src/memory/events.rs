//! The memory event hook: one observer point that sees every device allocation, free,
//! segment map / unmap and out-of-memory failure, on every device, with size, pool, page
//! kind, stream and a timestamp from [`clock::now_ns`](crate::clock::now_ns) (the clock of
//! task records). `npurt.memory.record_history` and the profiler's `profile_memory`
//! subscribe to it.
//!
//! With nothing subscribed each hook point costs one relaxed load ([`is_active`]).
//! Observers are called on the thread that did the work — the allocating thread, the
//! thread that dropped a buffer's last handle (possibly a runtime worker or engine thread),
//! and, for segment events, with the pool's lock held. So an observer must be quick, must
//! not block (no interpreter lock, no waits), and must not allocate or free device memory.
//!
//! ```
//! use npurt_core::{alloc, memory::{self, events::{self, MemAction, MemEvent, MemObserver}}};
//! use std::sync::{Arc, Mutex};
//!
//! struct Log(Mutex<Vec<MemAction>>);
//! impl MemObserver for Log {
//!     fn on_mem_event(&self, e: &MemEvent) { self.0.lock().unwrap().push(e.action); }
//! }
//! let log = Arc::new(Log(Mutex::new(Vec::new())));
//! let sub = events::subscribe(log.clone());
//! drop(alloc::malloc(4096, memory::PagePolicy::HugeFirst)?);
//! drop(sub);
//! let seen = log.0.lock().unwrap().clone();
//! assert!(seen.contains(&MemAction::Alloc) && seen.contains(&MemAction::Free));
//! # Ok::<(), npurt_core::Error>(())
//! ```

use crate::clock;
use npurt_mem::{PageKind, SegmentEvent, SegmentObserver};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemAction {
    /// A block was handed out.
    Alloc,
    /// `free()` was called while queued work may still use the block (the memory returns
    /// with the matching [`Free`](Self::Free) once that work is done).
    FreeRequested,
    /// The block went back to its pool (torch's `free_completed`).
    Free,
    /// A segment was mapped (the pool grew; a dedicated allocation; a `MemPool`).
    SegmentMap,
    /// A segment was unmapped.
    SegmentUnmap,
    /// An allocation failed for lack of memory (`size` is the request).
    Oom,
}

impl MemAction {
    /// torch.cuda's trace action name.
    pub fn torch_name(self) -> &'static str {
        match self {
            MemAction::Alloc => "alloc",
            MemAction::FreeRequested => "free_requested",
            MemAction::Free => "free_completed",
            MemAction::SegmentMap => "segment_alloc",
            MemAction::SegmentUnmap => "segment_free",
            MemAction::Oom => "oom",
        }
    }
}

/// Which pool the memory belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemPoolKind {
    /// The device's caching pool.
    Device,
    /// An explicit [`MemPool`](super::MemPool), by id.
    Pool(u64),
    /// A segment of its own (`NormalOnly`, or `HugeOnly` without huge pages in the pool).
    Dedicated,
    /// The device's shareable pool (memfd segments other processes can map).
    Shareable,
    /// Memory imported from another process (no segment events: the exporter's).
    Imported,
}

/// One memory event (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemEvent {
    pub action: MemAction,
    /// Device ordinal.
    pub device: u32,
    /// Block or segment address (0 for an OOM).
    pub addr: usize,
    /// Bytes requested (alloc/free/oom) or usable segment bytes (segment events).
    pub size: usize,
    /// Bytes the block takes in its pool (512-rounded), or the segment size.
    pub block_size: usize,
    pub pool: MemPoolKind,
    /// Pages backing it (`None` when unknown: an OOM).
    pub page_kind: Option<PageKind>,
    /// Segment events: large pool (`false`: a 2 MiB small-pool segment).
    pub large: bool,
    /// The allocating thread's current stream (`None`: its default stream, or a free /
    /// segment event, which no stream orders).
    pub stream: Option<u64>,
    /// [`clock::now_ns`](crate::clock::now_ns) at the event.
    pub t_ns: u64,
}

/// Something told about every memory event while subscribed.
pub trait MemObserver: Send + Sync {
    fn on_mem_event(&self, e: &MemEvent);
}

type Observers = Arc<Vec<(u64, Arc<dyn MemObserver>)>>;

static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// The `MEM` log level lets some memory line through (see [`set_logging`]).
static LOGGING: AtomicBool = AtomicBool::new(false);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static OBSERVERS: Mutex<Option<Observers>> = Mutex::new(None);

/// True while anything is subscribed: the one relaxed load every hook point pays.
#[inline(always)]
pub fn is_active() -> bool {
    ACTIVE.load(Relaxed) != 0
}

/// Subscribes `obs` until the returned guard is dropped.
pub fn subscribe(obs: Arc<dyn MemObserver>) -> MemSubscription {
    let id = NEXT_ID.fetch_add(1, Relaxed);
    let mut g = OBSERVERS.lock();
    let mut v: Vec<_> = g.as_deref().cloned().unwrap_or_default();
    v.push((id, obs));
    ACTIVE.store(v.len() + usize::from(LOGGING.load(Relaxed)), Relaxed);
    *g = Some(Arc::new(v));
    MemSubscription(id)
}

/// Keeps an observer subscribed; dropping it unsubscribes.
#[must_use = "dropping the subscription unsubscribes at once"]
#[derive(Debug)]
pub struct MemSubscription(u64);

impl Drop for MemSubscription {
    fn drop(&mut self) {
        let mut g = OBSERVERS.lock();
        let mut v: Vec<_> = g.as_deref().cloned().unwrap_or_default();
        v.retain(|(id, _)| *id != self.0);
        ACTIVE.store(v.len() + usize::from(LOGGING.load(Relaxed)), Relaxed);
        *g = if v.is_empty() { None } else { Some(Arc::new(v)) };
    }
}

/// Tells every observer (the list is snapshotted, so an observer may subscribe or
/// unsubscribe without deadlocking). Callers check [`is_active`] first.
#[cold]
pub(crate) fn emit(e: MemEvent) {
    if LOGGING.load(Relaxed) {
        log_event(&e);
    }
    let obs = OBSERVERS.lock().clone();
    if let Some(obs) = obs {
        for (_, o) in obs.iter() {
            o.on_mem_event(&e);
        }
    }
}

/// Makes the hook points log (the `MEM` module's level is warning or more verbose): the
/// memory lines are the hook's events, so logging off still costs one relaxed load.
pub(crate) fn set_logging(on: bool) {
    let g = OBSERVERS.lock();
    LOGGING.store(on, Relaxed);
    ACTIVE.store(g.as_deref().map_or(0, Vec::len) + usize::from(on), Relaxed);
}

/// The log line of an event: debug for allocations and frees, info for segments (the
/// pool growing or shrinking); an out-of-memory failure is a warning of `tell_oom`.
#[cold]
fn log_event(e: &MemEvent) {
    let pages = e.page_kind.map_or("-", |k| k.as_str());
    let stream = e.stream.map_or_else(|| "default".to_string(), |s| s.to_string());
    let ctx = crate::current::peek_context_id(e.device).map_or_else(|| "-".to_string(), |c| c.to_string());
    let (d, a, n, b, p) = (e.device, e.addr, e.size, e.block_size, e.pool);
    match e.action {
        MemAction::Alloc => log::debug!(
            "malloc {n} B at {a:#x} (block {b} B, {p:?} pool, {pages} pages): device {d} context {ctx} stream {stream}"
        ),
        MemAction::FreeRequested => log::debug!("free requested {n} B at {a:#x} ({p:?} pool): device {d}"),
        MemAction::Free => log::debug!("free {n} B at {a:#x} (block {b} B, {p:?} pool): device {d}"),
        MemAction::SegmentMap => log::info!(
            "pool grew: mapped a {n} B segment at {a:#x} ({pages} pages, {p:?} pool, {}): device {d}",
            if e.large { "large" } else { "small" }
        ),
        MemAction::SegmentUnmap => log::info!("unmapped a {n} B segment at {a:#x} ({p:?} pool): device {d}"),
        // The warning is `tell_oom`'s, which has the error's details.
        MemAction::Oom => {}
    }
}

/// An event stamped now.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn event(
    action: MemAction,
    device: u32,
    addr: usize,
    size: usize,
    block_size: usize,
    pool: MemPoolKind,
    page_kind: Option<PageKind>,
    stream: Option<u64>,
) -> MemEvent {
    MemEvent {
        action,
        device,
        addr,
        size,
        block_size,
        pool,
        page_kind,
        large: false,
        stream,
        t_ns: clock::now_ns(),
    }
}

/// The segment observer a pool of `device` is built with: forwards to the hook.
pub(crate) fn segment_observer(device: u32, pool: MemPoolKind) -> SegmentObserver {
    Arc::new(move |s: &SegmentEvent| {
        if is_active() {
            let action = if s.mapped {
                MemAction::SegmentMap
            } else {
                MemAction::SegmentUnmap
            };
            let mut e = event(action, device, s.addr, s.size, s.size, pool, Some(s.page_kind), None);
            e.large = s.large;
            emit(e);
        }
    })
}

/// The 512-rounded size of an `nbytes` block (the request if it overflows).
#[inline]
pub(crate) fn rounded(nbytes: usize) -> usize {
    npurt_mem::align::block_size(nbytes).unwrap_or(nbytes)
}
