//! Runtime configuration: how many virtual devices, how big, how many AI cores.
//!
//! Read once, at first use, from `npurt::configure` if it was called, else from the
//! environment (`NPURT_DEVICE_COUNT`, `NPURT_DEVICE_MEMORY`, `NPURT_AICORE_NUM`,
//! `NPURT_VISIBLE_DEVICES`, `NPURT_WORKER_THREADS`, `NPURT_STREAM_QUEUE_DEPTH`,
//! `NPURT_WORKER_POLICY`), else from the
//! host (AI cores = host cores).

use crate::error::{DeviceError, Result};
pub use crate::thread_role::WorkerPolicy;
use std::time::Duration;

/// Settings of the virtual devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Physical virtual devices before `visible_devices` filtering.
    pub device_count: u32,
    /// Capacity of each device's memory in bytes (a hard limit).
    pub device_memory: u64,
    /// AI cores each device reports (block-claiming semantics use the worker count).
    pub aicore_num: u32,
    /// Worker threads per device; default min(aicore_num, host cores).
    pub worker_threads: u32,
    /// Physical ids exposed as logical ids 0..n (like `ASCEND_RT_VISIBLE_DEVICES`).
    pub visible_devices: Option<Vec<u32>>,
    /// Slots in each stream's task ring.
    pub stream_queue_depth: usize,
    /// How long idle workers spin before they park, in microseconds.
    pub worker_spin_us: u64,
    /// How many polls a host wait spins before it parks.
    pub host_spin_iters: u32,
    /// OS scheduling of the worker threads (`NPURT_WORKER_POLICY`, default batch).
    pub worker_policy: WorkerPolicy,
}

pub(crate) fn host_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

fn host_memory() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on error, handled below.
    let (pages, size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    if pages > 0 && size > 0 {
        pages as u64 * size as u64
    } else {
        16 << 30
    }
}

/// Tuning knobs of one device's executor (derived from a [`Config`]).
#[derive(Debug, Clone)]
pub struct ExecConfig {
    pub workers: usize,
    pub queue_depth: usize,
    /// How long an idle worker spins before parking.
    pub worker_spin: Duration,
    /// How many polls a host thread spins before parking in a wait.
    pub host_spin_iters: u32,
    pub worker_policy: WorkerPolicy,
}

impl Default for Config {
    fn default() -> Self {
        let cores = host_cores();
        Self {
            device_count: 1,
            device_memory: (host_memory() / 2).clamp(1 << 30, 64 << 30),
            aicore_num: cores,
            worker_threads: cores,
            visible_devices: None,
            stream_queue_depth: 1024,
            worker_spin_us: 100,
            host_spin_iters: 4_000,
            worker_policy: WorkerPolicy::Batch,
        }
    }
}

/// Parses a byte size such as `1073741824`, `512M`, `16G`, `2GiB`.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Parses a visible-devices list the way ACL parses `ASCEND_RT_VISIBLE_DEVICES`: ids must
/// be ascending and below `physical`; parsing stops at the first invalid id or stray
/// character ("1, 2,3" keeps only 1).
pub fn parse_visible(s: &str, physical: u32) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for part in s.split(',') {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        match part.parse::<u32>() {
            Ok(id) if id < physical && out.last().is_none_or(|&l| id > l) => out.push(id),
            _ => break,
        }
    }
    out
}

fn env_num<T: std::str::FromStr>(name: &str) -> Result<Option<T>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse::<T>()
            .map(Some)
            .map_err(|_| DeviceError::Config(format!("{name}={v:?} is not a valid number")).into()),
        Err(_) => Ok(None),
    }
}

impl Config {
    /// The defaults, overridden by the `NPURT_*` environment variables.
    pub fn from_env() -> Result<Self> {
        let mut c = Config::default();
        if let Some(n) = env_num::<u32>("NPURT_DEVICE_COUNT")? {
            c.device_count = n;
        }
        if let Ok(v) = std::env::var("NPURT_DEVICE_MEMORY") {
            c.device_memory = parse_bytes(&v)
                .ok_or_else(|| DeviceError::Config(format!("NPURT_DEVICE_MEMORY={v:?} is not a size")))?;
        }
        if let Some(n) = env_num::<u32>("NPURT_AICORE_NUM")? {
            c.set_aicore_num(n);
        }
        if let Some(n) = env_num::<u32>("NPURT_WORKER_THREADS")? {
            c.worker_threads = n;
        }
        if let Some(n) = env_num::<usize>("NPURT_STREAM_QUEUE_DEPTH")? {
            c.stream_queue_depth = n;
        }
        if let Ok(v) = std::env::var("NPURT_WORKER_POLICY") {
            c.worker_policy = WorkerPolicy::parse(&v).ok_or_else(|| {
                DeviceError::Config(format!("NPURT_WORKER_POLICY={v:?} is not one of \"batch\", \"normal\""))
            })?;
        }
        if let Ok(v) = std::env::var("NPURT_VISIBLE_DEVICES") {
            c.visible_devices = Some(parse_visible(&v, c.device_count));
        }
        c.validate()?;
        Ok(c)
    }

    /// Sets the AI-core count and, with it, the default worker count
    /// (`min(aicore_num, host cores)`); set `worker_threads` afterwards to override it.
    pub fn set_aicore_num(&mut self, n: u32) {
        self.aicore_num = n;
        self.worker_threads = n.min(host_cores());
    }

