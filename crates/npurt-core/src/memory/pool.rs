//! [`MemPool`]: an explicit, preallocated memory pool of one device (torch's `MemPool`,
//! ACL's `aclrtMemPool*`), and the per-thread routing of allocations into it.
//!
//! A pool maps its whole size up front ([`CachingPool::fixed`]) and counts against the
//! device's capacity and quota from then on. [`MemPool::enter`] routes this thread's
//! allocations on the pool's device into it until [`MemPool::exit`] (nested pools: the
//! innermost wins). Buffers keep their pool alive; the pool's memory is unmapped when the
//! pool was destroyed (or every handle dropped) and its last buffer is gone.

use super::buffer::{DeviceBuffer, Owner};
use super::device_mem::DeviceMemory;
use super::events::{self, MemPoolKind};
use crate::error::{BufferError, Result};
use npurt_mem::align::round_down;
use npurt_mem::{CachingPool, MemError, PagePolicy, PoolConfig, PoolStats, MIN_BLOCK};
use std::cell::RefCell;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);
/// Pools entered on any thread and not yet exited: while 0, allocations skip the
/// thread-local routing lookup.
static ENTERED: AtomicUsize = AtomicUsize::new(0);

/// This thread's entered pools, innermost last.
struct Route(Vec<Arc<PoolInner>>);

impl Drop for Route {
    fn drop(&mut self) {
        // A thread that exits inside `with pool:` leaves the count right.
        ENTERED.fetch_sub(self.0.len(), Relaxed);
    }
}

thread_local! {
    static ROUTE: RefCell<Route> = const { RefCell::new(Route(Vec::new())) };
}

/// Gives the pool's room on the device back (declared after the pool, so after the unmap).
struct Reservation {
    mem: Arc<DeviceMemory>,
    bytes: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.mem.release_external(self.bytes);
    }
}

/// The shared part of a [`MemPool`].
pub(crate) struct PoolInner {
    pub(crate) id: u64,
    pub(crate) mem: Arc<DeviceMemory>,
    pub(crate) pool: CachingPool,
    size: usize,
    destroyed: AtomicBool,
    _room: Reservation,
}

impl PoolInner {
    pub(crate) fn alloc(self: &Arc<Self>, nbytes: usize) -> Result<DeviceBuffer> {
        if self.destroyed.load(Acquire) {
            return Err(BufferError::PoolDestroyed { id: self.id }.into());
        }
        self.mem.check_alive()?;
        let addr = self.pool.alloc(nbytes)?;
        Ok(DeviceBuffer::new(addr, nbytes, Owner::Pool(self.clone())))
    }
}

/// The innermost pool this thread entered for `device`, if any.
#[inline]
pub(crate) fn routed(device: u32) -> Option<Arc<PoolInner>> {
    if ENTERED.load(Relaxed) == 0 {
        return None;
    }
    ROUTE.with(|r| {
        let r = r.borrow();
        r.0.iter().rev().find(|p| p.mem.device == device).cloned()
    })
}

/// Undoes the most recent [`MemPool::enter`] of the pool with id `id` on this thread
/// (for handles that no longer hold the pool, e.g. after `destroy`).
pub fn exit_pool(id: u64) {
    ROUTE.with(|r| {
        let mut r = r.borrow_mut();
        if let Some(pos) = r.0.iter().rposition(|p| p.id == id) {
            r.0.remove(pos);
            ENTERED.fetch_sub(1, Relaxed);
        }
    });
}

/// An explicit memory pool (see the module docs). Cloning shares the pool.
#[derive(Clone)]
pub struct MemPool(Arc<PoolInner>);

impl std::fmt::Debug for MemPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MemPool(id={}, device={}, size={})",
            self.id(),
            self.device(),
            self.size()
        )
    }
}

impl PartialEq for MemPool {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for MemPool {}

impl MemPool {
    /// Maps a pool of `size` bytes (rounded down to 512) on the device of `mem`; fails
    /// with OutOfMemory if the device (or its quota) has no such room.
    pub fn new(mem: &Arc<DeviceMemory>, size: usize) -> Result<MemPool> {
        MemPool::new_ex(mem, size, false)
    }

