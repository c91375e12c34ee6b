//! Device memory shared between processes (AscendCL `aclrtIpcMem*`, CUDA IPC, torch's
//! multiprocessing sharing).
//!
//! * **Export.** [`export`] takes any range of a *shareable* buffer (the shareable pool,
//!   a shareable `MemPool`, or memory imported from elsewhere; see `memory/shareable.rs`
//!   for how to get one) and returns a printable key ([`key`]: 128 random bits). The
//!   first export starts this process's server thread ([`server`]).
//! * **Whitelist.** [`Access::Pids`] (the default; `set_import_pids` adds more): only
//!   those processes may import; [`Access::SameUser`] (what pickling uses): any process
//!   of this user; [`Access::Open`] (ACL's `DISABLE_PID_VALIDATION`): anyone who has the
//!   key. The importer's pid and uid come from the kernel (`SO_PEERCRED`). The exporter
//!   itself may always import its own keys.
//! * **Import.** [`import`] connects to the exporter, receives the sealed memfd by
//!   `SCM_RIGHTS` and maps the pages holding the range: a [`DeviceBuffer`] of the current
//!   device (copies and kernels work on it; it is not charged to this process). Importing
//!   a key twice maps it twice.
//! * **Lifetime.** The memory lives until the exporter freed it and every importer
//!   closed it or exited, in any order. The exporter keeps the block (never reused) while
//!   a lease is open; an importer's mapping keeps the pages even if the exporter dies.
//!   Dropping (or freeing) the imported buffer's last handle unmaps it and ends the lease.
//! * **Errors** are [`IpcError`]s (507022): not shareable, malformed / unknown key,
//!   not permitted, stale (freed, device reset, exporter exited), closed, timeout.

mod client;
pub mod key;
mod proto;
mod registry;
mod server;
mod sys;

pub use key::{array_key, parse_array_key, ArrayMeta};

use crate::error::{BufferError, IpcError, Result};
use crate::memory::{DeviceBuffer, DeviceMemory};
use std::sync::Arc;
use std::time::Duration;

/// Who may import a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Only these process ids (ACL's default whitelist; may start empty and be filled
    /// with [`set_import_pids`]).
    Pids(Vec<u32>),
    /// Any process of the exporter's user (pickling across `multiprocessing`).
    SameUser,
    /// Anyone holding the key (`ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION`).
    Open,
}

impl Access {
    /// A whitelist from user-given pids (each must be a positive process id).
    pub fn pids(pids: &[i64]) -> Result<Access> {
        Ok(Access::Pids(checked_pids(pids)?))
    }
}

fn checked_pids(pids: &[i64]) -> Result<Vec<u32>> {
    pids.iter()
        .map(|&p| {
            u32::try_from(p)
                .ok()
                .filter(|&p| p > 0 && p <= i32::MAX as u32)
                .ok_or_else(|| IpcError::BadPid { pid: p }.into())
        })
        .collect()
}

/// Exports `[offset, offset + len)` of `buf` (`len` 0: to the end) and returns its key.
/// The same range of the same buffer exported again with the same access gets the same
/// key while it is live. `NotShareable` if the memory is not from a shareable pool.
pub fn export(buf: &DeviceBuffer, offset: usize, len: usize, access: Access) -> Result<String> {
    buf.check()?;
    if !buf.is_shareable() {
        return Err(IpcError::NotShareable { addr: buf.addr() }.into());
    }
    let len = if len == 0 {
        buf.nbytes().saturating_sub(offset)
    } else {
        len
    };
    if len == 0 || offset.checked_add(len).is_none_or(|e| e > buf.nbytes()) {
        return Err(BufferError::OutOfRange {
            op: "ipc export",
            side: "buffer",
            nbytes: len,
            offset,
            capacity: buf.nbytes(),
        }
        .into());
    }
    let ep = server::endpoint()?;
    let addr = buf.addr() + offset;
    let reuse = matches!(access, Access::SameUser | Access::Open);
    registry::with(|r| {
        if reuse {
            if let Some(secret) = r.find_reusable(buf, addr, len, &access) {
                let k = key::Key {
                    pid: ep.pid,
                    nonce: ep.nonce,
                    secret,
                };
                return Ok(k.format());
            }
        }
        let k = key::Key::new(ep.pid, ep.nonce)?;
        r.insert(&k, buf, addr, len, access);
        Ok(k.format())
    })
}

fn own_key(key: &str, op: &'static str) -> Result<key::Key> {
    let k = key::Key::parse(key)?;
    let me = sys::getpid();
    let ours = server::endpoint().is_ok_and(|ep| ep.pid == k.pid && ep.nonce == k.nonce);
    if !ours {
        return Err(IpcError::NotExporter { pid: me, op }.into());
    }
    Ok(k)
}

/// Adds `pids` to the whitelist of a key this process exported (`aclrtIpcMemSetImportPid`).
pub fn set_import_pids(key: &str, pids: &[i64]) -> Result<()> {
    let k = own_key(key, "set the import pids of")?;
    let pids = checked_pids(pids)?;
    Ok(registry::with(|r| r.allow(&k, &pids))?)
}

/// The exporter's `aclrtIpcMemClose`: the key can no longer be imported; open imports
/// keep their memory until they close.
pub fn close(key: &str) -> Result<()> {
    let k = own_key(key, "close")?;
    Ok(registry::with(|r| r.close(&k))?)
}

/// True if this process exported `key` (and its server is this process's).
pub fn is_own_key(key: &str) -> bool {
    own_key(key, "").is_ok()
}

/// Imports `key` onto the device of `mem` (see the module docs); waits at most `timeout`
/// for the exporter's answer. The caller releases the interpreter lock around this.
pub fn import(key: &str, mem: &Arc<DeviceMemory>, timeout: Duration) -> Result<DeviceBuffer> {
    client::import(key, mem, timeout)
}

/// For an imported buffer: whether its exporter's process is still running (`None`
/// for memory that was not imported). The memory stays valid either way.
pub fn exporter_alive(buf: &DeviceBuffer) -> Option<bool> {
    let lease = buf.imported_lease()?.downcast_ref::<client::Lease>()?;
    Some(lease.exporter_alive())
}

/// This process's id as the host sees it (`aclrtDeviceGetBareTgid`; npurt runs where
/// its devices are, so there is no container translation).
pub fn bare_tgid() -> u32 {
    sys::getpid()
}

/// Exporter bookkeeping, for tests and leak checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpcStats {
    /// Keys this process issued that are still live.
    pub keys: usize,
    /// Imports of them open in other processes.
    pub leases: usize,
    /// Buffers kept alive only for those imports (or also by the exporter).
    pub held: usize,
}

/// Current [`IpcStats`] (runs a sweep first).
pub fn stats() -> IpcStats {
    registry::with(|r| {
        r.sweep();
        let (keys, leases, held) = r.counts();
        IpcStats { keys, leases, held }
    })
}

/// The default wait for an exporter's answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
