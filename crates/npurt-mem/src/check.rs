//! Consistency checks of the pool state (used by tests through
//! `CachingPool::debug_check`).

use crate::block::{BState, NIL};
use crate::state::{State, MIN_BLOCK};
use crate::stats;

impl State {
    /// Verifies: segments are tiled by their block chains, the address maps and free
    /// lists agree with block states, and the statistics add up.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut allocated = 0usize;
        let mut reserved = 0usize;
        let mut nblocks = 0usize;
        let mut nfree = 0usize;
        for (si, rec) in self.segs.iter().enumerate() {
            let Some(rec) = rec else { continue };
            reserved += rec.usable;
            if self.seg_by_base.get(&rec.seg.addr()) != Some(&(si as u32)) {
                return Err(format!("segment {si} missing from seg_by_base"));
            }
            let mut i = rec.first;
            let (mut expect, mut prev) = (rec.seg.addr(), NIL);
            loop {
                let b = &self.blocks[i];
                nblocks += 1;
                if b.addr != expect || b.prev != prev || b.seg as usize != si || b.state == BState::Dead {
                    return Err(format!("segment {si}: broken block chain at {:#x}", b.addr));
                }
                if b.size == 0 || b.size & (MIN_BLOCK - 1) != 0 || b.addr & 63 != 0 {
                    return Err(format!("bad block size/alignment {:#x}+{}", b.addr, b.size));
                }
                if self.starts.get(&b.addr) != Some(&i) {
                    return Err(format!("block {:#x} missing from starts", b.addr));
                }
                match b.state {
                    BState::Free => {
                        nfree += 1;
                        if !self.free.contains(&self.blocks, i) {
                            return Err(format!("free block {:#x} not listed exactly once", b.addr));
                        }
                    }
                    BState::Allocated => allocated += b.size,
                    BState::Dead => {}
                }
                if b.state != BState::Free && b.hot {
                    return Err(format!("non-free block {:#x} flagged hot", b.addr));
                }
                if b.deferred && !b.hot {
                    return Err(format!("deferred block {:#x} outside the hot cache", b.addr));
                }
                if prev != NIL {
                    let p = &self.blocks[prev];
                    let mergeable = p.state == BState::Free && b.state == BState::Free;
                    if mergeable && !p.deferred && !b.deferred {
                        return Err(format!("free blocks {:#x} and {:#x} not coalesced", p.addr, b.addr));
                    }
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
        if nblocks != self.starts.len() {
            return Err("starts holds blocks outside segments".into());
        }
        let listed = self.free.audit();
        if listed != nfree {
            return Err(format!("free lists hold {listed} blocks, {nfree} free blocks exist"));
        }
        if allocated as u64 != self.stats.allocated_bytes[stats::ALL].current {
            return Err(format!(
                "allocated {allocated} != stat {}",
                self.stats.allocated_bytes[0].current
            ));
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
