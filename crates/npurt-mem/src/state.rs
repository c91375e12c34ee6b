//! The caching pool's bookkeeping (everything behind the pool's mutex): free lists,
//! best fit, split, coalescing, pending (fenced) frees, segment release, statistics.
//! No system calls happen here; mapping and unmapping are done by `pool.rs` outside
//! the lock.

use std::collections::BTreeMap;

use crate::block::{merged_tag, BState, Block, FreeKey, Slab, ANY_STREAM, LARGE, NIL, SMALL};
use crate::error::MemError;
use crate::fence::Fence;
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
}

pub(crate) struct Pending {
    pub block: u32,
    pub fences: Vec<Box<dyn Fence>>,
}

/// Mutable pool state.
pub(crate) struct State {
    pub blocks: Slab,
    pub segs: Vec<Option<SegRec>>,
    seg_vacant: Vec<u32>,
    /// Every live block (free, allocated, pending) by start address.
    pub by_addr: BTreeMap<usize, u32>,
    /// Free blocks per pool, by (stream tag, size, address).
    pub free: [BTreeMap<FreeKey, u32>; 2],
    any_free: [usize; 2],
    pub pending: Vec<Pending>,
    /// Bytes being mapped right now by threads that dropped the lock.
    pub in_flight: usize,
    /// Sum of `usable` over segments.
    pub reserved: usize,
    pub limit: Option<usize>,
    pub stats: PoolStats,
    pub max_split: usize,
    pub fixed: bool,
}

#[inline]
fn stat_idx(pool: usize) -> usize {
    if pool == SMALL {
        stats::SMALL_POOL
    } else {
        stats::LARGE_POOL
    }
}

impl State {
    pub fn new(max_split: usize, fixed: bool) -> State {
        State {
            blocks: Slab::default(),
            segs: Vec::new(),
            seg_vacant: Vec::new(),
            by_addr: BTreeMap::new(),
            free: [BTreeMap::new(), BTreeMap::new()],
            any_free: [0; 2],
            pending: Vec::new(),
            in_flight: 0,
            reserved: 0,
            limit: None,
            stats: PoolStats::default(),
            max_split,
            fixed,
        }
    }

    /// Pool serving a request of `size` (already rounded) bytes.
    #[inline]
    pub fn pool_for(&self, size: usize) -> usize {
        if !self.fixed && size <= SMALL_SIZE {
            SMALL
        } else {
            LARGE
        }
    }

    /// Puts free block `i` (not in a free list) into its free list, coalescing.
    pub fn insert_free(&mut self, i: u32) {
        self.merge_and_insert(i);
    }

    #[inline]
    fn free_insert(&mut self, i: u32) {
        let b = &self.blocks[i];
        let (pool, key) = (b.pool as usize, b.key());
        self.any_free[pool] += usize::from(key.0 == ANY_STREAM);
        self.free[pool].insert(key, i);
    }

    #[inline]
    fn free_remove(&mut self, i: u32) {
        let b = &self.blocks[i];
        let (pool, key) = (b.pool as usize, b.key());
        self.any_free[pool] -= usize::from(key.0 == ANY_STREAM);
        let removed = self.free[pool].remove(&key);
        debug_assert_eq!(removed, Some(i));
    }

    /// Best-fit free block for `stream` (its own free blocks or fully idle ones),
    /// removed from the free list. Applies torch's `max_split_size` rules.
    #[inline]
    pub fn take_free(&mut self, pool: usize, stream: u64, size: usize) -> Option<u32> {
        let map = &self.free[pool];
        let own = map
            .range((stream, size, 0)..=(stream, usize::MAX, usize::MAX))
            .next()
            .map(|(k, &i)| (k.1, i));
        let any = if self.any_free[pool] > 0 {
            map.range((ANY_STREAM, size, 0)..).next().map(|(k, &i)| (k.1, i))
        } else {
            None
        };
        let (bsize, i) = match (own, any) {
            (Some(a), Some(b)) if b.0 < a.0 => b,
            (Some(a), _) => a,
            (None, Some(b)) => b,
            (None, None) => return None,
        };
        // Oversize blocks (≥ max_split_size) serve only oversize requests, and only
        // when they waste less than LARGE_BUFFER.
        if size < self.max_split && bsize >= self.max_split {
            return None;
        }
        if size >= self.max_split && bsize - size >= LARGE_BUFFER {
            return None;
        }
        self.free_remove(i);
        Some(i)
    }

