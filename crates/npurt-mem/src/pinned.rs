//! [`PinnedPool`]: a cache of freed pinned host allocations ([`HostAlloc`]) by
//! power-of-two size class (the rules of torch's `CachingHostAllocator`; npurt-core
//! frees a host buffer only once no queued copy uses it, so no fences are needed).

use parking_lot::Mutex;
use std::collections::BTreeMap;

use crate::error::MemError;
use crate::host::{HostAlloc, MAX_HOST};

/// Smallest size class of [`PinnedPool`].
pub(crate) const MIN_HOST_CLASS: usize = 4096;

/// What [`PinnedPool::lookup`] knows about a host address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinnedInfo {
    /// Start of the allocation.
    pub base: usize,
    /// Bytes requested.
    pub size: usize,
    /// Bytes of the size class.
    pub capacity: usize,
    /// Whether the pages are locked.
    pub locked: bool,
    /// `addr - base`.
    pub offset: usize,
}

/// Counters of a [`PinnedPool`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PinnedStats {
    /// Bytes (class sizes) handed out.
    pub live_bytes: u64,
    /// Bytes cached for reuse.
    pub cached_bytes: u64,
    /// Allocations served from the cache.
    pub hits: u64,
    /// Allocations that mapped new memory.
    pub misses: u64,
}

#[derive(Default)]
struct PinnedState {
    live: BTreeMap<usize, (HostAlloc, usize)>,
    cache: Vec<Vec<HostAlloc>>,
    stats: PinnedStats,
}

impl PinnedState {
    fn recycle(&mut self, a: HostAlloc, max_cached: usize, garbage: &mut Vec<HostAlloc>) {
        let len = a.len() as u64;
        if self.stats.cached_bytes + len > max_cached as u64 {
            garbage.push(a);
            return;
        }
        let class = a.len().trailing_zeros() as usize;
        if self.cache.len() <= class {
            self.cache.resize_with(class + 1, Vec::new);
        }
        self.cache[class].push(a);
        self.stats.cached_bytes += len;
    }
}

/// A cache of pinned host allocations by power-of-two size class.
pub struct PinnedPool {
    inner: Mutex<PinnedState>,
    max_cached: usize,
}

impl PinnedPool {
    /// A pool caching at most `max_cached_bytes` of freed allocations.
    pub fn new(max_cached_bytes: usize) -> PinnedPool {
        PinnedPool {
            inner: Mutex::new(PinnedState::default()),
            max_cached: max_cached_bytes,
        }
    }

    /// Size class of a request: the next power of two, at least 4 KiB.
    pub fn class_size(size: usize) -> Result<usize, MemError> {
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
        Ok(size.max(MIN_HOST_CLASS).next_power_of_two())
    }

    /// Allocates `size` bytes of pinned host memory; returns the (page aligned) address.
    pub fn alloc(&self, size: usize) -> Result<usize, MemError> {
        let class = PinnedPool::class_size(size)?;
        let idx = class.trailing_zeros() as usize;
        {
            let mut st = self.inner.lock();
            if let Some(a) = st.cache.get_mut(idx).and_then(|v| v.pop()) {
                let addr = a.addr();
                st.stats.cached_bytes -= class as u64;
                st.stats.live_bytes += class as u64;
                st.stats.hits += 1;
                st.live.insert(addr, (a, size));
                return Ok(addr);
            }
        }
        let a = HostAlloc::new(class)?;
        let addr = a.addr();
        let mut st = self.inner.lock();
        st.stats.live_bytes += class as u64;
        st.stats.misses += 1;
        st.live.insert(addr, (a, size));
        Ok(addr)
    }

    /// Frees the allocation at `addr` (no queued work may still use it) into the cache.
    pub fn free(&self, addr: usize) -> Result<(), MemError> {
        let mut garbage = Vec::new();
        let mut st = self.inner.lock();
        let Some((a, _)) = st.live.remove(&addr) else {
            if st.cache.iter().flatten().any(|a| a.addr() == addr) {
                return Err(MemError::DoubleFree { addr });
            }
            let reason = match st.live.range(..addr).next_back() {
                Some((_, (a, _))) if addr < a.addr() + a.len() => {
                    "interior pointer: not the start of a host allocation"
                }
                _ => "unknown host address",
            };
            return Err(MemError::InvalidPointer {
                addr,
                reason,
                during_free: true,
            });
        };
        st.stats.live_bytes -= a.len() as u64;
        st.recycle(a, self.max_cached, &mut garbage);
        drop(st);
        drop(garbage);
        Ok(())
    }

    /// The live allocation containing `addr` (interior pointers included).
    pub fn lookup(&self, addr: usize) -> Option<PinnedInfo> {
        let st = self.inner.lock();
        let (&base, (a, size)) = st.live.range(..=addr).next_back()?;
        (addr < base + a.len()).then(|| PinnedInfo {
            base,
            size: *size,
            capacity: a.len(),
            locked: a.is_locked(),
            offset: addr - base,
        })
    }

    /// Unmaps every cached allocation; returns the bytes released.
    pub fn empty_cache(&self) -> usize {
        let mut garbage = Vec::new();
        let released = {
            let mut st = self.inner.lock();
            let released = st.stats.cached_bytes as usize;
            for v in st.cache.iter_mut() {
                garbage.append(v);
            }
            st.stats.cached_bytes = 0;
            released
        };
        drop(garbage);
        released
    }

    /// Counters.
    pub fn stats(&self) -> PinnedStats {
        self.inner.lock().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_reuses_by_class_and_validates() {
        let p = PinnedPool::new(1 << 20);
        let a = p.alloc(5000).unwrap();
        assert_eq!(
            p.lookup(a + 100).unwrap(),
            PinnedInfo {
                base: a,
                size: 5000,
                capacity: 8192,
                locked: p.lookup(a).unwrap().locked,
                offset: 100
            }
        );
        assert!(matches!(
            p.free(a + 8),
            Err(MemError::InvalidPointer { during_free: true, .. })
        ));
        p.free(a).unwrap();
        assert!(matches!(p.free(a), Err(MemError::DoubleFree { .. })));
        assert!(p.lookup(a).is_none());
        let b = p.alloc(6000).unwrap();
        assert_eq!(a, b, "same class reused");
        assert_eq!(p.stats().hits, 1);
        // A live allocation is never handed out twice; a freed one is reused.
        let c = p.alloc(8192).unwrap();
        assert_ne!(c, b);
        p.free(b).unwrap();
        let d = p.alloc(8000).unwrap();
        assert_eq!(d, b);
        for x in [c, d] {
            p.free(x).unwrap();
        }
        assert_eq!(p.empty_cache(), 16384);
        assert_eq!(p.stats().cached_bytes, 0);
        assert!(matches!(p.free(12345), Err(MemError::InvalidPointer { .. })));
        assert!(p.alloc(0).is_err());
    }
}
