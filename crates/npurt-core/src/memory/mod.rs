//! Device memory, pinned host memory and copies (AscendCL `aclrtMalloc`, `aclrtMallocHost`,
//! `aclrtMemcpy[Async]`, `aclrtMemset[Async]`), built on `npurt-mem`.
//!
//! * Every active device owns a [`DeviceMemory`]: a [`CachingPool`](npurt_mem::CachingPool)
//!   whose capacity is the configured device memory, plus the accounting of explicit
//!   [`MemPool`]s and dedicated segments against that capacity and the per-process quota.
//! * [`DeviceBuffer`] / [`HostBuffer`] own their memory (cudarc style): queued copies hold
//!   clones, so a buffer freed while work still uses it returns to its pool only after that
//!   work ran — frees are stream-ordered with no fences, and every free block is idle for
//!   every stream.
//! * Copies validate before they touch memory (see [`copy`](self::copy) for the rules);
//!   raw device addresses are checked with [`resolve_in`] (from a device id:
//!   [`alloc::resolve`](crate::alloc::resolve)).
//!
//! ```
//! use npurt_core::{alloc, current, memory::{self, PagePolicy}};
//!
//! let dev = alloc::malloc(4096, PagePolicy::HugeFirst)?;
//! let host = memory::malloc_host(4096)?;
//! memory::write(&host, 0, &[7u8; 4096])?;
//! let s = current::current_stream()?;
//! memory::memcpy_async(&dev, &host, None, &s)?;   // H2D on the stream's copy engine
//! dev.clone().free()?;                            // stream-ordered: the copy still runs
//! s.synchronize(None)?;
//! let mut out = [0u8; 16];
//! assert!(memory::read(&dev, 0, &mut out).is_err()); // freed handle: typed error
//! # Ok::<(), npurt_core::Error>(())
//! ```

mod any;
mod buffer;
mod bulk;
mod copy;
mod device_mem;
pub mod events;
mod host;
mod operand;
mod pool;
mod quota;
mod shareable;
mod subrange;
mod summary;
mod view;

pub use any::AnyBuffer;
pub use buffer::DeviceBuffer;
pub use copy::{
    copy_size, memcpy, memcpy_async, memcpy_async_from_slice, memset, memset_async, read, try_memcpy_async,
    try_memcpy_async_from_staging, try_memset_async, write,
};
pub use device_mem::DeviceMemory;
pub use host::{host_empty_cache, host_stats, malloc_host, pinned_pool, HostBuffer, Staging};
pub use npurt_mem::{BlockStatus, PageKind, PagePolicy, PinnedStats, PoolStats, SegmentSnapshot};
pub use operand::Buffer;
pub use pool::{exit_pool, MemPool};
pub(crate) use quota::CtxQuota;
pub(crate) use shareable::{imported, region};
pub use shareable::{set_shareable_default, shareable_default, WeakBuffer, SHAREABLE_ENV};

pub use subrange::SubRange;
pub use view::BufferView;

use crate::current;
use crate::error::{BufferError, Result};
use buffer::{DedicatedGuard, Owner};
use npurt_mem::align::{block_size, round_up};
use npurt_mem::page::{page_size, HUGE_PAGE_SIZE};
use npurt_mem::{HugePageMode, MemError, Segment};
use std::sync::Arc;

/// Allocates `nbytes` on the device of `mem` (sizes and policies: see
/// [`alloc::malloc`](crate::alloc::malloc)). Counted against the limit of the thread's current
/// context when that context is on the same device (everything allocated on behalf of
/// code running in a context counts: kernel outputs, copies, explicit `device=`); one
/// thread-local lookup when no limit is set.
#[inline]
pub fn malloc_on(mem: &Arc<DeviceMemory>, nbytes: usize, policy: PagePolicy) -> Result<DeviceBuffer> {
    malloc_on_ex(mem, nbytes, policy, None)
}

/// [`malloc_on`] that says whether the memory must be shareable with other processes
/// (`None`: the process default, [`shareable_default`]; see `shareable.rs` for the rule).
#[inline]
pub fn malloc_on_ex(
    mem: &Arc<DeviceMemory>,
    nbytes: usize,
    policy: PagePolicy,
    shareable: Option<bool>,
) -> Result<DeviceBuffer> {
    match current::quota_on(mem.device) {
        None => alloc_plain(mem, nbytes, policy, shareable),
        Some(q) => malloc_charged(Some(&q), mem, nbytes, policy, shareable),
    }
}

