//! Huge-page ladder: every policy under every mode; fallback never fatal; HugeOnly
//! fails only when neither rung is available; THP really backs touched memory.

use npurt_mem::{smaps_anon_huge_bytes, thp_enabled, HugePageMode, MemError, PageKind, PagePolicy, Segment};

const MIB: usize = 1 << 20;
const MODES: [HugePageMode; 4] = [
    HugePageMode::Auto,
    HugePageMode::HugeTlb,
    HugePageMode::Thp,
    HugePageMode::Off,
];

fn touch(seg: &Segment) {
    let mut off = 0;
    while off < seg.len() {
        // SAFETY: off < len and the segment is a live RW mapping owned by the test.
        unsafe { seg.ptr().add(off).write_volatile(1) };
        off += 4096;
    }
}

#[test]
fn normal_only_is_always_normal() {
    for mode in MODES {
        for size in [1, 4096, MIB, 4 * MIB + 123] {
            let s = Segment::map_with(size, PagePolicy::NormalOnly, mode).unwrap();
            assert_eq!(s.page_kind(), PageKind::Normal);
            assert!(s.len() >= size && s.addr() & 4095 == 0);
        }
    }
}

#[test]
fn huge_first_never_fails_and_small_is_normal() {
    for mode in MODES {
        let s = Segment::map_with(MIB, PagePolicy::HugeFirst, mode).unwrap();
        assert_eq!(s.page_kind(), PageKind::Normal, "≤ 1 MiB uses normal pages");
        let s = Segment::map_with(6 * MIB + 5, PagePolicy::HugeFirst, mode).unwrap();
        assert!(s.len() >= 6 * MIB + 5);
        match s.page_kind() {
            PageKind::HugeTlb => {
                assert!(mode.allows_hugetlb());
                assert_eq!(s.len() % (2 * MIB), 0);
                assert_eq!(s.addr() % (2 * MIB), 0);
            }
            PageKind::Thp => {
                assert!(mode.allows_thp() && thp_enabled());
                assert_eq!(s.addr() % (2 * MIB), 0);
            }
            PageKind::Normal => {
                // Allowed only when THP could not be used.
                assert!(!(mode.allows_thp() && thp_enabled()), "mode {mode:?} should reach THP");
            }
        }
        touch(&s);
    }
}

#[test]
fn huge_only_errors_when_no_rung_is_available() {
    let err = Segment::map_with(4 * MIB, PagePolicy::HugeOnly, HugePageMode::Off).unwrap_err();
    assert!(matches!(err, MemError::HugePagesUnavailable { requested } if requested == 4 * MIB));
    assert_eq!(err.code(), 207_001);
    match Segment::map_with(4 * MIB, PagePolicy::HugeOnly, HugePageMode::Thp) {
        Ok(s) => assert_eq!(s.page_kind(), PageKind::Thp),
        Err(e) => {
            assert!(!thp_enabled());
            assert!(matches!(e, MemError::HugePagesUnavailable { .. }));
        }
    }
    // hugetlb pages may or may not be reserved on this machine: both outcomes are fine.
    match Segment::map_with(4 * MIB, PagePolicy::HugeOnly, HugePageMode::HugeTlb) {
        Ok(s) => assert_eq!(s.page_kind(), PageKind::HugeTlb),
        Err(e) => assert!(matches!(e, MemError::HugePagesUnavailable { .. })),
    }
    // HugeOnly applies even to small requests.
    if let Ok(s) = Segment::map_with(4096, PagePolicy::HugeOnly, HugePageMode::Auto) {
        assert_ne!(s.page_kind(), PageKind::Normal);
    }
}

#[test]
fn thp_segment_gets_huge_pages_after_first_touch() {
    let s = Segment::map_with(64 * MIB, PagePolicy::HugeFirst, HugePageMode::Thp).unwrap();
    touch(&s);
    let huge = smaps_anon_huge_bytes(s.addr(), s.len());
    eprintln!(
        "kind {:?}, THP enabled {}, AnonHugePages {:?}",
        s.page_kind(),
        thp_enabled(),
        huge
    );
    if s.page_kind() == PageKind::Thp && thp_enabled() {
        assert!(huge.unwrap() > 0, "THP-eligible segment got no huge pages");
    }
    let n = Segment::map_with(8 * MIB, PagePolicy::NormalOnly, HugePageMode::Auto).unwrap();
    touch(&n);
    assert_eq!(smaps_anon_huge_bytes(n.addr(), n.len()), Some(0));
}

#[test]
fn shared_segment_is_visible_through_its_fd() {
    for mode in [HugePageMode::Off, HugePageMode::Auto] {
        let s = Segment::map_shared_with(3 * MIB, mode).unwrap();
        assert!(s.is_shared() && s.fd().is_some());
        assert!(matches!(s.page_kind(), PageKind::Normal | PageKind::HugeTlb));
        // SAFETY: live RW mapping of s.len() bytes owned by the test.
        unsafe { s.ptr().add(12345).write(0x5A) };
        let fd = s.raw_fd().unwrap();
        // SAFETY: maps the memfd a second time (as another process would); the mapping
        // is unmapped below before `s` goes away.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), s.len(), libc::PROT_READ, libc::MAP_SHARED, fd, 0) };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: offset 12345 < s.len() inside the read-only mapping just created.
        let v = unsafe { p.cast::<u8>().add(12345).read() };
        assert_eq!(v, 0x5A);
        // SAFETY: unmaps exactly the mapping created above.
        unsafe { libc::munmap(p, s.len()) };
    }
    assert!(Segment::map_shared(0).is_err());
}
