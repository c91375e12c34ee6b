//! The memory event hook (`memory::events`): every alloc, free, segment map/unmap and OOM
//! reaches a subscriber with its size, pool, page kind, stream and time; nothing after
//! unsubscribing. The tests share the process-wide observer list, so they run one at a time.

mod common;

use common::*;
use npurt_core::memory::events::{self, MemAction, MemEvent, MemObserver, MemPoolKind};
use npurt_core::memory::{self, MemPool, PagePolicy};
use npurt_core::{alloc, clock, current};
use std::sync::{Arc, Mutex, MutexGuard};

const MIB: usize = 1 << 20;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    setup();
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct Rec(Mutex<Vec<MemEvent>>);

impl MemObserver for Rec {
    fn on_mem_event(&self, e: &MemEvent) {
        self.0.lock().unwrap().push(e.clone());
    }
}

impl Rec {
    fn take(&self) -> Vec<MemEvent> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn find(ev: &[MemEvent], action: MemAction, addr: usize) -> Option<&MemEvent> {
    ev.iter().find(|e| e.action == action && e.addr == addr)
}

#[test]
fn alloc_and_free_are_told_with_size_pool_kind_and_time() {
    let _g = serial();
    let m = {
        ctx(0);
        alloc::device_memory(0).unwrap()
    };
    let rec = Arc::new(Rec::default());
    let sub = events::subscribe(rec.clone());
    assert!(events::is_active());
    let t0 = clock::now_ns();
    let b = memory::malloc_on(&m, 1000, PagePolicy::HugeFirst).unwrap();
    let addr = b.addr();
    b.clone().free().unwrap(); // a second handle: free requested, memory still held
    drop(b);
    let ev = rec.take();
    let a = find(&ev, MemAction::Alloc, addr).expect("alloc told");
    assert_eq!(
        (a.device, a.size, a.block_size, a.pool),
        (0, 1000, 1024, MemPoolKind::Device)
    );
    assert!(a.page_kind.is_some() && a.t_ns >= t0 && a.stream.is_none());
    let r = find(&ev, MemAction::FreeRequested, addr).expect("free requested told");
    let f = find(&ev, MemAction::Free, addr).expect("free told");
    assert!(a.t_ns <= r.t_ns && r.t_ns <= f.t_ns);
    assert_eq!(f.page_kind, a.page_kind);

    // The thread's current stream is the allocation's stream.
    let s = current::current_context().unwrap().create_stream(0).unwrap();
    current::push_stream(&s).unwrap();
    let b = memory::malloc_on(&m, 4096, PagePolicy::HugeFirst).unwrap();
    current::pop_stream(&s);
    let ev = rec.take();
    assert_eq!(find(&ev, MemAction::Alloc, b.addr()).unwrap().stream, Some(s.id()));
    drop(b);
    drop(sub);
    assert!(!events::is_active());
    rec.take();
    drop(memory::malloc_on(&m, 4096, PagePolicy::HugeFirst).unwrap());
    assert!(rec.take().is_empty(), "nothing after unsubscribing");
    s.destroy(false).unwrap();
}

#[test]
fn segments_pools_dedicated_and_oom_are_told() {
    let _g = serial();
    ctx(1);
    let m = alloc::device_memory(1).unwrap();
    m.empty_cache();
    let rec = Arc::new(Rec::default());
    let _sub = events::subscribe(rec.clone());
    // A large request maps a segment of its own size; empty_cache unmaps it.
    let b = memory::malloc_on(&m, 3 * MIB, PagePolicy::HugeFirst).unwrap();
    let addr = b.addr();
    drop(b);
    m.empty_cache();
    let ev = rec.take();
    let map = ev
        .iter()
        .position(|e| e.action == MemAction::SegmentMap && e.addr == addr);
    let alloc = ev.iter().position(|e| e.action == MemAction::Alloc && e.addr == addr);
    let unmap = ev
        .iter()
        .position(|e| e.action == MemAction::SegmentUnmap && e.addr == addr);
    assert!(
        map < alloc && alloc.is_some(),
        "segment mapped before the alloc: {ev:?}"
    );
    assert!(unmap.is_some(), "segment unmapped: {ev:?}");
    let seg = &ev[map.unwrap()];
    assert!(seg.large && seg.size >= 3 * MIB && seg.device == 1);

    // A memory pool: its segment at creation, its blocks tagged with its id, unmapped at drop.
    let pool = MemPool::new(&m, 4 * MIB).unwrap();
    let pb = pool.alloc(1000).unwrap();
    let pa = pb.addr();
    drop(pb);
    pool.destroy().unwrap();
    let ev = rec.take();
    let kind = MemPoolKind::Pool(
        ev.iter()
            .find(|e| e.action == MemAction::Alloc)
            .map_or(0, |e| match e.pool {
                MemPoolKind::Pool(id) => id,
                _ => 0,
            }),
    );
    assert_ne!(kind, MemPoolKind::Pool(0), "{ev:?}");
    assert!(ev.iter().any(|e| e.action == MemAction::SegmentMap && e.pool == kind));
    assert_eq!(find(&ev, MemAction::Free, pa).unwrap().pool, kind);
    assert!(
        ev.iter().any(|e| e.action == MemAction::SegmentUnmap && e.pool == kind),
        "{ev:?}"
    );

    // NormalOnly: a dedicated segment, mapped and unmapped around the block.
    let d = memory::malloc_on(&m, 8192, PagePolicy::NormalOnly).unwrap();
    let da = d.addr();
    drop(d);
    let ev = rec.take();
    let actions: Vec<_> = ev.iter().filter(|e| e.addr == da).map(|e| e.action).collect();
    assert_eq!(
        actions,
        [
            MemAction::SegmentMap,
            MemAction::Alloc,
            MemAction::Free,
            MemAction::SegmentUnmap
        ]
    );
    assert!(ev.iter().all(|e| e.pool == MemPoolKind::Dedicated));

    // Out of memory: the request is told.
    assert!(memory::malloc_on(&m, m.capacity() + MIB, PagePolicy::HugeFirst).is_err());
    let ev = rec.take();
    let oom = ev.iter().find(|e| e.action == MemAction::Oom).expect("oom told");
    assert_eq!((oom.size, oom.device), (m.capacity() + MIB, 1));
}
