//! [`DeviceState`]: a device's identity and liveness, without its scheduler.
//!
//! Events, contexts and the memory fronts need to know which device they belong to,
//! whether it still runs, who observes its tasks and how busy it is; only streams and the
//! workers need the ready lists, jobs, notifier and engines of [`Scheduler`]. Holding an
//! `Arc<DeviceState>` (an event) keeps none of the scheduling machinery alive, and a
//! [`Scheduler`] derefs to its state, so `dev.ordinal` / `dev.is_alive()` read the same on
//! both.
//!
//! [`Scheduler`]: super::Scheduler

use crate::profiler::ProfilerSlot;
use crossbeam_utils::CachePadded;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

/// Identity, liveness, observers and activity counters of one running device.
pub(crate) struct DeviceState {
    pub ordinal: u32,
    alive: AtomicBool,
    pub(crate) profiler: ProfilerSlot,
    /// Events created on this device that still exist.
    pub(crate) live_events: AtomicUsize,
    /// Nanoseconds each worker spent running work (its own counter: a plain store).
    pub(crate) busy: Box<[CachePadded<AtomicU64>]>,
}

impl DeviceState {
    pub(crate) fn new(ordinal: u32, workers: usize) -> DeviceState {
        DeviceState {
            ordinal,
            alive: AtomicBool::new(true),
            profiler: ProfilerSlot::default(),
            live_events: AtomicUsize::new(0),
            busy: (0..workers).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
        }
    }

    /// Nanoseconds the AI-core workers spent running work, summed over workers (since
    /// the device started; utilisation = its growth / (elapsed × workers)).
    pub(crate) fn busy_ns(&self) -> u64 {
        self.busy.iter().map(|b| b.load(Relaxed)).sum()
    }

    /// AI-core worker threads.
    pub(crate) fn workers(&self) -> usize {
        self.busy.len()
    }

    /// Events created on this device that still exist.
    pub(crate) fn live_events(&self) -> usize {
        self.live_events.load(Relaxed)
    }

    #[inline]
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Acquire)
    }

    /// Marks the device dead (at shutdown, or in a forked child, which has no threads).
    pub(crate) fn mark_dead(&self) {
        self.alive.store(false, Release);
    }

    /// Installs (or removes) the device's task observer.
    pub(crate) fn set_observer(&self, obs: Option<std::sync::Arc<dyn crate::profiler::TaskObserver>>) {
        self.profiler.set(obs);
    }

    /// Adds a task observer beside the installed ones.
    pub(crate) fn add_observer(&self, obs: std::sync::Arc<dyn crate::profiler::TaskObserver>) {
        self.profiler.add(obs);
    }

    /// Removes one observer (by identity); true if it was installed.
    pub(crate) fn remove_observer(&self, obs: &std::sync::Arc<dyn crate::profiler::TaskObserver>) -> bool {
        self.profiler.remove(obs)
    }
}
