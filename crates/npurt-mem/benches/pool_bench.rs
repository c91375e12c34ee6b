//! Micro-benchmark: cached alloc+free pairs vs raw mmap+munmap, and first-touch cost
//! of THP vs normal pages. Run with
//! `cargo bench -p npurt-mem --bench pool_bench`.

use std::hint::black_box;
use std::time::Instant;

use npurt_mem::{smaps_anon_huge_bytes, CachingPool, HugePageMode, PagePolicy, PoolConfig, Segment};

const MIB: usize = 1 << 20;

/// Best of 5 rounds of `iters / 5` calls (the machine is shared: the minimum is the
/// least disturbed figure).
fn ns_per(iters: usize, f: impl FnMut()) -> f64 {
    let mut f = f;
    let n = (iters / 5).max(1);
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn pool() -> CachingPool {
    CachingPool::new(PoolConfig::new(4 << 30)).expect("pool")
}

fn main() {
    let iters = 2_000_000;

    // 1. Exact fit from the cache: a free 1 MiB block whose neighbour is allocated.
    let p = pool();
    let a = p.alloc(MIB).unwrap();
    let _b = p.alloc(MIB).unwrap();
    p.free(a).unwrap();
    let exact = ns_per(iters, || {
        let x = p.alloc(black_box(MIB)).unwrap();
        p.free(black_box(x)).unwrap();
    });

    // 2. Split + coalesce every time: two sizes alternate, so no freed block fits the next
    // request exactly; each request coalesces the previous free, then splits again.
    let p2 = pool();
    let x = p2.alloc(4 * MIB).unwrap();
    p2.free(x).unwrap();
    let mut k = 0usize;
    let split = ns_per(iters, || {
        k += 1;
        let x = p2.alloc(black_box(if k % 2 == 0 { 4 * MIB } else { 3 * MIB })).unwrap();
        p2.free(black_box(x)).unwrap();
    });

    // 3. Same with 100 other live blocks in the pool (bigger maps).
    let p3 = pool();
    let live: Vec<usize> = (0..100).map(|i| p3.alloc(512 * (i + 1)).unwrap()).collect();
    let busy = ns_per(iters, || {
        let x = p3.alloc(black_box(MIB)).unwrap();
        p3.free(black_box(x)).unwrap();
    });
    drop(live);

    // 4. Raw mmap + munmap of 1 MiB (untouched, like the pool's hand-out).
    let raw_iters = 100_000;
    let raw = ns_per(raw_iters, || {
        let s = Segment::map_with(black_box(MIB), PagePolicy::NormalOnly, HugePageMode::Off).unwrap();
        black_box(s.ptr());
    });

    println!("alloc+free 1 MiB, exact fit from cache : {exact:7.1} ns/pair");
    println!("alloc+free 3/4 MiB, split + coalesce     : {split:7.1} ns/pair");
    println!("alloc+free 1 MiB, 100 live blocks        : {busy:7.1} ns/pair");
    println!("raw mmap+munmap 1 MiB                    : {raw:7.1} ns/pair");
    println!("ratio raw / pool (exact fit)             : {:7.1}x", raw / exact);
    println!("ratio raw / pool (split + coalesce)      : {:7.1}x", raw / split);

    // 5. Two threads hammering one pool (contended mutex).
    let p4 = pool();
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 {
            let p4 = &p4;
            s.spawn(move || {
                for _ in 0..iters / 4 {
                    let x = p4.alloc(black_box(MIB)).unwrap();
                    p4.free(x).unwrap();
                }
            });
        }
    });
    let contended = t.elapsed().as_nanos() as f64 / (iters / 2) as f64;
    println!("2 threads, wall time per pair            : {contended:7.1} ns/pair");

    // 6. First touch of 512 MiB: THP vs normal pages. Each kind runs twice: on a VM
    // the very first touch of guest memory also pays the hypervisor's faults.
    for round in 1..=2 {
        for (name, policy, mode) in [
            ("thp   ", PagePolicy::HugeFirst, HugePageMode::Thp),
            ("normal", PagePolicy::NormalOnly, HugePageMode::Off),
        ] {
            let seg = Segment::map_with(512 * MIB, policy, mode).unwrap();
            let t = Instant::now();
            let mut off = 0;
            while off < seg.len() {
                // SAFETY: off < seg.len() and the segment is a live RW mapping we own.
                unsafe { seg.ptr().add(off).write_volatile(1) };
                off += 4096;
            }
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let huge = smaps_anon_huge_bytes(seg.addr(), seg.len()).unwrap_or(0);
            println!(
                "first touch 512 MiB, round {round}, {name} (kind {:>6}): {ms:7.1} ms, AnonHugePages {} MiB",
                seg.page_kind().as_str(),
                huge / MIB
            );
        }
    }
}
