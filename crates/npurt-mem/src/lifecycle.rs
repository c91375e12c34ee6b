//! Segment lifecycle inside the pool state: registering fresh segments and
//! unregistering entirely free ones (the caller unmaps them outside the lock).

use crate::block::{BState, Block, LARGE, NIL};
use crate::config::SegmentEvent;
use crate::page::PageKind;
use crate::segment::Segment;
use crate::state::{stat_idx, SegRec, State};
use crate::stats;

impl State {
    /// Registers a fresh segment; returns its single block (free, NOT in a free list).
    pub(crate) fn add_segment(&mut self, seg: Segment, usable: usize, pool: usize, keep: bool) -> u32 {
        let (base, kind) = (seg.addr(), seg.page_kind());
        let rec = Some(SegRec {
            seg,
            usable,
            pool,
            keep,
            first: NIL,
        });
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
            prev: NIL,
            next: NIL,
            seg: si,
            pool: pool as u8,
            state: BState::Free,
            hot: false,
            deferred: false,
        });
        self.starts.insert(base, bi);
        self.seg_by_base.insert(base, si);
        if let Some(rec) = self.segs[si as usize].as_mut() {
            rec.first = bi;
        }
        let p = stat_idx(pool);
        stats::inc(&mut self.stats.segment, p, 1);
        stats::inc(&mut self.stats.reserved_bytes, p, usable as u64);
        self.stats.page_bytes[kind.index()] += usable as u64;
        self.stats.num_device_alloc += 1;
        self.reserved += usable;
        self.tell_segment(true, base, usable, kind, pool);
        bi
    }

    /// Tells the segment observer, if any, about a segment added or released.
    #[inline]
    pub(crate) fn tell_segment(&self, mapped: bool, addr: usize, size: usize, page_kind: PageKind, pool: usize) {
        if let (false, Some(g)) = (mapped, &self.gate) {
            g.release(size);
        }
        if let Some(f) = &self.on_segment {
            f(&SegmentEvent {
                mapped,
                addr,
                size,
                page_kind,
                large: pool == LARGE,
            });
        }
    }

    /// Unregisters entirely free segments (skipping kept ones) until `reserved <=
    /// target`; the mappings are pushed to `out` for the caller to drop outside the
    /// lock. Returns the bytes released.
    pub(crate) fn release_free_segments(&mut self, target: usize, out: &mut Vec<Segment>) -> usize {
        let mut released = 0;
        for si in 0..self.segs.len() {
            if self.reserved <= target {
                break;
            }
            let Some(rec) = &self.segs[si] else { continue };
            let (base, usable, pool, keep, first) = (rec.seg.addr(), rec.usable, rec.pool, rec.keep, rec.first);
            if keep {
                continue;
            }
            // Entirely free: every block free (a deferred block may not have merged
            // with its neighbours yet, so there may be several).
            let mut j = first;
            while j != NIL {
                let b = &self.blocks[j];
                if b.state != BState::Free {
                    break;
                }
                j = b.next;
            }
            if j != NIL {
                continue;
            }
            let mut j = first;
            while j != NIL {
                let (next, addr) = (self.blocks[j].next, self.blocks[j].addr);
                self.free.remove(&mut self.blocks, j);
                self.starts.remove(&addr);
                self.blocks.remove(j);
                j = next;
            }
            self.seg_by_base.remove(&base);
            let rec = self.segs[si].take().expect("segment present");
            self.seg_vacant.push(si as u32);
            let p = stat_idx(pool);
            stats::dec(&mut self.stats.segment, p, 1);
            stats::dec(&mut self.stats.reserved_bytes, p, usable as u64);
            self.stats.page_bytes[rec.seg.page_kind().index()] -= usable as u64;
            self.stats.num_device_free += 1;
            self.reserved -= usable;
            released += usable;
            self.tell_segment(false, base, usable, rec.seg.page_kind(), pool);
            out.push(rec.seg);
        }
        released
    }
}

impl Drop for State {
    /// The pool is going away: its remaining segments unmap now.
    fn drop(&mut self) {
        if self.on_segment.is_some() || self.gate.is_some() {
            for rec in self.segs.iter().flatten() {
                self.tell_segment(false, rec.seg.addr(), rec.usable, rec.seg.page_kind(), rec.pool);
            }
        }
    }
}
