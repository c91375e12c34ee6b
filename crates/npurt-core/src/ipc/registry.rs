//! The exporter's registry: every key this process issued, who may import it, and how many
//! imports (leases) are open. A key holds its buffer only weakly while nobody imported it
//! (freeing or dropping the buffer makes the key stale at once) and strongly while leases
//! are open, so the block is never reused while another process maps it: the memory lives
//! until the exporter freed it *and* every importer closed it or died, in any order.
//! Removed keys leave a tombstone (bounded) so a late import says "freed" or "closed"
//! rather than "unknown".

use super::key::Key;
use super::Access;
use crate::error::IpcError;
use crate::memory::{DeviceBuffer, WeakBuffer};
use npurt_mem::SharedRegion;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};

/// Tombstones kept for late imports.
const TOMBS: usize = 4096;

struct Export {
    buf: WeakBuffer,
    /// Held while leases are open.
    hold: Option<DeviceBuffer>,
    addr: usize,
    len: usize,
    access: Access,
    closed: bool,
    leases: usize,
}

#[derive(Clone, Copy)]
enum Tomb {
    Freed,
    Closed,
}

#[derive(Default)]
pub(crate) struct Registry {
    exports: HashMap<[u8; 16], Export>,
    tombs: HashMap<[u8; 16], Tomb>,
    tomb_order: VecDeque<[u8; 16]>,
}

/// What the server sends an importer.
pub(crate) struct Grant {
    pub region: SharedRegion,
    pub nbytes: usize,
    pub device: u32,
}

pub(crate) static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

pub(crate) fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut g = REGISTRY.lock();
    f(g.get_or_insert_with(Registry::default))
}

fn dead(b: &DeviceBuffer) -> Option<&'static str> {
    if b.is_freed() {
        Some("freed the memory")
    } else if b.check().is_err() {
        Some("reset the memory's device")
    } else {
        None
    }
}

impl Registry {
    pub(crate) fn insert(&mut self, key: &Key, buf: &DeviceBuffer, addr: usize, len: usize, access: Access) {
        self.exports.insert(
            key.secret,
            Export {
                buf: buf.downgrade(),
                hold: None,
                addr,
                len,
                access,
                closed: false,
                leases: 0,
            },
        );
    }

    /// A live key for the same range and access (pickling the same buffer twice reuses it).
    pub(crate) fn find_reusable(
        &self,
        buf: &DeviceBuffer,
        addr: usize,
        len: usize,
        access: &Access,
    ) -> Option<[u8; 16]> {
        self.exports.iter().find_map(|(s, e)| {
            let same = e.addr == addr && e.len == len && &e.access == access && !e.closed;
            (same && e.buf.upgrade().is_some_and(|b| &b == buf)).then_some(*s)
        })
    }

    fn entry(&mut self, key: &Key) -> Result<&mut Export, IpcError> {
        let pid = key.pid;
        match self.exports.get_mut(&key.secret) {
            Some(e) => Ok(e),
            None => Err(match self.tombs.get(&key.secret) {
                Some(Tomb::Freed) => IpcError::Stale {
                    pid,
                    reason: "freed the memory",
                },
                Some(Tomb::Closed) => IpcError::Closed { pid },
                None => IpcError::UnknownKey { pid },
            }),
        }
    }

    /// Adds `pids` to the key's whitelist (an open key stays open).
    pub(crate) fn allow(&mut self, key: &Key, pids: &[u32]) -> Result<(), IpcError> {
        let e = self.entry(key)?;
        if let Access::Pids(list) = &mut e.access {
            for p in pids {
                if !list.contains(p) {
                    list.push(*p);
                }
            }
        }
        Ok(())
    }

    /// The exporter's `ipc_mem_close`: no more imports; open leases keep the memory.
    pub(crate) fn close(&mut self, key: &Key) -> Result<(), IpcError> {
        self.entry(key)?.closed = true;
        self.sweep();
        Ok(())
    }

    /// Checks an import request from (`pid`, `uid`) and opens a lease.
    pub(crate) fn grant(&mut self, key: &Key, pid: u32, uid: u32) -> Result<Grant, IpcError> {
        let me = super::sys::getpid();
        let my_uid = super::sys::getuid();
        let e = self.entry(key)?;
        if e.closed {
            return Err(IpcError::Closed { pid: me });
        }
        let allowed = pid == me
            || match &e.access {
                Access::Open => true,
                Access::SameUser => uid == my_uid,
                Access::Pids(list) => list.contains(&pid),
            };
        if !allowed {
            return Err(IpcError::NotPermitted { pid, exporter: me });
        }
        let Some(buf) = e.buf.upgrade() else {
            return Err(IpcError::Stale {
                pid: me,
                reason: "freed the memory",
            });
        };
        if let Some(reason) = dead(&buf) {
            return Err(IpcError::Stale { pid: me, reason });
        }
        let region = match crate::memory::region(&buf, e.addr, e.len) {
            Some(r) => r.map_err(|err| IpcError::Protocol {
                pid: me,
                reason: err.to_string(),
            })?,
            None => return Err(IpcError::NotShareable { addr: e.addr }),
        };
        let device = buf.device();
        e.hold = Some(buf);
        e.leases += 1;
        Ok(Grant {
            region,
            nbytes: e.len,
            device,
        })
    }

    /// An importer closed (or died): drop its lease.
    pub(crate) fn end_lease(&mut self, secret: &[u8; 16]) {
        if let Some(e) = self.exports.get_mut(secret) {
            e.leases = e.leases.saturating_sub(1);
            if e.leases == 0 {
                e.hold = None;
            }
        }
        self.sweep();
    }

    /// Removes keys whose memory is gone (freed or dropped by the exporter) or that were
    /// closed, once no lease is open; they become tombstones.
    pub(crate) fn sweep(&mut self) {
        let mut gone = Vec::new();
        for (s, e) in &self.exports {
            if e.leases > 0 {
                continue;
            }
            if e.closed {
                gone.push((*s, Tomb::Closed));
            } else if e.buf.upgrade().is_none_or(|b| dead(&b).is_some()) {
                gone.push((*s, Tomb::Freed));
            }
        }
        for (s, t) in gone {
            self.exports.remove(&s);
            self.tombs.insert(s, t);
            self.tomb_order.push_back(s);
            if self.tomb_order.len() > TOMBS {
                if let Some(old) = self.tomb_order.pop_front() {
                    self.tombs.remove(&old);
                }
            }
        }
    }

    /// (keys, open leases, buffers held for leases).
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        let leases = self.exports.values().map(|e| e.leases).sum();
        let held = self.exports.values().filter(|e| e.hold.is_some()).count();
        (self.exports.len(), leases, held)
    }
}
