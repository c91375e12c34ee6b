//! [`DeviceMemory`]: the memory of one active device. It owns the device's
//! [`CachingPool`] and accounts for everything else that takes room on the device
//! (explicit [`MemPool`](super::MemPool)s, dedicated segments of `NormalOnly` /
//! `HugeOnly` allocations), so that the configured capacity and the per-process quota
//! hold for the sum: the caching pool's limit is always `budget - external`.

use super::pool::PoolInner;
use crate::error::{Error, Result};
use crate::executor::Scheduler;
use npurt_mem::{CachingPool, MemError, PageKind, PoolConfig, PoolStats, ReserveGate};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

/// Everything outside the caching pool, under one lock (changes are rare: creating a
/// MemPool, a dedicated segment, a quota).
#[derive(Default)]
pub(super) struct External {
    /// Bytes reserved outside the caching pool (MemPools + dedicated segments).
    pub(super) reserved: usize,
    /// `set_per_process_memory_fraction` quota in bytes.
    pub(super) quota: Option<usize>,
    pub(super) fraction: Option<f64>,
    /// Dedicated segments by base address: (mapped bytes, requested bytes, page kind).
    pub(super) dedicated: BTreeMap<usize, (usize, usize, PageKind)>,
    /// Statistics of the dedicated segments (large-pool column).
    pub(super) stats: PoolStats,
    pub(super) pools: Vec<Weak<PoolInner>>,
}

/// The memory of one active device (see the module docs). Shared by the device, its
/// contexts, and every buffer allocated from it, so it outlives a device reset while
/// leaked buffers still exist (they report the reset as an error when used).
pub struct DeviceMemory {
    pub(crate) device: u32,
    pub(crate) dev: Arc<Scheduler>,
    pub(crate) pool: CachingPool,
    capacity: usize,
    pub(super) ext: Mutex<External>,
    /// The shareable pool and imported ranges (`shareable.rs`).
    pub(crate) share: super::shareable::ShareState,
    /// This process's slot in the device's shared status region (None: process-private).
    pub(crate) shared: Option<Arc<crate::shared::Attached>>,
}

impl std::fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceMemory(device={}, capacity={})", self.device, self.capacity)
    }
}

impl DeviceMemory {
    pub(crate) fn new(device: u32, capacity: usize, dev: Arc<Scheduler>) -> Result<Arc<Self>> {
        // No sync hook: a block goes back to the pool only when the last operation that
        // captured its buffer has run and been dropped, so every free block is idle (the
        // pool's contract for hook-less pools). A hook would also make allocations wait for
        // the device, which deadlocks when called from a host callback.
        let shared = crate::shared::Attached::attach(device, capacity as u64);
        let pool = CachingPool::new(PoolConfig {
            reserve_gate: shared.clone().map(|a| a as Arc<dyn ReserveGate>),
            segment_observer: Some(super::events::segment_observer(
                device,
                super::events::MemPoolKind::Device,
            )),
            ..PoolConfig::new(capacity)
        })?;
        Ok(Arc::new(DeviceMemory {
            device,
            dev,
            pool,
            capacity,
            ext: Mutex::new(External::default()),
            share: Default::default(),
            shared,
        }))
    }