    /// Checks ranges; every bad value gives a clear message.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(DeviceError::Config(m).into());
        if self.device_count == 0 || self.device_count > 64 {
            return bad(format!("device_count must be 1..=64, got {}", self.device_count));
        }
        if self.device_memory < (1 << 20) {
            return bad(format!(
                "device_memory must be at least 1 MiB, got {}",
                self.device_memory
            ));
        }
        if self.aicore_num == 0 || self.aicore_num > 1024 {
            return bad(format!("aicore_num must be 1..=1024, got {}", self.aicore_num));
        }
        if self.worker_threads == 0 || self.worker_threads > 1024 {
            return bad(format!("worker_threads must be 1..=1024, got {}", self.worker_threads));
        }
        if !(2..=1 << 20).contains(&self.stream_queue_depth) {
            return bad(format!(
                "stream_queue_depth must be 2..=1048576, got {}",
                self.stream_queue_depth
            ));
        }
        if let Some(v) = &self.visible_devices {
            if let Some(&bad_id) = v.iter().find(|&&id| id >= self.device_count) {
                return bad(format!(
                    "visible device {bad_id} does not exist ({} devices)",
                    self.device_count
                ));
            }
            if v.windows(2).any(|w| w[0] >= w[1]) {
                return bad("visible_devices must be strictly ascending".to_string());
            }
        }
        Ok(())
    }

    /// Physical ids in logical order.
    pub fn visible(&self) -> Vec<u32> {
        self.visible_devices
            .clone()
            .unwrap_or_else(|| (0..self.device_count).collect())
    }

    pub(crate) fn exec(&self) -> ExecConfig {
        ExecConfig {
            workers: self.worker_threads as usize,
            queue_depth: self.stream_queue_depth,
            worker_spin: Duration::from_micros(self.worker_spin_us),
            host_spin_iters: self.host_spin_iters,
            worker_policy: self.worker_policy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_policy_parses_the_documented_names_only() {
        assert_eq!(WorkerPolicy::parse(" Batch "), Some(WorkerPolicy::Batch));
        assert_eq!(WorkerPolicy::parse("normal"), Some(WorkerPolicy::Normal));
        for bad in ["", "fifo", "batch2"] {
            assert_eq!(WorkerPolicy::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Config::default().worker_policy, WorkerPolicy::Batch);
        assert_eq!(
            WorkerPolicy::parse(WorkerPolicy::Normal.name()),
            Some(WorkerPolicy::Normal)
        );
    }

    #[test]
    fn visible_devices_parse_like_acl() {
        assert_eq!(parse_visible("0,1,2", 4), vec![0, 1, 2]);
        assert_eq!(parse_visible("1, 2,3", 4), vec![1]);
        assert_eq!(parse_visible("2,1", 4), vec![2]);
        assert_eq!(parse_visible("1,9,2", 4), vec![1]);
        assert_eq!(parse_visible("x", 4), Vec::<u32>::new());
        assert_eq!(parse_visible("3", 4), vec![3]);
    }

    #[test]
    fn sizes_and_validation() {
        assert_eq!(parse_bytes("16G"), Some(16 << 30));
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes("12"), Some(12));
        assert_eq!(parse_bytes("12Q"), None);
        assert_eq!(parse_bytes("99999999999999T"), None);
        let mut c = Config::default();
        assert!(c.validate().is_ok());
        c.device_count = 0;
        assert!(c.validate().unwrap_err().to_string().contains("device_count"));
        c.device_count = 2;
        c.visible_devices = Some(vec![1, 0]);
        assert!(c.validate().is_err());
    }
}

/// Launch-blocking mode (`NPURT_LAUNCH_BLOCKING=1`, or torch_npu's `ASCEND_LAUNCH_BLOCKING=1`;
/// NPURT_ wins when both are set): the bindings wait for every launch, copy and event
/// record to complete and raise its error at the call, as `CUDA_LAUNCH_BLOCKING` does.
/// Read once; afterwards one relaxed load.
#[inline]
pub fn launch_blocking() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
    static MODE: AtomicU8 = AtomicU8::new(0); // 0 unread, 1 off, 2 on
    match MODE.load(Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let on = launch_blocking_from(
                std::env::var("NPURT_LAUNCH_BLOCKING").ok().as_deref(),
                std::env::var("ASCEND_LAUNCH_BLOCKING").ok().as_deref(),
            );
            MODE.store(if on { 2 } else { 1 }, Relaxed);
            on
        }
    }
}

/// The rule behind [`launch_blocking`]: a set, non-empty `NPURT_LAUNCH_BLOCKING` decides
/// (`1`/`true`/`yes`/`on` is on), else `ASCEND_LAUNCH_BLOCKING`; default off.
pub fn launch_blocking_from(npurt: Option<&str>, ascend: Option<&str>) -> bool {
    let on = |v: &str| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on");
    match npurt.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => on(v),
        None => ascend.is_some_and(on),
    }
}

#[cfg(test)]
mod launch_blocking_tests {
    use super::launch_blocking_from as f;

    #[test]
    fn npurt_wins_then_ascend_then_off() {
        assert!(!f(None, None));
        assert!(f(Some("1"), None) && f(None, Some("1")) && f(Some("true"), Some("0")));
        assert!(!f(Some("0"), Some("1")), "NPURT_ wins");
        assert!(f(Some(""), Some("1")), "empty NPURT_ falls through");
        assert!(!f(None, Some("2")));
    }
}
