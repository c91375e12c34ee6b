//! Helpers shared by the pool's integration tests.
#![allow(dead_code)]

use npurt_mem::{CachingPool, PagePolicy, PoolConfig};

pub const MIB: usize = 1 << 20;

/// A growable normal-page pool with torch's 20 MiB large segments.
pub fn pool(capacity: usize) -> CachingPool {
    CachingPool::new(PoolConfig {
        policy: PagePolicy::NormalOnly,
        large_segment: Some(20 << 20),
        trim_before_growth: false,
        ..PoolConfig::new(capacity)
    })
    .unwrap()
}

/// One statistic by its torch-style key.
pub fn kv(p: &CachingPool, key: &str) -> u64 {
    p.stats()
        .to_kv()
        .into_iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no {key}"))
        .1
}
