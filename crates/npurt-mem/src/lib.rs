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
//! ## Stream-ordered free contract
//!
//! The pool knows streams only as opaque `u64` ids (`u64::MAX` is reserved) and device
//! progress only through [`Fence`]s.
//!
//! * A block is allocated for a stream `S`. Work queued on `S` runs in order, so a
//!   block freed by `S` may be handed to the *next allocation on `S`* at once.
//! * `free(addr, fences)`: `fences` must cover every queued use of the block on
//!   streams **other than `S`** (torch's `record_stream`). With no (or only completed)
//!   fences the block goes straight to `S`'s free list. Otherwise it is *pending* and
//!   joins `S`'s free list once every fence reports complete. Pending frees are polled
//!   at the start of every allocation, in `empty_cache`, before giving up with
//!   OutOfMemory, and by [`CachingPool::process_pending`].
//! * A free block tagged `S` may only be reused by allocations on `S`, because queued
//!   work on `S` may still touch it. It becomes usable by **any** stream when the
//!   caller declares `S` drained ([`CachingPool::mark_stream_idle`] after a stream
//!   synchronize, [`CachingPool::mark_all_idle`] after a device synchronize). Fresh
//!   segment memory is usable by any stream. Allocations on `T` pick the best fit
//!   among `T`'s own free blocks and the idle ones. Free neighbours coalesce when their
//!   tags agree or one is idle (the result stays bound to the non-idle stream).
//! * Unmapping: `empty_cache` and the release-and-retry step before OutOfMemory unmap
//!   entirely free segments. They first call the configured [`SyncHook`] (a device
//!   synchronize) if there is one; **without a hook the pool assumes that freed memory
//!   is idle** when it unmaps it, so a caller with asynchronous streams must either
//!   install a hook or synchronize before `empty_cache`. The gc threshold only
//!   releases segments known to be idle when a hook is installed.
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::sync::Arc;
//! use npurt_mem::{acl_malloc_size, CachingPool, PoolConfig};
//!
//! let pool = CachingPool::new(PoolConfig::new(1 << 30)).unwrap();
//! let n = acl_malloc_size(1000).unwrap(); // aclrtMalloc(1000): 1056 bytes
//! let a = pool.alloc(n, 1).unwrap(); // stream 1
//! assert_eq!(pool.lookup(a + 10).unwrap().base, a);
//! // Stream 2 also read the buffer: fence that use when freeing.
//! let stream2_done = Arc::new(AtomicBool::new(false));
//! pool.free(a, vec![Box::new(stream2_done.clone())]).unwrap();
//! let b = pool.alloc(n, 1).unwrap();
//! assert_ne!(a, b, "a is pending until the fence completes");
//! stream2_done.store(true, Ordering::Release);
//! assert_eq!(pool.alloc(n, 1).unwrap(), a);
//! assert!(pool.free(a + 64, vec![]).is_err()); // interior pointer: typed error
//! ```
//!
//! Bad pointers never cause UB: `free` of an unknown, interior or already freed
//! address returns [`MemError::InvalidPointer`] / [`MemError::DoubleFree`] (ACL code
//! 207002), and [`CachingPool::lookup`] resolves interior pointers or returns `None`.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod active;
pub mod align;
mod block;
mod check;
mod coalesce;
mod config;
pub mod error;
mod fence;
mod freelist;
mod grow;
mod host;
mod info;
mod lifecycle;
pub mod page;
mod pinned;
mod pool;
mod segment;
mod state;
pub mod stats;

pub use align::{acl_malloc, acl_malloc_align32_size, acl_malloc_size, acl_policy};
pub use block::ANY_STREAM;
pub use config::{PoolConfig, SegmentEvent, SegmentObserver, SyncHook};
pub use error::{human_bytes, MemError};
pub use fence::{Completed, Fence};
pub use host::HostAlloc;
pub use info::{BlockInfo, BlockSnapshot, BlockStatus, SegmentSnapshot};
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
