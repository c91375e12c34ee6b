//! Cross-process sharing inside one process (the exporter imports its own keys through its
//! own server, so the whole socket / SCM_RIGHTS / lease path runs): shareable allocation,
//! export of interior ranges, visibility, lifetime in both orders, typed errors. The
//! tests with real processes (whitelists, SIGKILL) are in `tests/ipc/` (pytest).

mod common;

use common::*;
use npurt_core::alloc;
use npurt_core::error::{Error, IpcError};
use npurt_core::ipc::{self, Access};
use npurt_core::memory::{self, PageKind, PagePolicy};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(5);

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    setup();
    ctx(0);
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn ipc_err(e: Error) -> IpcError {
    match e {
        Error::Ipc(i) => i,
        other => panic!("expected an IpcError, got {other:?}"),
    }
}

fn write(b: &memory::DeviceBuffer, off: usize, bytes: &[u8]) {
    memory::write(b, off, bytes).unwrap();
}

fn read(b: &memory::DeviceBuffer, off: usize, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    memory::read(b, off, &mut v).unwrap();
    v
}

/// Waits (bounded) until the exporter's server saw the lease end.
fn wait_leases(n: usize) {
    let t0 = Instant::now();
    while ipc::stats().leases != n {
        assert!(t0.elapsed() < T, "leases stuck at {:?}", ipc::stats());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn shareable_memory_round_trip() {
    let _g = serial();
    let mem = alloc::current_memory().unwrap();
    let a = alloc::malloc_ex(10_000, PagePolicy::HugeFirst, Some(true)).unwrap();
    assert!(a.is_shareable());
    assert_eq!(a.page_kind(), Some(PageKind::Normal), "shared memory gets no THP");
    write(&a, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
    // An interior range: the import maps the containing pages.
    let key = ipc::export(&a, 3, 4, Access::Pids(vec![])).unwrap();
    assert!(key.starts_with("npurt1-") && key.len() < 65);
    let b = ipc::import(&key, &mem, T).unwrap();
    assert!(b.is_imported() && b.nbytes() == 4);
    assert_eq!(read(&b, 0, 4), vec![4, 5, 6, 7]);
    write(&b, 0, &[40]);
    assert_eq!(
        read(&a, 3, 1),
        vec![40],
        "the importer's writes are the exporter's memory"
    );
    assert_ne!(b.addr(), a.addr() + 3, "a second mapping");
    assert_eq!(ipc::exporter_alive(&b), Some(true));
    // The raw address of the import is device memory (acl pointers resolve it).
    assert!(memory::resolve_in(&mem, b.addr(), 4).is_ok());
    drop(b);
    wait_leases(0);
    drop(a);
}

#[test]
fn exporter_frees_first_memory_lives_until_import_closes() {
    let _g = serial();
    let mem = alloc::current_memory().unwrap();
    let before = mem.allocated_bytes();
    let a = alloc::malloc_ex(1 << 20, PagePolicy::HugeFirst, Some(true)).unwrap();
    write(&a, 100, &[9; 16]);
    let key = ipc::export(&a, 0, 0, Access::Open).unwrap();
    let b = ipc::import(&key, &mem, T).unwrap();
    a.clone().free().unwrap();
    drop(a);
    // Freed: no new imports (stale), but the open import still sees its bytes and the
    // block is not handed out again.
    let e = ipc_err(ipc::import(&key, &mem, T).unwrap_err());
    assert!(matches!(e, IpcError::Stale { .. }), "{e}");
    assert!(e.to_string().contains("freed"), "{e}");
    let c = alloc::malloc_ex(1 << 20, PagePolicy::HugeFirst, Some(true)).unwrap();
    write(&c, 100, &[0; 16]);
    assert_eq!(read(&b, 100, 16), vec![9; 16]);
    drop(c);
    drop(b);
    wait_leases(0);
    assert_eq!(ipc::stats().held, 0);
    assert_eq!(
        mem.allocated_bytes(),
        before,
        "the block went back once both sides let go"
    );
}

#[test]
fn importer_closes_first_then_exporter_frees() {
    let _g = serial();
    let mem = alloc::current_memory().unwrap();
    let before = mem.allocated_bytes();
    let a = alloc::malloc_ex(4096, PagePolicy::HugeFirst, Some(true)).unwrap();
    let key = ipc::export(&a, 0, 0, Access::Pids(vec![])).unwrap();
    drop(ipc::import(&key, &mem, T).unwrap());
    wait_leases(0);
    drop(a);
    assert_eq!(mem.allocated_bytes(), before);
    let e = ipc_err(ipc::import(&key, &mem, T).unwrap_err());
    assert!(matches!(e, IpcError::Stale { .. }), "key reuse after free: {e}");
}

#[test]
fn typed_errors() {
    let _g = serial();
    let mem = alloc::current_memory().unwrap();
    let plain = alloc::malloc(4096, PagePolicy::HugeFirst).unwrap();
    let e = ipc_err(ipc::export(&plain, 0, 0, Access::Open).unwrap_err());
    assert!(matches!(e, IpcError::NotShareable { .. }));
    assert!(e.to_string().contains("shareable=True"), "{e}");
    assert_eq!(Error::from(e).acl().code, 507022);
    let a = alloc::malloc_ex(4096, PagePolicy::HugeFirst, Some(true)).unwrap();
    assert!(ipc::export(&a, 4000, 200, Access::Open).is_err(), "beyond the buffer");
    let key = ipc::export(&a, 0, 0, Access::Pids(vec![])).unwrap();
    // Forged: the right exporter, a wrong secret.
    let forged = format!(
        "{}{}",
        &key[..key.len() - 4],
        if key.ends_with("0000") { "1111" } else { "0000" }
    );
    let e = ipc_err(ipc::import(&forged, &mem, T).unwrap_err());
    assert!(matches!(e, IpcError::UnknownKey { .. }), "{e}");
    for bad in ["", "hello", "npurt1-zz"] {
        let e = ipc_err(ipc::import(bad, &mem, T).unwrap_err());
        assert!(matches!(e, IpcError::MalformedKey { .. }), "{e}");
    }
    // A well-formed key of a process that does not exist.
    let e = ipc_err(ipc::import(&format!("npurt1-7ffffffe{}", &key[15..]), &mem, T).unwrap_err());
    assert!(matches!(e, IpcError::Stale { .. }), "{e}");
    assert!(matches!(
        ipc_err(ipc::set_import_pids(&key, &[0]).unwrap_err()),
        IpcError::BadPid { .. }
    ));
    ipc::set_import_pids(&key, &[1]).unwrap();
    ipc::close(&key).unwrap();
    let e = ipc_err(ipc::import(&key, &mem, T).unwrap_err());
    assert!(matches!(e, IpcError::Closed { .. }), "{e}");
    assert!(!ipc::is_own_key(&forged[..10]));
    let pool = memory::MemPool::new_ex(&mem, 1 << 20, true).unwrap();
    let p = pool.alloc(1000).unwrap();
    let k = ipc::export(&p, 0, 0, Access::Open).unwrap();
    assert_eq!(ipc::import(&k, &mem, T).unwrap().nbytes(), 1000);
}

#[test]
fn shareable_segments_count_against_the_device() {
    let _g = serial();
    let mem = alloc::current_memory().unwrap();
    mem.empty_cache();
    let r0 = mem.reserved_bytes();
    let a = alloc::malloc_ex(8 << 20, PagePolicy::HugeFirst, Some(true)).unwrap();
    assert!(mem.reserved_bytes() >= r0 + (8 << 20));
    assert!(mem.stats().page_bytes[PageKind::Normal.index()] >= 8 << 20);
    drop(a);
    mem.empty_cache();
    assert!(mem.reserved_bytes() <= r0 + (2 << 20), "released after empty_cache");
    let huge = mem.capacity() + 4096;
    let e = alloc::malloc_ex(huge, PagePolicy::HugeFirst, Some(true)).unwrap_err();
    assert_eq!(e.kind(), npurt_core::ErrorKind::OutOfMemory, "{e}");
    // A large shareable block gives its segment back when freed: the caching pool can
    // then use all of the device again.
    let big = alloc::malloc_ex(mem.capacity() / 2, PagePolicy::HugeFirst, Some(true)).unwrap();
    drop(big);
    let plain = alloc::malloc(mem.capacity() / 2 + (64 << 20), PagePolicy::HugeFirst).unwrap();
    drop(plain);
    mem.empty_cache();
}
