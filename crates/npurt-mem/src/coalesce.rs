//! Coalescing in the caching pool's state: freed blocks enter the hot cache deferred
//! (not yet merged with their free neighbours); merging happens when a request of another
//! size, an eviction or a flush needs it (see `freelist.rs` for the bet this makes).

use crate::block::{BState, LARGE, NIL, SMALL};
use crate::state::State;

impl State {
    /// Allocated block `i` becomes free and enters
    /// the hot cache deferred: coalescing waits until a request needs it (freelist.rs).
    #[inline]
    pub(crate) fn free_block(&mut self, i: u32) {
        let b = &mut self.blocks[i];
        b.state = BState::Free;
        b.deferred = true;
        self.push_hot(i);
    }

    /// Puts free block `i` (not in a free list) into the hot cache; the entry that makes
    /// room goes to the ordered map, coalesced first if it was deferred.
    #[inline]
    pub(crate) fn push_hot(&mut self, i: u32) {
        if let Some(old) = self.free.insert_hot(&mut self.blocks, i) {
            if self.blocks[old].deferred {
                self.merge_and_insert(old, false);
            } else {
                self.free.insert(&mut self.blocks, old);
            }
        }
    }

    /// Coalesces the deferred blocks of `pool`'s hot cache (they stay hot).
    pub(crate) fn settle(&mut self, pool: usize) {
        let (slots, len) = self.free.hot_slots(pool);
        for &i in &slots[..len] {
            // Skip entries an earlier merge of this loop absorbed, evicted or settled.
            let b = &self.blocks[i];
            if b.state == BState::Free && b.hot && b.deferred {
                self.free.remove(&mut self.blocks, i);
                self.merge_and_insert(i, true);
            }
        }
    }

    /// Coalesces every deferred block (both pools).
    pub(crate) fn settle_all(&mut self) {
        self.settle(SMALL);
        self.settle(LARGE);
    }

    /// Free block `i` (not in a free list) absorbs every free neighbour (a
    /// run of them when deferred blocks are involved) and is inserted into its free list
    /// (the hot cache if `hot`). Returns the surviving slot.
    pub(crate) fn merge_and_insert(&mut self, mut i: u32, hot: bool) -> u32 {
        loop {
            let prev = self.blocks[i].prev;
            if prev == NIL || self.blocks[prev].state != BState::Free {
                break;
            }
            self.free.remove(&mut self.blocks, prev);
            self.absorb_next(prev);
            i = prev;
        }
        loop {
            let next = self.blocks[i].next;
            if next == NIL || self.blocks[next].state != BState::Free {
                break;
            }
            self.free.remove(&mut self.blocks, next);
            self.absorb_next(i);
        }
        self.blocks[i].deferred = false;
        if hot {
            self.push_hot(i);
        } else {
            self.free.insert(&mut self.blocks, i);
        }
        i
    }

    /// Block `i` swallows its successor (neither is in a free list).
    fn absorb_next(&mut self, i: u32) {
        let n = self.blocks[i].next;
        let (nsize, nnext, naddr) = {
            let nb = &self.blocks[n];
            (nb.size, nb.next, nb.addr)
        };
        let b = &mut self.blocks[i];
        b.size += nsize;
        b.next = nnext;
        if nnext != NIL {
            self.blocks[nnext].prev = i;
        }
        self.starts.remove(&naddr);
        self.blocks.remove(n);
    }

    /// Size of the largest free cached block, counting each deferred block as the block
    /// it will coalesce into (reading it changes nothing).
    pub(crate) fn largest_free(&self) -> usize {
        let mut largest = self.free.largest(&self.blocks);
        for pool in [SMALL, LARGE] {
            let (slots, len) = self.free.hot_slots(pool);
            for &i in &slots[..len] {
                if self.blocks[i].deferred {
                    largest = largest.max(self.free_run(i));
                }
            }
        }
        largest
    }

    /// Bytes of the free block that coalescing free block `i` would make: the run of
    /// adjacent free blocks around it.
    fn free_run(&self, i: u32) -> usize {
        let mut size = self.blocks[i].size;
        for forward in [false, true] {
            let mut j = i;
            loop {
                let b = &self.blocks[j];
                let n = if forward { b.next } else { b.prev };
                if n == NIL || self.blocks[n].state != BState::Free {
                    break;
                }
                size += self.blocks[n].size;
                j = n;
            }
        }
        size
    }
}
