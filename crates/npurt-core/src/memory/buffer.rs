//! [`DeviceBuffer`]: a handle to device memory that owns it. Operations queued on streams
//! hold clones of the buffer's inner `Arc`, and the block goes back to its pool only when
//! the last clone is dropped — so freeing a buffer that queued work still uses is safe
//! (stream-ordered) without any fence, and a freed block is idle for every stream.

use super::device_mem::DeviceMemory;
use super::events::{self, MemAction, MemPoolKind};
use super::pool::PoolInner;
use super::quota::CtxQuota;
use crate::error::{BufferError, Result};
use npurt_mem::{MemError, PageKind, Segment};
use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::Arc;

/// Gives a dedicated segment's room back once the mapping is gone (declared after the
/// segment in [`Owner::Dedicated`], so it drops after the unmap).
pub(crate) struct DedicatedGuard {
    pub(crate) mem: Arc<DeviceMemory>,
    pub(crate) base: usize,
}

impl Drop for DedicatedGuard {
    fn drop(&mut self) {
        self.mem.remove_dedicated(self.base);
    }
}

/// Where a buffer's memory comes from and goes back to.
pub(crate) enum Owner {
    /// A block of the device's caching pool.
    Device(Arc<DeviceMemory>),
    /// A block of an explicit [`MemPool`](super::MemPool).
    Pool(Arc<PoolInner>),
    /// A segment of its own (`NormalOnly`, or `HugeOnly` when the pool had no huge pages).
    Dedicated { _seg: Segment, guard: DedicatedGuard },
    /// A block of the device's shareable pool (memfd segments; see `shareable.rs`).
    Shareable(Arc<DeviceMemory>),
    /// Another process's memory mapped here (`ipc::import`); the lease drops after the unmap.
    Imported {
        _seg: Segment,
        guard: super::shareable::ImportGuard,
        _lease: Box<dyn std::any::Any + Send + Sync>,
    },
    /// A block of a registered range of another allocation (see `subrange.rs`).
    Sub(Arc<super::subrange::SubInner>),
    /// No memory: a record kept in a thread's spare list for reuse.
    Vacant,
}

/// Spare buffer records kept per thread. Allocating the shared record of a buffer costs
/// about as much as the pool's own alloc+free, so the last handle of a buffer gives its
/// memory back and keeps the emptied record for the next allocation on that thread.
const SPARES: usize = 16;

thread_local! {
    static SPARE: RefCell<Vec<Arc<BufferInner>>> = const { RefCell::new(Vec::new()) };
}

/// The shared part of a [`DeviceBuffer`]; see the module docs.
pub(crate) struct BufferInner {
    pub(crate) addr: usize,
    pub(crate) nbytes: usize,
    pub(crate) owner: Owner,
    freed: AtomicBool,
    /// The context limit this buffer's bytes are counted against, and how many.
    charge: Option<(Arc<CtxQuota>, usize)>,
    /// The memory went back (a spare record). A spare keeps an `Owner::Device`, so the
    /// next allocation on that device reuses the record without touching the device's
    /// reference count; a spare can thus keep a reset device's (emptied) `DeviceMemory`
    /// object alive until the thread allocates elsewhere or exits.
    pub(super) vacant: bool,
}

impl BufferInner {
    pub(crate) fn mem(&self) -> &DeviceMemory {
        match &self.owner {
            Owner::Device(m) => m,
            Owner::Pool(p) => &p.mem,
            Owner::Dedicated { guard, .. } => &guard.mem,
            Owner::Shareable(m) => m,
            Owner::Imported { guard, .. } => &guard.mem,
            Owner::Sub(r) => r.mem(),
            Owner::Vacant => unreachable!("a vacant record has no handle"),
        }
    }

