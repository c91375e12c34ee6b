//! Caching pool basics: reuse, split/merge, best fit, segment sizes, empty_cache, stats,
//! typed errors for bad pointers and sizes, ACL padding.

use npurt_mem::{acl_malloc_size, BlockStatus, MemError, PageKind};

mod common;

use common::{kv, pool, MIB};

#[test]
fn alloc_free_reuse_and_lookup() {
    let p = pool(64 * MIB);
    let a = p.alloc(1000).unwrap();
    assert_eq!(a % 512, 0);
    let info = p.lookup(a + 100).unwrap();
    assert_eq!(
        (info.base, info.size, info.allocated_size, info.offset),
        (a, 1000, 1024, 100)
    );
    assert_eq!(info.page_kind, PageKind::Normal);
    assert!(p.lookup(a + 1024).is_none(), "past the block (free remainder)");
    p.free(a).unwrap();
    assert!(p.lookup(a).is_none());
    assert_eq!(p.alloc(1000).unwrap(), a, "cached block reused");
    assert_eq!(kv(&p, "segment.all.current"), 1);
    assert_eq!(kv(&p, "reserved_bytes.small_pool.current"), 2 * MIB as u64);
    p.debug_check().unwrap();
}

#[test]
fn split_and_merge() {
    let p = pool(64 * MIB);
    let [a, b, c] = [0; 3].map(|_| p.alloc(1000).unwrap());
    assert_eq!((b - a, c - b), (1024, 1024), "carved from one segment");
    p.free(b).unwrap();
    let blocks = &p.snapshot()[0].blocks;
    assert_eq!(blocks.len(), 4);
    assert_eq!(
        (blocks[1].addr, blocks[1].size, blocks[1].status),
        (b, 1024, BlockStatus::Free)
    );
    p.free(a).unwrap();
    let blocks = &p.snapshot()[0].blocks;
    assert_eq!(
        (blocks[0].addr, blocks[0].size, blocks[0].status),
        (a, 2048, BlockStatus::Free)
    );
    p.free(c).unwrap();
    let seg = &p.snapshot()[0];
    assert_eq!(seg.blocks.len(), 1, "fully coalesced");
    assert_eq!(seg.blocks[0].size, 2 * MIB);
    p.debug_check().unwrap();
}

#[test]
fn best_fit() {
    let p = pool(64 * MIB);
    let mut holes = Vec::new();
    for size in [4096, 2048, 8192] {
        holes.push(p.alloc(size).unwrap());
        p.alloc(512).unwrap(); // separator
    }
    for &h in &holes {
        p.free(h).unwrap();
    }
    assert_eq!(p.alloc(2000).unwrap(), holes[1]);
    assert_eq!(p.alloc(3000).unwrap(), holes[0]);
    let big = p.alloc(5000).unwrap();
    assert_eq!(big, holes[2]);
    assert_eq!(p.lookup(big).unwrap().allocated_size, 5120, "split off the 8 KiB hole");
    p.debug_check().unwrap();
}

#[test]
fn large_pool_segment_sizes() {
    let p = pool(1 << 30);
    let a = p.alloc(5 * MIB).unwrap();
    assert_eq!(p.reserved_bytes(), 20 * MIB);
    let b = p.alloc(16 * MIB).unwrap(); // does not fit the 15 MiB remainder
    assert_eq!(p.reserved_bytes(), 36 * MIB);
    let c = p.alloc(19 * MIB).unwrap();
    assert_eq!(
        p.lookup(c).unwrap().allocated_size,
        20 * MIB,
        "1 MiB remainder is not split"
    );
    assert_eq!(p.reserved_bytes(), 56 * MIB);
    let d = p.alloc(MIB + 1).unwrap();
    assert_eq!(
        p.lookup(d).unwrap().base,
        a + 5 * MIB,
        "large requests share 20 MiB segments"
    );
    let s = p.stats();
    assert_eq!(s.segment[0].current, 3);
    assert_eq!(s.allocation[2].current, 4);
    assert_eq!(s.allocated_bytes[1].current, 0);
    for x in [a, b, c, d] {
        p.free(x).unwrap();
    }
    p.debug_check().unwrap();
}

#[test]
fn empty_cache_returns_segments() {
    let p = pool(1 << 30);
    let xs: Vec<usize> = [100, 2 * MIB, 700_000, 30 * MIB]
        .iter()
        .map(|&s| p.alloc(s).unwrap())
        .collect();
    let reserved = p.reserved_bytes();
    assert_eq!(p.mem_info(), ((1 << 30) - reserved, 1 << 30));
    p.free(xs[0]).unwrap();
    assert_eq!(p.empty_cache(), 0, "segment still holds xs[2]");
    for &x in &xs[1..] {
        p.free(x).unwrap();
    }
    assert_eq!(p.empty_cache(), reserved);
    let s = p.stats();
    assert_eq!((s.reserved_bytes[0].current, s.segment[0].current), (0, 0));
    assert_eq!(s.reserved_bytes[0].peak, reserved as u64);
    assert_eq!(p.mem_info().0, 1 << 30);
    p.reset_peak_stats();
    assert_eq!(p.stats().reserved_bytes[0].peak, 0);
}

