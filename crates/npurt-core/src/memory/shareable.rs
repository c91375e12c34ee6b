//! Shareable device memory: a second caching pool per device whose segments are sealed
//! memfds (`npurt_mem::PoolConfig::shareable`), so any of its blocks can be exported to
//! another process ([`crate::ipc`]), and the importer's side: mappings of another
//! process's memory that behave as device buffers of the importer's device.
//!
//! **Who gets shareable memory.** Memory that is never shared stays in the device's
//! (THP-backed) caching pool at full speed; an allocation is shareable when it asks for it
//! (`shareable = Some(true)`: `npurt.malloc(n, shareable=True)`, `npurt.empty(...,
//! shareable=True)`) or when it does not say and the process-wide default is on
//! (`NPURT_IPC_SHAREABLE=1`, [`set_shareable_default`]), so unchanged pyACL code
//! (`acl.rt.malloc`, then `ipc_mem_get_export_key`) works. A `MemPool(size,
//! shareable=True)` is a preallocated shareable pool.
//!
//! **Charging.** The pool's segments are charged to the device like every other room
//! outside the caching pool ([`DeviceMemory::reserve_external`] before a segment is
//! mapped, `release_external` after it is unmapped: the pool's reserve gate), so the
//! capacity, the per-process quota and the cross-process accounting hold for the sum.
//! Importers charge nothing: the bytes are the exporter's.
//!
//! **Page kind.** Shared memory gets no transparent huge pages (`shmem_enabled` is `never`
//! on the target machines): blocks report `normal` (or `hugetlb` when a hugetlb memfd
//! could be had); `memory_stats()["page_bytes.normal"]` counts them.

use super::buffer::{BufferInner, DeviceBuffer, Owner};
use super::device_mem::DeviceMemory;
use super::events::{self, MemPoolKind};
use crate::error::Result;
use npurt_mem::{CachingPool, PagePolicy, PoolConfig, ReserveGate, SharedRegion};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, Weak};

/// Name of the environment switch read by [`shareable_default`].
pub const SHAREABLE_ENV: &str = "NPURT_IPC_SHAREABLE";

/// 0: not read yet, 1: off, 2: on.
static DEFAULT: AtomicU8 = AtomicU8::new(0);

/// Whether allocations that do not say are shareable: [`set_shareable_default`], else
/// `NPURT_IPC_SHAREABLE` (`1/on/true/yes`), read once. One relaxed load after the first call.
#[inline]
pub fn shareable_default() -> bool {
    match DEFAULT.load(Relaxed) {
        0 => {
            let on = std::env::var(SHAREABLE_ENV)
                .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "on" | "true" | "yes"))
                .unwrap_or(false);
            let _ = DEFAULT.compare_exchange(0, if on { 2 } else { 1 }, Relaxed, Relaxed);
            DEFAULT.load(Relaxed) == 2
        }
        v => v == 2,
    }
}

/// Makes later allocations that do not say shareable (`true`) or not (`false`).
pub fn set_shareable_default(on: bool) {
    DEFAULT.store(if on { 2 } else { 1 }, Relaxed);
}

/// Per-device shareable state: the shareable pool (made at the first shareable allocation)
/// and the ranges of imported mappings (so raw-pointer checks know them).
#[derive(Default)]
pub(crate) struct ShareState {
    pool: OnceLock<CachingPool>,
    imported: Mutex<BTreeMap<usize, usize>>,
}

impl ShareState {
    /// The shareable pool, if one was made.
    pub(crate) fn pool(&self) -> Option<&CachingPool> {
        self.pool.get()
    }

    /// Base and length of the imported buffer containing `addr`.
    pub(crate) fn imported_at(&self, addr: usize) -> Option<(usize, usize)> {
        let m = self.imported.lock();
        let (&base, &len) = m.range(..=addr).next_back()?;
        (addr < base + len).then_some((base, len))
    }

    pub(crate) fn add_imported(&self, base: usize, len: usize) {
        self.imported.lock().insert(base, len);
    }

    pub(crate) fn remove_imported(&self, base: usize) {
        self.imported.lock().remove(&base);
    }
}

/// Charges the shareable pool's segments to their device (see the module docs).
struct Gate(Weak<DeviceMemory>);

impl ReserveGate for Gate {
    fn try_reserve(&self, bytes: usize) -> std::result::Result<(), String> {
        match self.0.upgrade() {
            Some(m) => m.reserve_external(bytes).map_err(|e| match e.kind() {
                crate::ErrorKind::OutOfMemory => "device room for shareable memory".to_string(),
                _ => e.to_string(),
            }),
            None => Err("device memory is gone".to_string()),
        }
    }

    fn release(&self, bytes: usize) {
        if let Some(m) = self.0.upgrade() {
            m.release_external(bytes);
        }
    }
}

/// The shareable pool of `mem` (made now if needed).
pub(crate) fn pool_of(mem: &Arc<DeviceMemory>) -> &CachingPool {
    mem.share.pool.get_or_init(|| {
        let cfg = PoolConfig {
            shareable: true,
            reserve_gate: Some(Arc::new(Gate(Arc::downgrade(mem)))),
            segment_observer: Some(events::segment_observer(mem.device, MemPoolKind::Shareable)),
            ..PoolConfig::new(mem.capacity())
        };
        CachingPool::new(cfg).expect("a growing pool with default settings")
    })
}

