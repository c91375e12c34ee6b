//! Shareable segments: memory backed by a `memfd` (`MAP_SHARED`) whose descriptor another
//! process can map ([`Segment::map_shared`]), and the other side's mapping of such a
//! descriptor ([`Segment::map_fd`]).
//!
//! The memfd is created `MFD_CLOEXEC | MFD_ALLOW_SEALING`, sized, then sealed with
//! `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`: its size can never change, so a process
//! that maps it can never be sent `SIGBUS` by a truncation. [`Segment::map_fd`] refuses a
//! descriptor without those seals or too small for the requested range. Nothing is ever
//! named in `/dev/shm` (a memfd has no path); the pages live as long as a descriptor or a
//! mapping of them does.
//!
//! Page kind: a hugetlb memfd (`MFD_HUGETLB`) is tried above 1 MiB when the mode allows
//! it; otherwise pages are [`PageKind::Normal`]. THP for shared memory is governed by
//! `shmem_enabled` (`never` on the target machines), so shareable memory is never THP.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use crate::align::{round_down, round_up};
use crate::block::BState;
use crate::error::MemError;
use crate::info::SharedRegion;
use crate::page::{page_size, HugePageMode, PageKind, PagePolicy, HUGE_MIN_REQUEST, HUGE_PAGE_SIZE};
use crate::pool::CachingPool;
use crate::segment::{check_size, raw_mmap, Segment};

/// The seals every shareable segment carries (and an imported descriptor must carry).
pub const SHARE_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

impl Segment {
    /// A shareable segment backed by `memfd_create` (`MAP_SHARED`), whose [`fd`](Self::fd)
    /// can be passed to another process and mapped there. Honours `NPURT_HUGEPAGES`.
    pub fn map_shared(size: usize) -> Result<Segment, MemError> {
        Segment::map_shared_with(size, HugePageMode::from_env())
    }

    /// [`map_shared`](Self::map_shared) with an explicit mode.
    pub fn map_shared_with(size: usize, mode: HugePageMode) -> Result<Segment, MemError> {
        check_size(size)?;
        if mode.allows_hugetlb() && size > HUGE_MIN_REQUEST {
            let len = round_up(size, HUGE_PAGE_SIZE).expect("checked size");
            let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING | libc::MFD_HUGETLB | libc::MFD_HUGE_2MB;
            if let Ok(seg) = Segment::memfd_map(len, flags, PageKind::HugeTlb) {
                return Ok(seg);
            }
        }
        let len = round_up(size, page_size()).expect("checked size");
        Segment::memfd_map(len, libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING, PageKind::Normal)
    }

    fn memfd_map(len: usize, flags: libc::c_uint, kind: PageKind) -> Result<Segment, MemError> {
        // SAFETY: the name is a valid NUL-terminated C string; memfd_create returns a
        // new descriptor or -1.
        let raw = unsafe { libc::memfd_create(c"npurt-shareable".as_ptr(), flags) };
        if raw < 0 {
            return Err(MemError::last_os("memfd_create"));
        }
        // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let off = libc::off_t::try_from(len).map_err(|_| MemError::InvalidSize {
            size: len,
            reason: "too large for a memfd",
        })?;
        // SAFETY: ftruncate on a descriptor we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), off) } != 0 {
            return Err(MemError::last_os("ftruncate"));
        }
        // SAFETY: F_ADD_SEALS on a memfd we own created with MFD_ALLOW_SEALING.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SHARE_SEALS) } != 0 {
            return Err(MemError::last_os("fcntl(F_ADD_SEALS)"));
        }
        let ptr = raw_mmap(len, libc::MAP_SHARED, fd.as_raw_fd(), 0)?;
        Ok(Segment {
            ptr,
            len,
            kind,
            fd: Some(fd),
        })
    }

    /// Maps `len` bytes at `offset` of a shareable descriptor received from another
    /// process (read-write, `MAP_SHARED`). `offset` must be page aligned. The descriptor
    /// must carry [`SHARE_SEALS`] (its size can never shrink) and hold `offset + len`
    /// bytes; otherwise [`MemError::InvalidSize`] says why. The mapping keeps the memory
    /// alive; the caller may close `fd` afterwards.
    pub fn map_fd(fd: BorrowedFd<'_>, offset: usize, len: usize) -> Result<Segment, MemError> {
        check_size(len)?;
        if offset % page_size() != 0 {
            return Err(MemError::InvalidSize {
                size: offset,
                reason: "a mapping offset must be page aligned",
            });
        }
        // SAFETY: F_GET_SEALS only reads the descriptor's seals.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return Err(MemError::InvalidSize {
                size: len,
                reason: "the descriptor is not a sealed npurt memfd (its size could shrink)",
            });
        }
        // SAFETY: a zeroed `stat` is a valid out-parameter; fstat fills it or fails.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a valid, writable stat struct.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(MemError::last_os("fstat"));
        }
        let end = offset.checked_add(len).ok_or(MemError::InvalidSize {
            size: len,
            reason: "offset + length overflows",
        })?;
        if (st.st_size as u64) < end as u64 {
            return Err(MemError::InvalidSize {
                size: end,
                reason: "the range lies beyond the end of the shared memory",
            });
        }
        let map_len = round_up(len, page_size()).expect("checked size");
        let off = libc::off_t::try_from(offset).map_err(|_| MemError::InvalidSize {
            size: offset,
            reason: "offset too large",
        })?;
        let ptr: NonNull<u8> = raw_mmap(map_len, libc::MAP_SHARED, fd.as_raw_fd(), off)?;
        Ok(Segment {
            ptr,
            len: map_len,
            kind: PageKind::Normal,
            fd: None,
        })
    }

    /// A new descriptor of this segment's memfd (`F_DUPFD_CLOEXEC`), to send to another
    /// process; `None` for segments that are not shareable.
    pub fn dup_fd(&self) -> Option<Result<OwnedFd, MemError>> {
        let fd = self.fd.as_ref()?;
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new one or -1.
        let raw = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if raw < 0 {
            return Some(Err(MemError::last_os("fcntl(F_DUPFD_CLOEXEC)")));
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        Some(Ok(unsafe { OwnedFd::from_raw_fd(raw) }))
    }
}

