//! What the shared status region costs an allocation: 1 MiB and 4 KiB malloc+free pairs
//! through `memory::malloc_on` on a device attached to its region against a process-private
//! device, in the same run (the ratio is the figure; the absolute times move with the
//! machine's load). A cached pair pays one relaxed add and one relaxed sub on the process's
//! slot; mapping a segment (not measured here: the pool caches) pays one CAS.
//! Run with `cargo bench -p npurt-core --bench shared_micro`.

use npurt_core::memory::{self, DeviceMemory, PagePolicy};
use npurt_core::{alloc, registry, shared, Config};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

/// Best of 7 rounds, alternating the two devices round by round.
fn pairs(mems: [&Arc<DeviceMemory>; 2], n: usize, iters: usize) -> [f64; 2] {
    let mut best = [f64::INFINITY; 2];
    for _ in 0..7 {
        for (i, mem) in mems.iter().enumerate() {
            let t = Instant::now();
            for _ in 0..iters {
                let b = memory::malloc_on(mem, black_box(n), PagePolicy::HugeFirst).unwrap();
                drop(black_box(b));
            }
            best[i] = best[i].min(t.elapsed().as_nanos() as f64 / iters as f64);
        }
    }
    best
}

fn main() -> Result<(), npurt_core::Error> {
    registry::configure(Config {
        device_count: 2,
        ..Config::from_env()?
    })?;
    shared::set_enabled(true);
    registry::set_device(0)?;
    let with = alloc::device_memory(0)?;
    shared::set_enabled(false);
    registry::set_device(1)?;
    let without = alloc::device_memory(1)?;
    assert!(with.is_shared() && !without.is_shared(), "{:?}", shared::attach_error());
    let _keep = [
        memory::malloc_on(&with, 1 << 20, PagePolicy::HugeFirst)?,
        memory::malloc_on(&without, 1 << 20, PagePolicy::HugeFirst)?,
    ];
    for (n, label) in [(1 << 20, "1 MiB"), (4096, "4 KiB")] {
        let [a, b] = pairs([&with, &without], n, 200_000);
        println!(
            "{label} malloc+free: shared region {a:6.1} ns/pair, private {b:6.1} ns/pair, ratio {:.3}",
            a / b
        );
    }
    Ok(())
}
