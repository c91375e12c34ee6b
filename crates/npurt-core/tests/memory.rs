//! Device memory through npurt-core: allocation, stream-ordered frees, copies, pools,
//! quotas, pointer validation, teardown. The tests share device statistics, so they run
//! one at a time (a file-wide lock).

mod common;

use common::*;
use npurt_core::alloc;
use npurt_core::memory::{self, AnyBuffer, Buffer, MemPool, PageKind, PagePolicy};
use npurt_core::{registry, ErrorKind};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

const MIB: usize = 1 << 20;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    setup();
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn mem0() -> Arc<memory::DeviceMemory> {
    ctx(0);
    alloc::device_memory(0).unwrap()
}

/// The pool's 512-byte rounding.
fn block(n: usize) -> u64 {
    (n.div_ceil(512) * 512) as u64
}

#[test]
fn malloc_free_and_statistics() {
    let _g = serial();
    let m = mem0();
    let base = m.allocated_bytes();
    let b = memory::malloc_on(&m, 1000, PagePolicy::HugeFirst).unwrap();
    assert_eq!(b.nbytes(), 1000);
    assert_eq!(b.addr() % 64, 0);
    assert_eq!(m.allocated_bytes(), base + block(1000));
    assert!(m.reserved_bytes() >= m.allocated_bytes());
    let (free, total) = m.mem_info();
    assert_eq!(total as usize, m.capacity());
    assert_eq!(free, total - m.reserved_bytes());
    let twin = b.clone();
    b.free().unwrap();
    assert_eq!(
        twin.clone().free().unwrap_err().kind(),
        ErrorKind::MemoryFree,
        "double free"
    );
    assert_eq!(
        twin.check().unwrap_err().kind(),
        ErrorKind::InvalidHandle,
        "use after free"
    );
    drop(twin);
    assert_eq!(m.allocated_bytes(), base);
    let kv = m.stats().to_kv();
    for key in [
        "allocated_bytes.all.peak",
        "page_bytes.thp",
        "page_bytes.normal",
        "num_ooms",
    ] {
        assert!(kv.iter().any(|(k, _)| k == key), "{key} missing");
    }
    // Zero and absurd sizes: typed errors.
    assert_eq!(
        memory::malloc_on(&m, 0, PagePolicy::HugeFirst).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    let e = memory::malloc_on(&m, 1 << 62, PagePolicy::HugeFirst).unwrap_err();
    assert_eq!((e.kind(), e.acl().code), (ErrorKind::OutOfMemory, 207001));
    assert!(e.to_string().contains("requested"), "{e}");
    assert_eq!(
        memory::malloc_on(&m, usize::MAX, PagePolicy::HugeFirst)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
}

#[test]
fn copies_round_trip_every_direction() {
    let _g = serial();
    let m = mem0();
    let n = 3 * MIB + 17;
    let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let h = memory::malloc_host(n).unwrap();
    memory::write(&h, 0, &data).unwrap();
    let d1 = memory::malloc_on(&m, n, PagePolicy::HugeFirst).unwrap();
    let d2 = memory::malloc_on(&m, n, PagePolicy::HugeFirst).unwrap();
    // Sync H2D, D2D, D2H.
    assert_eq!(memory::memcpy(&d1, &h, None).unwrap(), n);
    memory::memcpy(&d2, &d1, None).unwrap();
    let mut out = vec![0u8; n];
    memory::read(&d2, 0, &mut out).unwrap();
    assert_eq!(out, data);
    // Async through the copy engine, with a memset in between; large enough to split.
    let big = 20 * MIB;
    let s = ctx(0).create_stream(0).unwrap();
    let hb = memory::malloc_host(big).unwrap();
    let db = memory::malloc_on(&m, big, PagePolicy::HugeFirst).unwrap();
    memory::memset_async(&db, 0xAB, None, &s).unwrap();
    memory::memcpy_async(&db, &d2, Some(n), &s).unwrap();
    memory::memcpy_async(&hb, &db, None, &s).unwrap();
    s.synchronize(None).unwrap();
    let mut back = vec![0u8; big];
    memory::read(&hb, 0, &mut back).unwrap();
    assert_eq!(&back[..n], &data[..]);
    assert!(back[n..].iter().all(|&x| x == 0xAB));
    // Host to host, and the AnyBuffer form.
    let h2 = memory::malloc_host(n).unwrap();
    memory::memcpy(&AnyBuffer::from(h2.clone()), &AnyBuffer::from(h.clone()), None).unwrap();
    memory::read(&h2, 0, &mut out).unwrap();
    assert_eq!(out, data);
    // Overlapping copy within one buffer (memmove semantics).
    memory::memset(&d1, 1, Some(10)).unwrap();
    s.destroy(false).unwrap();
}

#[test]
fn bounds_zero_sizes_and_freed_operands_are_typed_errors() {
    let _g = serial();
    let m = mem0();
    let small = memory::malloc_on(&m, 100, PagePolicy::HugeFirst).unwrap();
    let big = memory::malloc_on(&m, 200, PagePolicy::HugeFirst).unwrap();
    let kind = |r: npurt_core::Result<usize>| r.unwrap_err().kind();
    assert_eq!(
        kind(memory::memcpy(&small, &big, None)),
        ErrorKind::InvalidValue,
        "dst too small"
    );
    assert_eq!(
        kind(memory::memcpy(&big, &small, Some(150))),
        ErrorKind::InvalidValue,
        "src too small"
    );
    assert_eq!(
        kind(memory::memcpy(&big, &small, Some(0))),
        ErrorKind::InvalidValue,
        "zero"
    );
    assert_eq!(kind(memory::memset(&small, 0, Some(101))), ErrorKind::InvalidValue);
    assert_eq!(memory::memcpy(&big, &small, None).unwrap(), 100);
    assert!(memory::write(&small, 90, &[0; 11]).is_err());
    assert!(memory::write(&small, usize::MAX, &[0; 2]).is_err());
    let mut buf = [0u8; 10];
    assert!(memory::read(&small, 95, &mut buf).is_err());
    let e = memory::memcpy(&big, &small, Some(1000)).unwrap_err();
    assert_eq!(e.acl().code, 107000);
    let twin = small.clone();
    small.free().unwrap();
    assert_eq!(kind(memory::memcpy(&big, &twin, None)), ErrorKind::InvalidHandle);
    let s = ctx(0).default_stream().unwrap();
    assert_eq!(
        memory::memcpy_async(&big, &twin, None, &s).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
}

#[test]
fn free_while_a_queued_copy_uses_the_buffer_is_stream_ordered() {
    let _g = serial();
    let m = mem0();
    let s = ctx(0).create_stream(0).unwrap();
    let base = m.allocated_bytes();
    let src = memory::malloc_on(&m, MIB, PagePolicy::HugeFirst).unwrap();
    memory::memset(&src, 0x5A, None).unwrap();
    let dst = memory::malloc_host(MIB).unwrap();
    s.launch(Arc::new(Spin(Duration::from_millis(150))), 1).unwrap();
    memory::memcpy_async(&dst, &src, None, &s).unwrap();
    src.free().unwrap();
    // The queued copy still holds the block.
    assert_eq!(m.allocated_bytes(), base + block(MIB));
    s.synchronize(None).unwrap();
    assert_eq!(m.allocated_bytes(), base);
    let mut out = vec![0u8; MIB];
    memory::read(&dst, 0, &mut out).unwrap();
    assert!(out.iter().all(|&x| x == 0x5A));
    // The freed block is reusable by any stream right away.
    let again = memory::malloc_on(&m, MIB, PagePolicy::HugeFirst).unwrap();
    drop(again);
    s.destroy(false).unwrap();
}

#[test]
fn quota_gives_out_of_memory_and_the_device_stays_usable() {
    let _g = serial();
    let m = mem0();
    m.empty_cache();
    let cap = m.capacity();
    assert!(m.set_fraction(0.0).is_err() && m.set_fraction(1.5).is_err() && m.set_fraction(f64::NAN).is_err());
    let frac = (64 * MIB) as f64 / cap as f64;
    m.set_fraction(frac).unwrap();
    let a = memory::malloc_on(&m, 40 * MIB, PagePolicy::HugeFirst).unwrap();
    let e = memory::malloc_on(&m, 40 * MIB, PagePolicy::HugeFirst).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    let msg = e.to_string();
    assert!(
        msg.contains("quota") && msg.contains("requested") && msg.contains("largest free"),
        "{msg}"
    );
    assert!(m.stats().num_ooms >= 1);
    drop(a);
    let b = memory::malloc_on(&m, 40 * MIB, PagePolicy::HugeFirst).unwrap();
    drop(b);
    m.set_fraction(1.0).unwrap();
}

#[test]
fn policies_get_the_pages_they_ask_for() {
    let _g = serial();
    let m = mem0();
    let base = m.allocated_bytes();
    let n = memory::malloc_on(&m, 4 * MIB, PagePolicy::NormalOnly).unwrap();
    assert_eq!(n.page_kind(), Some(PageKind::Normal));
    assert_eq!(m.allocated_bytes(), base + (4 * MIB) as u64);
    assert!(m.stats().page_bytes_of(PageKind::Normal) >= 4 * MIB as u64);
    let r = alloc::resolve(0, n.addr() + 10, 100).unwrap();
    assert_eq!((r.base, r.offset, r.page_kind), (n.addr(), 10, PageKind::Normal));
    memory::memset(&n, 3, None).unwrap();
    drop(n);
    assert_eq!(m.allocated_bytes(), base);
    match memory::malloc_on(&m, 4 * MIB, PagePolicy::HugeOnly) {
        Ok(h) => assert_ne!(h.page_kind(), Some(PageKind::Normal)),
        Err(e) => assert_eq!(e.acl().code, 207001, "{e}"),
    }
}

#[test]
fn mem_pool_routes_allocations_and_releases_its_memory() {
    let _g = serial();
    let m = mem0();
    m.empty_cache();
    let (free0, _) = m.mem_info();
    let reserved0 = m.reserved_bytes();
    let pool = MemPool::new(&m, 8 * MIB).unwrap();
    assert_eq!(m.mem_info().0, free0 - 8 * MIB as u64);
    assert_eq!(m.reserved_bytes(), reserved0 + 8 * MIB as u64);
    pool.enter().unwrap();
    let a = memory::malloc_on(&m, MIB, PagePolicy::HugeFirst).unwrap();
    assert_eq!(a.pool_id(), Some(pool.id()));
    assert!(
        memory::malloc_on(&m, 8 * MIB, PagePolicy::HugeFirst)
            .unwrap_err()
            .kind()
            == ErrorKind::OutOfMemory
    );
    pool.exit();
    let b = memory::malloc_on(&m, MIB, PagePolicy::HugeFirst).unwrap();
    assert_eq!(b.pool_id(), None);
    assert_eq!(alloc::resolve(0, a.addr(), 1).unwrap().pool, Some(pool.id()));
    assert_eq!(pool.clone().destroy().unwrap(), 1);
    assert_eq!(pool.alloc(10).unwrap_err().kind(), ErrorKind::InvalidHandle);
    assert!(pool.enter().is_err());
    drop(pool);
    // `a` keeps the pool's memory alive; dropping it releases everything.
    let r1 = m.reserved_bytes();
    assert!(r1 >= reserved0 + 8 * MIB as u64);
    drop(a);
    assert_eq!(m.reserved_bytes(), r1 - 8 * MIB as u64);
    drop(b);
    m.empty_cache();
    assert_eq!(m.mem_info().0, m.capacity() as u64 - m.reserved_bytes());
    assert!(MemPool::new(&m, 100).is_err());
    assert_eq!(
        MemPool::new(&m, m.capacity() + MIB).unwrap_err().kind(),
        ErrorKind::OutOfMemory
    );
}

#[test]
fn raw_pointers_are_validated() {
    let _g = serial();
    let m = mem0();
    let b = memory::malloc_on(&m, 1000, PagePolicy::HugeFirst).unwrap();
    let r = alloc::resolve(0, b.addr() + 100, 900).unwrap();
    assert_eq!((r.base, r.offset, r.size, r.pool), (b.addr(), 100, 1000, None));
    let code = |r: npurt_core::Result<memory::Resolved>| r.unwrap_err().acl().code;
    assert_eq!(code(alloc::resolve(0, b.addr() + 100, 901)), 107000, "past the end");
    assert_eq!(code(alloc::resolve(0, b.addr(), 0)), 107000, "zero");
    assert_eq!(code(alloc::resolve(0, 16, 1)), 107000, "unknown");
    assert_eq!(code(alloc::resolve(0, usize::MAX, 1)), 107000, "unknown");
    let addr = b.addr();
    drop(b);
    assert_eq!(code(alloc::resolve(0, addr, 1)), 107000, "freed");
}

#[test]
fn device_reset_invalidates_buffers_and_reports_leaks() {
    let _g = serial();
    let dev = registry::set_device(1).unwrap();
    let m = dev.memory().clone();
    let b = memory::malloc_on(&m, 4096, PagePolicy::HugeFirst).unwrap();
    let host = memory::malloc_host(4096).unwrap();
    let other = memory::malloc_on(&mem0(), 4096, PagePolicy::HugeFirst).unwrap();
    // Cross-device copy while both are alive.
    memory::memset(&b, 9, None).unwrap();
    memory::memcpy(&other, &b, None).unwrap();
    let mut out = [0u8; 4096];
    memory::read(&other, 0, &mut out).unwrap();
    assert!(out.iter().all(|&x| x == 9));
    let report = registry::reset_device_force(1).unwrap().unwrap();
    assert_eq!((report.allocations, report.bytes), (1, block(4096)));
    let e = memory::memcpy(&host, &b, None).unwrap_err();
    assert_eq!((e.kind(), e.acl().code), (ErrorKind::InvalidHandle, 107017));
    assert_eq!(
        memory::malloc_on(&m, 10, PagePolicy::HugeFirst).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
    assert_eq!(
        alloc::resolve(1, b.addr(), 1).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
    drop(b); // the leaked block goes back to the dead device's pool, which then unmaps
}

#[test]
fn buffers_are_freed_from_other_threads() {
    let _g = serial();
    let m = mem0();
    let base = m.allocated_bytes();
    let bufs: Vec<_> = (0..64)
        .map(|i| memory::malloc_on(&m, 512 * (i + 1), PagePolicy::HugeFirst).unwrap())
        .collect();
    let handles: Vec<_> = bufs
        .chunks(16)
        .map(|c| {
            let c = c.to_vec();
            std::thread::spawn(move || {
                for b in c {
                    memory::memset(&b, 1, None).unwrap();
                    b.free().unwrap();
                }
            })
        })
        .collect();
    drop(bufs);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(m.allocated_bytes(), base);
    let _ = Buffer::nbytes(&memory::malloc_host(1).unwrap());
}

#[test]
fn async_copies_from_rust_memory_are_staged() {
    let _g = serial();
    let m = mem0();
    let s = ctx(0).create_stream(0).unwrap();
    let d = memory::malloc_on(&m, 4096, PagePolicy::HugeFirst).unwrap();
    let mut src = vec![3u8; 4096];
    s.launch(Arc::new(Spin(Duration::from_millis(50))), 1).unwrap();
    memory::memcpy_async_from_slice(&d, &src, &s).unwrap();
    src.fill(0); // staged: the caller may reuse its memory at once
    let mut st = memory::Staging::new(4096).unwrap();
    st.as_mut_slice().fill(4);
    let d2 = memory::malloc_on(&m, 4096, PagePolicy::HugeFirst).unwrap();
    assert!(memory::try_memcpy_async_from_staging(&d2, st, Some(4096), &s)
        .unwrap()
        .is_ok());
    s.synchronize(None).unwrap();
    let mut out = vec![0u8; 4096];
    memory::read(&d, 0, &mut out).unwrap();
    assert!(out.iter().all(|&x| x == 3));
    memory::read(&d2, 0, &mut out).unwrap();
    assert!(out.iter().all(|&x| x == 4));
    assert!(memory::memcpy_async_from_slice(&d, &[0u8; 4097], &s).is_err());
    assert!(memory::memcpy_async_from_slice(&d, &[], &s).is_err());
    s.destroy(false).unwrap();
}

#[test]
fn context_memory_limits_are_separate_and_released() {
    let _g = serial();
    let m = mem0();
    let dev = registry::use_device(0).unwrap();
    let (a, b) = (dev.create_context().unwrap(), dev.create_context().unwrap());
    a.set_memory_limit(Some(8 * MIB)).unwrap();
    assert_eq!(a.memory_limit(), Some(8 * MIB));
    assert_eq!(b.memory_limit(), None);
    npurt_core::current::push_context(&a);
    let x = alloc::malloc(6 * MIB, PagePolicy::HugeFirst).unwrap();
    // malloc_on of the current context's device counts too (kernel outputs, copies).
    let e = memory::malloc_on(&m, 3 * MIB, PagePolicy::HugeFirst).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    let e = alloc::malloc(3 * MIB, PagePolicy::HugeFirst).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert_eq!(e.acl().code, 207001);
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("context {} memory limit", a.id())) && msg.contains("largest free"),
        "{msg}"
    );
    assert_eq!(a.memory_charged(), (6 * MIB, 6 * MIB));
    // The refused request left nothing behind, and the context is still usable.
    let y = alloc::malloc(2 * MIB, PagePolicy::NormalOnly).unwrap();
    assert_eq!(a.memory_charged().0, 8 * MIB);
    npurt_core::current::pop_context();
    // Another context on the same device is not limited by `a`'s limit.
    npurt_core::current::push_context(&b);
    let z = alloc::malloc(16 * MIB, PagePolicy::HugeFirst).unwrap();
    npurt_core::current::pop_context();
    // Frees give the room back, also when the last handle drops on another thread.
    let x2 = x.clone();
    std::thread::spawn(move || drop(x2)).join().unwrap();
    assert_eq!(a.memory_charged().0, 8 * MIB, "a clone still holds the buffer");
    drop(x);
    drop(y);
    assert_eq!(a.memory_charged(), (0, 8 * MIB));
    a.set_memory_limit(None).unwrap();
    npurt_core::current::push_context(&a);
    let big = alloc::malloc(16 * MIB, PagePolicy::HugeFirst).unwrap();
    npurt_core::current::pop_context();
    assert_eq!(a.memory_charged().0, 0, "no limit: nothing is counted");
    drop((big, z));
    a.destroy().unwrap();
    b.destroy().unwrap();
    assert!(a.set_memory_limit(Some(MIB)).is_err(), "destroyed context");
}
