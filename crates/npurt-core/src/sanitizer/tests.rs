//! The sanitizer's rules on real allocations (no Python: sites are 0).

use super::report::{self, Finding};
use super::*;
use crate::memory::{self, AnyBuffer, PagePolicy};
use parking_lot::Mutex;

/// The sanitizer is process-wide: its tests take turns.
pub(super) static SERIAL: Mutex<()> = Mutex::new(());

fn kinds(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.kind).collect()
}

#[test]
fn tool_names_parse_and_bad_ones_are_refused() {
    assert_eq!(parse("memcheck").unwrap(), MEMCHECK);
    assert_eq!(parse("racecheck, synccheck").unwrap(), RACECHECK | SYNCCHECK);
    assert_eq!(parse("all").unwrap(), ALL);
    assert_eq!(parse("").unwrap(), 0);
    assert_eq!(parse("0").unwrap(), 0);
    let e = parse("memcheck,leakcheck").unwrap_err();
    assert!(e.to_string().contains("leakcheck"), "{e}");
}

#[test]
fn double_free_and_use_after_free_name_the_block() {
    let _g = SERIAL.lock();
    enable(MEMCHECK);
    report::take();
    let mem = crate::alloc::device_memory(0).unwrap();
    let buf = memory::malloc_on(&mem, 8192, PagePolicy::HugeFirst).unwrap();
    let any = AnyBuffer::Device(buf.clone());
    let base = buf.addr();
    raw_alloc_free(&any);
    buf.free().unwrap();
    assert!(memcheck::check_freed(base + 100, 8, "memcpy"));
    assert!(!memcheck::check_freed(base + 8192, 8, "memcpy"), "past the block");
    assert!(memcheck::bad_free(base, "free"));
    assert!(memcheck::bad_free(base + (1 << 40), "free"));
    let f = report::take();
    assert_eq!(kinds(&f), ["use-after-free", "double-free", "invalid-free"]);
    assert!(f[0].message.contains("use after free"), "{}", f[0].message);
    assert!(
        f[1].text().starts_with("========= Error: Invalid free of"),
        "{}",
        f[1].text()
    );
    enable(0);
    assert_eq!(memcheck::counts(), (0, 0));
}

fn raw_alloc_free(any: &AnyBuffer) {
    memcheck::raw_alloc(any);
    assert_eq!(memcheck::counts().0, 1);
    memcheck::raw_free(any);
    assert_eq!(memcheck::counts(), (0, 1));
}

#[test]
fn quarantined_pages_are_protected_once_only_the_quarantine_holds_them() {
    let _g = SERIAL.lock();
    enable(MEMCHECK);
    report::take();
    let host = memory::malloc_host(3 * 4096).unwrap();
    let any = AnyBuffer::Host(host.clone());
    memcheck::raw_alloc(&any);
    memcheck::raw_free(&any);
    let addr = host.addr();
    assert!(!memcheck::protected_at(addr), "a handle still holds it");
    drop(any);
    host.free().unwrap();
    let other = AnyBuffer::Host(memory::malloc_host(64).unwrap());
    memcheck::raw_alloc(&other); // sweeps the quarantine
    assert!(memcheck::protected_at(addr));
    enable(0);
    assert!(!memcheck::protected_at(addr));
}

#[test]
fn leaks_at_reset_and_exit_are_counted_in_the_summary() {
    let _g = SERIAL.lock();
    enable(MEMCHECK);
    report::take();
    let mem = crate::alloc::device_memory(0).unwrap();
    let a = AnyBuffer::Device(memory::malloc_on(&mem, 1000, PagePolicy::HugeFirst).unwrap());
    let b = AnyBuffer::Host(memory::malloc_host(24).unwrap());
    memcheck::raw_alloc(&a);
    memcheck::raw_alloc(&b);
    memcheck::device_reset(0);
    memcheck::at_exit();
    let f = report::take();
    assert_eq!(kinds(&f), ["leak", "leak"]);
    assert!(f[0].message.contains("at the reset of device 0"), "{}", f[0].message);
    assert!(f[1].message.contains("at exit"), "{}", f[1].message);
    let text = report::text(&f, true);
    assert!(
        text.contains("========= LEAK SUMMARY: 1024 bytes leaked in 2 allocations"),
        "{text}"
    );
    assert!(text.ends_with("========= ERROR SUMMARY: 2 errors\n"), "{text}");
    assert!(report::json(&f).starts_with("{\"errors\":2,\"leaked_bytes\":1024,"));
    enable(0);
}