    /// Gives the memory back; the record becomes vacant.
    fn release(&mut self) {
        if self.vacant {
            return;
        }
        if events::is_active() && !matches!(self.owner, Owner::Sub(_)) {
            self.tell_free();
        }
        self.vacant = true;
        // Imported memory is the exporter's, a registered range's blocks sit in memory
        // already counted: only this process's own allocations count.
        let counted = !matches!(self.owner, Owner::Imported { .. } | Owner::Sub(_));
        if let (Some(a), true) = (&self.mem().shared, counted) {
            a.allocated(-(events::rounded(self.nbytes) as i64));
        }
        if let Some((q, bytes)) = self.charge.take() {
            q.uncharge(bytes);
        }
        // Every operation that captured this buffer has run and been dropped: the block is
        // idle for all streams. `free` cannot fail for an address the pool handed out.
        if let Owner::Device(m) = &self.owner {
            drop(m.pool.free(self.addr));
            return; // keep the device (see `vacant`)
        }
        match std::mem::replace(&mut self.owner, Owner::Vacant) {
            Owner::Pool(p) => drop(p.pool.free(self.addr)),
            // The segment unmaps, then the guard gives the room back.
            Owner::Dedicated { _seg, guard } => drop((_seg, guard)),
            Owner::Shareable(m) => super::shareable::free(&m, self.addr, self.nbytes),
            // Unmap, forget the range, then tell the exporter (the lease closes).
            Owner::Imported { _seg, guard, _lease } => drop((_seg, guard, _lease)),
            Owner::Sub(r) => r.release(self.addr, self.nbytes),
            Owner::Device(_) | Owner::Vacant => {}
        }
    }

    pub(super) fn pool_kind(&self) -> MemPoolKind {
        match &self.owner {
            Owner::Pool(p) => MemPoolKind::Pool(p.id),
            Owner::Dedicated { .. } => MemPoolKind::Dedicated,
            Owner::Shareable(_) => MemPoolKind::Shareable,
            Owner::Imported { .. } => MemPoolKind::Imported,
            Owner::Sub(r) => r.parent_pool_kind(),
            Owner::Device(_) | Owner::Vacant => MemPoolKind::Device,
        }
    }

    fn kind(&self) -> Option<PageKind> {
        match &self.owner {
            Owner::Device(m) => m.pool.lookup(self.addr).map(|b| b.page_kind),
            Owner::Pool(p) => p.pool.lookup(self.addr).map(|b| b.page_kind),
            Owner::Dedicated { _seg, .. } | Owner::Imported { _seg, .. } => Some(_seg.page_kind()),
            Owner::Shareable(m) => m.share.pool()?.lookup(self.addr).map(|b| b.page_kind),
            Owner::Sub(r) => r.parent_page_kind(),
            Owner::Vacant => None,
        }
    }

    /// Tells the memory hook that the block goes back (and, for a dedicated
    /// allocation, that its segment unmaps).
    #[cold]
    fn tell_free(&self) {
        let (device, kind, pool) = (self.mem().device, self.kind(), self.pool_kind());
        let size = events::rounded(self.nbytes);
        events::emit(events::event(
            MemAction::Free,
            device,
            self.addr,
            self.nbytes,
            size,
            pool,
            kind,
            None,
        ));
        if let Owner::Dedicated { _seg, .. } = &self.owner {
            let mut e = events::event(
                MemAction::SegmentUnmap,
                device,
                _seg.addr(),
                _seg.len(),
                _seg.len(),
                pool,
                kind,
                None,
            );
            e.large = true;
            events::emit(e);
        }
    }

    /// Refills a spare record (unique, vacant).
    #[inline]
    fn refill(&mut self, addr: usize, nbytes: usize) {
        self.addr = addr;
        self.nbytes = nbytes;
        *self.freed.get_mut() = false;
        self.vacant = false;
    }
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        self.release();
    }
}

/// A spare record of this thread, if any (unique: only the spare list held it).
#[inline]
fn take_spare() -> Option<Arc<BufferInner>> {
    SPARE.try_with(|s| s.borrow_mut().pop()).ok().flatten()
}

/// Device memory (AscendCL `aclrtMalloc`). Cloning the handle does not copy memory: all
/// clones name the same allocation. [`free`](Self::free) marks the allocation freed for
/// every clone (later use is a typed error); the memory returns to its pool when the last
/// clone, including those held by queued copies, is dropped.
#[derive(Clone)]
pub struct DeviceBuffer(pub(crate) ManuallyDrop<Arc<BufferInner>>);

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: this is the handle's destructor; `self.0` is not used after the take.
        let mut arc = unsafe { ManuallyDrop::take(&mut self.0) };
        if let Some(inner) = Arc::get_mut(&mut arc) {
            // The last handle (queued operations hold handles too): free the memory now and
            // keep the record. If the thread is exiting or its list is full, `arc` drops.
            inner.release();
            let _ = SPARE.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < SPARES {
                    s.push(arc);
                }
            });
        }
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer(device={}, addr={:#x}, nbytes={}{})",
            self.device(),
            self.addr(),
            self.nbytes(),
            if self.is_freed() { ", freed" } else { "" }
        )
    }
}

impl PartialEq for DeviceBuffer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for DeviceBuffer {}

