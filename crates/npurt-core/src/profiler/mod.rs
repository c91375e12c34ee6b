//! What a profiler attaches to: one [`TaskRecord`] per finished task (kind, name, device,
//! context, stream, sequence number, cores, blocks, bytes, submit / start / end times on
//! [`crate::clock`], the launch's call site) and one [`LaunchNote`] per task pushed (the
//! host side of the launch). Observers are per device ([`ProfilerSlot`]); [`site`] keeps
//! the launch call sites that the bindings capture.
//!
//! Cost when nothing observes: creating a task does one relaxed load of a process-wide
//! word ([`active`]); the workers and engines test a timestamp the task already carries.

mod collect;
pub mod site;

pub use collect::{Collector, Ring};
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::Arc;

/// What kind of task a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskKind {
    Kernel,
    CopyH2D,
    CopyD2H,
    CopyD2D,
    CopyH2H,
    Memset,
    /// A timing event's record (non-timing events add no task).
    Record,
    /// A device-side wait on another stream (event wait, stream wait, last-writer order).
    Wait,
    HostFunc,
    /// A copy-engine task queued without a description.
    Copy,
}

impl TaskKind {
    /// The label of non-kernel tasks in profiles (Kineto's memcpy names where they apply).
    pub fn label(self) -> &'static str {
        match self {
            TaskKind::Kernel => "kernel",
            TaskKind::CopyH2D => "Memcpy HtoD",
            TaskKind::CopyD2H => "Memcpy DtoH",
            TaskKind::CopyD2D => "Memcpy DtoD",
            TaskKind::CopyH2H => "Memcpy HtoH",
            TaskKind::Memset => "Memset",
            TaskKind::Record => "Event Record",
            TaskKind::Wait => "Stream Wait",
            TaskKind::HostFunc => "Host Callback",
            TaskKind::Copy => "Copy",
        }
    }

    /// True for tasks the copy engine runs.
    pub fn on_copy_engine(self) -> bool {
        matches!(
            self,
            TaskKind::CopyH2D
                | TaskKind::CopyD2H
                | TaskKind::CopyD2D
                | TaskKind::CopyH2H
                | TaskKind::Memset
                | TaskKind::Copy
        )
    }
}

/// One core's turn on a multi-block kernel: the blocks it ran back to back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreSpan {
    pub core: u32,
    pub blocks: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// No core / thread (records and waits run on no resource of their own).
pub const NO_CORE: u32 = u32::MAX;

/// One finished task.
#[derive(Debug, Clone)]
pub struct TaskRecord {
    pub device: u32,
    pub context: u64,
    pub stream: u64,
    /// The task's sequence number on its stream (0 is the first task ever pushed).
    pub seq: u64,
    pub kind: TaskKind,
    /// Kernel name, or [`TaskKind::label`].
    pub name: Arc<str>,
    pub blocks: u32,
    /// Bytes copied or set (copies and memsets), else 0.
    pub bytes: u64,
    /// The AI core of a one-block kernel, the engine thread of a copy or callback
    /// (the copy engine is 0, callback threads count from 0), else [`NO_CORE`].
    pub core: u32,
    /// Each core's turn on a multi-block kernel (empty otherwise).
    pub spans: Vec<CoreSpan>,
    pub submit_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The launch's call site ([`site::meta`]); 0 when none was captured.
    pub meta: u32,
    /// For a wait: the stream waited on and the task count it waited for (the task that
    /// released it is that stream's `target - 1`).
    pub wait_on: Option<(u64, u64)>,
    /// The task failed (it set its stream's sticky error).
    pub failed: bool,
}

/// The host side of one launch: the task `(stream, seq)` was created at `submit_ns` on
/// host thread `thread` and was in the ring at `queued_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchNote {
    pub device: u32,
    pub stream: u64,
    pub seq: u64,
    pub thread: u64,
    pub submit_ns: u64,
    pub queued_ns: u64,
    pub meta: u32,
}

/// Receives records; called on runtime threads (and launching threads), so it must be quick.
pub trait TaskObserver: Send + Sync {
    fn on_task(&self, record: TaskRecord);
    /// The host side of a launch (default: ignored).
    fn on_launch(&self, _note: LaunchNote) {}
}