#[test]
fn off_nothing_is_tracked() {
    let _g = SERIAL.lock();
    enable(0);
    report::take();
    let b = AnyBuffer::Host(memory::malloc_host(24).unwrap());
    memcheck::raw_alloc(&b);
    assert!(!memcheck::bad_free(1, "free"));
    assert_eq!(memcheck::counts(), (0, 0));
    assert_eq!(report::count(), 0);
}

#[test]
fn settling_gives_quarantined_blocks_back_before_the_figures_are_read() {
    let _g = SERIAL.lock();
    enable(MEMCHECK);
    report::take();
    let mem = crate::alloc::device_memory(0).unwrap();
    let before = mem.allocated_bytes();
    let buf = memory::malloc_on(&mem, 3 << 20, PagePolicy::HugeFirst).unwrap();
    let any = AnyBuffer::Device(buf.clone());
    memcheck::raw_alloc(&any);
    memcheck::raw_free(&any);
    let addr = buf.addr();
    drop((any, buf));
    let other = AnyBuffer::Host(memory::malloc_host(64).unwrap());
    memcheck::raw_alloc(&other); // sweeps: the freed block's pages are protected
    assert!(memcheck::protected_at(addr + 4096));
    assert!(
        mem.allocated_bytes() >= before + (3 << 20),
        "the quarantine holds the block"
    );
    assert_eq!(quarantine::settle(), 1);
    assert_eq!(memcheck::counts().1, 0);
    assert!(!memcheck::protected_at(addr + 4096));
    assert_eq!(mem.allocated_bytes(), before, "the program's own figure again");
    assert!(!memcheck::check_freed(addr, 8, "memcpy"), "released: no longer known");
    memcheck::raw_free(&other);
    enable(0);
    assert_eq!(quarantine::settle(), 0, "off: nothing to do");
}

#[test]
fn a_redzone_reports_reads_into_it_and_writes_past_the_end() {
    let _g = SERIAL.lock();
    enable(MEMCHECK | PADDING);
    report::take();
    let mem = crate::alloc::device_memory(0).unwrap();
    let buf = memory::malloc_on(&mem, 1056 + PAD_BYTES, PagePolicy::HugeFirst).unwrap();
    let any = AnyBuffer::Device(buf.clone());
    let base = buf.addr();
    memcheck::raw_alloc_sized(&any, 1056);
    assert!(!memcheck::check_freed(base, 1056, "memcpy"), "inside the allocation");
    assert!(
        memcheck::check_freed(base + 1000, 100, "memcpy"),
        "44 bytes into the redzone"
    );
    // SAFETY: the first bytes of the block's redzone (unprotected: before its first whole
    // page), which the test owns; a raw write past the end, as a buggy program makes.
    unsafe { std::ptr::write_bytes((base + 1056) as *mut u8, 0x7F, 16) };
    memcheck::raw_free(&any);
    let f = report::take();
    assert_eq!(kinds(&f), ["out-of-bounds", "out-of-bounds"], "{f:?}");
    assert!(
        f[0].message
            .contains("44 bytes past the end of the 1056-byte allocation"),
        "{}",
        f[0].message
    );
    assert!(
        f[1].message
            .contains("16 bytes of its redzone (bytes 1056..1072 of the allocation) were overwritten"),
        "{}",
        f[1].message
    );
    enable(0);
}
