//! `NPURT_HUGEPAGES` is honoured by `Segment::map`, `map_shared` and pools without an
//! explicit mode. One test function only: it changes the process environment.

use npurt_mem::{thp_enabled, CachingPool, MemError, PageKind, PagePolicy, PoolConfig, Segment};

const MIB: usize = 1 << 20;

#[test]
fn env_override_switches_rungs() {
    std::env::set_var("NPURT_HUGEPAGES", "off");
    let e = Segment::map(4 * MIB, PagePolicy::HugeOnly).unwrap_err();
    assert!(matches!(e, MemError::HugePagesUnavailable { .. }));
    assert_eq!(
        Segment::map(4 * MIB, PagePolicy::HugeFirst).unwrap().page_kind(),
        PageKind::Normal
    );
    assert_eq!(Segment::map_shared(4 * MIB).unwrap().page_kind(), PageKind::Normal);
    // torch-style 20 MiB large segments, so that `b` below shares `a`'s segment.
    let pool = CachingPool::new(PoolConfig {
        large_segment: Some(20 * MIB),
        ..PoolConfig::new(64 * MIB)
    })
    .unwrap();
    let a = pool.alloc(5 * MIB).unwrap();
    assert_eq!(pool.lookup(a).unwrap().page_kind, PageKind::Normal);
    assert_eq!(pool.stats().page_bytes_of(PageKind::Normal), 20 * MIB as u64);

    std::env::set_var("NPURT_HUGEPAGES", "thp");
    let s = Segment::map(4 * MIB, PagePolicy::HugeFirst).unwrap();
    let want = if thp_enabled() { PageKind::Thp } else { PageKind::Normal };
    assert_eq!(s.page_kind(), want);
    let b = pool.alloc(5 * MIB + 1).unwrap();
    assert_eq!(pool.lookup(b).unwrap().page_kind, PageKind::Normal, "same segment as a");
    let c = pool.alloc(30 * MIB).unwrap();
    assert_eq!(pool.lookup(c).unwrap().page_kind, want);

    std::env::set_var("NPURT_HUGEPAGES", "bogus");
    assert!(Segment::map(4 * MIB, PagePolicy::HugeFirst).is_ok());
    std::env::remove_var("NPURT_HUGEPAGES");
}
