//! Fragmentation check: a dynamic-shape inference loop (float32 images 3x224x224,
//! 3x640x640, 3x480x480) for 10,000 steps with a few long-lived buffers. Reports
//! peak reserved / peak allocated, with no OOM while the device has room.
//!
//! With torch's 20 MiB large-pool segments the ratio is about 1.39: the working set
//! (~50 MiB) is small against the segment size, so segment granularity dominates. npurt's
//! default maps request-sized (page-rounded) large segments, mappings being cheap on the
//! CPU, and unmaps entirely free cached segments before growing past its peak footprint
//! (`PoolConfig::trim_before_growth`): about 1.13 on the test's seed, with about 50
//! segments mapped in 10,000 steps. One seed can be lucky, so a second test replays ten
//! more seeds and asserts the median and the worst case (measured: median 1.12, worst
//! 1.14; without trimming 1.17 / 1.20; with 2 MiB-rounded segments 1.32 / 1.49 over 30
//! seeds).

use npurt_mem::{CachingPool, PagePolicy, PoolConfig};

const MIB: usize = 1 << 20;
const SHAPES: [usize; 3] = [3 * 224 * 224 * 4, 3 * 640 * 640 * 4, 3 * 480 * 480 * 4];

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Returns (peak allocated, peak reserved).
fn replay(pool: &CachingPool, steps: usize, seed: u64) -> (u64, u64) {
    let mut rng = Rng(seed);
    // Long-lived: "weights" and a workspace allocated up front.
    let long: Vec<usize> = [24 * MIB, 3 * MIB, 600_000, 8192]
        .iter()
        .map(|&s| pool.alloc(s).unwrap())
        .collect();
    let mut carry: Vec<usize> = Vec::new();
    for step in 0..steps {
        let shape = SHAPES[rng.below(3)];
        // Input, a few activations of the input's size, one downsampled output.
        let mut live = vec![pool.alloc(shape).unwrap()];
        for _ in 0..1 + rng.below(3) {
            live.push(pool.alloc(shape).unwrap());
            // Activations die in varying order as the graph executes.
            if live.len() > 2 && rng.below(2) == 0 {
                let victim = 1 + rng.below(live.len() - 1);
                pool.free(live.swap_remove(victim)).unwrap();
            }
        }
        live.push(pool.alloc(shape / 4).unwrap());
        // The output outlives the step (e.g. kept for post-processing) for a while.
        carry.push(live.pop().unwrap());
        if carry.len() > 2 {
            pool.free(carry.remove(rng.below(carry.len()))).unwrap();
        }
        while !live.is_empty() {
            let victim = rng.below(live.len());
            pool.free(live.swap_remove(victim)).unwrap();
        }
        if step % 1000 == 999 {
            pool.debug_check().unwrap();
        }
    }
    for a in carry.into_iter().chain(long) {
        pool.free(a).unwrap();
    }
    let s = pool.stats();
    (s.allocated_bytes[0].peak, s.reserved_bytes[0].peak)
}

#[test]
fn dynamic_shapes_fragmentation() {
    let pool = CachingPool::new(PoolConfig {
        policy: PagePolicy::NormalOnly,
        ..PoolConfig::new(1 << 30)
    })
    .unwrap();
    let (alloc_peak, reserved_peak) = replay(&pool, 10_000, 0x5EED);
    let ratio = reserved_peak as f64 / alloc_peak as f64;
    let s = pool.stats();
    eprintln!(
        "fragmentation: peak allocated {:.1} MiB, peak reserved {:.1} MiB, ratio {ratio:.3}, \
         segments mapped {}, retries {}, ooms {}",
        alloc_peak as f64 / MIB as f64,
        reserved_peak as f64 / MIB as f64,
        s.num_device_alloc,
        s.num_alloc_retries,
        s.num_ooms
    );
    assert_eq!(s.num_ooms, 0);
    assert!(
        s.num_device_alloc <= 150,
        "trimming churns: {} segments mapped",
        s.num_device_alloc
    );
    assert!(
        ratio <= 1.25,
        "reserved/allocated peak ratio {ratio:.3} is above the 1.25 target (expected about 1.13)"
    );
}

#[test]
fn fragmentation_over_many_seeds() {
    let mut ratios: Vec<f64> = (1..=10u64)
        .map(|seed| {
            let pool = CachingPool::new(PoolConfig {
                policy: PagePolicy::NormalOnly,
                ..PoolConfig::new(1 << 30)
            })
            .unwrap();
            let (a, r) = replay(&pool, 2_000, seed * 0x9E37 + 0x5EED);
            assert_eq!(pool.stats().num_ooms, 0);
            r as f64 / a as f64
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let median = (ratios[4] + ratios[5]) / 2.0;
    eprintln!("fragmentation over 10 seeds: {ratios:.3?}, median {median:.3}");
    assert!(
        median <= 1.2,
        "median reserved/peak ratio {median:.3} above 1.2: {ratios:.3?}"
    );
    assert!(
        ratios[9] <= 1.3,
        "worst reserved/peak ratio {:.3} above 1.3: {ratios:.3?}",
        ratios[9]
    );
}

#[test]
fn tight_device_does_not_oom_while_memory_is_free() {
    // Probe the peak first, then replay on a device with 25% headroom over that peak.
    let probe = CachingPool::new(PoolConfig::new(1 << 30)).unwrap();
    let (alloc_peak, _) = replay(&probe, 2_000, 7);
    let cap = alloc_peak as usize * 5 / 4;
    let pool = CachingPool::new(PoolConfig {
        policy: PagePolicy::NormalOnly,
        ..PoolConfig::new(cap)
    })
    .unwrap();
    let (_, reserved_peak) = replay(&pool, 2_000, 7);
    let s = pool.stats();
    eprintln!(
        "tight device {:.1} MiB: peak reserved {:.1} MiB, retries {}, ooms {}",
        cap as f64 / MIB as f64,
        reserved_peak as f64 / MIB as f64,
        s.num_alloc_retries,
        s.num_ooms
    );
    assert_eq!(s.num_ooms, 0);
    assert!(reserved_peak as usize <= cap);
}
