//! Typed errors of the memory layer, with their AscendCL (`ACL_ERROR_*`) codes.

use std::fmt;

/// `ACL_ERROR_RT_PARAM_INVALID`
pub const ACL_ERROR_RT_PARAM_INVALID: u32 = 107_000;
/// `ACL_ERROR_RT_MEMORY_ALLOCATION`
pub const ACL_ERROR_RT_MEMORY_ALLOCATION: u32 = 207_001;
/// `ACL_ERROR_RT_MEMORY_FREE`
pub const ACL_ERROR_RT_MEMORY_FREE: u32 = 207_002;
/// `ACL_ERROR_RT_DRV_INTERNAL_ERROR`
pub const ACL_ERROR_RT_DRV_INTERNAL_ERROR: u32 = 507_899;

/// Errors of the memory layer. Every variant maps to an ACL error code ([`MemError::code`]).
#[derive(thiserror::Error, Debug)]
pub enum MemError {
    /// Growing the pool (or the device) would exceed a limit, even after cached
    /// segments were released.
    #[error(
        "out of device memory ({what}): requested {} ({requested} bytes); limit (capacity, quota \
         or pool size) {} ({limit} bytes); {} allocated, {} reserved by the caching pool, largest \
         free cached block {}. Hint: call empty_cache() or free buffers; reserved >> allocated \
         means fragmentation (try max_split_size)",
        human(.requested), human(.limit), human(.allocated), human(.reserved), human(.largest_free)
    )]
    OutOfMemory {
        /// Bytes the caller asked for.
        requested: usize,
        /// The binding limit (capacity, quota or fixed pool size) in bytes.
        limit: usize,
        /// Bytes currently handed out to callers (block sizes).
        allocated: usize,
        /// Bytes currently mapped by the pool.
        reserved: usize,
        /// Largest free block cached by the pool.
        largest_free: usize,
        /// Which limit was hit: `"device capacity"`, `"quota"` or `"pool"`.
        what: String,
    },
    /// `PagePolicy::HugeOnly` and neither hugetlb nor THP pages could be obtained.
    #[error("huge pages unavailable for a {requested}-byte mapping (no hugetlb pages reserved and THP disabled or refused; see NPURT_HUGEPAGES)")]
    HugePagesUnavailable {
        /// Bytes requested.
        requested: usize,
    },
    /// Zero, overflowing or absurd size.
    #[error("invalid size {size}: {reason}")]
    InvalidSize {
        /// The size given.
        size: usize,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A pointer that is not (the start of) a live allocation.
    #[error("invalid pointer {addr:#x} given to {}: {reason}", if *.during_free { "free" } else { "a memory call" })]
    InvalidPointer {
        /// The address given.
        addr: usize,
        /// Unknown / interior / out of range ...
        reason: &'static str,
        /// True when the bad pointer was given to a free call (code 207002), false
        /// for any other call (code 107000).
        during_free: bool,
    },
    /// The address was already freed.
    #[error("double free of {addr:#x}")]
    DoubleFree {
        /// The address given.
        addr: usize,
    },
    /// An OS call failed unexpectedly.
    #[error("{op} failed: {}", std::io::Error::from_raw_os_error(*.errno))]
    Os {
        /// The failing call, e.g. `"mmap"`.
        op: &'static str,
        /// `errno` after the call.
        errno: i32,
    },
}

impl MemError {
    /// The AscendCL error code of this error.
    pub fn code(&self) -> u32 {
        match self {
            MemError::OutOfMemory { .. } | MemError::HugePagesUnavailable { .. } => ACL_ERROR_RT_MEMORY_ALLOCATION,
            MemError::InvalidSize { .. } => ACL_ERROR_RT_PARAM_INVALID,
            MemError::InvalidPointer { during_free: true, .. } | MemError::DoubleFree { .. } => {
                ACL_ERROR_RT_MEMORY_FREE
            }
            MemError::InvalidPointer { during_free: false, .. } => ACL_ERROR_RT_PARAM_INVALID,
            MemError::Os { .. } => ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        }
    }

    /// The AscendCL name of [`MemError::code`].
    pub fn name(&self) -> &'static str {
        match self.code() {
            ACL_ERROR_RT_MEMORY_ALLOCATION => "ACL_ERROR_RT_MEMORY_ALLOCATION",
            ACL_ERROR_RT_PARAM_INVALID => "ACL_ERROR_RT_PARAM_INVALID",
            ACL_ERROR_RT_MEMORY_FREE => "ACL_ERROR_RT_MEMORY_FREE",
            _ => "ACL_ERROR_RT_DRV_INTERNAL_ERROR",
        }
    }

    /// `Os` error from the current `errno`.
    pub(crate) fn last_os(op: &'static str) -> MemError {
        MemError::Os {
            op,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }

    /// Same error, re-targeted at a non-free call (bad pointers become 107000).
    pub fn not_during_free(self) -> MemError {
        match self {
            MemError::InvalidPointer { addr, reason, .. } => MemError::InvalidPointer {
                addr,
                reason,
                during_free: false,
            },
            e => e,
        }
    }
}

/// Human-readable byte count ("1.50 MiB"), used in messages and summaries.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

struct Human(u64);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&human_bytes(self.0))
    }
}

fn human(n: &usize) -> Human {
    Human(*n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names() {
        let oom = MemError::OutOfMemory {
            requested: 1 << 20,
            limit: 1 << 30,
            allocated: 5,
            reserved: 7,
            largest_free: 3,
            what: "quota".into(),
        };
        assert_eq!(oom.code(), 207_001);
        assert_eq!(oom.name(), "ACL_ERROR_RT_MEMORY_ALLOCATION");
        let msg = oom.to_string();
        assert!(msg.contains("quota") && msg.contains("1.00 MiB") && msg.contains("empty_cache"));
        assert_eq!(MemError::HugePagesUnavailable { requested: 1 }.code(), 207_001);
        assert_eq!(
            MemError::InvalidSize {
                size: 0,
                reason: "zero"
            }
            .code(),
            107_000
        );
        let bad = MemError::InvalidPointer {
            addr: 16,
            reason: "unknown",
            during_free: true,
        };
        assert_eq!(bad.code(), 207_002);
        assert_eq!(bad.name(), "ACL_ERROR_RT_MEMORY_FREE");
        assert_eq!(bad.not_during_free().code(), 107_000);
        assert_eq!(MemError::DoubleFree { addr: 1 }.code(), 207_002);
        let os = MemError::Os {
            op: "mmap",
            errno: libc::ENOMEM,
        };
        assert_eq!(os.code(), 507_899);
        assert_eq!(os.name(), "ACL_ERROR_RT_DRV_INTERNAL_ERROR");
        assert!(os.to_string().starts_with("mmap failed"));
    }

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(human_bytes(20 << 20), "20.00 MiB");
    }
}
