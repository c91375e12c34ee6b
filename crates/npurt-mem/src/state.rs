//! The caching pool's bookkeeping (everything behind the pool's mutex): free lists,
//! best fit, split, statistics (coalescing is in `coalesce.rs`,
//! segment registration and release in `lifecycle.rs`).
//! No system calls happen here; mapping and unmapping are done by `grow.rs` and
//! `pool.rs` outside the lock.

use std::collections::BTreeMap;

use crate::block::{AddrMap, BState, Block, Slab, LARGE, NIL, SMALL};
use crate::error::MemError;
use crate::freelist::FreeLists;
use crate::page::PageKind;
use crate::segment::Segment;
use crate::stats::{self, PoolStats};

/// Requests up to this size use the small pool (torch `kSmallSize`).
pub const SMALL_SIZE: usize = 1 << 20;
/// Segment size of the small pool (torch `kSmallBuffer`).
pub const SMALL_BUFFER: usize = 2 << 20;
/// Segment size for large requests up to [`MIN_LARGE_ALLOC`] (torch `kLargeBuffer`).
pub const LARGE_BUFFER: usize = 20 << 20;
/// Large requests above this get their own segment (torch `kMinLargeAlloc`).
pub const MIN_LARGE_ALLOC: usize = 10 << 20;
/// Rounding of dedicated large segments (torch `kRoundLarge`).
pub const ROUND_LARGE: usize = 2 << 20;
/// Smallest block (torch `kMinBlockSize`).
pub const MIN_BLOCK: usize = 512;

pub(crate) struct SegRec {
    pub seg: Segment,
    /// Bytes of the segment the pool uses (≤ `seg.len()`); what `reserved` counts.
    pub usable: usize,
    pub pool: usize,
    /// Never released (the fixed pool's up-front segment).
    pub keep: bool,
    /// Slot of the segment's first block (stable: merges keep the lower block).
    pub first: u32,
}

/// Mutable pool state.
pub(crate) struct State {
    pub blocks: Slab,
    pub segs: Vec<Option<SegRec>>,
    pub seg_vacant: Vec<u32>,
    /// Every live block (free or allocated) by start address.
    pub starts: AddrMap,
    /// Segment slot by base address (for interior-pointer lookups).
    pub seg_by_base: BTreeMap<usize, u32>,
    pub free: FreeLists,
    /// Bytes being mapped right now by threads that dropped the lock.
    pub in_flight: usize,
    /// Sum of `usable` over segments.
    pub reserved: usize,
    pub limit: Option<usize>,
    /// `stats.active` / `stats.active_bytes` are not kept here: a block is active exactly
    /// while it is allocated (the runtime frees a block only once no queued work uses
    /// it), so [`snapshot`] copies the allocation statistics into them, which keeps the
    /// alloc/free hot path to three statistics instead of five.
    ///
    /// [`snapshot`]: State::snapshot
    pub stats: PoolStats,
    pub max_split: usize,
    pub fixed: bool,
    /// Large segments are request-sized (`PoolConfig::large_segment == None`).
    pub exact_segments: bool,
    /// Told about every segment added or released ([`crate::SegmentObserver`]).
    pub on_segment: Option<crate::config::SegmentObserver>,
    /// Charged for every segment (released in [`State::tell_segment`]).
    pub gate: Option<std::sync::Arc<dyn crate::config::ReserveGate>>,
}

#[inline]
pub(crate) fn stat_idx(pool: usize) -> usize {
    if pool == SMALL {
        stats::SMALL_POOL
    } else {
        stats::LARGE_POOL
    }
}

impl State {
    pub(crate) fn new(max_split: usize, fixed: bool) -> State {
        State {
            blocks: Slab::default(),
            segs: Vec::new(),
            seg_vacant: Vec::new(),
            starts: AddrMap::default(),
            seg_by_base: BTreeMap::new(),
            free: FreeLists::default(),
            in_flight: 0,
            reserved: 0,
            limit: None,
            stats: PoolStats::default(),
            max_split,
            fixed,
            exact_segments: false,
            on_segment: None,
            gate: None,
        }
    }

    /// Pool serving a request of `size` (already rounded) bytes.
    #[inline]
    pub(crate) fn pool_for(&self, size: usize) -> usize {
        if !self.fixed && size <= SMALL_SIZE {
            SMALL
        } else {
            LARGE
        }
    }

    /// Puts free block `i` (not in a free list) into its free list, coalescing.
    pub(crate) fn insert_free(&mut self, i: u32) {
        self.merge_and_insert(i, false);
    }

    /// Best-fit free block, removed from the free list. Applies torch's
    /// `max_split_size` rules.
    #[inline]
    pub(crate) fn take_free(&mut self, pool: usize, size: usize) -> Option<u32> {
        // A hot block of exactly this size: the tightest fit there is, whether or not
        // it has been coalesced (its free neighbours, if any, stay as they are).
        if let Some(i) = self.free.take_hot_exact(&mut self.blocks, pool, size) {
            self.blocks[i].deferred = false;
            return Some(i);
        }
        self.settle(pool);
        let (bsize, i) = self.free.best_fit(&self.blocks, pool, size)?;
        // Oversize blocks (≥ max_split_size) serve only oversize requests, and only
        // when they waste less than LARGE_BUFFER.
        if size < self.max_split && bsize >= self.max_split {
            return None;
        }
        if size >= self.max_split && bsize - size >= LARGE_BUFFER {
            return None;
        }
        self.free.remove(&mut self.blocks, i);
        Some(i)
    }