impl DeviceBuffer {
    #[inline]
    pub(crate) fn new(addr: usize, nbytes: usize, owner: Owner) -> Self {
        if let Some(mut arc) = take_spare() {
            if let Some(inner) = Arc::get_mut(&mut arc) {
                inner.refill(addr, nbytes);
                inner.owner = owner;
                return DeviceBuffer(ManuallyDrop::new(arc));
            }
        }
        Self::fresh(addr, nbytes, owner)
    }

    /// A buffer of the device caching pool of `mem`: like [`new`](Self::new) with
    /// `Owner::Device`, but a spare record of the same device is reused as it is (no
    /// reference count traffic).
    #[inline]
    pub(crate) fn on_device(addr: usize, nbytes: usize, mem: &Arc<DeviceMemory>) -> Self {
        if let Some(mut arc) = take_spare() {
            if let Some(inner) = Arc::get_mut(&mut arc) {
                inner.refill(addr, nbytes);
                if !matches!(&inner.owner, Owner::Device(m) if Arc::ptr_eq(m, mem)) {
                    inner.owner = Owner::Device(mem.clone());
                }
                return DeviceBuffer(ManuallyDrop::new(arc));
            }
        }
        Self::fresh(addr, nbytes, Owner::Device(mem.clone()))
    }

    fn fresh(addr: usize, nbytes: usize, owner: Owner) -> Self {
        DeviceBuffer(ManuallyDrop::new(Arc::new(BufferInner {
            addr,
            nbytes,
            owner,
            freed: AtomicBool::new(false),
            charge: None,
            vacant: false,
        })))
    }

    /// Counts this (new, unshared) buffer's `bytes` against `quota` until it is released.
    pub(crate) fn charged_to(mut self, quota: Arc<CtxQuota>, bytes: usize) -> Self {
        match Arc::get_mut(&mut self.0) {
            Some(inner) => inner.charge = Some((quota, bytes)),
            None => quota.uncharge(bytes), // unreachable: a new buffer is unshared
        }
        self
    }

    /// Device address of the first byte (64-byte aligned).
    #[inline]
    pub fn addr(&self) -> usize {
        self.0.addr
    }

    /// Bytes requested (the capacity copies are checked against).
    #[inline]
    pub fn nbytes(&self) -> usize {
        self.0.nbytes
    }

    /// The device the memory is on.
    #[inline]
    pub fn device(&self) -> u32 {
        self.0.mem().device
    }

    /// True once [`free`](Self::free) was called through any handle.
    #[inline]
    pub fn is_freed(&self) -> bool {
        self.0.freed.load(Acquire)
    }

    /// Id of the [`MemPool`](super::MemPool) the buffer came from, if any.
    pub fn pool_id(&self) -> Option<u64> {
        match &self.0.owner {
            Owner::Pool(p) => Some(p.id),
            _ => None,
        }
    }

    /// Page kind backing the buffer (`None` once freed or if the device is gone).
    pub fn page_kind(&self) -> Option<PageKind> {
        if self.check().is_err() {
            return None;
        }
        self.0.kind()
    }

    /// Which pool the buffer's memory belongs to (the memory hook's `pool`).
    pub fn pool_kind(&self) -> MemPoolKind {
        self.0.pool_kind()
    }

    /// Fails if the buffer was freed or its device was reset.
    #[inline]
    pub fn check(&self) -> Result<()> {
        if self.is_freed() {
            return Err(BufferError::Freed {
                what: "device buffer",
                addr: self.addr(),
            }
            .into());
        }
        self.0.mem().check_alive()
    }

    /// Frees the buffer (AscendCL `aclrtFree`, stream-ordered): later use of any handle is
    /// an error; the memory is reused once queued work that uses it has finished. Freeing
    /// twice (through another clone) is [`MemError::DoubleFree`] (207002).
    pub fn free(self) -> Result<()> {
        if events::is_active() && !self.0.freed.load(Acquire) {
            let (d, n) = (self.device(), self.nbytes());
            let e = events::event(
                MemAction::FreeRequested,
                d,
                self.addr(),
                n,
                events::rounded(n),
                self.pool_kind(),
                None,
                None,
            );
            events::emit(e);
        }
        // The only handle: nobody can see the flag, dropping it frees (no atomic swap).
        if Arc::strong_count(&self.0) == 1 && !self.0.freed.load(Acquire) {
            return Ok(());
        }
        if self.0.freed.swap(true, AcqRel) {
            return Err(MemError::DoubleFree { addr: self.addr() }.into());
        }
        Ok(())
    }
}
