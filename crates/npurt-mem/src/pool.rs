//! [`CachingPool`]: torch's CUDA/NPU caching allocator rules over [`Segment`]s. See the
//! crate docs for the free contract.

use parking_lot::Mutex;

use crate::align::{block_size, round_down};
use crate::block::{BState, LARGE, NIL};
use crate::config::PoolConfig;
use crate::error::MemError;
use crate::info::{BlockInfo, BlockSnapshot, BlockStatus, SegmentSnapshot};
use crate::page::{HugePageMode, PagePolicy};
use crate::segment::Segment;
use crate::state::{State, LARGE_BUFFER, MIN_BLOCK};
use crate::stats::PoolStats;

/// A caching device-memory pool for one virtual device. All methods take `&self`.
pub struct CachingPool {
    pub(crate) state: Mutex<State>,
    pub(crate) capacity: usize,
    pub(crate) policy: PagePolicy,
    pub(crate) huge_mode: Option<HugePageMode>,
    pub(crate) gc_threshold: Option<f64>,
    pub(crate) grow: bool,
    pub(crate) large_segment: Option<usize>,
    pub(crate) trim_before_growth: bool,
    pub(crate) shareable: bool,
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
                return Err(MemError::InvalidSize {
                    size: 0,
                    reason: "gc_threshold must be in (0, 1]",
                });
            }
        }
        // Like torch, keep 20 MiB segments splittable: smaller limits are raised just
        // above LARGE_BUFFER. A fixed pool's single segment must always split.
        let max_split = if cfg.grow {
            cfg.max_split_size.max(LARGE_BUFFER + MIN_BLOCK)
        } else {
            usize::MAX
        };
        let mut st = State::new(max_split, !cfg.grow);
        st.exact_segments = cfg.large_segment.is_none();
        st.on_segment = cfg.segment_observer.clone();
        if cfg.grow {
            st.gate = cfg.reserve_gate.clone(); // a fixed pool's room is its owner's business
        }
        if !cfg.grow {
            let usable = round_down(cfg.capacity, MIN_BLOCK);
            if usable == 0 {
                return Err(MemError::InvalidSize {
                    size: cfg.capacity,
                    reason: "fixed pool smaller than 512 bytes",
                });
            }
            let mode = cfg.huge_mode.unwrap_or_else(HugePageMode::from_env);
            let seg = crate::memfd::map_for_pool(usable, cfg.policy, mode, cfg.shareable)?;
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
            large_segment: cfg.large_segment,
            trim_before_growth: cfg.trim_before_growth,
            shareable: cfg.shareable,
        })
    }

    /// A fixed pool (AscendCL `MemPool`): `size` bytes mapped up front, never grows;
    /// dropping it releases everything.
    pub fn fixed(size: usize, policy: PagePolicy) -> Result<CachingPool, MemError> {
        CachingPool::new(PoolConfig {
            policy,
            grow: false,
            ..PoolConfig::new(size)
        })
    }

    /// Allocates `size` bytes (rounded up to 512; no ACL padding). Returns the block
    /// address (512-byte aligned).
    #[inline]
    pub fn alloc(&self, size: usize) -> Result<usize, MemError> {
        let padded = block_size(size)?;
        {
            let mut st = self.state.lock();
            let pool = st.pool_for(padded);
            if let Some(i) = st.take_free(pool, padded) {
                return Ok(st.split_and_allocate(i, padded, size));
            }
        }
        self.alloc_slow(padded, size)
    }

    pub(crate) fn mode(&self) -> HugePageMode {
        self.huge_mode.unwrap_or_else(HugePageMode::from_env)
    }

    /// Maps a new segment of `size` bytes for this pool (a sealed memfd if shareable).
    pub(crate) fn map_segment(&self, size: usize) -> Result<Segment, MemError> {
        crate::memfd::map_for_pool(size, self.policy, self.mode(), self.shareable)
    }

    /// True if the pool maps memfd segments whose blocks can be [`share`](Self::share)d.
    pub fn is_shareable(&self) -> bool {
        self.shareable
    }

    pub(crate) fn effective_limit(&self, st: &State) -> usize {
        st.limit.map_or(self.capacity, |l| l.min(self.capacity))
    }

    /// Frees the allocation starting at `addr`; the caller guarantees that no queued work
    /// still uses it (npurt-core frees a buffer when its last queued user is dropped).
    /// Unknown, interior and already-freed pointers give typed errors (code 207002).
    #[inline]
    pub fn free(&self, addr: usize) -> Result<(), MemError> {
        let mut st = self.state.lock();
        let i = st.find_for_free(addr)?;
        st.release(i);
        Ok(())
    }

    /// The live allocation containing `addr` (interior pointers included, up to the
    /// block's `allocated_size`); `None` for freed or unknown addresses.
    pub fn lookup(&self, addr: usize) -> Option<BlockInfo> {
        let st = self.state.lock();
        let i = st.containing(addr)?;
        let b = &st.blocks[i];
        if b.state != BState::Allocated || addr >= b.end() {
            return None;
        }
        Some(BlockInfo {
            base: b.addr,
            size: b.requested,
            allocated_size: b.size,
            page_kind: st.kind_of(i),
            offset: addr - b.addr,
        })
    }

    /// True if `addr` lies in one of the pool's segments, allocated or not: freed device
    /// memory the pool still holds stays known as device memory.
    pub fn owns(&self, addr: usize) -> bool {
        self.state.lock().containing(addr).is_some()
    }

    /// Unmaps every entirely free segment; returns the bytes released.
    pub fn empty_cache(&self) -> usize {
        let mut garbage = Vec::new();
        let released = self.state.lock().release_free_segments(0, &mut garbage);
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

    /// `(free, total)` like `aclrtGetMemInfo`: capacity minus reserved bytes (cached
    /// blocks count as used, as on a device). For a fixed pool: its size minus the
    /// bytes allocated from it.
    pub fn mem_info(&self) -> (usize, usize) {
        let st = self.state.lock();
        let used = if self.grow {
            st.reserved
        } else {
            st.stats.allocated_bytes[0].current as usize
        };
        (self.capacity.saturating_sub(used), self.capacity)
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
        self.state.lock().stats.reset_peaks();
    }

    /// Resets cumulative counters (`allocated`/`freed`, retries, OOMs).
    pub fn reset_accumulated_stats(&self) {
        self.state.lock().stats.reset_accumulated();
    }

    /// Segments and blocks (torch's `memory_snapshot`), deferred frees coalesced first.
    pub fn snapshot(&self) -> Vec<SegmentSnapshot> {
        let mut st = self.state.lock();
        st.settle_all();
        let mut out = Vec::new();
        for rec in st.segs.iter().flatten() {
            let mut blocks = Vec::new();
            let mut i = rec.first;
            loop {
                let b = &st.blocks[i];
                let status = match b.state {
                    BState::Allocated => BlockStatus::Allocated,
                    _ => BlockStatus::Free,
                };
                blocks.push(BlockSnapshot {
                    addr: b.addr,
                    size: b.size,
                    requested: b.requested,
                    status,
                });
                if b.next == NIL {
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
