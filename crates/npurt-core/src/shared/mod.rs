//! One device, several processes: the per-device shared status region.
//!
//! Every process that uses device `d` maps `<status dir>/device<d>-<capacity hex>.region`
//! (processes share a device when they agree on what it is: its ordinal and capacity,
//! `NPURT_DEVICE_MEMORY`). The region lists the processes using the device (pid, start
//! time, name), their memory (allocated, reserved, quota) and activity, and holds the
//! device's reserved-bytes counter, which every segment mapping charges with one CAS
//! against the capacity: the capacity holds across processes, and a refusal names who
//! holds what. A cached malloc/free costs one relaxed add on the process's `allocated`.
//! A process that dies without detaching is found (pid gone or reused) on attach and
//! before a refusal, and its share reclaimed. It also holds the interprocess events'
//! slots (`ipc_event.rs`). `NPURT_SHARED_DEVICE=0` (or [`set_enabled`]) keeps devices
//! process-private; a directory or file that is not safely ours does too (see
//! [`attach_error`]).
//!
//! **Fork.** A forked child's inherited slot and event slots stay the parent's: dropping
//! them changes nothing in the region and never takes the (shared) `flock`; a region the
//! child opens itself is a fresh mapping. See [`inherited`] and DESIGN.md.

mod ipc_event;
#[cfg(all(test, loom))]
mod loom_tests;
mod procs;
mod protocol;
mod region;
#[cfg(all(test, not(loom)))]
mod tests;

pub use ipc_event::IpcEvent;
pub use procs::ProcessInfo;
pub(crate) use procs::{alive, me};

use crate::error::AclCode;
use parking_lot::Mutex;
use region::Region;
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Arc, OnceLock, Weak};

/// Errors of the shared region and of interprocess events.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SharedError {
    #[error("shared status region: {op} failed (errno {errno})")]
    Os { op: &'static str, errno: i32 },
    #[error("shared status region: the lock is held by a process that does not let go (2 s)")]
    LockTimeout,
    #[error("shared status region: all {max} {what} slots are in use")]
    Full { what: &'static str, max: usize },
    #[error("status directory {path}: {reason}; npurt keeps devices process-private (set NPURT_STATUS_DIR)")]
    UnsafeDir { path: String, reason: String },
    #[error("shared status region {path} has an incompatible layout (version {found})")]
    Version { path: String, found: u32 },
    #[error("not an npurt interprocess event handle: {0}")]
    BadHandle(String),
    #[error("the interprocess event handle is stale: its event was destroyed and the slot reused")]
    StaleHandle,
    #[error("the process that owns this interprocess event (pid {pid}) exited before its record completed")]
    ProducerGone { pid: u32 },
    #[error("the interprocess event was destroyed by its process (pid {pid}) before its record completed")]
    ProducerClosed { pid: u32 },
    #[error("an interprocess event cannot have timing enabled (as in torch and CUDA)")]
    IpcTiming,
}

impl SharedError {
    pub(crate) fn os(op: &'static str) -> Self {
        Self::Os {
            op,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }
    pub fn code(&self) -> AclCode {
        match self {
            Self::BadHandle(_) | Self::IpcTiming => AclCode::PARAM_INVALID,
            Self::StaleHandle | Self::ProducerGone { .. } | Self::ProducerClosed { .. } => AclCode::IPC_ERROR,
            Self::Full { .. } => AclCode::NO_EVENT_RESOURCE,
            _ => AclCode::INTERNAL_ERROR,
        }
    }
    pub(crate) fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind;
        match self {
            Self::BadHandle(_) | Self::IpcTiming => ErrorKind::InvalidValue,
            Self::StaleHandle | Self::ProducerGone { .. } | Self::ProducerClosed { .. } => ErrorKind::Ipc,
            _ => ErrorKind::Internal,
        }
    }
}

static DISABLED: AtomicBool = AtomicBool::new(false);
static ENV_READ: OnceLock<()> = OnceLock::new();

/// Whether devices started from now on attach to their shared region.
pub fn enabled() -> bool {
    ENV_READ.get_or_init(|| {
        if std::env::var("NPURT_SHARED_DEVICE").is_ok_and(|v| v == "0") {
            DISABLED.store(true, Release);
        }
    });
    !DISABLED.load(Acquire)
}

/// Turns the region on or off for devices started from now on (benchmarks, tests).
pub fn set_enabled(on: bool) {
    let _ = enabled();
    DISABLED.store(!on, Release);
}

static LAST_ERROR: Mutex<Option<SharedError>> = Mutex::new(None);

/// True when an object made by process `pid` is a forked child's inherited copy (it must
/// leave the region alone). The fork handler's flag covers children of a running
/// runtime; the pid covers the rest.
pub(crate) fn inherited(pid: u32) -> bool {
    crate::lifecycle::forked() || std::process::id() != pid
}

/// Why the last device that tried to attach stayed process-private, if it did.
pub fn attach_error() -> Option<SharedError> {
    LAST_ERROR.lock().clone()
}

/// The per-user status directory (one owner of this rule): `NPURT_STATUS_DIR`, else
/// `/dev/shm/npurt-<uid>`, else `$XDG_RUNTIME_DIR/npurt`, else `<tmp>/npurt-<uid>`. Created
/// with mode 0700; refused when it is not a directory owned by this user or when group
/// or others may access it.
pub fn status_dir() -> Result<PathBuf, SharedError> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let dir = match std::env::var_os("NPURT_STATUS_DIR").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None if writable("/dev/shm") => PathBuf::from(format!("/dev/shm/npurt-{uid}")),
        None => match std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
        {
            Some(x) => x.join("npurt"),
            None => std::env::temp_dir().join(format!("npurt-{uid}")),
        },
    };
    let unsafe_dir = |reason: String| SharedError::UnsafeDir {
        path: dir.display().to_string(),
        reason,
    };
    if let Err(e) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir) {
        return Err(unsafe_dir(format!("cannot create it ({e})")));
    }
    let md = std::fs::symlink_metadata(&dir).map_err(|e| unsafe_dir(e.to_string()))?;
    if !md.is_dir() {
        return Err(unsafe_dir("not a directory".into()));
    }
    if md.uid() != uid {
        return Err(unsafe_dir(format!("owned by uid {}, not {uid}", md.uid())));
    }
    if md.permissions().mode() & 0o077 != 0 {
        return Err(unsafe_dir(format!(
            "mode {:o}: group or others have access",
            md.permissions().mode() & 0o777
        )));
    }
    Ok(dir)
}