/// Allocates on `mem`, counted against `quota` (a context's memory limit) if there is one.
#[inline]
pub(crate) fn malloc_charged(
    quota: Option<&Arc<CtxQuota>>,
    mem: &Arc<DeviceMemory>,
    nbytes: usize,
    policy: PagePolicy,
    shareable: Option<bool>,
) -> Result<DeviceBuffer> {
    let Some(q) = quota else {
        return alloc_plain(mem, nbytes, policy, shareable);
    };
    let charged = q
        .charge(nbytes, || {
            (mem.reserved_bytes() as usize, mem.pool.largest_free_block())
        })
        .inspect_err(|e| {
            if events::is_active() {
                tell_oom(e, mem.device, nbytes);
            }
        })?;
    match alloc_plain(mem, nbytes, policy, shareable) {
        Ok(b) if charged > 0 => Ok(b.charged_to(q.clone(), charged)),
        Ok(b) => Ok(b),
        Err(e) => {
            q.uncharge(charged);
            Err(e)
        }
    }
}

#[inline]
fn alloc_plain(
    mem: &Arc<DeviceMemory>,
    nbytes: usize,
    policy: PagePolicy,
    shareable: Option<bool>,
) -> Result<DeviceBuffer> {
    let r = alloc_untold(mem, nbytes, policy, shareable);
    if let (Some(a), Ok(_)) = (&mem.shared, &r) {
        a.allocated(events::rounded(nbytes) as i64); // the shared region's one relaxed add
    }
    if events::is_active() {
        tell_alloc(&r, mem.device, nbytes);
    }
    r
}

/// Tells the memory hook about an allocation's outcome (an alloc or an OOM).
#[cold]
pub(crate) fn tell_alloc(r: &Result<DeviceBuffer>, device: u32, nbytes: usize) {
    match r {
        Ok(b) => events::emit(events::event(
            events::MemAction::Alloc,
            device,
            b.addr(),
            nbytes,
            events::rounded(nbytes),
            b.pool_kind(),
            b.page_kind(),
            current::peek_stream_id(device),
        )),
        Err(e) => tell_oom(e, device, nbytes),
    }
}

#[cold]
fn tell_oom(e: &crate::Error, device: u32, nbytes: usize) {
    if e.kind() == crate::ErrorKind::OutOfMemory {
        log::warn!(
            "out of memory on device {device} (context {}, stream {}): {e}",
            current::peek_context_id(device).map_or_else(|| "-".to_string(), |c| c.to_string()),
            current::peek_stream_id(device).map_or_else(|| "default".to_string(), |s| s.to_string())
        );
        events::emit(events::event(
            events::MemAction::Oom,
            device,
            0,
            nbytes,
            events::rounded(nbytes),
            events::MemPoolKind::Device,
            None,
            current::peek_stream_id(device),
        ));
    }
}

#[inline]
fn alloc_untold(
    mem: &Arc<DeviceMemory>,
    nbytes: usize,
    policy: PagePolicy,
    shareable: Option<bool>,
) -> Result<DeviceBuffer> {
    mem.check_alive()?;
    if crate::fault::armed() && crate::fault::fires(crate::fault::Fault::Alloc) {
        return Err(mem.injected_oom(nbytes));
    }
    // An entered MemPool wins, unless shareable memory is asked for and the pool is not.
    if let Some(p) = pool::routed(mem.device) {
        if shareable != Some(true) || p.pool.is_shareable() {
            return p.alloc(nbytes);
        }
    }
    if shareable.unwrap_or_else(shareable_default) {
        return shareable::alloc(mem, nbytes, policy);
    }
    match policy {
        PagePolicy::HugeFirst => {
            let addr = mem.pool.alloc(nbytes)?;
            Ok(DeviceBuffer::on_device(addr, nbytes, mem))
        }
        PagePolicy::HugeOnly => {
            let addr = mem.pool.alloc(nbytes)?;
            if mem.pool.lookup(addr).is_some_and(|b| b.page_kind != PageKind::Normal) {
                return Ok(DeviceBuffer::on_device(addr, nbytes, mem));
            }
            // Normal pages: give the block back (never handed out, so the memory hook is
            // not told) and map huge pages of its own.
            drop(mem.pool.free(addr));
            alloc_dedicated(mem, nbytes, PagePolicy::HugeOnly)
        }
        PagePolicy::NormalOnly => alloc_dedicated(mem, nbytes, PagePolicy::NormalOnly),
    }
}