    #[inline]
    fn should_split(&self, pool: usize, bsize: usize, size: usize) -> bool {
        let rem = bsize - size;
        if self.fixed || pool == SMALL || self.exact_segments {
            // Request-sized segments: split off any remainder, so a block's allocated size
            // stays the rounded request (the remainder is free, coalesced back on free).
            rem >= MIN_BLOCK
        } else {
            size < self.max_split && rem > SMALL_SIZE
        }
    }

    /// Splits free block `i` (not in a free list) to `size` if worthwhile and hands it
    /// out. Returns the address.
    #[inline]
    pub(crate) fn split_and_allocate(&mut self, i: u32, size: usize, requested: usize) -> usize {
        let b = &self.blocks[i];
        let pool = b.pool as usize;
        if self.should_split(pool, b.size, size) {
            let rem = Block {
                addr: b.addr + size,
                size: b.size - size,
                requested: 0,
                prev: i,
                next: b.next,
                seg: b.seg,
                pool: b.pool,
                state: BState::Free,
                hot: false,
                deferred: false,
            };
            let (next, raddr) = (rem.next, rem.addr);
            let r = self.blocks.insert(rem);
            if next != NIL {
                self.blocks[next].prev = r;
            }
            let b = &mut self.blocks[i];
            b.next = r;
            b.size = size;
            self.starts.insert(raddr, r);
            // Into the hot cache: merging it back on free is then cheap (see freelist.rs).
            self.push_hot(r);
        }
        let b = &mut self.blocks[i];
        b.state = BState::Allocated;
        b.requested = requested;
        let (addr, bsize) = (b.addr, b.size as u64);
        let s = &mut self.stats;
        let p = stat_idx(pool);
        stats::inc(&mut s.allocation, p, 1);
        stats::inc(&mut s.allocated_bytes, p, bsize);
        stats::inc(&mut s.requested_bytes, p, requested as u64);
        addr
    }

    /// Live block containing `addr` (any state): exact starts in O(1), interior
    /// addresses by walking the segment's blocks.
    pub(crate) fn containing(&self, addr: usize) -> Option<u32> {
        if let Some(&i) = self.starts.get(&addr) {
            return Some(i);
        }
        let (_, &si) = self.seg_by_base.range(..=addr).next_back()?;
        let rec = self.segs[si as usize].as_ref()?;
        if addr >= rec.seg.addr() + rec.usable {
            return None;
        }
        let mut i = rec.first;
        while self.blocks[i].end() <= addr {
            i = self.blocks[i].next;
        }
        Some(i)
    }

    /// Block for `free(addr)`, or the typed error.
    #[inline]
    pub(crate) fn find_for_free(&self, addr: usize) -> Result<u32, MemError> {
        if let Some(&i) = self.starts.get(&addr) {
            return match self.blocks[i].state {
                BState::Allocated => Ok(i),
                _ => Err(MemError::DoubleFree { addr }),
            };
        }
        let bad = |reason| MemError::InvalidPointer {
            addr,
            reason,
            during_free: true,
        };
        match self.containing(addr) {
            Some(i) if self.blocks[i].state == BState::Allocated => {
                Err(bad("interior pointer: not the start of an allocation"))
            }
            Some(_) => Err(MemError::DoubleFree { addr }),
            None => Err(bad("unknown address: not allocated by this pool")),
        }
    }

    /// Caller freed block `i` (no queued work uses it): free it now.
    #[inline]
    pub(crate) fn release(&mut self, i: u32) {
        self.uncount_allocation(i);
        self.free_block(i);
    }

    /// Allocation statistics of freeing block `i`.
    #[inline]
    fn uncount_allocation(&mut self, i: u32) {
        let b = &mut self.blocks[i];
        let (p, size, req) = (stat_idx(b.pool as usize), b.size as u64, b.requested as u64);
        b.requested = 0;
        let s = &mut self.stats;
        stats::dec(&mut s.allocation, p, 1);
        stats::dec(&mut s.allocated_bytes, p, size);
        stats::dec(&mut s.requested_bytes, p, req);
    }

    /// Page kind of the segment holding block `i`.
    pub(crate) fn kind_of(&self, i: u32) -> PageKind {
        let si = self.blocks[i].seg as usize;
        self.segs[si]
            .as_ref()
            .map(|r| r.seg.page_kind())
            .unwrap_or(PageKind::Normal)
    }

    /// Statistics snapshot (the caller fills in config-derived fields).
    pub(crate) fn snapshot(&self) -> PoolStats {
        let mut s = self.stats.clone();
        s.active = s.allocation;
        s.active_bytes = s.allocated_bytes;
        s.largest_free_block = self.largest_free() as u64;
        s.limit = self.limit.map(|l| l as u64);
        s.max_split_size = self.max_split as u64;
        s
    }
}
