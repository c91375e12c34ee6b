//! [`PinnedPool`]: a cache of freed pinned host allocations ([`HostAlloc`]) by
//! power-of-two size class (the rules of torch's `CachingHostAllocator`, including
//! fenced frees).

use parking_lot::Mutex;
use std::collections::BTreeMap;

use crate::error::MemError;
use crate::fence::Fence;
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
    /// Frees still waiting for fences.
    pub pending: u64,
}

#[derive(Default)]
struct PinnedState {
    live: BTreeMap<usize, (HostAlloc, usize)>,
    cache: Vec<Vec<HostAlloc>>,
    pending: Vec<(HostAlloc, Vec<Box<dyn Fence>>)>,
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

    fn poll(&mut self, max_cached: usize, garbage: &mut Vec<HostAlloc>) {
        let mut k = 0;
        while k < self.pending.len() {
            self.pending[k].1.retain(|f| !f.is_complete());
            if self.pending[k].1.is_empty() {
                let (a, _) = self.pending.swap_remove(k);
                self.recycle(a, max_cached, garbage);
            } else {
                k += 1;
            }
        }
        self.stats.pending = self.pending.len() as u64;
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
        let mut garbage = Vec::new();
        {
            let mut st = self.inner.lock();
            st.poll(self.max_cached, &mut garbage);
            if let Some(a) = st.cache.get_mut(idx).and_then(|v| v.pop()) {
                let addr = a.addr();
                st.stats.cached_bytes -= class as u64;
                st.stats.live_bytes += class as u64;
                st.stats.hits += 1;
                st.live.insert(addr, (a, size));
                return Ok(addr);
            }
        }
        drop(garbage);
        let a = HostAlloc::new(class)?;
        let addr = a.addr();
        let mut st = self.inner.lock();
        st.stats.live_bytes += class as u64;
        st.stats.misses += 1;
        st.live.insert(addr, (a, size));
        Ok(addr)
    }

    /// Frees the allocation at `addr`; it is reused only once every fence completed.
    pub fn free(&self, addr: usize, fences: Vec<Box<dyn Fence>>) -> Result<(), MemError> {
        let mut garbage = Vec::new();
        let mut st = self.inner.lock();
        let Some((a, _)) = st.live.remove(&addr) else {
            let cached = st.cache.iter().flatten().chain(st.pending.iter().map(|p| &p.0));
            if cached.into_iter().any(|a| a.addr() == addr) {
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
        let mut fences = fences;
        fences.retain(|f| !f.is_complete());
        if fences.is_empty() {
            st.recycle(a, self.max_cached, &mut garbage);
        } else {
            st.pending.push((a, fences));
            st.stats.pending = st.pending.len() as u64;
        }
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
            st.poll(0, &mut garbage);
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
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

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
            p.free(a + 8, vec![]),
            Err(MemError::InvalidPointer { during_free: true, .. })
        ));
        p.free(a, vec![]).unwrap();
        assert!(matches!(p.free(a, vec![]), Err(MemError::DoubleFree { .. })));
        assert!(p.lookup(a).is_none());
        let b = p.alloc(6000).unwrap();
        assert_eq!(a, b, "same class reused");
        assert_eq!(p.stats().hits, 1);
        // Fenced free: not reused until the fence completes.
        let f = Arc::new(AtomicBool::new(false));
        p.free(b, vec![Box::new(f.clone())]).unwrap();
        let c = p.alloc(8192).unwrap();
        assert_ne!(c, b);
        f.store(true, std::sync::atomic::Ordering::Release);
        let d = p.alloc(8000).unwrap();
        assert_eq!(d, b);
        for x in [c, d] {
            p.free(x, vec![]).unwrap();
        }
        assert_eq!(p.empty_cache(), 16384);
        assert_eq!(p.stats().cached_bytes, 0);
        assert!(matches!(p.free(12345, vec![]), Err(MemError::InvalidPointer { .. })));
        assert!(p.alloc(0).is_err());
    }
}