/// An allocation with a segment of its own, counted against the device.
fn alloc_dedicated(mem: &Arc<DeviceMemory>, nbytes: usize, policy: PagePolicy) -> Result<DeviceBuffer> {
    let size = block_size(nbytes)?;
    let gran = if policy == PagePolicy::NormalOnly {
        page_size()
    } else {
        HUGE_PAGE_SIZE
    };
    let reserve = round_up(size, gran).ok_or(MemError::InvalidSize {
        size: nbytes,
        reason: "size overflows",
    })?;
    mem.reserve_external(reserve)?;
    let seg = match Segment::map_with(size, policy, HugePageMode::from_env()) {
        Ok(seg) => seg,
        Err(e) => {
            mem.release_external(reserve);
            return Err(match e {
                MemError::Os {
                    errno: libc::ENOMEM, ..
                } => MemError::OutOfMemory {
                    requested: nbytes,
                    limit: mem.capacity(),
                    allocated: mem.allocated_bytes() as usize,
                    reserved: mem.reserved_bytes() as usize,
                    largest_free: 0,
                    what: "host memory (mmap ENOMEM)".to_string(),
                },
                e => e,
            }
            .into());
        }
    };
    let (base, mapped, kind) = (seg.addr(), seg.len(), seg.page_kind());
    mem.add_dedicated(base, mapped, reserve, nbytes, kind);
    if events::is_active() {
        let pool = events::MemPoolKind::Dedicated;
        let mut e = events::event(
            events::MemAction::SegmentMap,
            mem.device,
            base,
            mapped,
            mapped,
            pool,
            Some(kind),
            None,
        );
        e.large = true;
        events::emit(e);
    }
    let guard = DedicatedGuard { mem: mem.clone(), base };
    Ok(DeviceBuffer::new(base, nbytes, Owner::Dedicated { _seg: seg, guard }))
}

/// What [`resolve_in`] found out about a raw device address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// Start of the allocation containing the address.
    pub base: usize,
    /// `addr - base`.
    pub offset: usize,
    /// Bytes requested for that allocation.
    pub size: usize,
    /// Page kind backing it.
    pub page_kind: PageKind,
    /// The [`MemPool`] it came from, if any.
    pub pool: Option<u64>,
}

/// Validates a raw address on `mem`'s device: `[addr, addr+nbytes)` must lie inside one
/// live allocation (the caching pool, a memory pool or a dedicated segment). Unknown, freed
/// or out-of-range addresses are typed errors (107000). The front that finds the device is
/// [`alloc::resolve`](crate::alloc::resolve).
pub fn resolve_in(mem: &DeviceMemory, addr: usize, nbytes: usize) -> Result<Resolved> {
    mem.check_alive()?;
    if nbytes == 0 {
        return Err(BufferError::ZeroSize { op: "resolve" }.into());
    }
    let found = if let Some(b) = mem.pool.lookup(addr) {
        Some(Resolved {
            base: b.base,
            offset: b.offset,
            size: b.size,
            page_kind: b.page_kind,
            pool: None,
        })
    } else if let Some(r) = mem.pools().iter().find_map(|p| {
        p.pool.lookup(addr).map(|b| Resolved {
            base: b.base,
            offset: b.offset,
            size: b.size,
            page_kind: b.page_kind,
            pool: Some(p.id),
        })
    }) {
        Some(r)
    } else if let Some(b) = mem.share.pool().and_then(|p| p.lookup(addr)) {
        Some(Resolved {
            base: b.base,
            offset: b.offset,
            size: b.size,
            page_kind: b.page_kind,
            pool: None,
        })
    } else if let Some((base, len)) = mem.share.imported_at(addr) {
        Some(Resolved {
            base,
            offset: addr - base,
            size: len,
            page_kind: PageKind::Normal,
            pool: None,
        })
    } else {
        mem.find_dedicated(addr).map(|(base, size, kind)| Resolved {
            base,
            offset: addr - base,
            size,
            page_kind: kind,
            pool: None,
        })
    };
    let Some(r) = found else {
        return Err(MemError::InvalidPointer {
            addr,
            reason: "unknown device address: not inside a live allocation of this device",
            during_free: false,
        }
        .into());
    };
    if r.offset.checked_add(nbytes).is_none_or(|end| end > r.size) {
        return Err(BufferError::OutOfRange {
            op: "resolve",
            side: "allocation",
            nbytes,
            offset: r.offset,
            capacity: r.size,
        }
        .into());
    }
    Ok(r)
}
