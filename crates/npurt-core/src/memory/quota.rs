//! Per-context memory limits: a serving process that runs two models in two contexts can
//! keep one from starving the other. A context's limit caps the bytes allocated (block
//! sizes, 512-byte rounded) by buffers made while the context is current and the limit is
//! set; exceeding it is OutOfMemory (207001) naming the context, and the context stays
//! usable. The device-wide quota (`set_per_process_memory_fraction`) and the capacity
//! still apply on top.
//!
//! Cost: a context that never had a limit pays one atomic load per allocation.

use crate::error::Result;
use npurt_mem::align::block_size;
use npurt_mem::MemError;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::Arc;

/// "No limit".
const UNLIMITED: usize = usize::MAX;

/// A context's limit and the bytes charged against it.
#[derive(Debug)]
pub(crate) struct CtxQuota {
    pub(crate) context: u64,
    limit: AtomicUsize,
    used: AtomicUsize,
    peak: AtomicUsize,
}

impl CtxQuota {
    pub(crate) fn new(context: u64) -> Arc<CtxQuota> {
        Arc::new(CtxQuota {
            context,
            limit: AtomicUsize::new(UNLIMITED),
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        })
    }

    /// The limit in bytes, if one is set.
    pub(crate) fn limit(&self) -> Option<usize> {
        Some(self.limit.load(Acquire)).filter(|&l| l != UNLIMITED)
    }

    /// Sets (or with `None` clears) the limit. Lowering it below what is allocated does
    /// not free anything: later allocations fail until enough is freed.
    pub(crate) fn set_limit(&self, limit: Option<usize>) {
        self.limit.store(limit.unwrap_or(UNLIMITED), Release);
    }

    /// Bytes currently charged (allocated while a limit was set).
    pub(crate) fn used(&self) -> usize {
        self.used.load(Relaxed)
    }

    /// Peak of [`used`](Self::used).
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Relaxed)
    }

    /// Charges an allocation of `nbytes` if a limit is set: returns the bytes charged
    /// (0 when unlimited), or OutOfMemory when the limit would be exceeded (`device` gives
    /// the device's reserved bytes and largest free block for the message).
    #[inline]
    pub(crate) fn charge(&self, nbytes: usize, device: impl FnOnce() -> (usize, usize)) -> Result<usize> {
        let limit = self.limit.load(Acquire);
        if limit == UNLIMITED {
            return Ok(0);
        }
        let size = block_size(nbytes)?;
        let before = self.used.fetch_add(size, AcqRel);
        let after = before.saturating_add(size);
        if after > limit {
            self.used.fetch_sub(size, AcqRel);
            let (reserved, largest_free) = device();
            return Err(MemError::OutOfMemory {
                requested: nbytes,
                limit,
                allocated: before,
                reserved,
                largest_free,
                what: format!("context {} memory limit, see Context.set_memory_limit", self.context),
            }
            .into());
        }
        self.peak.fetch_max(after, Relaxed);
        Ok(size)
    }

    /// Gives back `bytes` charged by [`charge`](Self::charge).
    #[inline]
    pub(crate) fn uncharge(&self, bytes: usize) {
        self.used.fetch_sub(bytes, AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_charges_nothing() {
        let q = CtxQuota::new(1);
        assert_eq!(q.charge(1 << 20, || (0, 0)).unwrap(), 0);
        assert_eq!(q.used(), 0);
        assert_eq!(q.limit(), None);
    }

    #[test]
    fn limit_is_enforced_and_released() {
        let q = CtxQuota::new(7);
        q.set_limit(Some(4096));
        assert_eq!(q.charge(1000, || (0, 0)).unwrap(), 1024);
        assert_eq!(q.charge(3072, || (0, 0)).unwrap(), 3072);
        let e = q.charge(1, || (0, 99)).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("context 7 memory limit"), "{msg}");
        assert_eq!(e.acl().code, 207001);
        assert_eq!(q.used(), 4096, "a refused charge is rolled back");
        q.uncharge(1024);
        assert_eq!(q.charge(512, || (0, 0)).unwrap(), 512);
        assert_eq!(q.peak(), 4096);
        q.set_limit(None);
        assert_eq!(q.charge(1 << 30, || (0, 0)).unwrap(), 0);
    }
}