fn writable(p: &str) -> bool {
    let c = std::ffi::CString::new(p).expect("no NUL");
    // SAFETY: access() reads a NUL-terminated path we own.
    Path::new(p).is_dir() && unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0
}

fn region_path(dir: &Path, device: u32, capacity: u64) -> PathBuf {
    dir.join(format!("device{device}-{capacity:x}.region"))
}

/// Regions mapped, by path (one per file), with the pid that mapped them (see "Fork").
type Mappings = HashMap<PathBuf, (u32, Weak<Region>)>;
static REGIONS: Mutex<Option<Mappings>> = Mutex::new(None);

/// Maps (creating and initialising if needed) the region of `device` with `capacity`.
pub(crate) fn open_region(dir: &Path, device: u32, capacity: u64) -> Result<Arc<Region>, SharedError> {
    let path = region_path(dir, device, capacity);
    let mut map = REGIONS.lock();
    let pid = std::process::id();
    let cached = map.get_or_insert_with(HashMap::new).get(&path);
    if let Some(r) = cached.filter(|(p, _)| *p == pid).and_then(|(_, w)| w.upgrade()) {
        return Ok(r);
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| SharedError::UnsafeDir {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
    let md = file.metadata().map_err(|_| SharedError::os("fstat"))?;
    if md.uid() != std::fs::metadata(dir).map(|m| m.uid()).unwrap_or(u32::MAX) || md.mode() & 0o077 != 0 {
        return Err(SharedError::UnsafeDir {
            path: path.display().to_string(),
            reason: "file not ours or not 0600".into(),
        });
    }
    region::lock_file(&file)?;
    if md.len() < region::LEN as u64 {
        file.set_len(region::LEN as u64)
            .map_err(|_| SharedError::os("ftruncate"))?;
    }
    let r = Region::map(file)?; // the lock stays with the file: released below
    let h = r.header();
    let g = FileUnlock(&r);
    match h.magic.load(Acquire) {
        region::MAGIC if h.version.load(Relaxed) != region::VERSION => {
            return Err(SharedError::Version {
                path: path.display().to_string(),
                found: h.version.load(Relaxed),
            });
        }
        region::MAGIC => {}
        _ => {
            h.version.store(region::VERSION, Relaxed);
            h.device.store(device, Relaxed);
            h.capacity.store(capacity, Relaxed);
            h.reserved.store(0, Relaxed);
            h.magic.store(region::MAGIC, Release);
        }
    }
    drop(g);
    let r = Arc::new(r);
    map.get_or_insert_with(HashMap::new)
        .insert(path, (pid, Arc::downgrade(&r)));
    Ok(r)
}

/// Unlocks a region's file on drop (the open path locked it before mapping).
struct FileUnlock<'a>(&'a Region);
impl Drop for FileUnlock<'_> {
    fn drop(&mut self) {
        drop(region::FileLock::adopt(self.0));
    }
}

