//! The process table of a shared region: attaching and detaching a process, charging
//! device room across processes (one CAS against the capacity), and reclaiming the share
//! of a process that died without detaching (its pid is gone, a zombie, or reused: the
//! start time differs). Dead processes are looked for on attach and before an
//! allocation is refused.

use super::region::{self, ProcSlot, Region, FREE, LIVE, MAX_PROCS};
use super::{protocol, SharedError};
use npurt_mem::human_bytes;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

/// Start time of `pid` (field 22 of `/proc/<pid>/stat`), or `None` if it is gone or a
/// zombie (a killed process not yet reaped has no memory any more).
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // After the state (field 3) come fields 4..; the start time is field 22.
    fields.nth(18)?.parse().ok()
}

/// This process: (pid, start time).
pub(crate) fn me() -> (u32, u64) {
    let pid = std::process::id();
    (pid, start_time(pid).unwrap_or(0))
}

/// True while the process that wrote `(pid, start)` runs.
pub(crate) fn alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// A short name for this process: `comm`, and the script or executable when different.
pub(crate) fn my_name() -> String {
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    let comm = comm.trim();
    let script = std::env::args()
        .nth(if comm.starts_with("python") { 1 } else { 0 })
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    match (comm.is_empty(), script.is_empty() || script == comm) {
        (false, false) => format!("{comm}:{script}"),
        (false, true) => comm.to_string(),
        _ => script,
    }
}

/// Frees the slots of dead processes (under the region lock); returns the bytes reclaimed.
pub(crate) fn reclaim_dead(r: &Region) -> u64 {
    let mut freed = 0;
    for i in 0..MAX_PROCS {
        let s = r.proc(i);
        if s.state.load(Acquire) != LIVE || alive(s.pid.load(Relaxed), s.start.load(Relaxed)) {
            continue;
        }
        freed += clear(r, s);
    }
    super::ipc_event::close_dead(r);
    freed
}

/// Empties a slot and gives its reserved bytes back to the device.
fn clear(r: &Region, s: &ProcSlot) -> u64 {
    protocol::clear(r.header(), s)
}

/// Takes a free slot for this process (under the lock, after reclaiming dead ones).
pub(crate) fn attach(r: &Region) -> Result<usize, SharedError> {
    let _g = r.lock()?;
    reclaim_dead(r);
    let (pid, start) = me();
    let i = (0..MAX_PROCS)
        .find(|&i| r.proc(i).state.load(Acquire) == FREE)
        .ok_or(SharedError::Full {
            what: "process",
            max: MAX_PROCS,
        })?;
    let s = r.proc(i);
    region::store_name(s, &my_name());
    protocol::publish(s, pid, start);
    Ok(i)
}

/// Gives the slot back (whatever it still holds is returned to the device).
pub(crate) fn detach(r: &Region, i: usize) {
    let _g = r.lock(); // best effort: a stuck lock must not keep a process from exiting
    clear(r, r.proc(i));
}

/// One CAS loop on the device's reserved counter against the capacity; on success the
/// bytes are also counted on the slot. A refusal first reclaims dead processes and
/// retries once; the error then names who holds what.
pub(crate) fn charge(r: &Region, i: usize, bytes: u64) -> Result<(), String> {
    for retry in [true, false] {
        if protocol::try_charge(r.header(), r.proc(i), bytes) {
            return Ok(());
        }
        if retry {
            match r.lock() {
                Ok(_g) if reclaim_dead(r) > 0 => continue,
                _ => break,
            }
        }
    }
    Err(holders(r, i, bytes))
}

/// Gives back bytes taken with [`charge`].
pub(crate) fn release(r: &Region, i: usize, bytes: u64) {
    // A slot cleared meanwhile (detach) already gave everything back.
    protocol::release(r.header(), r.proc(i), bytes);
}

/// "device 0 (capacity 64.0 MiB) is shared by 2 processes: pid 12 'python:a.py' holds
/// 48.0 MiB reserved (40.0 MiB allocated); pid 13 'python' (this process) holds ...".
pub(crate) fn holders(r: &Region, me: usize, requested: u64) -> String {
    let h = r.header();
    let mut parts = Vec::new();
    for j in 0..MAX_PROCS {
        let s = r.proc(j);
        if s.state.load(Acquire) != LIVE {
            continue;
        }
        let this = if j == me { " (this process)" } else { "" };
        parts.push(format!(
            "pid {} '{}'{this} holds {} reserved ({} allocated)",
            s.pid.load(Relaxed),
            region::load_name(s),
            human_bytes(s.reserved.load(Relaxed)),
            human_bytes(s.allocated.load(Relaxed)),
        ));
    }
    format!(
        "device {} capacity {} shared across processes: {} more would exceed it; {} reserved by {} process(es): {}",
        h.device.load(Relaxed),
        human_bytes(h.capacity.load(Relaxed)),
        human_bytes(requested),
        human_bytes(h.reserved.load(Relaxed)),
        parts.len(),
        parts.join("; ")
    )
}

/// What `npurt-smi` shows of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub name: String,
    pub allocated: u64,
    pub reserved: u64,
    pub quota: u64,
    pub streams: u64,
    pub events: u64,
    /// False when the process is gone but its slot was not reclaimed yet.
    pub alive: bool,
}

pub(crate) fn list(r: &Region) -> Vec<ProcessInfo> {
    (0..MAX_PROCS)
        .map(|i| r.proc(i))
        .filter_map(|s| protocol::live_pid(s).map(|pid| (s, pid)))
        .map(|(s, pid)| ProcessInfo {
            pid,
            name: region::load_name(s),
            allocated: s.allocated.load(Relaxed),
            reserved: s.reserved.load(Relaxed),
            quota: s.quota.load(Relaxed),
            streams: s.streams.load(Relaxed),
            events: s.events.load(Relaxed),
            alive: alive(pid, s.start.load(Relaxed)),
        })
        .collect()
}