    /// The device ordinal.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// The device capacity in bytes (a hard limit on reserved memory).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn check_alive(&self) -> Result<()> {
        if self.dev.is_alive() {
            Ok(())
        } else {
            Err(crate::error::DeviceError::gone(self.device).into())
        }
    }

    fn budget(ext: &External, capacity: usize) -> usize {
        ext.quota.map_or(capacity, |q| q.min(capacity))
    }

    /// Re-derives the caching pool's limit from the quota and the external reservations.
    fn apply_limit(&self, ext: &External) {
        let limit = if ext.quota.is_none() && ext.reserved == 0 {
            None
        } else {
            Some(Self::budget(ext, self.capacity).saturating_sub(ext.reserved))
        };
        self.pool.set_limit(limit);
    }

    fn oom(&self, ext: &mut External, requested: usize) -> Error {
        ext.stats.num_ooms += 1;
        let budget = Self::budget(ext, self.capacity);
        let what = if budget < self.capacity {
            "quota"
        } else {
            "device capacity"
        };
        MemError::OutOfMemory {
            requested,
            limit: budget,
            allocated: self.pool.allocated_bytes() + ext.stats.allocated_bytes[0].current as usize,
            reserved: self.pool.reserved_bytes() + ext.reserved,
            largest_free: self.pool.largest_free_block(),
            what: what.to_string(),
        }
        .into()
    }

    /// The OutOfMemory error of an injected allocation fault (`NPURT_FAULT=alloc:N`),
    /// counted like a real one.
    #[cold]
    pub(crate) fn injected_oom(&self, requested: usize) -> Error {
        let mut ext = self.ext.lock();
        ext.stats.num_ooms += 1;
        MemError::OutOfMemory {
            requested,
            limit: Self::budget(&ext, self.capacity),
            allocated: self.pool.allocated_bytes() + ext.stats.allocated_bytes[0].current as usize,
            reserved: self.pool.reserved_bytes() + ext.reserved,
            largest_free: self.pool.largest_free_block(),
            what: "injected fault (NPURT_FAULT alloc)".to_string(),
        }
        .into()
    }

    /// Takes `bytes` of device room for something outside the caching pool (releasing the
    /// pool's cached segments if needed), or fails with OutOfMemory.
    pub(crate) fn reserve_external(&self, bytes: usize) -> Result<()> {
        self.charge_shared(bytes)?;
        self.reserve_local(bytes).inspect_err(|_| self.release_shared(bytes))
    }

    fn reserve_local(&self, bytes: usize) -> Result<()> {
        let mut ext = self.ext.lock();
        let budget = Self::budget(&ext, self.capacity);
        let total = ext.reserved.checked_add(bytes).filter(|&t| t <= budget);
        let Some(total) = total else {
            return Err(self.oom(&mut ext, bytes));
        };
        // Shrink the pool's limit first so that it cannot grow into the room meanwhile.
        let old = ext.reserved;
        ext.reserved = total;
        self.apply_limit(&ext);
        if self.pool.reserved_bytes() + total > budget {
            self.pool.empty_cache();
            if self.pool.reserved_bytes() + total > budget {
                ext.reserved = old;
                self.apply_limit(&ext);
                return Err(self.oom(&mut ext, bytes));
            }
        }
        Ok(())
    }

    pub(crate) fn release_external(&self, bytes: usize) {
        self.release_shared(bytes);
        let mut ext = self.ext.lock();
        ext.reserved = ext.reserved.saturating_sub(bytes);
        self.apply_limit(&ext);
    }

    /// Charges `bytes` on the device's shared counter (other processes' reservations
    /// count); a refusal first gives this process's cached segments back.
    fn charge_shared(&self, bytes: usize) -> Result<()> {
        let Some(a) = &self.shared else { return Ok(()) };
        if a.try_reserve(bytes).is_ok() {
            return Ok(());
        }
        // Not the shareable pool's cache: its growth calls here holding its lock.
        self.pool.empty_cache();
        a.try_reserve(bytes).map_err(|what| {
            let mut ext = self.ext.lock();
            ext.stats.num_ooms += 1;
            MemError::OutOfMemory {
                requested: bytes,
                limit: self.capacity,
                allocated: self.pool.allocated_bytes() + ext.stats.allocated_bytes[0].current as usize,
                reserved: self.pool.reserved_bytes() + ext.reserved,
                largest_free: self.pool.largest_free_block(),
                what,
            }
            .into()
        })
    }

    fn release_shared(&self, bytes: usize) {
        if let (Some(a), true) = (&self.shared, bytes > 0) {
            a.release(bytes);
        }
    }

    pub(crate) fn register_pool(&self, p: &Arc<PoolInner>) {
        let mut ext = self.ext.lock();
        ext.pools.retain(|w| w.strong_count() > 0);
        ext.pools.push(Arc::downgrade(p));
    }

    /// Records a dedicated segment of `mapped` bytes for which `reserved` (≥ `mapped`) bytes
    /// were taken with [`reserve_external`](Self::reserve_external); returns the rest.
    pub(crate) fn add_dedicated(&self, base: usize, mapped: usize, reserved: usize, requested: usize, kind: PageKind) {
        self.release_shared(reserved.saturating_sub(mapped));
        let mut ext = self.ext.lock();
        ext.reserved = ext.reserved.saturating_sub(reserved) + mapped;
        self.apply_limit(&ext);
        ext.dedicated.insert(base, (mapped, requested, kind));
        ext.stats.add_dedicated(mapped as u64, requested as u64, kind);
    }

    /// Forgets a dedicated segment (the caller unmaps it) and gives its room back.
    pub(crate) fn remove_dedicated(&self, base: usize) {
        let mut ext = self.ext.lock();
        let Some((mapped, requested, kind)) = ext.dedicated.remove(&base) else {
            return;
        };
        ext.stats.remove_dedicated(mapped as u64, requested as u64, kind);
        self.release_shared(mapped);
        ext.reserved = ext.reserved.saturating_sub(mapped);
        self.apply_limit(&ext);
    }

    /// The dedicated segment containing `addr`: (base, requested bytes, page kind).
    pub(crate) fn find_dedicated(&self, addr: usize) -> Option<(usize, usize, PageKind)> {
        let ext = self.ext.lock();
        let (&base, &(_, requested, kind)) = ext.dedicated.range(..=addr).next_back()?;
        (addr < base + requested).then_some((base, requested, kind))
    }

    /// Live explicit memory pools of this device.
    pub(crate) fn pools(&self) -> Vec<Arc<PoolInner>> {
        self.ext.lock().pools.iter().filter_map(Weak::upgrade).collect()
    }

    /// Device-wide statistics in torch's shape: the caching pool, the explicit memory
    /// pools and the dedicated segments added up. `capacity` and `limit` (the quota)
    /// are the device's.
    pub fn stats(&self) -> PoolStats {
        let mut s = self.pool.stats();
        let pools = self.pools();
        let (ext_stats, quota) = {
            let ext = self.ext.lock();
            (ext.stats.clone(), ext.quota)
        };
        s.merge(&ext_stats);
        for p in &pools {
            s.merge(&p.pool.stats());
        }
        if let Some(p) = self.share.pool() {
            s.merge(&p.stats());
        }
        s.capacity = self.capacity as u64;
        s.limit = quota.map(|q| q as u64);
        s
    }

    /// Bytes allocated to live buffers (block sizes), all pools of the device
    /// (`memory_allocated`).
    pub fn allocated_bytes(&self) -> u64 {
        self.pool.allocated_bytes() as u64 + self.ext_allocated()
    }

    fn ext_allocated(&self) -> u64 {
        let pools = self.pools();
        let dedicated = self.ext.lock().stats.allocated_bytes[0].current;
        let shareable = self.share.pool().map_or(0, |p| p.allocated_bytes() as u64);
        dedicated + shareable + pools.iter().map(|p| p.pool.allocated_bytes() as u64).sum::<u64>()
    }

    /// Bytes reserved on the device: mapped by the pools and dedicated segments
    /// (`memory_reserved`).
    pub fn reserved_bytes(&self) -> u64 {
        self.pool.reserved_bytes() as u64 + self.ext.lock().reserved as u64
    }

    /// `(free, total)` like `aclrtGetMemInfo`: capacity minus reserved bytes.
    pub fn mem_info(&self) -> (u64, u64) {
        let used = self.reserved_bytes().min(self.capacity as u64);
        (self.capacity as u64 - used, self.capacity as u64)
    }

    /// (free, total) as `aclrtGetMemInfo` reports them on the card, where `aclrtFree` gives
    /// memory back: free is what no live allocation holds (the caching pool's cached blocks
    /// count as free; [`mem_info`](Self::mem_info) is torch's view, which counts them used).
    pub fn acl_mem_info(&self) -> (u64, u64) {
        let used = self.allocated_bytes().min(self.capacity as u64);
        (self.capacity as u64 - used, self.capacity as u64)
    }

    /// Resets every peak statistic to its current value.
    pub fn reset_peak_stats(&self) {
        self.pool.reset_peak_stats();
        for p in self.pools() {
            p.pool.reset_peak_stats();
        }
        if let Some(p) = self.share.pool() {
            p.reset_peak_stats();
        }
        self.ext.lock().stats.reset_peaks();
    }

    /// Returns the caching pool's unused cached segments to the OS; the bytes released.
    pub fn empty_cache(&self) -> usize {
        self.pool.empty_cache() + self.share.pool().map_or(0, |p| p.empty_cache())
    }

    /// torch's `set_per_process_memory_fraction`: the device's reserved memory (all pools)
    /// may not exceed `fraction * capacity`. `0 < fraction <= 1`.
    pub fn set_fraction(&self, fraction: f64) -> Result<()> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(Error::invalid(format!(
                "memory fraction must be in (0, 1], got {fraction}"
            )));
        }
        let mut ext = self.ext.lock();
        ext.quota = Some((fraction * self.capacity as f64) as usize);
        ext.fraction = Some(fraction);
        if let Some(a) = &self.shared {
            a.set_quota(ext.quota.unwrap_or(0) as u64);
        }
        self.apply_limit(&ext);
        Ok(())
    }

    /// The fraction set by [`set_fraction`](Self::set_fraction), if any.
    pub fn fraction(&self) -> Option<f64> {
        self.ext.lock().fraction
    }

    /// torch-style summary table of [`stats`](Self::stats).
    pub fn summary(&self) -> String {
        let mut s = format!("device {}\n{}", self.device, self.stats().summary());
        s += &self.pool_lines();
        s
    }

    /// Live allocations and their bytes (for the teardown's leak report).
    pub(crate) fn live(&self) -> (usize, u64) {
        let s = self.stats();
        (s.allocation[0].current as usize, s.allocated_bytes[0].current)
    }
}