/// A device's attachment: the region and this process's slot. Dropping it detaches.
pub(crate) struct Attached {
    region: Arc<Region>,
    slot: usize,
    /// The attached process (a forked child's inherited copy leaves the slot alone).
    pid: u32,
}

impl Attached {
    /// Attaches this process to `device`'s region, or `None` (process-private) when the
    /// region is off or cannot be used safely ([`attach_error`] says why).
    pub(crate) fn attach(device: u32, capacity: u64) -> Option<Arc<Attached>> {
        if !enabled() {
            return None;
        }
        let r = status_dir()
            .and_then(|d| open_region(&d, device, capacity))
            .and_then(|region| {
                let slot = procs::attach(&region)?;
                let pid = std::process::id();
                Ok(Arc::new(Attached { region, slot, pid }))
            });
        match r {
            Ok(a) => Some(a),
            Err(e) => {
                *LAST_ERROR.lock() = Some(e);
                None
            }
        }
    }

    /// The fast path: one relaxed add (or sub) on this process's allocated bytes (none in
    /// a forked child: the load of the fork flag).
    #[inline]
    pub(crate) fn allocated(&self, delta: i64) {
        if crate::lifecycle::forked() {
            return;
        }
        let a = &self.region.proc(self.slot).allocated;
        if delta >= 0 {
            a.fetch_add(delta as u64, Relaxed);
        } else {
            a.fetch_sub(delta.unsigned_abs(), Relaxed);
        }
    }

    pub(crate) fn set_quota(&self, quota: u64) {
        if inherited(self.pid) {
            return;
        }
        self.region.proc(self.slot).quota.store(quota, Relaxed);
    }

    pub(crate) fn publish(&self, streams: u64, events: u64) {
        if inherited(self.pid) {
            return;
        }
        let s = self.region.proc(self.slot);
        s.streams.store(streams, Relaxed);
        s.events.store(events, Relaxed);
    }

    /// Every process attached to the device.
    pub(crate) fn processes(&self) -> Vec<ProcessInfo> {
        procs::list(&self.region)
    }
}

impl npurt_mem::ReserveGate for Attached {
    fn try_reserve(&self, bytes: usize) -> Result<(), String> {
        if inherited(self.pid) {
            return Err("a forked child cannot take room on its parent's device".into());
        }
        procs::charge(&self.region, self.slot, bytes as u64)
    }
    fn release(&self, bytes: usize) {
        if inherited(self.pid) {
            return; // the parent still holds these bytes: releasing here would count twice
        }
        procs::release(&self.region, self.slot, bytes as u64);
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        if inherited(self.pid) {
            return; // the slot is the parent's
        }
        procs::detach(&self.region, self.slot);
    }
}

/// One device as the region files in the status directory describe it (for npurt-smi).
#[derive(Debug, Clone)]
pub struct SharedDevice {
    pub device: u32,
    pub capacity: u64,
    pub reserved: u64,
    pub processes: Vec<ProcessInfo>,
}

/// Reads every region in the status directory (without attaching); dead processes are
/// listed with `alive: false`.
pub fn snapshot() -> Result<Vec<SharedDevice>, SharedError> {
    let dir = status_dir()?;
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(out);
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((dev, cap)) = parse_region_name(&name) else {
            continue;
        };
        let Ok(r) = open_region(&dir, dev, cap) else { continue };
        let h = r.header();
        out.push(SharedDevice {
            device: dev,
            capacity: h.capacity.load(Relaxed),
            reserved: h.reserved.load(Relaxed),
            processes: procs::list(&r),
        });
    }
    out.sort_by_key(|d| (d.device, d.capacity));
    Ok(out)
}

fn parse_region_name(name: &str) -> Option<(u32, u64)> {
    let rest = name.strip_prefix("device")?.strip_suffix(".region")?;
    let (d, c) = rest.split_once('-')?;
    Some((d.parse().ok()?, u64::from_str_radix(c, 16).ok()?))
}

/// Frees the slots of processes that died without detaching, in every region of the
/// status directory; returns the bytes reclaimed (npurt-smi calls it).
pub fn reclaim() -> Result<u64, SharedError> {
    let dir = status_dir()?;
    let mut total = 0;
    for e in std::fs::read_dir(&dir)
        .map_err(|_| SharedError::os("readdir"))?
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((dev, cap)) = parse_region_name(&name) else {
            continue;
        };
        let Ok(r) = open_region(&dir, dev, cap) else { continue };
        let _g = r.lock()?;
        total += procs::reclaim_dead(&r);
    }
    Ok(total)
}
