//! One active virtual device: its executor, contexts and properties, and its teardown.

use crate::config::Config;
use crate::context::{Context, ContextInner, ContextList};
use crate::error::Result;
use crate::event::Event;
use crate::executor::{Executor, Scheduler};
use crate::memory::DeviceMemory;
use parking_lot::Mutex;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// What a device reports about itself (ACL's `aclrtGetDeviceInfo` attributes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProps {
    pub ordinal: u32,
    pub physical_id: u32,
    pub name: String,
    pub soc_name: String,
    pub total_memory: u64,
    pub aicore_num: u32,
    pub vector_core_num: u32,
    pub l2_cache_size: u64,
    pub worker_threads: u32,
    pub stream_queue_depth: usize,
}

impl DeviceProps {
    pub(crate) fn new(ordinal: u32, physical_id: u32, cfg: &Config) -> Self {
        DeviceProps {
            ordinal,
            physical_id,
            name: format!("npurt virtual NPU {physical_id}"),
            soc_name: "Ascend910B-npurt".to_string(),
            total_memory: cfg.device_memory,
            aicore_num: cfg.aicore_num,
            vector_core_num: cfg.aicore_num * 2,
            l2_cache_size: host_l2_size(),
            worker_threads: cfg.worker_threads,
            stream_queue_depth: cfg.stream_queue_depth,
        }
    }
}

/// The host's last-level cache, which plays the device L2's role.
fn host_l2_size() -> u64 {
    for idx in [3, 2] {
        let p = format!("/sys/devices/system/cpu/cpu0/cache/index{idx}/size");
        if let Ok(s) = std::fs::read_to_string(p) {
            if let Some(b) = crate::config::parse_bytes(s.trim()) {
                return b;
            }
        }
    }
    32 << 20
}

/// What was still alive when a device was torn down.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeakReport {
    pub device: u32,
    pub streams: usize,
    pub events: usize,
    pub contexts: usize,
    pub allocations: usize,
    pub bytes: u64,
}

impl LeakReport {
    pub fn is_empty(&self) -> bool {
        self.streams + self.events + self.contexts + self.allocations == 0
    }
}

/// An active device (between the first set and the last reset).
pub struct Device {
    pub props: DeviceProps,
    pub(crate) shared: Arc<Scheduler>,
    exec: Mutex<Option<Executor>>,
    default_ctx: Arc<ContextInner>,
    contexts: Arc<ContextList>,
    memory: Arc<DeviceMemory>,
}

impl Device {
    pub(crate) fn start(props: DeviceProps, cfg: &Config) -> Result<Arc<Self>> {
        let exec = Executor::start(props.ordinal, &cfg.exec())?;
        let shared = exec.shared.clone();
        let memory = match DeviceMemory::new(props.ordinal, cfg.device_memory as usize, shared.clone()) {
            Ok(m) => m,
            Err(e) => {
                exec.shutdown();
                return Err(e);
            }
        };
        let default_ctx = ContextInner::new(shared.clone(), memory.clone(), std::sync::Weak::new());
        Ok(Arc::new(Device {
            props,
            shared,
            exec: Mutex::new(Some(exec)),
            default_ctx,
            contexts: Arc::default(),
            memory,
        }))
    }

    /// The device's memory: caching pool, statistics, quota.
    pub fn memory(&self) -> &Arc<DeviceMemory> {
        &self.memory
    }

    /// What `npurt-smi` shows: (AI-core workers, their busy nanoseconds summed, live events).
    pub fn activity(&self) -> (usize, u64, usize) {
        (self.shared.workers(), self.shared.busy_ns(), self.shared.live_events())
    }

    /// AI-core utilisation in percent over the next `window` (blocks the caller that
    /// long): the busy time the workers add up during it over `window × workers`, clamped
    /// to 0..=100 (work is counted when a piece of it ends, so a long kernel shows in the
    /// window it finishes in).
    pub fn utilization(&self, window: std::time::Duration) -> f64 {
        let (workers, b0, _) = self.activity();
        let t0 = std::time::Instant::now();
        std::thread::sleep(window);
        let (_, b1, _) = self.activity();
        busy_percent(b1.saturating_sub(b0), t0.elapsed().as_nanos() as u64, workers)
    }

