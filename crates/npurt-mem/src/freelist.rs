//! Free lists of the caching pool: per pool (small/large) an ordered map keyed by
//! (size, address) for best fit, fronted by a tiny "hot" cache of the most
//! recently freed blocks.
//!
//! The hot cache exists for speed: a block that is freed and re-allocated with the
//! same size (the common loop pattern) never touches the ordered map. Hot blocks are
//! logically part of the free list: best fit considers them, and they leave the cache
//! (into the map) when evicted by newer frees. The remainder split off a block also goes
//! to the cache.
//!
//! A freed block enters the cache *deferred*: not yet coalesced with its free
//! neighbours (`Block::deferred`). A request of exactly its size takes it back with no
//! split, merge or address-map update, so `malloc(n); free()` loops cost two cache
//! operations. Any other request first settles the cache (merges its deferred blocks,
//! see `State::settle`), so best fit always sees fully coalesced blocks; so does
//! eviction into the ordered map. Invariant: two adjacent free blocks that could merge
//! exist only while one of them is deferred.

use std::collections::BTreeMap;

use crate::block::{FreeKey, Slab};

/// Hot-cache entries per pool.
const HOT: usize = 8;

/// Most recently freed blocks of one pool, oldest first.
#[derive(Default, Debug)]
struct Hot {
    slots: [u32; HOT],
    len: usize,
}

impl Hot {
    #[inline]
    fn remove_at(&mut self, pos: usize) -> u32 {
        let i = self.slots[pos];
        // A plain loop: usually nothing to move (the newest entry is taken), and
        // `copy_within` would call memmove even then.
        for k in pos..self.len - 1 {
            self.slots[k] = self.slots[k + 1];
        }
        self.len -= 1;
        i
    }
}

/// See the module docs.
#[derive(Default, Debug)]
pub(crate) struct FreeLists {
    maps: [BTreeMap<FreeKey, u32>; 2],
    hot: [Hot; 2],
}

impl FreeLists {
    /// Inserts free block `i` into the ordered map.
    #[inline]
    pub(crate) fn insert(&mut self, blocks: &mut Slab, i: u32) {
        let b = &mut blocks[i];
        b.hot = false;
        self.maps[b.pool as usize].insert(b.key(), i);
    }

    /// Inserts free block `i` into the hot cache. When the cache is full its oldest
    /// entry leaves it and is returned (no longer listed anywhere: the caller inserts
    /// it into the map, coalescing it first if it is deferred).
    #[inline]
    #[must_use]
    pub(crate) fn insert_hot(&mut self, blocks: &mut Slab, i: u32) -> Option<u32> {
        let pool = blocks[i].pool as usize;
        let evicted = if self.hot[pool].len == HOT {
            let old = self.hot[pool].remove_at(0);
            blocks[old].hot = false;
            Some(old)
        } else {
            None
        };
        let h = &mut self.hot[pool];
        h.slots[h.len] = i;
        h.len += 1;
        blocks[i].hot = true;
        evicted
    }

    /// Takes the newest hot block of `pool` of exactly `size` bytes out of the cache
    /// (the allocation fast path; deferred blocks qualify).
    #[inline]
    pub(crate) fn take_hot_exact(&mut self, blocks: &mut Slab, pool: usize, size: usize) -> Option<u32> {
        let h = &mut self.hot[pool];
        let pos = h.slots[..h.len].iter().rposition(|&i| blocks[i].size == size)?;
        let i = h.remove_at(pos);
        blocks[i].hot = false;
        Some(i)
    }

    /// The hot cache of `pool`, oldest first (a copy: the caller may modify the lists).
    #[inline]
    pub(crate) fn hot_slots(&self, pool: usize) -> ([u32; HOT], usize) {
        (self.hot[pool].slots, self.hot[pool].len)
    }

    /// Removes free block `i` from wherever it is.
    #[inline]
    pub(crate) fn remove(&mut self, blocks: &mut Slab, i: u32) {
        let b = &mut blocks[i];
        let pool = b.pool as usize;
        if b.hot {
            b.hot = false;
            let h = &mut self.hot[pool];
            let pos = h.slots[..h.len]
                .iter()
                .position(|&s| s == i)
                .expect("hot block in cache");
            h.remove_at(pos);
        } else {
            let removed = self.maps[pool].remove(&b.key());
            debug_assert_eq!(removed, Some(i));
        }
    }

    /// Best-fit free block of `pool` for a request of `size`: the smallest block ≥
    /// `size`. Not removed.
    #[inline]
    pub(crate) fn best_fit(&self, blocks: &Slab, pool: usize, size: usize) -> Option<(usize, u32)> {
        let h = &self.hot[pool];
        let mut best: Option<(usize, u32)> = None;
        for &i in h.slots[..h.len].iter().rev() {
            let b = &blocks[i];
            if b.size >= size && beats(&best, b.size) {
                best = Some((b.size, i));
                if b.size == size {
                    return best;
                }
            }
        }
        match self.maps[pool].range((size, 0)..).next() {
            Some((k, &i)) if beats(&best, k.0) => Some((k.0, i)),
            _ => best,
        }
    }

    /// Size of the largest free block.
    pub(crate) fn largest(&self, blocks: &Slab) -> usize {
        let mapped = self.maps.iter().flat_map(|m| m.keys().map(|k| k.0));
        let hot = self
            .hot
            .iter()
            .flat_map(|h| h.slots[..h.len].iter().map(|&i| blocks[i].size));
        mapped.chain(hot).max().unwrap_or(0)
    }

    /// Whether free block `i` is listed (consistency checks).
    pub(crate) fn contains(&self, blocks: &Slab, i: u32) -> bool {
        let b = &blocks[i];
        let pool = b.pool as usize;
        let h = &self.hot[pool];
        let in_hot = h.slots[..h.len].contains(&i);
        let in_map = self.maps[pool].get(&b.key()) == Some(&i);
        in_hot == b.hot && (in_hot != in_map)
    }

    /// Number of listed blocks.
    pub(crate) fn audit(&self) -> usize {
        self.maps.iter().map(|m| m.len()).sum::<usize>() + self.hot.iter().map(|h| h.len).sum::<usize>()
    }
}

/// `best` is empty or holds a larger block than `size`.
#[inline]
fn beats(best: &Option<(usize, u32)>, size: usize) -> bool {
    match best {
        None => true,
        Some((s, _)) => *s > size,
    }
}
