//! Block records of the caching pool, kept in a slab (a `Vec` with a free list of
//! slots) so the hot path never heap-allocates per block.

/// "No block" in `prev`/`next` links.
pub(crate) const NIL: u32 = u32::MAX;

/// Index of the small pool in per-pool arrays.
pub(crate) const SMALL: usize = 0;
/// Index of the large pool in per-pool arrays.
pub(crate) const LARGE: usize = 1;

/// Lifecycle of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BState {
    /// In a free list.
    Free,
    /// Handed out to a caller.
    Allocated,
    /// Slot not in use (absorbed by a merge or released).
    Dead,
}

/// One block: a contiguous piece of a segment. Blocks of a segment form a doubly linked
/// list in address order.
#[derive(Clone, Debug)]
pub(crate) struct Block {
    pub addr: usize,
    /// Block size (multiple of 512).
    pub size: usize,
    /// Bytes the caller asked for (0 while free).
    pub requested: usize,
    pub prev: u32,
    pub next: u32,
    /// Slot of the owning segment.
    pub seg: u32,
    /// `SMALL` or `LARGE`.
    pub pool: u8,
    pub state: BState,
    /// Free and held in the free lists' hot cache (not in the ordered map).
    pub hot: bool,
    /// Hot and not yet coalesced with its free neighbours (see `freelist.rs`).
    pub deferred: bool,
}

/// Free-list key: ordered by (size, address), so a range query from `(size, 0)` yields
/// the best fit.
pub(crate) type FreeKey = (usize, usize);

impl Block {
    #[inline]
    pub(crate) fn key(&self) -> FreeKey {
        (self.size, self.addr)
    }

    #[inline]
    pub(crate) fn end(&self) -> usize {
        self.addr + self.size
    }
}

/// Slab of blocks.
#[derive(Default, Debug)]
pub(crate) struct Slab {
    blocks: Vec<Block>,
    vacant: Vec<u32>,
}

impl Slab {
    #[inline]
    pub(crate) fn insert(&mut self, b: Block) -> u32 {
        if let Some(i) = self.vacant.pop() {
            self.blocks[i as usize] = b;
            i
        } else {
            let i = u32::try_from(self.blocks.len()).expect("fewer than 2^32 blocks");
            assert!(i != NIL, "block slab full");
            self.blocks.push(b);
            i
        }
    }

    #[inline]
    pub(crate) fn remove(&mut self, i: u32) {
        self.blocks[i as usize].state = BState::Dead;
        self.vacant.push(i);
    }

    /// Live (non-dead) blocks with their slot.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &Block)> {
        self.blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.state != BState::Dead)
            .map(|(i, b)| (i as u32, b))
    }
}

impl std::ops::Index<u32> for Slab {
    type Output = Block;
    #[inline]
    fn index(&self, i: u32) -> &Block {
        &self.blocks[i as usize]
    }
}

impl std::ops::IndexMut<u32> for Slab {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut Block {
        &mut self.blocks[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(addr: usize) -> Block {
        Block {
            addr,
            size: 512,
            requested: 0,
            prev: NIL,
            next: NIL,
            seg: 0,
            pool: SMALL as u8,
            state: BState::Free,
            hot: false,
            deferred: false,
        }
    }

    #[test]
    fn slab_reuses_slots() {
        let mut s = Slab::default();
        let a = s.insert(blk(0));
        let b = s.insert(blk(512));
        s.remove(a);
        assert_eq!(s.iter().count(), 1);
        let c = s.insert(blk(1024));
        assert_eq!(c, a);
        assert_eq!(s[b].end(), 1024);
        assert_eq!(s[c].key(), (512, 1024));
    }
}

/// Hasher for block start addresses (multiplicative mix, high bits folded down so
/// that 2 MiB-aligned addresses spread over the table).
#[derive(Default, Clone, Copy)]
pub(crate) struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        let x = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 29);
    }
}

/// Block start → slot, for every live block.
pub(crate) type AddrMap = std::collections::HashMap<usize, u32, std::hash::BuildHasherDefault<AddrHasher>>;
