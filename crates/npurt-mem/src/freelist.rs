//! Free lists of the caching pool: per pool (small/large) an ordered map keyed by
//! (stream tag, size, address) for best fit, fronted by a tiny "hot" cache of the most
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

use crate::block::{FreeKey, Slab, ANY_STREAM};

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
    /// Entries tagged `ANY_STREAM` in each map (lets best fit skip a range query).
    any: [usize; 2],
    hot: [Hot; 2],
}

impl FreeLists {
    /// Inserts free block `i` into the ordered map.
    #[inline]
    pub(crate) fn insert(&mut self, blocks: &mut Slab, i: u32) {
        let b = &mut blocks[i];
        b.hot = false;
        let (pool, key) = (b.pool as usize, b.key());
        self.any[pool] += usize::from(key.0 == ANY_STREAM);
        self.maps[pool].insert(key, i);
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

    /// Takes the newest hot block of `pool` of exactly `size` bytes usable by `stream`
    /// out of the cache (the allocation fast path; deferred blocks qualify).
    #[inline]
    pub(crate) fn take_hot_exact(&mut self, blocks: &mut Slab, pool: usize, stream: u64, size: usize) -> Option<u32> {
        let h = &mut self.hot[pool];
        let pos = h.slots[..h.len].iter().rposition(|&i| {
            let b = &blocks[i];
            b.size == size && (b.stream == stream || b.stream == ANY_STREAM)
        })?;
        let i = h.remove_at(pos);
        blocks[i].hot = false;
        Some(i)
    }

    /// The hot cache of `pool`, oldest first (a copy: the caller may modify the lists).
    #[inline]
    pub(crate) fn hot_slots(&self, pool: usize) -> ([u32; HOT], usize) {
        (self.hot[pool].slots, self.hot[pool].len)
    }

    /// Takes the oldest hot block of `pool` out of the cache.
    pub(crate) fn pop_hot(&mut self, blocks: &mut Slab, pool: usize) -> Option<u32> {
        if self.hot[pool].len == 0 {
            return None;
        }
        let i = self.hot[pool].remove_at(0);
        blocks[i].hot = false;
        Some(i)
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
            let key = b.key();
            self.any[pool] -= usize::from(key.0 == ANY_STREAM);
            let removed = self.maps[pool].remove(&key);
            debug_assert_eq!(removed, Some(i));
        }
    }

    /// Best-fit free block of `pool` for a request of `size` on `stream`: the smallest
    /// block ≥ `size` tagged `stream` or `ANY_STREAM`. Not removed.
    #[inline]
    pub(crate) fn best_fit(&self, blocks: &Slab, pool: usize, stream: u64, size: usize) -> Option<(usize, u32)> {
        let h = &self.hot[pool];
        let mut best: Option<(usize, u32)> = None;
        for &i in h.slots[..h.len].iter().rev() {
            let b = &blocks[i];
            if b.size >= size && (b.stream == stream || b.stream == ANY_STREAM) && beats(&best, b.size) {
                best = Some((b.size, i));
                if b.size == size {
                    return best;
                }
            }
        }
        let map = &self.maps[pool];
        let own = map
            .range((stream, size, 0)..=(stream, usize::MAX, usize::MAX))
            .next()
            .map(|(k, &i)| (k.1, i));
        let any = if self.any[pool] > 0 {
            map.range((ANY_STREAM, size, 0)..).next().map(|(k, &i)| (k.1, i))
        } else {
            None
        };
        for c in [own, any].into_iter().flatten() {
            if beats(&best, c.0) {
                best = Some(c);
            }
        }
        best
    }

    /// Keys of the ordered map of `pool` whose tag satisfies `pred` (flush
    /// the hot cache first to see every free block).
    pub(crate) fn keys_where(&self, pool: usize, pred: impl Fn(u64) -> bool) -> Vec<FreeKey> {
        self.maps[pool].keys().filter(|k| pred(k.0)).copied().collect()
    }

    /// Block of an ordered-map key.
    pub(crate) fn get(&self, pool: usize, key: &FreeKey) -> Option<u32> {
        self.maps[pool].get(key).copied()
    }

    /// Size of the largest free block.
    pub(crate) fn largest(&self, blocks: &Slab) -> usize {
        let mapped = self.maps.iter().flat_map(|m| m.keys().map(|k| k.1));
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

    /// Number of listed blocks, and whether the `ANY_STREAM` counters are right.
    pub(crate) fn audit(&self) -> (usize, bool) {
        let n = self.maps.iter().map(|m| m.len()).sum::<usize>() + self.hot.iter().map(|h| h.len).sum::<usize>();
        let any_ok = (0..2).all(|p| self.maps[p].keys().filter(|k| k.0 == ANY_STREAM).count() == self.any[p]);
        (n, any_ok)
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