/// Allocates `nbytes` of shareable memory on `mem` (no context limit: the caller charges).
pub(crate) fn alloc(mem: &Arc<DeviceMemory>, nbytes: usize, policy: PagePolicy) -> Result<DeviceBuffer> {
    let pool = pool_of(mem);
    let addr = match policy {
        PagePolicy::NormalOnly | PagePolicy::HugeFirst => pool.alloc(nbytes)?,
        PagePolicy::HugeOnly => {
            let addr = pool.alloc(nbytes)?;
            if pool
                .lookup(addr)
                .is_some_and(|b| b.page_kind == npurt_mem::PageKind::Normal)
            {
                drop(pool.free(addr));
                return Err(npurt_mem::MemError::HugePagesUnavailable { requested: nbytes }.into());
            }
            addr
        }
    };
    Ok(DeviceBuffer::new(addr, nbytes, Owner::Shareable(mem.clone())))
}

/// Gives a shareable block back. A large block's segment (its own: large segments are
/// request-sized) is unmapped at once, so cached shareable memory never starves the
/// device's caching pool; small blocks stay cached in their 2 MiB segments.
pub(crate) fn free(mem: &DeviceMemory, addr: usize, nbytes: usize) {
    if let Some(p) = mem.share.pool() {
        drop(p.free(addr));
        if nbytes > npurt_mem::SMALL_SIZE {
            p.empty_cache();
        }
    }
}

/// What another process needs to map `[addr, addr+len)` of `buf`: `None` if the buffer is
/// not shareable (or the range is not inside it).
pub(crate) fn region(buf: &DeviceBuffer, addr: usize, len: usize) -> Option<Result<SharedRegion>> {
    let pool = match &buf.0.owner {
        Owner::Shareable(m) => m.share.pool()?,
        Owner::Pool(p) if p.pool.is_shareable() => &p.pool,
        _ => return None,
    };
    pool.share(addr, len).map(|r| r.map_err(Into::into))
}

/// Wraps a mapping of another process's memory as a buffer of `mem`'s device: `nbytes`
/// at `seg.addr() + data_offset`. `lease` is dropped after the mapping is unmapped (it
/// tells the exporter the import is closed).
pub(crate) fn imported(
    mem: &Arc<DeviceMemory>,
    seg: npurt_mem::Segment,
    data_offset: usize,
    nbytes: usize,
    lease: Box<dyn std::any::Any + Send + Sync>,
) -> DeviceBuffer {
    // The buffer's own range (not the whole mapping): raw-pointer lookups resolve to it.
    let base = seg.addr() + data_offset;
    mem.share.add_imported(base, nbytes);
    let guard = ImportGuard { mem: mem.clone(), base };
    DeviceBuffer::new(
        base,
        nbytes,
        Owner::Imported {
            _seg: seg,
            guard,
            _lease: lease,
        },
    )
}

/// Forgets an imported range once its mapping is gone (declared after the mapping).
pub(crate) struct ImportGuard {
    pub(crate) mem: Arc<DeviceMemory>,
    base: usize,
}

impl Drop for ImportGuard {
    fn drop(&mut self) {
        self.mem.share.remove_imported(self.base);
    }
}

impl DeviceBuffer {
    /// True if the memory can be exported to another process ([`crate::ipc`]): a block
    /// of the shareable pool or of a shareable `MemPool`, or memory imported from another
    /// process (which can be passed on).
    pub fn is_shareable(&self) -> bool {
        match &self.0.owner {
            Owner::Shareable(_) | Owner::Imported { .. } => true,
            Owner::Pool(p) => p.pool.is_shareable(),
            _ => false,
        }
    }

    /// The lease of an imported buffer (`ipc`'s connection to the exporter).
    pub(crate) fn imported_lease(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        match &self.0.owner {
            Owner::Imported { _lease, .. } => Some(_lease.as_ref()),
            _ => None,
        }
    }

    /// True for memory imported from another process.
    pub fn is_imported(&self) -> bool {
        matches!(self.0.owner, Owner::Imported { .. })
    }

    /// A handle that does not keep the memory alive ([`WeakBuffer::upgrade`]).
    pub fn downgrade(&self) -> WeakBuffer {
        WeakBuffer(Arc::downgrade(&self.0))
    }
}

/// A non-owning handle of a [`DeviceBuffer`]: the memory goes back when the last
/// `DeviceBuffer` is dropped, whatever weak handles exist.
#[derive(Clone)]
pub struct WeakBuffer(std::sync::Weak<BufferInner>);

impl WeakBuffer {
    /// The buffer, if some `DeviceBuffer` (a user's handle, a queued operation) still holds it.
    pub fn upgrade(&self) -> Option<DeviceBuffer> {
        let a = self.0.upgrade()?;
        (!a.vacant).then(|| DeviceBuffer(ManuallyDrop::new(a)))
    }
}
