//! Plain-data views of pool blocks and segments: [`BlockInfo`] (address lookups) and
//! [`SegmentSnapshot`] (torch's `memory_snapshot`).

use crate::page::PageKind;

/// What [`CachingPool::lookup`](crate::CachingPool::lookup) knows about an address inside a live allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Start of the allocation.
    pub base: usize,
    /// Bytes the caller asked for.
    pub size: usize,
    /// Bytes the block really holds (rounded to 512, ≥ `size`).
    pub allocated_size: usize,
    /// Page kind of the segment.
    pub page_kind: PageKind,
    /// `addr - base`.
    pub offset: usize,
}

/// What another process needs to map part of a shareable pool's segment
/// ([`CachingPool::share`](crate::CachingPool::share)).
#[derive(Debug)]
pub struct SharedRegion {
    /// A new descriptor of the segment's sealed memfd.
    pub fd: std::os::fd::OwnedFd,
    /// Offset of the mapping in the memfd (page aligned; 2 MiB for hugetlb).
    pub map_offset: usize,
    /// Bytes to map (whole pages covering the range).
    pub map_len: usize,
    /// Offset of the range's first byte inside that mapping.
    pub data_offset: usize,
    /// Page kind of the segment.
    pub page_kind: PageKind,
}

/// State of a block in a [`SegmentSnapshot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockStatus {
    /// Cached, reusable.
    Free,
    /// Handed out.
    Allocated,
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
    /// State.
    pub status: BlockStatus,
}

/// One segment, as [`CachingPool::snapshot`](crate::CachingPool::snapshot) reports it (torch's `memory_snapshot`).
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
