//! Callgrind helper: N DeviceBuffer malloc+free pairs and N raw pool pairs.
use npurt_core::alloc;
use npurt_core::memory::PagePolicy;
use npurt_mem::{CachingPool, PoolConfig};
use std::hint::black_box;
const MIB: usize = 1 << 20;
fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let keep = alloc::malloc(MIB, PagePolicy::HugeFirst).unwrap();
    for _ in 0..n {
        let b = alloc::malloc(black_box(MIB), PagePolicy::HugeFirst).unwrap();
        drop(black_box(b));
    }
    let pool = CachingPool::new(PoolConfig::new(4 << 30)).unwrap();
    let _m = pool.alloc(MIB).unwrap();
    for _ in 0..n {
        let a = pool.alloc(black_box(MIB)).unwrap();
        pool.free(black_box(a)).unwrap();
    }
    drop(keep);
}
