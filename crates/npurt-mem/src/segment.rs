//! [`Segment`]: an RAII anonymous mapping obtained through the huge-page ladder.
//!
//! Ladder (for [`PagePolicy::HugeFirst`] above 1 MiB and for [`PagePolicy::HugeOnly`]):
//! 1. `mmap(MAP_HUGETLB | MAP_HUGE_2MB)` of the size rounded to 2 MiB: pages are
//!    reserved at map time, so success means real huge pages;
//! 2. THP: map `len + 2 MiB`, trim to a 2 MiB aligned range, `madvise(MADV_HUGEPAGE)`
//!    (only if the kernel's THP mode is `always`/`madvise`). A refused madvise is not
//!    an error: the mapping stays and is reported [`PageKind::Normal`];
//! 3. normal pages (`HugeOnly` fails with `HugePagesUnavailable` instead).
//!
//! [`HugePageMode`] (`NPURT_HUGEPAGES`) can switch rungs off.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use crate::align::round_up;
use crate::error::MemError;
use crate::page::{page_size, thp_enabled, HugePageMode, PageKind, PagePolicy, HUGE_MIN_REQUEST, HUGE_PAGE_SIZE};

/// Largest mapping the ladder accepts (keeps all rounding arithmetic far from overflow).
const MAX_MAP: usize = 1 << 56;

/// An owned, read-write, private (or memfd-shared) mapping; unmapped on drop.
#[derive(Debug)]
pub struct Segment {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) len: usize,
    pub(crate) kind: PageKind,
    pub(crate) fd: Option<OwnedFd>,
}

// SAFETY: a Segment exclusively owns its mapping (plain memory, no thread affinity);
// the raw pointer is only an address and Segment exposes no interior mutability
// itself, so moving or sharing the handle between threads is sound.
unsafe impl Send for Segment {}
// SAFETY: see `Send`; `&Segment` only reads ptr/len/kind/fd.
unsafe impl Sync for Segment {}

/// Raw anonymous/shared mmap; returns the start or the OS error.
pub(crate) fn raw_mmap(
    len: usize,
    flags: libc::c_int,
    fd: RawFd,
    offset: libc::off_t,
) -> Result<NonNull<u8>, MemError> {
    // SAFETY: a fresh mapping with a null hint never aliases existing Rust objects;
    // the kernel validates len/flags/fd and reports failure as MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            offset,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(MemError::last_os("mmap"));
    }
    NonNull::new(p.cast::<u8>()).ok_or(MemError::Os { op: "mmap", errno: 0 })
}

/// Unmaps `[addr, addr+len)`; errors are ignored (nothing can be done on drop paths).
///
/// # Safety
/// The range must be a mapping (or part of one) owned by the caller that nothing
/// references any more.
unsafe fn raw_munmap(addr: *mut u8, len: usize) {
    if len > 0 {
        // SAFETY: guaranteed by the caller.
        unsafe { libc::munmap(addr.cast(), len) };
    }
}

fn madvise(ptr: NonNull<u8>, len: usize, advice: libc::c_int) -> bool {
    // SAFETY: madvise with HUGEPAGE/NOHUGEPAGE only changes VMA flags of a range we own;
    // it does not touch the contents.
    unsafe { libc::madvise(ptr.as_ptr().cast(), len, advice) == 0 }
}

impl Segment {
    /// Maps `size` bytes under `policy`, honouring `NPURT_HUGEPAGES`.
    pub fn map(size: usize, policy: PagePolicy) -> Result<Segment, MemError> {
        Segment::map_with(size, policy, HugePageMode::from_env())
    }

    /// Maps `size` bytes under `policy` with an explicit [`HugePageMode`].
    /// `len()` is `size` rounded up to the page size of the kind obtained.
    pub fn map_with(size: usize, policy: PagePolicy, mode: HugePageMode) -> Result<Segment, MemError> {
        check_size(size)?;
        let want_huge = match policy {
            PagePolicy::NormalOnly => false,
            PagePolicy::HugeFirst => size > HUGE_MIN_REQUEST,
            PagePolicy::HugeOnly => true,
        };
        if want_huge {
            if mode.allows_hugetlb() {
                if let Some(seg) = Segment::try_hugetlb(size) {
                    return Ok(seg);
                }
                log::debug!("no hugetlb pages for a {size} B segment: trying transparent huge pages");
            }
            if mode.allows_thp() && thp_enabled() {
                let seg = Segment::map_thp(size)?;
                if seg.kind == PageKind::Thp || policy == PagePolicy::HugeFirst {
                    if seg.kind != PageKind::Thp {
                        log::debug!("madvise(MADV_HUGEPAGE) refused for a {size} B segment: normal pages");
                    }
                    return Ok(seg);
                }
            }
            if policy == PagePolicy::HugeOnly {
                return Err(MemError::HugePagesUnavailable { requested: size });
            }
        }
        Segment::map_normal(size, policy == PagePolicy::NormalOnly)
    }