    #[inline]
    fn should_split(&self, pool: usize, bsize: usize, size: usize) -> bool {
        let rem = bsize - size;
        if self.fixed || pool == SMALL {
            rem >= MIN_BLOCK
        } else {
            size < self.max_split && rem > SMALL_SIZE
        }
    }

    /// Splits free block `i` (not in a free list) to `size` if worthwhile and hands it
    /// out to `stream`. Returns the address.
    #[inline]
    pub fn split_and_allocate(&mut self, i: u32, size: usize, requested: usize, stream: u64) -> usize {
        let b = &self.blocks[i];
        let pool = b.pool as usize;
        if self.should_split(pool, b.size, size) {
            let rem = Block {
                addr: b.addr + size,
                size: b.size - size,
                requested: 0,
                stream: b.stream,
                prev: i,
                next: b.next,
                seg: b.seg,
                pool: b.pool,
                state: BState::Free,
            };
            let (next, raddr) = (rem.next, rem.addr);
            let r = self.blocks.insert(rem);
            if next != NIL {
                self.blocks[next].prev = r;
            }
            let b = &mut self.blocks[i];
            b.next = r;
            b.size = size;
            self.by_addr.insert(raddr, r);
            self.free_insert(r);
        }
        let b = &mut self.blocks[i];
        b.state = BState::Allocated;
        b.stream = stream;
        b.requested = requested;
        let (addr, bsize) = (b.addr, b.size as u64);
        let s = &mut self.stats;
        let p = stat_idx(pool);
        stats::inc(&mut s.allocation, p, 1);
        stats::inc(&mut s.active, p, 1);
        stats::inc(&mut s.allocated_bytes, p, bsize);
        stats::inc(&mut s.active_bytes, p, bsize);
        stats::inc(&mut s.requested_bytes, p, requested as u64);
        addr
    }

    /// Block for `free(addr)`, or the typed error.
    pub fn find_for_free(&self, addr: usize) -> Result<u32, MemError> {
        if let Some(&i) = self.by_addr.get(&addr) {
            return match self.blocks[i].state {
                BState::Allocated => Ok(i),
                _ => Err(MemError::DoubleFree { addr }),
            };
        }
        let bad = |reason| MemError::InvalidPointer { addr, reason, during_free: true };
        match self.by_addr.range(..addr).next_back() {
            Some((_, &i)) if addr < self.blocks[i].end() => match self.blocks[i].state {
                BState::Allocated => Err(bad("interior pointer: not the start of an allocation")),
                _ => Err(MemError::DoubleFree { addr }),
            },
            _ => Err(bad("unknown address: not allocated by this pool")),
        }
    }

    /// Caller freed block `i`: update allocation stats, then free now or park it.
    #[inline]
    pub fn release_allocation(&mut self, i: u32, fences: Vec<Box<dyn Fence>>) {
        let b = &mut self.blocks[i];
        let (p, size, req) = (stat_idx(b.pool as usize), b.size as u64, b.requested as u64);
        b.requested = 0;
        let s = &mut self.stats;
        stats::dec(&mut s.allocation, p, 1);
        stats::dec(&mut s.allocated_bytes, p, size);
        stats::dec(&mut s.requested_bytes, p, req);
        let mut fences = fences;
        fences.retain(|f| !f.is_complete());
        if fences.is_empty() {
            self.free_block(i);
        } else {
            self.blocks[i].state = BState::Pending;
            self.pending.push(Pending { block: i, fences });
        }
    }

    /// Allocated/pending block `i` becomes free (tagged with its stream), coalesced.
    #[inline]
    fn free_block(&mut self, i: u32) {
        let b = &mut self.blocks[i];
        b.state = BState::Free;
        let (p, size) = (stat_idx(b.pool as usize), b.size as u64);
        stats::dec(&mut self.stats.active, p, 1);
        stats::dec(&mut self.stats.active_bytes, p, size);
        self.merge_and_insert(i);
    }

