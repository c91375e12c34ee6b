//! Releasing the GIL: which calls run without it and the one helper that decides. Blocking
//! waits (which also check for signals) are in `wait.rs`; everything else that may take
//! long (big copies and allocations, starting a device, a full stream) goes through
//! [`detach_above`] or `py.detach` directly.

use pyo3::prelude::*;

/// Copies of more than this many bytes release the GIL.
pub(crate) const GIL_FREE_COPY: usize = 16 << 10;
/// Allocations of more than this many bytes release the GIL (the small pool's limit).
pub(crate) const GIL_FREE_ALLOC: usize = 1 << 20;

/// Runs `f` without the GIL when `bytes > limit`; short calls keep it (releasing and
/// taking it back costs more than they take).
#[inline]
pub(crate) fn detach_above<R: Send>(py: Python<'_>, bytes: usize, limit: usize, f: impl FnOnce() -> R + Send) -> R {
    if bytes > limit {
        py.detach(f)
    } else {
        f()
    }
}