    /// [`new`](Self::new); `shareable`: one sealed memfd segment, so its blocks can be
    /// exported to other processes (normal pages: shared memory gets no THP).
    pub fn new_ex(mem: &Arc<DeviceMemory>, size: usize, shareable: bool) -> Result<MemPool> {
        mem.check_alive()?;
        let usable = round_down(size, MIN_BLOCK);
        if usable == 0 {
            return Err(MemError::InvalidSize {
                size,
                reason: "a memory pool needs at least 512 bytes",
            }
            .into());
        }
        mem.reserve_external(usable)?;
        let room = Reservation {
            mem: mem.clone(),
            bytes: usable,
        };
        let id = NEXT_POOL_ID.fetch_add(1, Relaxed);
        let pool = CachingPool::new(PoolConfig {
            policy: PagePolicy::HugeFirst,
            grow: false,
            shareable,
            segment_observer: Some(events::segment_observer(mem.device, MemPoolKind::Pool(id))),
            ..PoolConfig::new(usable)
        })?;
        let inner = Arc::new(PoolInner {
            id,
            mem: mem.clone(),
            pool,
            size: usable,
            destroyed: AtomicBool::new(false),
            _room: room,
        });
        mem.register_pool(&inner);
        Ok(MemPool(inner))
    }

    /// Process-unique id.
    pub fn id(&self) -> u64 {
        self.0.id
    }
    /// The device of the pool.
    pub fn device(&self) -> u32 {
        self.0.mem.device
    }
    /// Bytes the pool holds.
    pub fn size(&self) -> usize {
        self.0.size
    }
    /// True if its blocks can be exported to other processes.
    pub fn is_shareable(&self) -> bool {
        self.0.pool.is_shareable()
    }
    /// True once [`destroy`](Self::destroy)ed.
    pub fn is_destroyed(&self) -> bool {
        self.0.destroyed.load(Acquire)
    }

    /// Allocates from this pool (512-byte blocks; OutOfMemory when it is full).
    pub fn alloc(&self, nbytes: usize) -> Result<DeviceBuffer> {
        let r = if crate::fault::armed() && crate::fault::fires(crate::fault::Fault::Alloc) {
            Err(self.0.mem.injected_oom(nbytes))
        } else {
            self.0.alloc(nbytes)
        };
        // The shared region counts this process's allocations (its release subtracts them);
        // routed allocations are counted by `alloc_plain`, direct ones here.
        if let (Some(a), Ok(_)) = (&self.0.mem.shared, &r) {
            a.allocated(events::rounded(nbytes) as i64);
        }
        if events::is_active() {
            super::tell_alloc(&r, self.0.mem.device, nbytes);
        }
        r
    }

    /// The pool's statistics (torch's shape).
    pub fn stats(&self) -> PoolStats {
        self.0.pool.stats()
    }

    /// Bytes allocated from the pool (block sizes).
    pub fn allocated(&self) -> usize {
        self.0.pool.allocated_bytes()
    }

    /// Live allocations.
    pub fn live_allocations(&self) -> usize {
        self.stats().allocation[0].current as usize
    }

    /// Routes this thread's allocations on the pool's device into the pool until the
    /// matching [`exit`](Self::exit).
    pub fn enter(&self) -> Result<()> {
        if self.is_destroyed() {
            return Err(BufferError::PoolDestroyed { id: self.id() }.into());
        }
        self.0.mem.check_alive()?;
        ROUTE.with(|r| r.borrow_mut().0.push(self.0.clone()));
        ENTERED.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Undoes the most recent [`enter`](Self::enter) of this pool on this thread.
    pub fn exit(&self) {
        exit_pool(self.id());
    }

    /// Destroys the pool: no more allocations from it; its memory is unmapped as soon as
    /// no buffer allocated from it (and no handle) is left. Returns the number of live
    /// allocations at this point (0 = released now, once this handle is dropped).
    pub fn destroy(self) -> Result<usize> {
        if self.0.destroyed.swap(true, AcqRel) {
            return Err(BufferError::PoolDestroyed { id: self.id() }.into());
        }
        Ok(self.live_allocations())
    }
}
