//! [`Fence`]: the pool's only view of device progress.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Something that completes once queued device work has finished (an event recorded on
/// a stream, for npurt-core).
///
/// `is_complete` is called with the pool's lock held: it must be cheap, must not block
/// and must not call back into the pool. Once it returned `true` it must keep doing so.
/// The pool drops a fence (with the lock held) as soon as it has seen it complete.
pub trait Fence: Send + Sync {
    /// Whether the fenced work has finished.
    fn is_complete(&self) -> bool;
}

/// A flag fence (handy for tests and host-side completion): complete when `true`.
impl Fence for Arc<AtomicBool> {
    fn is_complete(&self) -> bool {
        self.load(Ordering::Acquire)
    }
}

/// A fence that is always complete.
#[derive(Clone, Copy, Debug, Default)]
pub struct Completed;

impl Fence for Completed {
    fn is_complete(&self) -> bool {
        true
    }
}
