//! Micro-benchmark of the memory API from Rust: 1 MiB malloc+free pairs through
//! `npurt_core::memory` (current device) and through the raw caching pool, and 64 MiB
//! copies (H2D and D2H from pinned memory) against a plain slice copy.
//! Run with `cargo bench -p npurt-core --bench memory_micro`.

use npurt_core::alloc;
use npurt_core::memory::{self, PagePolicy};
use npurt_mem::{CachingPool, PoolConfig};
use std::hint::black_box;
use std::time::Instant;

const MIB: usize = 1 << 20;

/// Best of 5 rounds (the machine is shared: the minimum is the least disturbed figure).
fn ns_per(iters: usize, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn gbps(bytes: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm (first touch)
    let s = ns_per(10, f);
    bytes as f64 / s
}

fn main() -> Result<(), npurt_core::Error> {
    let keep = alloc::malloc(MIB, PagePolicy::HugeFirst)?; // a live neighbour
    let buf = ns_per(200_000, || {
        let b = alloc::malloc(black_box(MIB), PagePolicy::HugeFirst).unwrap();
        drop(black_box(b));
    });
    let mem = alloc::current_memory()?;
    let on = ns_per(200_000, || {
        let b = memory::malloc_on(&mem, black_box(MIB), PagePolicy::HugeFirst).unwrap();
        drop(black_box(b));
    });
    let pool = CachingPool::new(PoolConfig::new(4 << 30)).unwrap();
    let _n = pool.alloc(npurt_mem::acl_malloc_size(MIB).unwrap()).unwrap();
    let raw = ns_per(200_000, || {
        let a = pool.alloc(npurt_mem::acl_malloc_size(black_box(MIB)).unwrap()).unwrap();
        pool.free(black_box(a)).unwrap();
    });
    let _m = pool.alloc(MIB).unwrap();
    let unpadded = ns_per(200_000, || {
        let a = pool.alloc(black_box(MIB)).unwrap();
        pool.free(black_box(a)).unwrap();
    });
    println!("1 MiB malloc+free, DeviceBuffer (current device): {buf:7.1} ns/pair");
    println!("1 MiB malloc_on+free, DeviceBuffer (given device): {on:7.1} ns/pair");
    println!("1 MiB alloc+free, raw CachingPool (alloc_acl)    : {raw:7.1} ns/pair");
    println!("1 MiB alloc+free, raw CachingPool (alloc, no pad): {unpadded:7.1} ns/pair");

    let n = 64 * MIB;
    let host = memory::malloc_host(n)?;
    let dev = alloc::malloc(n, PagePolicy::HugeFirst)?;
    memory::memset(&host, 1, None)?;
    let h2d = gbps(n, || {
        memory::memcpy(&dev, &host, None).unwrap();
    });
    let d2h = gbps(n, || {
        memory::memcpy(&host, &dev, None).unwrap();
    });
    let (a, mut b) = (vec![1u8; n], vec![0u8; n]);
    let plain = gbps(n, || {
        black_box(&mut b).copy_from_slice(black_box(&a));
        black_box(&b);
    });
    println!("64 MiB H2D pinned: {h2d:5.1} GB/s, D2H pinned: {d2h:5.1} GB/s, slice copy: {plain:5.1} GB/s");
    drop(keep);
    Ok(())
}
