//! Randomized invariant test (seeded xorshift, reproducible): random alloc / free /
//! empty_cache / quota changes, checking after
//! every step that live blocks never overlap, statistics match the live set, reserved
//! bytes equal the sum of segments and never exceed the capacity, OOM only happens when
//! no segment could fit, and everything is returned at the end.

use std::collections::BTreeMap;

use npurt_mem::{BlockStatus, CachingPool, MemError, PagePolicy, PoolConfig};

const MIB: usize = 1 << 20;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn size(rng: &mut Rng, cap: usize) -> usize {
    match rng.below(100) {
        0..=59 => 1 + rng.below(64 << 10),
        60..=84 => (64 << 10) + rng.below(2 * MIB),
        _ => 2 * MIB + rng.below(cap / 3),
    }
}

fn check(p: &CachingPool, live: &BTreeMap<usize, usize>, cap: usize) {
    p.debug_check().unwrap();
    let s = p.stats();
    let sum: usize = live.values().sum();
    assert_eq!(s.allocated_bytes[0].current as usize, sum);
    assert_eq!(s.allocation[0].current as usize, live.len());
    assert!(s.reserved_bytes[0].current as usize <= cap);
}

fn run(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let cap = [24, 64, 200][seed as usize % 3] * MIB;
    let cfg = PoolConfig {
        policy: if seed & 1 == 0 {
            PagePolicy::NormalOnly
        } else {
            PagePolicy::HugeFirst
        },
        max_split_size: if seed % 4 == 1 { 24 * MIB } else { usize::MAX },
        large_segment: Some(20 << 20),
        ..PoolConfig::new(cap)
    };
    let p = CachingPool::new(cfg).unwrap();
    let mut live: BTreeMap<usize, usize> = BTreeMap::new();
    let mut limit = cap;
    for step in 0..400 {
        match rng.below(100) {
            0..=54 => {
                let n = size(&mut rng, cap);
                match p.alloc(n) {
                    Ok(a) => {
                        let info = p.lookup(a).unwrap();
                        assert_eq!((info.base, info.size), (a, n));
                        let end = a + info.allocated_size;
                        assert!(a % 512 == 0 && info.allocated_size >= n);
                        if let Some((&b, &bs)) = live.range(..a).next_back() {
                            assert!(b + bs <= a, "seed {seed} step {step}: overlap below");
                        }
                        if let Some((&b, _)) = live.range(a..).next() {
                            assert!(end <= b, "seed {seed} step {step}: overlap above");
                        }
                        live.insert(a, info.allocated_size);
                    }
                    Err(MemError::OutOfMemory { .. }) => {
                        // Only when even a tight segment cannot be mapped after the
                        // pool released its free segments.
                        let tight = (n + 4095) & !4095;
                        assert!(
                            p.reserved_bytes() + tight > limit,
                            "seed {seed} step {step}: spurious OOM for {n} (reserved {}, limit {limit})",
                            p.reserved_bytes()
                        );
                    }
                    Err(e) => panic!("unexpected {e}"),
                }
            }
            55..=89 if !live.is_empty() => {
                let k = *live.keys().nth(rng.below(live.len())).unwrap();
                live.remove(&k);
                p.free(k).unwrap();
                assert!(p.free(k).is_err());
            }
            90..=94 => {
                p.empty_cache();
                for seg in p.snapshot() {
                    let whole_free = seg.blocks.iter().all(|b| b.status == BlockStatus::Free);
                    assert!(!whole_free, "empty_cache left an entirely free segment");
                }
            }
            95..=99 => {
                let l = if rng.below(2) == 0 {
                    None
                } else {
                    Some(cap / 2 + rng.below(cap / 2))
                };
                limit = l.unwrap_or(cap);
                p.set_limit(l);
            }
            _ => {}
        }
        check(&p, &live, cap);
        if step % 25 == 0 {
            // Deferred frees count as the blocks they coalesce into; the snapshot coalesces.
            let largest = p.largest_free_block();
            let snap = p.snapshot();
            let free = snap
                .iter()
                .flat_map(|s| &s.blocks)
                .filter(|b| b.status == BlockStatus::Free);
            assert_eq!(free.map(|b| b.size).max().unwrap_or(0), largest);
            let total: usize = snap.iter().map(|s| s.size).sum();
            assert_eq!(total, p.reserved_bytes());
            let allocated = snap
                .iter()
                .flat_map(|s| &s.blocks)
                .filter(|b| b.status == BlockStatus::Allocated)
                .count();
            assert_eq!(allocated, live.len());
        }
    }
    for (&a, _) in live.iter() {
        p.free(a).unwrap();
    }
    p.empty_cache();
    let s = p.stats();
    assert_eq!(s.reserved_bytes[0].current, 0, "seed {seed}");
    assert_eq!(
        (
            s.allocated_bytes[0].current,
            s.active_bytes[0].current,
            s.segment[0].current
        ),
        (0, 0, 0)
    );
    assert_eq!(s.requested_bytes[0].current, 0);
    assert_eq!(s.page_bytes, [0; 3]);
    p.debug_check().unwrap();
}

#[test]
fn random_sequences_keep_invariants() {
    for seed in 1..=128 {
        run(seed);
    }
}
