//! [`HostAlloc`]: pinned ("page-locked") host memory: an anonymous mapping, `mlock`ed
//! where the process may lock memory.

use std::ptr::NonNull;

use crate::align::round_up;
use crate::error::MemError;
use crate::page::page_size;

/// Largest host allocation accepted.
pub(crate) const MAX_HOST: usize = 1 << 48;

/// An anonymous host mapping, `mlock`ed when the process may lock it. Page aligned
/// (hence 64-byte aligned). Unlocked and unmapped on drop.
#[derive(Debug)]
pub struct HostAlloc {
    ptr: NonNull<u8>,
    len: usize,
    locked: bool,
}

// SAFETY: HostAlloc exclusively owns its mapping; the pointer is just an address with
// no thread affinity, and shared access only reads ptr/len/locked.
unsafe impl Send for HostAlloc {}
// SAFETY: see Send.
unsafe impl Sync for HostAlloc {}

impl HostAlloc {
    /// Maps `size` bytes (rounded up to the page size) and tries to `mlock` them.
    /// A refused lock (RLIMIT_MEMLOCK, no CAP_IPC_LOCK) is not an error: see
    /// [`is_locked`](Self::is_locked).
    pub fn new(size: usize) -> Result<HostAlloc, MemError> {
        if size == 0 {
            return Err(MemError::InvalidSize {
                size,
                reason: "host allocation size must be > 0",
            });
        }
        if size > MAX_HOST {
            return Err(MemError::InvalidSize {
                size,
                reason: "host allocation too large",
            });
        }
        let len = round_up(size, page_size()).expect("bounded size");
        // SAFETY: a fresh private anonymous mapping with a null hint aliases nothing.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(MemError::last_os("mmap"));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(MemError::Os { op: "mmap", errno: 0 })?;
        // SAFETY: [p, p+len) is the mapping created above; mlock only pins its pages.
        let locked = unsafe { libc::mlock(p, len) } == 0;
        Ok(HostAlloc { ptr, len, locked })
    }

    /// Start of the allocation.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Start address as an integer.
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Length in bytes (page rounded).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false; present for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `mlock` succeeded.
    pub fn is_locked(&self) -> bool {
        self.locked
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: [ptr, ptr+len) is a live RW mapping owned by self; the shared borrow
        // of self prevents concurrent mutation through `as_mut_slice`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: the mapping is owned by self and no borrow of it outlives self.
        unsafe {
            if self.locked {
                libc::munlock(self.ptr.as_ptr().cast(), self.len);
            }
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_alloc_basics() {
        let mut h = HostAlloc::new(10_000).unwrap();
        assert_eq!(h.addr() % 64, 0);
        assert!(h.len() >= 10_000);
        h.as_mut_slice().fill(7);
        assert!(h.as_slice().iter().all(|&b| b == 7));
        // Locking may be refused by RLIMIT_MEMLOCK; both outcomes are valid.
        let _ = h.is_locked();
        assert!(HostAlloc::new(0).is_err());
        assert!(HostAlloc::new(usize::MAX).is_err());
    }
}
