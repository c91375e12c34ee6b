//! Fault injection (`npurt_core::fault`), in its own test binary: the armed faults are
//! process-wide, so the kinds run one after another in one test.

mod common;

use common::*;
use npurt_core::memory::{self, PagePolicy};
use npurt_core::{alloc, fault, registry, ErrorKind};
use std::sync::Arc;
use std::time::Duration;

fn injected(kind: &str) -> u64 {
    fault::injected().into_iter().find(|(k, _)| *k == kind).unwrap().1
}

#[test]
fn injected_faults_are_typed_and_the_runtime_recovers() {
    let c = ctx(0);
    let mem = registry::use_device(0).unwrap().memory().clone();
    let base = mem.allocated_bytes();

    // alloc:2 — the second allocation from now fails with OutOfMemory, the others work.
    fault::set("alloc:2").unwrap();
    let a = alloc::malloc(4096, PagePolicy::HugeFirst).unwrap();
    let e = alloc::malloc(4096, PagePolicy::HugeFirst).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert!(e.to_string().contains("injected"), "{e}");
    let b = alloc::malloc(4096, PagePolicy::HugeFirst).unwrap();
    drop((a, b));
    assert_eq!(mem.allocated_bytes(), base);
    assert_eq!(injected("alloc"), 1);

    // kernel:2 — the second kernel fails: sticky error at sync, later work skipped.
    let s = c.create_stream(0).unwrap();
    let k = Blocks::new(4);
    fault::set("kernel:2").unwrap();
    s.launch(k.clone(), 4).unwrap();
    s.launch(k.clone(), 4).unwrap();
    s.launch(k.clone(), 4).unwrap();
    let e = s.synchronize(Some(Duration::from_secs(30))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TaskFailed, "{e}");
    assert!(k.hits.iter().all(|h| h.load(std::sync::atomic::Ordering::Relaxed) == 1));
    assert!(s.launch(k.clone(), 4).is_err(), "a failed stream refuses new work");
    s.destroy(true).unwrap();
    let s = c.create_stream(0).unwrap(); // other streams go on
    s.launch(k.clone(), 4).unwrap();
    s.synchronize(Some(Duration::from_secs(30))).unwrap();

    // hang:1 — the kernel never ends: the timeout fires; a forced destroy ends it.
    fault::set("hang:1").unwrap();
    s.launch(k.clone(), 1).unwrap();
    let e = s.synchronize(Some(Duration::from_millis(200))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    s.destroy(true).unwrap();
    let s = c.create_stream(0).unwrap();
    s.launch(k.clone(), 4).unwrap();
    s.synchronize(Some(Duration::from_secs(30))).unwrap();
    s.destroy(false).unwrap();

    // copy_stall:1 — the copy engine stalls: the timeout fires; a forced reset recovers.
    let dev = registry::set_device(1).unwrap();
    let s1 = dev.default_context().create_stream(0).unwrap();
    let mem1 = dev.memory().clone();
    let d = memory::malloc_on(&mem1, 4096, PagePolicy::HugeFirst).unwrap();
    let h = memory::malloc_host(4096).unwrap();
    fault::set("copy_stall:1").unwrap();
    memory::memcpy_async(&d, &h, None, &s1).unwrap();
    let e = s1.synchronize(Some(Duration::from_millis(200))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    drop((d, h));
    registry::reset_device_force(1).unwrap();
    let dev = registry::set_device(1).unwrap();
    let s1 = dev.default_context().create_stream(0).unwrap();
    s1.launch(Arc::new(Spin(Duration::ZERO)), 1).unwrap();
    s1.synchronize(Some(Duration::from_secs(30))).unwrap();
    s1.destroy(false).unwrap();
    registry::reset_device(1).unwrap();

    assert_eq!(
        fault::injected().iter().map(|(_, n)| n).sum::<u64>(),
        4,
        "{:?}",
        fault::injected()
    );
    assert!(fault::set("nonsense:1").is_err());
    assert!(fault::set("kernel:x").is_err());
    fault::set("off").unwrap();
}