    pub fn ordinal(&self) -> u32 {
        self.props.ordinal
    }

    pub fn default_context(&self) -> Context {
        Context(self.default_ctx.clone())
    }

    /// Creates an explicit context with its own default stream.
    pub fn create_context(&self) -> Result<Context> {
        Ok(Context(self.contexts.create(self.shared.clone(), self.memory.clone())))
    }

    /// Creates an event on this device.
    pub fn create_event(&self, timing: bool) -> Event {
        Event::new(self.shared.state.clone(), timing)
    }

    /// Waits for all work on all contexts of the device; raises the first sticky error.
    pub fn synchronize(&self, timeout: Option<std::time::Duration>) -> Result<()> {
        let all: Vec<Context> = std::iter::once(self.default_context())
            .chain(self.contexts.snapshot().into_iter().map(Context))
            .collect();
        for c in all {
            c.synchronize(timeout)?;
        }
        Ok(())
    }

    /// Waits up to `timeout` for the queued work of every context, ignoring sticky errors
    /// (what a non-forced teardown waits for); true when all of it finished.
    pub fn wait_idle(&self, timeout: Option<std::time::Duration>) -> bool {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        std::iter::once(self.default_ctx.clone())
            .chain(self.contexts.snapshot())
            .all(|c| c.wait_all(deadline))
    }

    /// Installs (or removes) a profiler observer for this device's tasks.
    pub fn set_observer(&self, obs: Option<Arc<dyn crate::profiler::TaskObserver>>) {
        self.shared.set_observer(obs);
    }

    /// Adds a task observer beside the installed ones (a profiler beside the flight recorder).
    pub fn add_observer(&self, obs: Arc<dyn crate::profiler::TaskObserver>) {
        self.shared.add_observer(obs);
    }

    /// Removes one observer (by identity); true if it was installed.
    pub fn remove_observer(&self, obs: &Arc<dyn crate::profiler::TaskObserver>) -> bool {
        self.shared.remove_observer(obs)
    }

    /// Finishes pending work, releases every stream, event and context, stops the threads,
    /// and reports what was still alive.
    pub(crate) fn teardown(&self, force: bool) -> LeakReport {
        let explicit: Vec<Arc<ContextInner>> = self.contexts.take();
        let all: Vec<&Arc<ContextInner>> = std::iter::once(&self.default_ctx).chain(explicit.iter()).collect();
        if !force {
            for c in &all {
                c.wait_all(None);
            }
        }
        let (allocations, bytes) = self.memory.live();
        let report = LeakReport {
            device: self.props.ordinal,
            streams: all.iter().map(|c| c.stream_count()).sum(),
            events: self.shared.live_events.load(Relaxed),
            contexts: explicit.len(),
            allocations,
            bytes,
        };
        let streams: Vec<_> = all.iter().flat_map(|c| c.all_streams()).collect();
        for c in &all {
            c.retire(force);
        }
        if let Some(exec) = self.exec.lock().take() {
            exec.shutdown();
        }
        // With the threads gone, whatever is still queued (a forced reset) will never run:
        // drop it and count it complete so that no host thread waits on it forever.
        for s in &streams {
            s.abandon();
        }
        // Cached segments go back to the OS now; leaked buffers keep their own segments
        // mapped (their handles report the reset when used) until they are dropped.
        self.memory.empty_cache();
        if report.is_empty() {
            log::info!(
                "device {} torn down{}",
                report.device,
                if force { " (forced)" } else { "" }
            );
        } else {
            log::warn!(
                "device {} reset with resources still alive: {} streams, {} events, {} contexts, {} allocations ({} B)",
                report.device,
                report.streams,
                report.events,
                report.contexts,
                report.allocations,
                report.bytes
            );
        }
        report
    }
}

/// Busy nanoseconds over a span of `span_ns` on `workers` cores, in percent (0..=100):
/// the one rule for AI-core utilisation (`Device::utilization`, npurt-smi's record).
pub fn busy_percent(busy_ns: u64, span_ns: u64, workers: usize) -> f64 {
    if span_ns == 0 || workers == 0 {
        return 0.0;
    }
    (100.0 * busy_ns as f64 / (span_ns as f64 * workers as f64)).clamp(0.0, 100.0)
}
