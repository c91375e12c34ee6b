//! Caching pool limits: capacity, OOM (typed, recoverable), release-and-retry, quota,
//! fixed pools, max_split_size, gc threshold, sync hook.

use npurt_mem::{CachingPool, MemError, PagePolicy, PoolConfig};

mod common;

use common::{kv, pool, MIB};

#[test]
fn capacity_is_never_exceeded_and_oom_is_typed() {
    let p = pool(50 * MIB);
    let mut live = Vec::new();
    let err = loop {
        match p.alloc(3 * MIB) {
            Ok(a) => live.push(a),
            Err(e) => break e,
        }
        assert!(p.reserved_bytes() <= 50 * MIB);
    };
    assert_eq!(err.code(), 207_001);
    match &err {
        MemError::OutOfMemory {
            requested,
            limit,
            allocated,
            reserved,
            what,
            ..
        } => {
            assert_eq!(
                (*requested, *limit, what.as_str()),
                (3 * MIB, 50 * MIB, "device capacity")
            );
            // Blocks may be larger than 3 MiB when carved from tight segments.
            assert!(*allocated >= live.len() * 3 * MIB && allocated <= reserved);
            assert!(*reserved <= 50 * MIB);
        }
        e => panic!("unexpected {e}"),
    }
    assert!(err.to_string().contains("empty_cache"));
    assert_eq!(p.stats().num_ooms, 1);
    // Still usable.
    p.free(live.pop().unwrap()).unwrap();
    live.push(p.alloc(3 * MIB).unwrap());
    assert!(p.alloc(100 * MIB).is_err(), "larger than the device");
    for a in live {
        p.free(a).unwrap();
    }
    p.debug_check().unwrap();
}

#[test]
fn releases_cached_segments_before_oom() {
    let p = pool(40 * MIB);
    let a = p.alloc(5 * MIB).unwrap();
    p.free(a).unwrap();
    assert_eq!(p.reserved_bytes(), 20 * MIB);
    let b = p.alloc(30 * MIB).unwrap();
    let s = p.stats();
    assert_eq!((s.num_alloc_retries, s.num_ooms, s.num_device_free), (1, 0, 1));
    assert_eq!(p.reserved_bytes(), 30 * MIB);
    p.free(b).unwrap();
}

#[test]
fn tight_device_uses_smaller_segments() {
    let p = pool(8 * MIB);
    let a = p.alloc(5 * MIB).unwrap(); // a 20 MiB segment cannot fit
    assert_eq!(p.reserved_bytes(), 6 * MIB);
    let b = p.alloc(MIB).unwrap(); // small pool: 2 MiB segment
    assert_eq!(p.reserved_bytes(), 8 * MIB);
    for x in [a, b] {
        p.free(x).unwrap();
    }
}

#[test]
fn quota() {
    let p = pool(1 << 30);
    p.set_limit(Some(30 * MIB));
    let a = p.alloc(5 * MIB).unwrap();
    let err = p.alloc(16 * MIB).unwrap_err();
    match &err {
        MemError::OutOfMemory { limit, what, .. } => {
            assert_eq!((*limit, what.as_str()), (30 * MIB, "quota"))
        }
        e => panic!("unexpected {e}"),
    }
    assert!(p.alloc(4096).is_ok(), "small allocations still fit");
    p.set_limit(None);
    let b = p.alloc(16 * MIB).unwrap();
    assert_eq!(p.limit(), None);
    for x in [a, b] {
        p.free(x).unwrap();
    }
}

#[test]
fn fixed_pool_never_grows() {
    let p = CachingPool::fixed(8 * MIB + 100, PagePolicy::HugeFirst).unwrap();
    assert!(p.is_fixed());
    assert_eq!(p.reserved_bytes(), 8 * MIB);
    let a = p.alloc(100).unwrap();
    assert_eq!(p.mem_info(), (8 * MIB + 100 - 512, 8 * MIB + 100));
    let b = p.alloc(5 * MIB).unwrap();
    let e = p.alloc(3 * MIB).unwrap_err();
    assert!(
        matches!(&e, MemError::OutOfMemory { what, .. } if what == "pool"),
        "{e}"
    );
    let c = p.alloc(2 * MIB).unwrap();
    for x in [a, b, c] {
        p.free(x).unwrap();
    }
    assert_eq!(p.empty_cache(), 0);
    assert_eq!(p.reserved_bytes(), 8 * MIB);
    assert_eq!(p.alloc(8 * MIB).unwrap(), a, "fully coalesced");
    p.debug_check().unwrap();
    assert!(CachingPool::fixed(100, PagePolicy::NormalOnly).is_err());
}