/// A pool's segment: the huge-page ladder, or a sealed memfd for a shareable pool
/// (`HugeOnly` then needs a hugetlb memfd).
pub(crate) fn map_for_pool(
    size: usize,
    policy: PagePolicy,
    mode: HugePageMode,
    shareable: bool,
) -> Result<Segment, MemError> {
    if !shareable {
        return Segment::map_with(size, policy, mode);
    }
    let mode = if policy == PagePolicy::NormalOnly {
        HugePageMode::Off
    } else {
        mode
    };
    let seg = Segment::map_shared_with(size, mode)?;
    if policy == PagePolicy::HugeOnly && seg.page_kind() != PageKind::HugeTlb {
        return Err(MemError::HugePagesUnavailable { requested: size });
    }
    Ok(seg)
}

impl CachingPool {
    /// What another process needs to map `[addr, addr + len)`, which must lie inside one
    /// live allocation of this (shareable) pool: a new descriptor of the segment's memfd
    /// and the whole pages covering the range. `None` if the range is not inside a live
    /// allocation or the pool is not shareable.
    pub fn share(&self, addr: usize, len: usize) -> Option<Result<SharedRegion, MemError>> {
        if !self.shareable || len == 0 {
            return None;
        }
        let st = self.state.lock();
        let i = st.containing(addr)?;
        let b = &st.blocks[i];
        if b.state != BState::Allocated || addr.checked_add(len)? > b.addr + b.requested.max(1) {
            return None;
        }
        let rec = st.segs[b.seg as usize].as_ref()?;
        let gran = if rec.seg.page_kind() == PageKind::HugeTlb {
            HUGE_PAGE_SIZE
        } else {
            page_size()
        };
        let rel = addr - rec.seg.addr();
        let map_offset = round_down(rel, gran);
        let end = round_up(rel + len, gran)?.min(rec.seg.len());
        Some(rec.seg.dup_fd()?.map(|fd| SharedRegion {
            fd,
            map_offset,
            map_len: end - map_offset,
            data_offset: rel - map_offset,
            page_kind: rec.seg.page_kind(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn sealed_and_mappable_elsewhere() {
        let s = Segment::map_shared_with(3 << 20, HugePageMode::Off).unwrap();
        assert_eq!(s.page_kind(), PageKind::Normal);
        let fd = s.fd().unwrap();
        // SAFETY: F_GET_SEALS only reads.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        assert_eq!(seals & SHARE_SEALS, SHARE_SEALS);
        // SAFETY: ftruncate on our own descriptor; the seal must refuse it.
        assert_ne!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) }, 0);
        // SAFETY: live RW mapping of s.len() bytes owned by the test.
        unsafe { s.ptr().add(page_size() + 7).write(0x5A) };
        let dup = s.dup_fd().unwrap().unwrap();
        let m = Segment::map_fd(dup.as_fd(), page_size(), 100).unwrap();
        drop(dup);
        // SAFETY: byte 7 of the 1-page mapping just created.
        assert_eq!(unsafe { m.ptr().add(7).read() }, 0x5A);
        assert!(Segment::map_fd(s.fd().unwrap(), 100, 100).is_err(), "unaligned offset");
        assert!(Segment::map_fd(s.fd().unwrap(), 0, 4 << 20).is_err(), "beyond the end");
        let plain = Segment::map_with(4096, crate::PagePolicy::NormalOnly, HugePageMode::Off).unwrap();
        assert!(plain.dup_fd().is_none());
    }

    #[test]
    fn shareable_pool_blocks_are_shared() {
        let pool = CachingPool::new(crate::PoolConfig {
            shareable: true,
            ..crate::PoolConfig::new(64 << 20)
        })
        .unwrap();
        let a = pool.alloc(10_000).unwrap();
        let b = pool.alloc(3 << 20).unwrap();
        assert_eq!(pool.lookup(b).unwrap().page_kind, PageKind::Normal);
        // SAFETY: b is a live 3 MiB block of the pool.
        unsafe { (b as *mut u8).add(5000).write(9) };
        let r = pool.share(b + 4999, 10).unwrap().unwrap();
        assert_eq!(r.map_offset % page_size(), 0);
        let m = Segment::map_fd(r.fd.as_fd(), r.map_offset, r.map_len).unwrap();
        // SAFETY: data_offset + 1 lies inside the mapping (it covers the 10 bytes).
        assert_eq!(unsafe { m.ptr().add(r.data_offset + 1).read() }, 9);
        assert!(pool.share(a, 20_000).is_none(), "beyond the allocation");
        pool.free(a).unwrap();
        assert!(pool.share(a, 1).is_none(), "freed");
        let plain = CachingPool::new(crate::PoolConfig::new(1 << 20)).unwrap();
        let c = plain.alloc(512).unwrap();
        assert!(plain.share(c, 1).is_none());
    }

    #[test]
    fn unsealed_descriptor_is_refused() {
        // SAFETY: a fresh memfd that this test owns.
        let raw = unsafe { libc::memfd_create(c"plain".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on our own descriptor.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 8192) }, 0);
        let e = Segment::map_fd(fd.as_fd(), 0, 4096).unwrap_err();
        assert!(e.to_string().contains("sealed"), "{e}");
    }
}
