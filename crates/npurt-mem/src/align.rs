//! Size rounding rules: AscendCL's `aclrtMalloc` padding and the pool's block rounding.
//!
//! All helpers are checked: a size of 0, a size above `isize::MAX` or an overflow while
//! rounding gives [`MemError::InvalidSize`], never a panic.

use crate::error::MemError;
use crate::page::PagePolicy;

/// Padding AscendCL adds behind every `aclrtMalloc` buffer.
pub const ACL_PAD: usize = 32;
/// Alignment of AscendCL sizes.
pub const ACL_SIZE_ALIGN: usize = 32;
/// Alignment every block start honours (ACL promises 64; the pool gives 512).
pub const BLOCK_START_ALIGN: usize = 64;
/// Granularity of pool blocks (torch's `kMinBlockSize`).
pub const BLOCK_ROUND: usize = 512;

/// Largest size any helper accepts.
pub const MAX_SIZE: usize = isize::MAX as usize;

/// `n` rounded up to a multiple of `align` (a power of two), `None` on overflow.
#[inline]
pub fn round_up(n: usize, align: usize) -> Option<usize> {
    debug_assert!(align.is_power_of_two());
    n.checked_add(align - 1).map(|v| v & !(align - 1))
}

/// `n` rounded down to a multiple of `align` (a power of two).
#[inline]
pub fn round_down(n: usize, align: usize) -> usize {
    debug_assert!(align.is_power_of_two());
    n & !(align - 1)
}

#[inline]
fn check(n: usize) -> Result<(), MemError> {
    if n == 0 {
        Err(MemError::InvalidSize {
            size: n,
            reason: "size must be > 0",
        })
    } else if n > MAX_SIZE {
        Err(MemError::InvalidSize {
            size: n,
            reason: "size exceeds isize::MAX",
        })
    } else {
        Ok(())
    }
}

#[inline]
fn overflow(n: usize) -> MemError {
    MemError::InvalidSize {
        size: n,
        reason: "size overflows when rounded",
    }
}

/// Bytes `aclrtMalloc(n)` really takes: `round_up(n, 32) + 32`.
#[inline]
pub fn acl_malloc_size(n: usize) -> Result<usize, MemError> {
    check(n)?;
    round_up(n, ACL_SIZE_ALIGN)
        .and_then(|v| v.checked_add(ACL_PAD))
        .filter(|&v| v <= MAX_SIZE)
        .ok_or_else(|| overflow(n))
}

/// Bytes `aclrtMallocAlign32(n)` takes: `round_up(n, 32)` (no padding).
#[inline]
pub fn acl_malloc_align32_size(n: usize) -> Result<usize, MemError> {
    check(n)?;
    round_up(n, ACL_SIZE_ALIGN)
        .filter(|&v| v <= MAX_SIZE)
        .ok_or_else(|| overflow(n))
}

/// ACL's `aclrtMemMallocPolicy` (its low byte) as a page policy, and whether `aclrtMalloc`
/// pads under it: 0/3 HUGE_FIRST(_P2P), 1/4 HUGE_ONLY(_P2P), 2/5 NORMAL_ONLY(_P2P) (P2P like
/// its base), 6/7 HUGE1G_ONLY(_P2P) as huge-only without the pad; any other value behaves
/// like HUGE_FIRST, as ACL does.
pub fn acl_policy(policy: u32) -> (PagePolicy, bool) {
    match policy & 0xFF {
        1 | 4 => (PagePolicy::HugeOnly, true),
        2 | 5 => (PagePolicy::NormalOnly, true),
        6 | 7 => (PagePolicy::HugeOnly, false),
        _ => (PagePolicy::HugeFirst, true),
    }
}

/// What `aclrtMalloc(n, policy)` (or, with `align32`, `aclrtMallocAlign32`) allocates: the
/// bytes ([`acl_malloc_size`], or [`acl_malloc_align32_size`] without the pad) and the page
/// policy ([`acl_policy`]).
pub fn acl_malloc(n: usize, policy: u32, align32: bool) -> Result<(usize, PagePolicy), MemError> {
    let (page, pad) = acl_policy(policy);
    let bytes = if pad && !align32 {
        acl_malloc_size(n)?
    } else {
        acl_malloc_align32_size(n)?
    };
    Ok((bytes, page))
}

/// Pool block size for a request of `n` bytes: `round_up(n, 512)`.
#[inline]
pub fn block_size(n: usize) -> Result<usize, MemError> {
    check(n)?;
    round_up(n, BLOCK_ROUND)
        .filter(|&v| v <= MAX_SIZE)
        .ok_or_else(|| overflow(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_sizes() {
        assert_eq!(acl_malloc_size(1).unwrap(), 64);
        assert_eq!(acl_malloc_size(32).unwrap(), 64);
        assert_eq!(acl_malloc_size(33).unwrap(), 96);
        assert_eq!(acl_malloc_align32_size(1).unwrap(), 32);
        assert_eq!(acl_malloc_align32_size(64).unwrap(), 64);
        assert_eq!(block_size(1).unwrap(), 512);
        assert_eq!(block_size(513).unwrap(), 1024);
        assert_eq!(block_size(acl_malloc_size(480).unwrap()).unwrap(), 512);
        assert_eq!(block_size(acl_malloc_size(481).unwrap()).unwrap(), 1024);
    }

    #[test]
    fn acl_policies() {
        assert_eq!(acl_malloc(1, 0, false).unwrap(), (64, PagePolicy::HugeFirst));
        assert_eq!(acl_malloc(1, 0, true).unwrap(), (32, PagePolicy::HugeFirst));
        assert_eq!(acl_malloc(33, 4, false).unwrap(), (96, PagePolicy::HugeOnly));
        assert_eq!(acl_malloc(33, 5, false).unwrap(), (96, PagePolicy::NormalOnly));
        assert_eq!(acl_malloc(33, 6, false).unwrap(), (64, PagePolicy::HugeOnly));
        assert_eq!(acl_malloc(33, 0x100 | 2, false).unwrap(), (96, PagePolicy::NormalOnly));
        assert_eq!(acl_policy(99), (PagePolicy::HugeFirst, true));
        assert!(acl_malloc(0, 0, false).is_err());
    }

    #[test]
    fn bad_sizes_are_errors() {
        for f in [acl_malloc_size, acl_malloc_align32_size, block_size] {
            assert!(matches!(f(0), Err(MemError::InvalidSize { size: 0, .. })));
            assert!(matches!(f(usize::MAX), Err(MemError::InvalidSize { .. })));
            assert!(matches!(f(MAX_SIZE + 1), Err(MemError::InvalidSize { .. })));
        }
        assert!(acl_malloc_size(MAX_SIZE).is_err());
        assert!(block_size(MAX_SIZE).is_err());
        assert_eq!(round_up(usize::MAX, 512), None);
        assert_eq!(round_down(1000, 512), 512);
    }
}
