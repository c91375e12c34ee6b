//! `SubRange` (the dialect's register_mem / malloc_from_mem): blocks carved from a
//! registered range of a live allocation, reused first-fit, bounded by the range, and
//! backed by memory the range keeps mapped.

use npurt_core::alloc;
use npurt_core::memory::{PagePolicy, SubRange};

const ALIGN: usize = 32;

fn malloc(n: usize) -> npurt_core::memory::DeviceBuffer {
    alloc::malloc(n, PagePolicy::HugeFirst).unwrap()
}

#[test]
fn blocks_are_carved_reused_and_bounded() {
    let parent = malloc(4096);
    let r = SubRange::register(&parent, parent.addr() + 8, 4000).unwrap();
    assert_eq!(r.base() % ALIGN, 0);
    assert!(r.base() >= parent.addr() + 8);
    let a = r.alloc(100).unwrap(); // 128 + 32
    let b = r.alloc(1).unwrap(); // 32 + 32
    assert_eq!(a.addr(), r.base());
    assert_eq!(b.addr(), r.base() + 160);
    assert_eq!(r.live_blocks(), 2);
    assert_eq!(r.available(), r.len() - 160 - 64);
    let err = r.alloc(8000).unwrap_err();
    assert!(err.to_string().contains("registered range"), "{err}");
    drop(a);
    assert_eq!(r.live_blocks(), 1);
    let c = r.alloc(64).unwrap(); // best fit: a's old place
    assert_eq!(c.addr(), r.base());
    drop((b, c));
    assert_eq!(r.available(), r.len());
}

#[test]
fn ranges_outside_the_allocation_are_refused() {
    let parent = malloc(1024);
    assert!(SubRange::register(&parent, parent.addr(), 0).is_err());
    assert!(SubRange::register(&parent, parent.addr() - 1, 16).is_err());
    assert!(SubRange::register(&parent, parent.addr() + 1000, 100).is_err());
    parent.clone().free().unwrap();
    assert!(SubRange::register(&parent, parent.addr(), 16).is_err());
}

#[test]
fn the_range_keeps_its_memory_while_blocks_live() {
    let parent = malloc(1 << 16);
    let r = SubRange::register(&parent, parent.addr(), 1 << 16).unwrap();
    let blk = r.alloc(1024).unwrap();
    drop((parent, r));
    // The block still names mapped memory: write and read it through a host view.
    let p = blk.addr() as *mut u8;
    // SAFETY: `blk` is a live block of 1024 bytes inside a mapping its range keeps.
    unsafe {
        p.write_bytes(7, 1024);
        assert_eq!(*p.add(1023), 7);
    }
    assert_eq!(blk.nbytes(), 1024);
}
