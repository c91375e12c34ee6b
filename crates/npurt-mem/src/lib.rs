//! # npurt-mem: the memory layer of npurt
//!
//! npurt emulates an Ascend NPU (AscendCL `aclrt*` semantics) on the CPU; "device
//! memory" is host memory obtained from `mmap`. This crate has three layers:
//!
//! 1. **Pages** ([`page`], [`Segment`]): a huge-page ladder. [`PagePolicy::HugeFirst`]
//!    tries hugetlb (`MAP_HUGETLB`), then transparent huge pages (2 MiB aligned +
//!    `MADV_HUGEPAGE`), then normal pages; requests of ≤ 1 MiB use normal pages.
//!    [`PagePolicy::HugeOnly`] fails with [`MemError::HugePagesUnavailable`] instead of
//!    falling back; [`PagePolicy::NormalOnly`] never uses huge pages. Every segment
//!    records the [`PageKind`] it got. `NPURT_HUGEPAGES=off|thp|hugetlb|auto` switches
//!    rungs off ([`HugePageMode`]). [`Segment::map_shared`] gives a memfd-backed
//!    segment whose fd can be exported to another process.
//! 2. **Caching pool** ([`CachingPool`]): torch's CUDA/NPU caching-allocator rules:
//!    512-byte rounding, a small pool (≤ 1 MiB, 2 MiB segments) and a large pool
//!    (request-sized, page-rounded segments by default — less fragmentation than torch's
//!    20 MiB segments for requests up to 10 MiB, which `PoolConfig::large_segment`
//!    restores), best fit, split, coalescing,
//!    `max_split_size`, release of cached segments and retry before OutOfMemory, a
//!    quota, `empty_cache`, gc threshold, torch-named statistics. Reserved bytes never
//!    exceed the configured capacity. [`CachingPool::fixed`] is a pre-mapped pool that
//!    never grows (AscendCL `MemPool`). The 1 MiB threshold of the ladder applies to
//!    segment sizes, so under `HugeFirst` even the small pool's 2 MiB segments get THP.
//! 3. **Pinned host memory** ([`HostAlloc`], [`PinnedPool`]): `mlock`ed host buffers,
//!    cached by power-of-two size class.
//!
//! [`align`] has the AscendCL size and policy rules ([`acl_malloc`]: `aclrtMalloc` takes
//! `round_up(n, 32) + 32` bytes, `aclrtMemMallocPolicy` → [`PagePolicy`]); the pool's
//! `alloc` does not pad: the runtime's ACL front pads with [`acl_malloc`] first.
//!
//! ## Free contract
//!
//! The pool knows nothing of streams. npurt-core frees a block only once no queued work
//! uses it (a `DeviceBuffer` is an `Arc` that queued copies and kernels clone, so the
//! last of them returns it), so every free block is idle for every stream and may be
//! handed to any allocation, coalesced with any free neighbour and unmapped by
//! `empty_cache`, gc or the release-and-retry step before OutOfMemory. (torch's
//! `record_stream` fences and per-stream free lists exist because a CUDA pointer has no
//! owner; npurt's buffers do.)
//!
//! ```
//! use npurt_mem::{acl_malloc_size, CachingPool, PoolConfig};
//!
//! let pool = CachingPool::new(PoolConfig::new(1 << 30)).unwrap();
//! let n = acl_malloc_size(1000).unwrap(); // aclrtMalloc(1000): 1056 bytes
//! let a = pool.alloc(n).unwrap();
//! assert_eq!(pool.lookup(a + 10).unwrap().base, a);
//! pool.free(a).unwrap();
//! assert_eq!(pool.alloc(n).unwrap(), a, "the freed block is reused");
//! assert!(pool.free(a + 64).is_err()); // interior pointer: typed error
//! ```
//!
//! Bad pointers never cause UB: `free` of an unknown, interior or already freed
//! address returns [`MemError::InvalidPointer`] / [`MemError::DoubleFree`] (ACL code
//! 207002), and [`CachingPool::lookup`] resolves interior pointers or returns `None`.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod align;
mod block;
mod check;
mod coalesce;
mod config;
pub mod error;
mod freelist;
mod grow;
mod host;
mod info;
mod lifecycle;
mod memfd;
pub mod page;
mod pinned;
mod pool;
mod segment;
mod state;
pub mod stats;

pub use align::{acl_malloc, acl_malloc_align32_size, acl_malloc_size, acl_policy};
pub use config::{PoolConfig, ReserveGate, SegmentEvent, SegmentObserver};
pub use error::{human_bytes, MemError};
pub use host::HostAlloc;
pub use info::{BlockInfo, BlockSnapshot, BlockStatus, SegmentSnapshot, SharedRegion};
pub use memfd::SHARE_SEALS;
pub use page::{
    smaps_anon_huge_bytes, smaps_rss_bytes, thp_enabled, thp_mode, HugePageMode, PageKind, PagePolicy, ThpMode,
    HUGEPAGES_ENV,
};
pub use pinned::{PinnedInfo, PinnedPool, PinnedStats};
pub use pool::CachingPool;
pub use segment::Segment;
pub use state::{LARGE_BUFFER, MIN_BLOCK, MIN_LARGE_ALLOC, ROUND_LARGE, SMALL_BUFFER, SMALL_SIZE};
pub use stats::{PoolStats, Stat, StatArray};

/// Result type of this crate.
pub type Result<T, E = MemError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_are_send_and_sync() {
        send_sync::<crate::CachingPool>();
        send_sync::<crate::PinnedPool>();
        send_sync::<crate::Segment>();
        send_sync::<crate::HostAlloc>();
        send_sync::<crate::MemError>();
    }
}