    /// Free block `i` (not in a free list) absorbs compatible free neighbours and is
    /// inserted into its free list. Returns the surviving slot.
    fn merge_and_insert(&mut self, mut i: u32) -> u32 {
        let prev = self.blocks[i].prev;
        if prev != NIL && self.blocks[prev].state == BState::Free {
            if let Some(tag) = merged_tag(self.blocks[prev].stream, self.blocks[i].stream) {
                self.free_remove(prev);
                self.absorb_next(prev, tag);
                i = prev;
            }
        }
        let next = self.blocks[i].next;
        if next != NIL && self.blocks[next].state == BState::Free {
            if let Some(tag) = merged_tag(self.blocks[i].stream, self.blocks[next].stream) {
                self.free_remove(next);
                self.absorb_next(i, tag);
            }
        }
        self.free_insert(i);
        i
    }

    /// Block `i` swallows its successor (neither is in a free list).
    fn absorb_next(&mut self, i: u32, tag: u64) {
        let n = self.blocks[i].next;
        let (nsize, nnext, naddr) = {
            let nb = &self.blocks[n];
            (nb.size, nb.next, nb.addr)
        };
        let b = &mut self.blocks[i];
        b.size += nsize;
        b.next = nnext;
        b.stream = tag;
        if nnext != NIL {
            self.blocks[nnext].prev = i;
        }
        self.by_addr.remove(&naddr);
        self.blocks.remove(n);
    }

    /// Polls pending frees; blocks whose fences all completed become free.
    pub fn process_pending(&mut self) {
        let mut k = 0;
        while k < self.pending.len() {
            let p = &mut self.pending[k];
            p.fences.retain(|f| !f.is_complete());
            if p.fences.is_empty() {
                let p = self.pending.swap_remove(k);
                self.free_block(p.block);
            } else {
                k += 1;
            }
        }
    }

    /// Free blocks tagged `stream` (or every stream when `None`) become usable by any
    /// stream: their stream's queued work is known to be done.
    pub fn mark_idle(&mut self, stream: Option<u64>) {
        let target = |t: u64| t != ANY_STREAM && stream.map_or(true, |s| s == t);
        for pool in [SMALL, LARGE] {
            let keys: Vec<FreeKey> = self.free[pool]
                .keys()
                .filter(|k| target(k.0))
                .copied()
                .collect();
            for k in keys {
                let Some(&first) = self.free[pool].get(&k) else {
                    continue; // absorbed by an earlier merge of this loop
                };
                let mut i = first;
                loop {
                    self.free_remove(i);
                    self.blocks[i].stream = ANY_STREAM;
                    i = self.merge_and_insert(i);
                    if !target(self.blocks[i].stream) {
                        break;
                    }
                }
            }
        }
    }

    /// Registers a fresh segment; returns its single block (free, tagged `ANY_STREAM`,
    /// NOT in a free list).
    pub fn add_segment(&mut self, seg: Segment, usable: usize, pool: usize, keep: bool) -> u32 {
        let (base, kind) = (seg.addr(), seg.page_kind());
        let rec = Some(SegRec { seg, usable, pool, keep });
        let si = match self.seg_vacant.pop() {
            Some(si) => {
                self.segs[si as usize] = rec;
                si
            }
            None => {
                self.segs.push(rec);
                (self.segs.len() - 1) as u32
            }
        };
        let bi = self.blocks.insert(Block {
            addr: base,
            size: usable,
            requested: 0,
            stream: ANY_STREAM,
            prev: NIL,
            next: NIL,
            seg: si,
            pool: pool as u8,
            state: BState::Free,
        });
        self.by_addr.insert(base, bi);
        let p = stat_idx(pool);
        stats::inc(&mut self.stats.segment, p, 1);
        stats::inc(&mut self.stats.reserved_bytes, p, usable as u64);
        self.stats.page_bytes[kind.index()] += usable as u64;
        self.stats.num_device_alloc += 1;
        self.reserved += usable;
        bi
    }

    /// Unregisters entirely free segments (skipping kept ones, and those still bound to
    /// a stream when `only_idle`) until `reserved <= target`; the mappings are pushed
    /// to `out` for the caller to drop outside the lock. Returns the bytes released.
    pub fn release_free_segments(&mut self, only_idle: bool, target: usize, out: &mut Vec<Segment>) -> usize {
        let mut released = 0;
        for si in 0..self.segs.len() {
            if self.reserved <= target {
                break;
            }
            let Some(rec) = &self.segs[si] else { continue };
            let (base, usable, pool, keep) = (rec.seg.addr(), rec.usable, rec.pool, rec.keep);
            let bi = self.by_addr[&base];
            let b = &self.blocks[bi];
            if keep || b.state != BState::Free || b.size != usable {
                continue;
            }
            if only_idle && b.stream != ANY_STREAM {
                continue;
            }
            self.free_remove(bi);
            self.by_addr.remove(&base);
            self.blocks.remove(bi);
            let rec = self.segs[si].take().expect("segment present");
            self.seg_vacant.push(si as u32);
            let p = stat_idx(pool);
            stats::dec(&mut self.stats.segment, p, 1);
            stats::dec(&mut self.stats.reserved_bytes, p, usable as u64);
            self.stats.page_bytes[rec.seg.page_kind().index()] -= usable as u64;
            self.stats.num_device_free += 1;
            self.reserved -= usable;
            released += usable;
            out.push(rec.seg);
        }
        released
    }