#[test]
fn max_split_size_rules() {
    let cfg = PoolConfig {
        policy: PagePolicy::NormalOnly,
        max_split_size: 32 * MIB,
        large_segment: Some(20 << 20),
        trim_before_growth: false, // torch's behaviour: the 40 MiB block stays cached
        ..PoolConfig::new(1 << 30)
    };
    let p = CachingPool::new(cfg).unwrap();
    let big = p.alloc(40 * MIB).unwrap();
    p.free(big).unwrap();
    let small = p.alloc(10 * MIB).unwrap();
    assert_ne!(
        p.lookup(small).unwrap().base,
        big,
        "oversize block not split for a small request"
    );
    assert_ne!(p.alloc(70 * MIB).unwrap(), big, "wastes too much");
    let b2 = p.alloc(38 * MIB).unwrap();
    assert_eq!(b2, big);
    assert_eq!(p.lookup(b2).unwrap().allocated_size, 40 * MIB);
    assert_eq!(kv(&p, "max_split_size"), 32 * MIB as u64);
}

#[test]
fn gc_threshold_releases_cached_segments() {
    let cfg = PoolConfig {
        policy: PagePolicy::NormalOnly,
        gc_threshold: Some(0.5),
        large_segment: Some(20 << 20),
        trim_before_growth: false, // gc alone decides what is released
        ..PoolConfig::new(100 * MIB)
    };
    let p = CachingPool::new(cfg).unwrap();
    let xs: Vec<usize> = (0..3).map(|_| p.alloc(20 * MIB).unwrap()).collect();
    assert_eq!(p.reserved_bytes(), 60 * MIB);
    for x in xs {
        p.free(x).unwrap();
    }
    let y = p.alloc(25 * MIB).unwrap();
    let s = p.stats();
    assert_eq!(s.num_device_free, 1);
    assert_eq!(p.reserved_bytes(), 66 * MIB);
    p.free(y).unwrap();
    assert!(CachingPool::new(PoolConfig {
        gc_threshold: Some(1.5),
        large_segment: Some(20 << 20),
        ..PoolConfig::new(MIB)
    })
    .is_err());
}

#[test]
fn trims_free_segments_before_growing_past_the_peak() {
    let cfg = |trim| PoolConfig {
        policy: PagePolicy::NormalOnly,
        trim_before_growth: trim,
        ..PoolConfig::new(1 << 30)
    };
    for trim in [true, false] {
        let p = CachingPool::new(cfg(trim)).unwrap();
        // Three 3 MiB segments, all freed: cached, each too small for 8 MiB.
        let small: Vec<usize> = (0..3).map(|_| p.alloc(3 * MIB).unwrap()).collect();
        for a in small {
            p.free(a).unwrap();
        }
        assert_eq!(p.reserved_bytes(), 9 * MIB);
        let big = p.alloc(8 * MIB).unwrap();
        let s = p.stats();
        if trim {
            // 8 MiB fits under the 9 MiB peak once the free segments are gone.
            assert_eq!((p.reserved_bytes(), s.num_device_free), (8 * MIB, 3));
            assert_eq!(s.reserved_bytes[0].peak, 9 * MIB as u64);
        } else {
            assert_eq!((p.reserved_bytes(), s.num_device_free), (17 * MIB, 0));
        }
        // Below the peak nothing is trimmed: a 3 MiB request maps next to the cache.
        let again = p.alloc(MIB + 1).unwrap();
        assert_eq!(p.stats().num_device_free, if trim { 3 } else { 0 });
        p.free(big).unwrap();
        p.free(again).unwrap();
        p.debug_check().unwrap();
    }
}
