//! [`CachingPool`]: torch's CUDA/NPU caching allocator rules over [`Segment`]s, with
//! stream-ordered frees. See the crate docs for the free contract.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::align::{acl_malloc_size, block_size, round_down, round_up};
use crate::block::{BState, ANY_STREAM, LARGE, SMALL};
use crate::error::MemError;
use crate::fence::Fence;
use crate::page::{page_size, HugePageMode, PageKind, PagePolicy};
use crate::segment::Segment;
use crate::state::{State, LARGE_BUFFER, MIN_BLOCK, MIN_LARGE_ALLOC, ROUND_LARGE, SMALL_BUFFER};
use crate::stats::{PoolStats, StatArray};

/// Called (without the pool lock) before cached segments are unmapped on the
/// allocation slow path and in `empty_cache`; it must wait until every stream that
/// freed blocks has drained (a device synchronize).
pub type SyncHook = Arc<dyn Fn() + Send + Sync>;

/// Pool configuration.
#[derive(Clone)]
pub struct PoolConfig {
    /// The device's hard limit: reserved bytes never exceed it.
    pub capacity: usize,
    /// Page policy of new segments.
    pub policy: PagePolicy,
    /// Ladder rungs; `None` reads `NPURT_HUGEPAGES` at every mapping.
    pub huge_mode: Option<HugePageMode>,
    /// Blocks of at least this size are never split (`usize::MAX` = no limit; torch
    /// uses values above 20 MiB).
    pub max_split_size: usize,
    /// Release idle cached segments when reserved exceeds this fraction of the limit.
    pub gc_threshold: Option<f64>,
    /// `false`: a fixed pool that maps `capacity` once up front and never grows.
    pub grow: bool,
    /// Device-synchronize hook (see [`SyncHook`]). Without one, the pool assumes that
    /// free blocks are idle whenever it unmaps them.
    pub sync_hook: Option<SyncHook>,
}

impl PoolConfig {
    /// Growable pool of `capacity` bytes with default settings.
    pub fn new(capacity: usize) -> PoolConfig {
        PoolConfig {
            capacity,
            policy: PagePolicy::HugeFirst,
            huge_mode: None,
            max_split_size: usize::MAX,
            gc_threshold: None,
            grow: true,
            sync_hook: None,
        }
    }
}

impl std::fmt::Debug for PoolConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolConfig")
            .field("capacity", &self.capacity)
            .field("policy", &self.policy)
            .field("huge_mode", &self.huge_mode)
            .field("max_split_size", &self.max_split_size)
            .field("gc_threshold", &self.gc_threshold)
            .field("grow", &self.grow)
            .field("sync_hook", &self.sync_hook.is_some())
            .finish()
    }
}

/// What [`CachingPool::lookup`] knows about an address inside a live allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Start of the allocation.
    pub base: usize,
    /// Bytes the caller asked for.
    pub size: usize,
    /// Bytes the block really holds (rounded to 512, ≥ `size`).
    pub allocated_size: usize,
    /// Stream the block was allocated on.
    pub stream: u64,
    /// Page kind of the segment.
    pub page_kind: PageKind,
    /// `addr - base`.
    pub offset: usize,
}

/// State of a block in a [`SegmentSnapshot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockStatus {
    /// Cached, reusable.
    Free,
    /// Handed out.
    Allocated,
    /// Freed, waiting for fences.
    Pending,
}

/// One block of a [`SegmentSnapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSnapshot {
    /// Start address.
    pub addr: usize,
    /// Block size.
    pub size: usize,
    /// Requested bytes (0 when free).
    pub requested: usize,
    /// Allocating stream, or the free-list tag (`None` = idle, any stream).
    pub stream: Option<u64>,
    /// State.
    pub status: BlockStatus,
}

/// One segment, as [`CachingPool::snapshot`] reports it (torch's `memory_snapshot`).
#[derive(Clone, Debug)]
pub struct SegmentSnapshot {
    /// Start address.
    pub base: usize,
    /// Bytes the pool uses (what `reserved` counts).
    pub size: usize,
    /// Bytes really mapped (page rounding).
    pub mapped_len: usize,
    /// Page kind.
    pub page_kind: PageKind,
    /// True for large-pool segments.
    pub large: bool,
    /// Blocks in address order.
    pub blocks: Vec<BlockSnapshot>,
}

/// A caching device-memory pool for one virtual device. All methods take `&self`.
pub struct CachingPool {
    state: Mutex<State>,
    capacity: usize,
    policy: PagePolicy,
    huge_mode: Option<HugePageMode>,
    gc_threshold: Option<f64>,
    grow: bool,
    hook: Option<SyncHook>,
}