    fn try_hugetlb(size: usize) -> Option<Segment> {
        let len = round_up(size, HUGE_PAGE_SIZE)?;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | libc::MAP_HUGE_2MB;
        let ptr = raw_mmap(len, flags, -1, 0).ok()?;
        Some(Segment {
            ptr,
            len,
            kind: PageKind::HugeTlb,
            fd: None,
        })
    }

    fn map_thp(size: usize) -> Result<Segment, MemError> {
        let ps = page_size();
        let len = round_up(size, ps).expect("checked size");
        let total = len + HUGE_PAGE_SIZE;
        let base = raw_mmap(total, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)?;
        let b = base.as_ptr() as usize;
        let start = round_up(b, HUGE_PAGE_SIZE).expect("address space");
        let head = start - b;
        let tail = total - head - len;
        // SAFETY: head and tail are the page-aligned unused ends of the mapping created
        // just above; nothing references them.
        unsafe {
            raw_munmap(base.as_ptr(), head);
            raw_munmap((start + len) as *mut u8, tail);
        }
        let ptr = NonNull::new(start as *mut u8).expect("non-null mapping");
        let kind = if madvise(ptr, len, libc::MADV_HUGEPAGE) {
            PageKind::Thp
        } else {
            PageKind::Normal
        };
        Ok(Segment {
            ptr,
            len,
            kind,
            fd: None,
        })
    }

    fn map_normal(size: usize, no_huge: bool) -> Result<Segment, MemError> {
        let len = round_up(size, page_size()).expect("checked size");
        let ptr = raw_mmap(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)?;
        if no_huge {
            // Refusal (e.g. kernels without THP) is harmless: pages are normal anyway.
            madvise(ptr, len, libc::MADV_NOHUGEPAGE);
        }
        Ok(Segment {
            ptr,
            len,
            kind: PageKind::Normal,
            fd: None,
        })
    }

    /// Start of the mapping (page aligned; 2 MiB aligned for hugetlb/THP).
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Start address as an integer.
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Mapped length in bytes (≥ the requested size).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (mappings are never empty); present for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What the ladder obtained.
    pub fn page_kind(&self) -> PageKind {
        self.kind
    }

    /// The memfd behind a [`map_shared`](Self::map_shared) segment.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|f| f.as_fd())
    }

    /// Raw memfd number, if shared.
    pub fn raw_fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// True for memfd-backed segments.
    pub fn is_shared(&self) -> bool {
        self.fd.is_some()
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the Segment owns exactly [ptr, ptr+len) since construction; dropping
        // it ends every borrow handed out through it (callers of `ptr()` promise not
        // to use the address past the Segment's lifetime).
        unsafe { raw_munmap(self.ptr.as_ptr(), self.len) };
    }
}

pub(crate) fn check_size(size: usize) -> Result<(), MemError> {
    if size == 0 {
        return Err(MemError::InvalidSize {
            size,
            reason: "mapping size must be > 0",
        });
    }
    if size > MAX_MAP {
        return Err(MemError::InvalidSize {
            size,
            reason: "mapping size too large",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_only_and_small_huge_first() {
        let s = Segment::map_with(10_000, PagePolicy::NormalOnly, HugePageMode::Auto).unwrap();
        assert_eq!(s.page_kind(), PageKind::Normal);
        assert_eq!(s.len(), round_up(10_000, page_size()).unwrap());
        let s = Segment::map_with(1 << 20, PagePolicy::HugeFirst, HugePageMode::Auto).unwrap();
        assert_eq!(s.page_kind(), PageKind::Normal);
        assert!(Segment::map_with(0, PagePolicy::HugeFirst, HugePageMode::Auto).is_err());
        assert!(Segment::map_with(usize::MAX, PagePolicy::NormalOnly, HugePageMode::Auto).is_err());
    }

    #[test]
    fn memory_is_usable() {
        let s = Segment::map_with(4 << 20, PagePolicy::HugeFirst, HugePageMode::Auto).unwrap();
        // SAFETY: the segment is a live RW mapping of s.len() bytes owned by this test.
        let m = unsafe { std::slice::from_raw_parts_mut(s.ptr(), s.len()) };
        m.fill(0xA5);
        assert!(m.iter().all(|&b| b == 0xA5));
        if s.page_kind() != PageKind::Normal {
            assert_eq!(s.addr() % HUGE_PAGE_SIZE, 0);
        }
    }
}