/// Observers installed on any device (the hot-path word; see [`active`]).
static OBSERVED: AtomicU32 = AtomicU32::new(0);

/// True when a task being created may need a timestamp or a call site: some device has an
/// observer, or call sites are captured ([`site::set_options`]). One relaxed load.
#[inline]
pub fn active() -> bool {
    OBSERVED.load(Relaxed) != 0 || site::capturing()
}

/// The observer every device starts with (the flight recorder), if any.
static FLIGHT: RwLock<Option<Arc<dyn TaskObserver>>> = RwLock::new(None);

/// Sets the observer that devices started from now on begin with (`None`: none). The
/// caller adds it to devices already running.
pub fn set_flight_recorder(obs: Option<Arc<dyn TaskObserver>>) {
    *FLIGHT.write() = obs;
}

/// Per-device observers.
pub(crate) struct ProfilerSlot {
    enabled: AtomicBool,
    observers: RwLock<Vec<Arc<dyn TaskObserver>>>,
}

impl Default for ProfilerSlot {
    fn default() -> Self {
        let slot = ProfilerSlot {
            enabled: AtomicBool::new(false),
            observers: RwLock::new(Vec::new()),
        };
        if let Some(f) = FLIGHT.read().clone() {
            slot.add(f);
        }
        slot
    }
}

impl ProfilerSlot {
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    /// Replaces every observer (`None`: removes them all).
    pub(crate) fn set(&self, obs: Option<Arc<dyn TaskObserver>>) {
        let mut v = self.observers.write();
        let before = v.len() as u32;
        v.clear();
        v.extend(obs);
        self.publish(before, &v);
    }

    /// Adds an observer beside the installed ones.
    pub(crate) fn add(&self, obs: Arc<dyn TaskObserver>) {
        let mut v = self.observers.write();
        let before = v.len() as u32;
        v.push(obs);
        self.publish(before, &v);
    }

    /// Removes one observer (by identity); true if it was installed.
    pub(crate) fn remove(&self, obs: &Arc<dyn TaskObserver>) -> bool {
        let mut v = self.observers.write();
        let before = v.len() as u32;
        v.retain(|o| !Arc::ptr_eq(o, obs));
        let found = v.len() as u32 != before;
        self.publish(before, &v);
        found
    }

    fn publish(&self, before: u32, v: &[Arc<dyn TaskObserver>]) {
        let after = v.len() as u32;
        if after > before {
            OBSERVED.fetch_add(after - before, Relaxed);
        } else {
            OBSERVED.fetch_sub(before - after, Relaxed);
        }
        self.enabled.store(after > 0, Relaxed);
    }

    pub(crate) fn emit(&self, rec: TaskRecord) {
        let v = self.observers.read();
        if let Some((last, rest)) = v.split_last() {
            for o in rest {
                o.on_task(rec.clone());
            }
            last.on_task(rec);
        }
    }

    pub(crate) fn launched(&self, note: LaunchNote) {
        for o in self.observers.read().iter() {
            o.on_launch(note);
        }
    }
}

impl Drop for ProfilerSlot {
    fn drop(&mut self) {
        let n = self.observers.get_mut().len() as u32;
        OBSERVED.fetch_sub(n, Relaxed);
    }
}

thread_local! {
    /// Recently seen names by address (kernel names are mostly `&'static str`s, so the
    /// address repeats; the bytes are compared too, so a reused address is no confusion).
    static NAMES: std::cell::RefCell<Vec<(usize, Arc<str>)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Names kept per thread.
const NAME_CACHE: usize = 32;

/// A shared copy of `name` (kernel names repeat: one allocation per name and thread, a
/// short scan to find it again).
pub fn intern_name(name: &str) -> Arc<str> {
    NAMES.with(|m| {
        let mut m = m.borrow_mut();
        let addr = name.as_ptr() as usize;
        if let Some((_, a)) = m.iter().find(|(p, a)| *p == addr && **a == *name) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(name);
        if m.len() == NAME_CACHE {
            m.remove(0);
        }
        m.push((addr, a.clone()));
        a
    })
}

/// This thread's OS id (host tracks of traces).
pub fn thread_id() -> u64 {
    thread_local!(static TID: u64 = {
        // SAFETY: gettid has no preconditions.
        (unsafe { libc::gettid() }) as u64
    });
    TID.with(|t| *t)
}