impl std::fmt::Debug for CachingPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachingPool")
            .field("capacity", &self.capacity)
            .field("grow", &self.grow)
            .finish_non_exhaustive()
    }
}

impl CachingPool {
    /// Creates a pool. A fixed pool (`grow: false`) maps its whole capacity (rounded
    /// down to 512) now and fails if that is impossible.
    pub fn new(cfg: PoolConfig) -> Result<CachingPool, MemError> {
        if let Some(t) = cfg.gc_threshold {
            if !(t > 0.0 && t <= 1.0) {
                return Err(MemError::InvalidSize { size: 0, reason: "gc_threshold must be in (0, 1]" });
            }
        }
        let mut st = State::new(cfg.max_split_size.max(MIN_BLOCK), !cfg.grow);
        if !cfg.grow {
            let usable = round_down(cfg.capacity, MIN_BLOCK);
            if usable == 0 {
                return Err(MemError::InvalidSize { size: cfg.capacity, reason: "fixed pool smaller than 512 bytes" });
            }
            let seg = Segment::map_with(usable, cfg.policy, cfg.huge_mode.unwrap_or_else(HugePageMode::from_env))?;
            let bi = st.add_segment(seg, usable, LARGE, true);
            st.insert_free(bi);
        }
        Ok(CachingPool {
            state: Mutex::new(st),
            capacity: cfg.capacity,
            policy: cfg.policy,
            huge_mode: cfg.huge_mode,
            gc_threshold: cfg.gc_threshold,
            grow: cfg.grow,
            hook: cfg.sync_hook,
        })
    }

    /// A fixed pool (AscendCL `MemPool`): `size` bytes mapped up front, never grows;
    /// dropping it releases everything.
    pub fn fixed(size: usize, policy: PagePolicy) -> Result<CachingPool, MemError> {
        CachingPool::new(PoolConfig { policy, grow: false, ..PoolConfig::new(size) })
    }

    /// Allocates `size` bytes (rounded up to 512; no ACL padding) for `stream`.
    /// Returns the block address (512-byte aligned).
    #[inline]
    pub fn alloc(&self, size: usize, stream: u64) -> Result<usize, MemError> {
        self.alloc_impl(size, size, stream)
    }

    /// Like [`alloc`](Self::alloc) with `aclrtMalloc` padding: the block holds
    /// `round_up(size, 32) + 32` bytes (then rounded to 512); `lookup().size` is `size`.
    #[inline]
    pub fn alloc_acl(&self, size: usize, stream: u64) -> Result<usize, MemError> {
        self.alloc_impl(size, acl_malloc_size(size)?, stream)
    }

    #[inline]
    fn alloc_impl(&self, requested: usize, padded: usize, stream: u64) -> Result<usize, MemError> {
        if stream == ANY_STREAM {
            return Err(MemError::InvalidStream { stream });
        }
        let size = block_size(padded)?;
        {
            let mut st = self.state.lock();
            if !st.pending.is_empty() {
                st.process_pending();
            }
            let pool = st.pool_for(size);
            if let Some(i) = st.take_free(pool, stream, size) {
                return Ok(st.split_and_allocate(i, size, requested, stream));
            }
        }
        self.alloc_slow(size, requested, stream)
    }

    fn mode(&self) -> HugePageMode {
        self.huge_mode.unwrap_or_else(HugePageMode::from_env)
    }

    fn effective_limit(&self, st: &State) -> usize {
        st.limit.map_or(self.capacity, |l| l.min(self.capacity))
    }