#[test]
fn stats_add_up() {
    let p = pool(1 << 30);
    let a = p.alloc(100).unwrap();
    let b = p.alloc(3 * MIB).unwrap();
    let c = p.alloc(acl_malloc_size(1000).unwrap()).unwrap(); // 1056 bytes: a 1536-byte block
    let s = p.stats();
    let (all, small, large) = (s.allocated_bytes[0], s.allocated_bytes[1], s.allocated_bytes[2]);
    assert_eq!(small.current, 512 + 1536);
    assert_eq!(large.current, 3 * MIB as u64);
    assert_eq!(all.current, small.current + large.current);
    assert_eq!(s.requested_bytes[0].current, 100 + 3 * MIB as u64 + 1056);
    assert_eq!(s.allocation[0].current, 3);
    assert_eq!(s.active_bytes[0].current, all.current);
    assert_eq!(s.reserved_bytes[0].current, 22 * MIB as u64);
    assert_eq!(s.page_bytes.iter().sum::<u64>(), s.reserved_bytes[0].current);
    p.free(b).unwrap();
    let s = p.stats();
    assert_eq!(
        s.allocated_bytes[2],
        npurt_mem::Stat {
            current: 0,
            peak: 3 * MIB as u64,
            allocated: 3 * MIB as u64,
            freed: 3 * MIB as u64
        }
    );
    assert_eq!(s.largest_free_block, 20 * MIB as u64);
    let keys: Vec<String> = s.to_kv().into_iter().map(|(k, _)| k).collect();
    for k in [
        "allocated_bytes.all.current",
        "reserved_bytes.large_pool.peak",
        "num_alloc_retries",
        "num_ooms",
        "segment.all.current",
        "page_bytes.hugetlb",
        "page_bytes.thp",
        "page_bytes.normal",
        "active_bytes.small_pool.freed",
        "requested_bytes.all.allocated",
    ] {
        assert!(keys.iter().any(|x| x == k), "missing {k}");
    }
    let summary = p.summary();
    assert!(
        summary.contains("Reserved memory") && summary.contains("22.00 MiB"),
        "{summary}"
    );
    p.reset_accumulated_stats();
    assert_eq!(p.stats().allocated_bytes[0].allocated, 0);
    for x in [a, c] {
        p.free(x).unwrap();
    }
}

#[test]
fn bad_pointers_and_sizes_are_typed_errors() {
    let p = pool(64 * MIB);
    let a = p.alloc(4096).unwrap();
    let b = p.alloc(4096).unwrap();
    let e = p.free(a + 512).unwrap_err();
    assert!(matches!(e, MemError::InvalidPointer { during_free: true, .. }), "{e}");
    assert_eq!(e.code(), 207_002);
    assert_eq!(e.not_during_free().code(), 107_000);
    p.free(a).unwrap();
    assert!(matches!(p.free(a), Err(MemError::DoubleFree { .. })));
    p.free(b).unwrap();
    // a and b coalesced: a + 4096 is now inside a free block.
    assert!(matches!(p.free(b), Err(MemError::DoubleFree { .. })));
    let x = 0u64;
    let unknown = &x as *const u64 as usize;
    let e = p.free(unknown).unwrap_err();
    assert!(matches!(e, MemError::InvalidPointer { .. }));
    assert!(p.lookup(unknown).is_none());
    assert!(p.free(0).is_err());
    assert!(p.free(usize::MAX).is_err());
    for s in [0, usize::MAX, isize::MAX as usize + 1] {
        let e = p.alloc(s).unwrap_err();
        assert!(matches!(e, MemError::InvalidSize { .. }), "{s}: {e}");
        assert_eq!(e.code(), 107_000);
        assert!(acl_malloc_size(s).is_err());
    }
    assert!(matches!(
        p.alloc(isize::MAX as usize - 4096),
        Err(MemError::OutOfMemory { .. })
    ));
    let other = pool(64 * MIB);
    let o = other.alloc(512).unwrap();
    assert!(p.free(o).is_err(), "pointer of another pool");
    other.free(o).unwrap();
    p.debug_check().unwrap();
}

#[test]
fn acl_padding() {
    let p = pool(64 * MIB);
    let a = p.alloc(acl_malloc_size(480).unwrap()).unwrap();
    let b = p.alloc(acl_malloc_size(481).unwrap()).unwrap();
    assert_eq!(
        (p.lookup(a).unwrap().allocated_size, p.lookup(a).unwrap().size),
        (512, 512)
    );
    assert_eq!(p.lookup(b).unwrap().allocated_size, 1024);
    assert_eq!(a % 64, 0);
}

#[test]
fn deferred_frees_coalesce_before_best_fit() {
    let p = pool(64 * MIB);
    let [a, b] = [0; 2].map(|_| p.alloc(1024).unwrap());
    assert_eq!(b - a, 1024);
    // Freed blocks wait in the hot cache uncoalesced; a same-size request takes one back.
    p.free(a).unwrap();
    p.free(b).unwrap();
    p.debug_check().unwrap();
    assert_eq!(p.alloc(1024).unwrap(), b, "newest exact-size block reused");
    p.free(b).unwrap();
    // Any other size sees them merged with the segment's remainder: best fit is at `a`.
    assert_eq!(p.largest_free_block(), 2 * MIB);
    assert_eq!(p.alloc(2048).unwrap(), a);
    p.debug_check().unwrap();
    let blocks = &p.snapshot()[0].blocks;
    assert_eq!(blocks.len(), 2);
    assert_eq!((blocks[0].size, blocks[0].status), (2048, BlockStatus::Allocated));
}

#[test]
fn deferred_run_of_frees_merges_whole() {
    let p = pool(64 * MIB);
    let bufs: Vec<usize> = (0..12).map(|_| p.alloc(4096).unwrap()).collect();
    // More frees than the hot cache holds: evictions coalesce runs of deferred blocks.
    for &x in bufs.iter().rev() {
        p.free(x).unwrap();
        p.debug_check().unwrap();
    }
    let seg = &p.snapshot()[0];
    assert_eq!(seg.blocks.len(), 1, "fully coalesced");
    assert_eq!(p.empty_cache(), 2 * MIB);
    p.debug_check().unwrap();
}
