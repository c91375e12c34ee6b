//! Stream-ordered frees: same-stream reuse, fences, cross-stream reuse only when idle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use npurt_mem::{BlockStatus, CachingPool, Completed, Fence, MemError, PagePolicy, PoolConfig};

const MIB: usize = 1 << 20;

fn pool() -> CachingPool {
    CachingPool::new(PoolConfig {
        policy: PagePolicy::NormalOnly,
        large_segment: Some(20 << 20),
        ..PoolConfig::new(1 << 30)
    })
    .unwrap()
}

fn flag() -> (Arc<AtomicBool>, Vec<Box<dyn Fence>>) {
    let f = Arc::new(AtomicBool::new(false));
    let boxed: Box<dyn Fence> = Box::new(f.clone());
    (f, vec![boxed])
}

#[test]
fn same_stream_reuses_at_once_other_streams_wait_for_idle() {
    let p = pool();
    let a = p.alloc(4096, 1).unwrap();
    let _separator = p.alloc(4096, 1).unwrap();
    p.free(a, vec![]).unwrap();
    let b = p.alloc(4096, 2).unwrap();
    assert_ne!(b, a, "stream 2 must not take a block stream 1 may still use");
    assert_eq!(p.alloc(4096, 1).unwrap(), a, "stream 1 reuses it at once");
    p.free(a, vec![]).unwrap();
    p.mark_stream_idle(1);
    assert_eq!(p.alloc(4096, 3).unwrap(), a, "idle blocks serve every stream");
    assert_eq!(p.lookup(a).unwrap().stream, 3);
    p.debug_check().unwrap();
}

#[test]
fn fenced_block_is_not_reused_until_the_fence_completes() {
    let p = pool();
    let a = p.alloc(3 * MIB, 1).unwrap();
    let (f, fences) = flag();
    p.free(a, fences).unwrap();
    assert!(p.lookup(a).is_none(), "freed from the caller's point of view");
    assert!(matches!(p.free(a, vec![]), Err(MemError::DoubleFree { .. })));
    let s = p.stats();
    assert_eq!((s.pending_frees, s.allocated_bytes[0].current), (1, 0));
    assert_eq!(s.active_bytes[0].current, 3 * MIB as u64, "pending blocks stay active");
    let b = p.alloc(3 * MIB, 1).unwrap();
    assert_ne!(b, a, "not handed out while the fence is pending");
    assert_eq!(p.process_pending(), 1);
    assert_eq!(p.snapshot()[0].blocks[0].status, BlockStatus::Pending);
    assert_eq!(p.empty_cache(), 0, "pending blocks keep their segment");
    f.store(true, Ordering::Release);
    let c = p.alloc(3 * MIB, 1).unwrap();
    assert_eq!(c, a, "reused once complete");
    assert_eq!(p.stats().pending_frees, 0);
    for x in [b, c] {
        p.free(x, vec![]).unwrap();
    }
    assert_eq!(p.empty_cache(), 20 * MIB);
    p.debug_check().unwrap();
}

#[test]
fn several_fences_all_must_complete() {
    let p = pool();
    let a = p.alloc(1000, 5).unwrap();
    let (f1, mut fences) = flag();
    let (f2, more) = flag();
    fences.extend(more);
    fences.push(Box::new(Completed));
    p.free(a, fences).unwrap();
    f1.store(true, Ordering::Release);
    assert_eq!(p.process_pending(), 1);
    f2.store(true, Ordering::Release);
    assert_eq!(p.process_pending(), 0);
    assert_eq!(p.alloc(1000, 5).unwrap(), a);
}

#[test]
fn completed_fences_free_immediately() {
    let p = pool();
    let a = p.alloc(1000, 5).unwrap();
    p.free(a, vec![Box::new(Completed)]).unwrap();
    assert_eq!(p.stats().pending_frees, 0);
    assert_eq!(p.alloc(1000, 5).unwrap(), a);
}

#[test]
fn pending_blocks_complete_on_the_oom_path() {
    let p = CachingPool::new(PoolConfig {
        policy: PagePolicy::NormalOnly,
        large_segment: Some(20 << 20),
        ..PoolConfig::new(20 * MIB)
    })
    .unwrap();
    let a = p.alloc(12 * MIB, 1).unwrap();
    let (f, fences) = flag();
    p.free(a, fences).unwrap();
    assert!(matches!(p.alloc(12 * MIB, 1), Err(MemError::OutOfMemory { .. })));
    f.store(true, Ordering::Release);
    assert_eq!(p.alloc(12 * MIB, 1).unwrap(), a);
}

#[test]
fn mark_all_idle_coalesces_across_streams() {
    let p = pool();
    let xs: Vec<usize> = (0..4).map(|s| p.alloc(4096, s).unwrap()).collect();
    let keep = p.alloc(4096, 9).unwrap();
    for &x in &xs {
        p.free(x, vec![]).unwrap();
    }
    // Four neighbouring free blocks bound to four streams cannot merge yet.
    let frees = |p: &CachingPool| {
        p.snapshot()[0]
            .blocks
            .iter()
            .filter(|b| b.status == BlockStatus::Free)
            .count()
    };
    assert_eq!(frees(&p), 4 + 1);
    p.mark_all_idle();
    assert_eq!(frees(&p), 2, "four stream blocks + nothing, and the segment tail");
    assert_eq!(p.alloc(4 * 4096, 7).unwrap(), xs[0]);
    p.free(keep, vec![]).unwrap();
    p.debug_check().unwrap();
}

#[test]
fn active_statistics_count_pending_blocks() {
    // The pool keeps only allocated + pending counters on the hot path and derives the
    // active ones; check every field against the definition.
    let p = pool();
    let a = p.alloc(3 * MIB, 1).unwrap();
    let (f, fences) = flag();
    p.free(a, fences).unwrap(); // pending: allocated 0, active 3 MiB
    let b = p.alloc(3 * MIB, 1).unwrap(); // active peaks at 6 MiB, allocated at 3 MiB
    let s = p.stats();
    let (act, alloc) = (s.active_bytes[0], s.allocated_bytes[0]);
    assert_eq!((alloc.current, alloc.peak), (3 * MIB as u64, 3 * MIB as u64));
    assert_eq!((act.current, act.peak), (6 * MIB as u64, 6 * MIB as u64));
    assert_eq!((act.allocated, act.freed), (6 * MIB as u64, 0));
    assert_eq!((s.active[0].current, s.active[0].peak), (2, 2));
    f.store(true, Ordering::Release);
    p.process_pending();
    let s = p.stats();
    assert_eq!(s.active_bytes[0].current, 3 * MIB as u64);
    assert_eq!(s.active_bytes[0].freed, 3 * MIB as u64, "the pending block left");
    p.reset_peak_stats();
    assert_eq!(p.stats().active_bytes[0].peak, 3 * MIB as u64);
    p.free(b, vec![]).unwrap();
    let s = p.stats();
    assert_eq!(
        (s.active_bytes[0].current, s.active_bytes[0].freed),
        (0, 6 * MIB as u64)
    );
    assert_eq!(s.active_bytes[0].peak, 3 * MIB as u64);
    p.debug_check().unwrap();
}