    /// Segment size to map for a block of `size` bytes, or which limit forbids it.
    fn plan(&self, st: &State, size: usize, pool: usize) -> Result<usize, &'static str> {
        let lim = self.effective_limit(st);
        let used = st.reserved + st.in_flight;
        let preferred = if pool == SMALL {
            SMALL_BUFFER
        } else if size <= MIN_LARGE_ALLOC {
            LARGE_BUFFER
        } else {
            round_up(size, ROUND_LARGE).unwrap_or(usize::MAX)
        };
        // Small devices: fall back to tighter segments rather than failing.
        let tight = round_up(size, page_size()).unwrap_or(usize::MAX);
        let candidates = [preferred, round_up(size, ROUND_LARGE).unwrap_or(usize::MAX), tight];
        if let Some(&s) = candidates.iter().find(|&&s| used.checked_add(s).is_some_and(|t| t <= lim)) {
            return Ok(s);
        }
        if used.checked_add(tight).is_some_and(|t| t <= self.capacity) {
            Err("quota")
        } else {
            Err("device capacity")
        }
    }

    fn oom(&self, st: &State, requested: usize, what: &str, limit: usize) -> MemError {
        MemError::OutOfMemory {
            requested,
            limit,
            allocated: st.stats.allocated_bytes[0].current as usize,
            reserved: st.reserved,
            largest_free: st.largest_free(),
            what: what.to_string(),
        }
    }

    #[cold]
    fn alloc_slow(&self, size: usize, requested: usize, stream: u64) -> Result<usize, MemError> {
        let mut garbage: Vec<Segment> = Vec::new();
        let mut st = self.state.lock();
        let pool = st.pool_for(size);
        let mut stage = 0u8;
        let mut gc_done = false;
        loop {
            st.process_pending();
            if let Some(i) = st.take_free(pool, stream, size) {
                return Ok(st.split_and_allocate(i, size, requested, stream));
            }
            if !self.grow {
                st.stats.num_ooms += 1;
                return Err(self.oom(&st, requested, "pool", self.capacity));
            }
            let lim = self.effective_limit(&st);
            if size > lim {
                st.stats.num_ooms += 1;
                let what = if lim < self.capacity { "quota" } else { "device capacity" };
                return Err(self.oom(&st, requested, what, lim));
            }
            if !gc_done {
                gc_done = true;
                if let Some(t) = self.gc_threshold {
                    let target = (t * lim as f64) as usize;
                    if st.reserved > target {
                        st.release_free_segments(self.hook.is_some(), target, &mut garbage);
                    }
                }
            }
            match self.plan(&st, size, pool) {
                Ok(seg_size) => {
                    st.in_flight += seg_size;
                    drop(st);
                    drop(std::mem::take(&mut garbage));
                    let res = Segment::map_with(seg_size, self.policy, self.mode());
                    st = self.state.lock();
                    st.in_flight -= seg_size;
                    let seg = match res {
                        Ok(seg) => seg,
                        Err(MemError::Os { op: "mmap", errno: libc::ENOMEM }) => {
                            st.stats.num_ooms += 1;
                            return Err(self.oom(&st, requested, "host memory (mmap ENOMEM)", lim));
                        }
                        Err(e) => return Err(e),
                    };
                    let bi = st.add_segment(seg, seg_size, pool, false);
                    return Ok(st.split_and_allocate(bi, size, requested, stream));
                }
                Err(what) => {
                    stage += 1;
                    match stage {
                        1 => {
                            st.stats.num_alloc_retries += 1;
                            st.release_free_segments(self.hook.is_some(), 0, &mut garbage);
                        }
                        2 if self.hook.is_some() => {
                            drop(st);
                            drop(std::mem::take(&mut garbage));
                            if let Some(h) = &self.hook {
                                h();
                            }
                            st = self.state.lock();
                            st.mark_idle(None);
                            st.process_pending();
                            st.release_free_segments(false, 0, &mut garbage);
                        }
                        _ => {
                            st.stats.num_ooms += 1;
                            return Err(self.oom(&st, requested, what, lim));
                        }
                    }
                }
            }
        }
    }

    /// Frees the allocation starting at `addr`. `fences` must cover every queued use of
    /// the block on streams other than its allocation stream (see the crate docs).
    /// Unknown, interior and already-freed pointers give typed errors (code 207002).
    #[inline]
    pub fn free(&self, addr: usize, fences: Vec<Box<dyn Fence>>) -> Result<(), MemError> {
        let mut st = self.state.lock();
        let i = st.find_for_free(addr)?;
        st.release_allocation(i, fences);
        Ok(())
    }

    /// The live allocation containing `addr` (interior pointers included, up to the
    /// block's `allocated_size`); `None` for freed or unknown addresses.
    pub fn lookup(&self, addr: usize) -> Option<BlockInfo> {
        let st = self.state.lock();
        let (_, &i) = st.by_addr.range(..=addr).next_back()?;
        let b = &st.blocks[i];
        if b.state != BState::Allocated || addr >= b.end() {
            return None;
        }
        Some(BlockInfo {
            base: b.addr,
            size: b.requested,
            allocated_size: b.size,
            stream: b.stream,
            page_kind: st.kind_of(i),
            offset: addr - b.addr,
        })
    }

    /// Polls pending (fenced) frees now; returns how many are still pending.
    pub fn process_pending(&self) -> usize {
        let mut st = self.state.lock();
        st.process_pending();
        st.pending.len()
    }

    /// Declares that all work queued on `stream` so far has finished: its free blocks
    /// become usable by every stream (and releasable by gc).
    pub fn mark_stream_idle(&self, stream: u64) {
        self.state.lock().mark_idle(Some(stream));
    }

    /// [`mark_stream_idle`](Self::mark_stream_idle) for every stream (device synchronize).
    pub fn mark_all_idle(&self) {
        self.state.lock().mark_idle(None);
    }

    /// Unmaps every entirely free segment (after calling the sync hook, if any);
    /// returns the bytes released. Without a hook the caller must have synchronized.
    pub fn empty_cache(&self) -> usize {
        if let Some(h) = &self.hook {
            h();
        }
        let mut garbage = Vec::new();
        let released = {
            let mut st = self.state.lock();
            if self.hook.is_some() {
                st.mark_idle(None);
            }
            st.process_pending();
            st.release_free_segments(false, 0, &mut garbage)
        };
        drop(garbage);
        released
    }

    /// Sets (or clears) the quota on reserved bytes (e.g. `fraction * capacity`).
    pub fn set_limit(&self, limit: Option<usize>) {
        self.state.lock().limit = limit;
    }

    /// The quota, if any.
    pub fn limit(&self) -> Option<usize> {
        self.state.lock().limit
    }

    /// The device capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// True for a fixed (non-growing) pool.
    pub fn is_fixed(&self) -> bool {
        !self.grow
    }

    /// Bytes currently mapped.
    pub fn reserved_bytes(&self) -> usize {
        self.state.lock().reserved
    }

    /// Bytes currently allocated (block sizes).
    pub fn allocated_bytes(&self) -> usize {
        self.state.lock().stats.allocated_bytes[0].current as usize
    }

    /// `(free, total)` against the capacity, like `aclrtGetMemInfo`.
    pub fn mem_info(&self) -> (usize, usize) {
        let st = self.state.lock();
        (self.capacity.saturating_sub(st.reserved), self.capacity)
    }

    /// Largest free cached block.
    pub fn largest_free_block(&self) -> usize {
        self.state.lock().largest_free()
    }

    /// Statistics snapshot.
    pub fn stats(&self) -> PoolStats {
        let mut s = self.state.lock().snapshot();
        s.capacity = self.capacity as u64;
        s
    }

    /// torch-style `memory_summary()` table.
    pub fn summary(&self) -> String {
        self.stats().summary()
    }

    /// Resets every peak to the current value.
    pub fn reset_peak_stats(&self) {
        let mut st = self.state.lock();
        for a in stat_arrays(&mut st.stats) {
            for s in a.iter_mut() {
                s.peak = s.current;
            }
        }
    }

    /// Resets cumulative counters (`allocated`/`freed`, retries, OOMs).
    pub fn reset_accumulated_stats(&self) {
        let mut st = self.state.lock();
        for a in stat_arrays(&mut st.stats) {
            for s in a.iter_mut() {
                s.allocated = 0;
                s.freed = 0;
            }
        }
        st.stats.num_alloc_retries = 0;
        st.stats.num_ooms = 0;
    }

    /// Segments and blocks (torch's `memory_snapshot`).
    pub fn snapshot(&self) -> Vec<SegmentSnapshot> {
        let st = self.state.lock();
        let mut out = Vec::new();
        for rec in st.segs.iter().flatten() {
            let mut blocks = Vec::new();
            let mut i = st.by_addr[&rec.seg.addr()];
            loop {
                let b = &st.blocks[i];
                let status = match b.state {
                    BState::Allocated => BlockStatus::Allocated,
                    BState::Pending => BlockStatus::Pending,
                    _ => BlockStatus::Free,
                };
                let stream = (b.stream != ANY_STREAM).then_some(b.stream);
                blocks.push(BlockSnapshot { addr: b.addr, size: b.size, requested: b.requested, stream, status });
                if b.next == crate::block::NIL {
                    break;
                }
                i = b.next;
            }
            out.push(SegmentSnapshot {
                base: rec.seg.addr(),
                size: rec.usable,
                mapped_len: rec.seg.len(),
                page_kind: rec.seg.page_kind(),
                large: rec.pool == LARGE,
                blocks,
            });
        }
        out.sort_by_key(|s| s.base);
        out
    }

    /// Checks internal invariants (tests and debugging).
    #[doc(hidden)]
    pub fn debug_check(&self) -> Result<(), String> {
        let st = self.state.lock();
        st.check()?;
        if st.reserved > self.capacity {
            return Err(format!("reserved {} > capacity {}", st.reserved, self.capacity));
        }
        Ok(())
    }
}

fn stat_arrays(s: &mut PoolStats) -> [&mut StatArray; 7] {
    [
        &mut s.allocation,
        &mut s.segment,
        &mut s.active,
        &mut s.allocated_bytes,
        &mut s.reserved_bytes,
        &mut s.active_bytes,
        &mut s.requested_bytes,
    ]
}
