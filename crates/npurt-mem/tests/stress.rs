//! 4 threads hammer one pool: every block gets a thread/iteration pattern on each of
//! its 512-byte granules (blocks are 512-aligned multiples of 512, so any overlap
//! between two live blocks shares a granule) which is verified before the free.

use std::time::{Duration, Instant};

use npurt_mem::{CachingPool, PagePolicy, PoolConfig};

const MIB: usize = 1 << 20;

fn fill(addr: usize, len: usize, tag: u64) {
    let mut off = 0;
    while off < len {
        // SAFETY: [addr, addr+len) is a live block owned by this thread; off < len and
        // addr+off is 8-aligned.
        unsafe { ((addr + off) as *mut u64).write(tag ^ off as u64) };
        off += 512;
    }
}

fn verify(addr: usize, len: usize, tag: u64) {
    let mut off = 0;
    while off < len {
        // SAFETY: as in `fill`.
        let v = unsafe { ((addr + off) as *const u64).read() };
        assert_eq!(v, tag ^ off as u64, "block {addr:#x}+{off} overwritten: blocks overlap");
        off += 512;
    }
}

#[test]
fn four_threads_no_overlap() {
    let pool = CachingPool::new(PoolConfig {
        policy: PagePolicy::HugeFirst,
        ..PoolConfig::new(1 << 30)
    })
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let ops: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || {
                    let mut rng = 0x1234_5678_9ABC_DEF1u64 ^ (t << 32);
                    let mut live: Vec<(usize, usize, u64)> = Vec::new();
                    let mut i = 0u64;
                    while i < 20_000 && Instant::now() < deadline {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let r = rng as usize;
                        if live.len() < 16 && (r % 3 > 0 || live.is_empty()) {
                            let size = match r % 100 {
                                0..=69 => 1 + (r >> 8) % 65536,
                                70..=94 => 65536 + (r >> 8) % MIB,
                                _ => MIB + (r >> 8) % (8 * MIB),
                            };
                            let a = pool.alloc(size).unwrap();
                            let len = pool.lookup(a).unwrap().allocated_size;
                            let tag = (t << 56) | (i << 8);
                            fill(a, len, tag);
                            live.push((a, len, tag));
                        } else {
                            let (a, len, tag) = live.swap_remove(r % live.len());
                            verify(a, len, tag);
                            pool.free(a).unwrap();
                        }
                        if i % 5000 == 4999 && t == 0 {
                            pool.empty_cache();
                        }
                        i += 1;
                    }
                    for (a, len, tag) in live {
                        verify(a, len, tag);
                        pool.free(a).unwrap();
                    }
                    i as usize
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    eprintln!("{ops} ops");
    pool.debug_check().unwrap();
    let s = pool.stats();
    assert_eq!(s.allocated_bytes[0].current, 0);
    assert!(s.reserved_bytes[0].peak <= 1 << 30);
    pool.empty_cache();
    assert_eq!(pool.reserved_bytes(), 0);
}