    /// Page kind of the segment holding block `i`.
    pub fn kind_of(&self, i: u32) -> PageKind {
        let si = self.blocks[i].seg as usize;
        self.segs[si].as_ref().map(|r| r.seg.page_kind()).unwrap_or(PageKind::Normal)
    }

    /// Size of the largest free cached block.
    pub fn largest_free(&self) -> usize {
        self.free.iter().flat_map(|m| m.keys().map(|k| k.1)).max().unwrap_or(0)
    }

    /// Statistics snapshot (the caller fills in config-derived fields).
    pub fn snapshot(&self) -> PoolStats {
        let mut s = self.stats.clone();
        s.pending_frees = self.pending.len() as u64;
        s.largest_free_block = self.largest_free() as u64;
        s.limit = self.limit.map(|l| l as u64);
        s.max_split_size = self.max_split as u64;
        s
    }

    /// Internal consistency check (tests): segment tiling, maps vs states, stats.
    pub fn check(&self) -> Result<(), String> {
        let mut allocated = 0usize;
        let mut reserved = 0usize;
        let mut nblocks = 0usize;
        for (si, rec) in self.segs.iter().enumerate() {
            let Some(rec) = rec else { continue };
            reserved += rec.usable;
            let mut i = *self.by_addr.get(&rec.seg.addr()).ok_or("segment start not in by_addr")?;
            let (mut expect, mut prev) = (rec.seg.addr(), NIL);
            loop {
                let b = &self.blocks[i];
                nblocks += 1;
                if b.addr != expect || b.prev != prev || b.seg as usize != si || b.state == BState::Dead {
                    return Err(format!("segment {si}: broken block chain at {:#x}", b.addr));
                }
                if b.size == 0 || b.size % MIN_BLOCK != 0 || b.addr % 64 != 0 {
                    return Err(format!("bad block size/alignment {:#x}+{}", b.addr, b.size));
                }
                if self.by_addr.get(&b.addr) != Some(&i) {
                    return Err(format!("block {:#x} missing from by_addr", b.addr));
                }
                let in_free = self.free[b.pool as usize].get(&b.key()) == Some(&i);
                if in_free != (b.state == BState::Free) {
                    return Err(format!("block {:#x} free-list membership wrong", b.addr));
                }
                if b.state == BState::Allocated {
                    allocated += b.size;
                }
                expect = b.end();
                prev = i;
                if b.next == NIL {
                    break;
                }
                i = b.next;
            }
            if expect != rec.seg.addr() + rec.usable || rec.usable > rec.seg.len() {
                return Err(format!("segment {si} not tiled by its blocks"));
            }
        }
        if nblocks != self.by_addr.len() {
            return Err("by_addr holds blocks outside segments".into());
        }
        let nfree: usize = self.free.iter().map(|m| m.len()).sum();
        let nany: usize = self.free.iter().map(|m| m.keys().filter(|k| k.0 == ANY_STREAM).count()).sum();
        if nany != self.any_free.iter().sum::<usize>() || nfree > nblocks {
            return Err("free-list counters wrong".into());
        }
        if allocated as u64 != self.stats.allocated_bytes[stats::ALL].current {
            return Err(format!("allocated {allocated} != stat {}", self.stats.allocated_bytes[0].current));
        }
        if reserved != self.reserved || reserved as u64 != self.stats.reserved_bytes[stats::ALL].current {
            return Err(format!("reserved {reserved} != {} / stat", self.reserved));
        }
        if self.stats.page_bytes.iter().sum::<u64>() != reserved as u64 {
            return Err("page_bytes do not add up to reserved".into());
        }
        Ok(())
    }
}
