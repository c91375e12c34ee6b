//! The caching pool's slow path: no cached block fits, so map a new segment, after
//! gc and releasing cached segments, or fail with a detailed OutOfMemory. Mapping and unmapping happen without the pool lock.

use crate::align::round_up;
use crate::block::SMALL;
use crate::error::MemError;
use crate::page::page_size;
use crate::pool::CachingPool;
use crate::segment::Segment;
use crate::state::{State, LARGE_BUFFER, MIN_LARGE_ALLOC, ROUND_LARGE, SMALL_BUFFER};

impl CachingPool {
    /// Segment size to map for a block of `size` bytes, or which limit forbids it.
    fn plan(&self, st: &State, size: usize, pool: usize) -> Result<usize, &'static str> {
        let lim = self.effective_limit(st);
        let used = st.reserved + st.in_flight;
        let preferred = if pool == SMALL {
            SMALL_BUFFER
        } else if size <= MIN_LARGE_ALLOC && self.large_segment.is_some() {
            self.large_segment.unwrap_or(LARGE_BUFFER).max(size)
        } else if self.large_segment.is_some() {
            round_up(size, ROUND_LARGE).unwrap_or(usize::MAX) // torch's kRoundLarge
        } else {
            // Request-sized: page-rounded. A 2 MiB rounding left tails that no other
            // request of a dynamic-shape loop fits (tests/fragmentation.rs: median
            // reserved/peak 1.32 over 30 seeds, 1.19 page-rounded). THP still backs the
            // 2 MiB-aligned part of such a segment (`Segment::map_thp` aligns the start).
            round_up(size, page_size()).unwrap_or(usize::MAX)
        };
        // Small devices: fall back to tighter segments rather than failing.
        let tight = round_up(size, page_size()).unwrap_or(usize::MAX);
        let candidates = [preferred, round_up(size, ROUND_LARGE).unwrap_or(usize::MAX), tight];
        if let Some(&s) = candidates
            .iter()
            .find(|&&s| used.checked_add(s).is_some_and(|t| t <= lim))
        {
            return Ok(s);
        }
        if used.checked_add(tight).is_some_and(|t| t <= self.capacity) {
            Err("quota")
        } else {
            Err("device capacity")
        }
    }

    fn oom(&self, st: &State, requested: usize, what: &str, limit: usize) -> MemError {
        MemError::OutOfMemory {
            requested,
            limit,
            allocated: st.stats.allocated_bytes[0].current as usize,
            reserved: st.reserved,
            largest_free: st.largest_free(),
            what: what.to_string(),
        }
    }

    #[cold]
    pub(crate) fn alloc_slow(&self, size: usize, requested: usize) -> Result<usize, MemError> {
        let mut garbage: Vec<Segment> = Vec::new();
        let mut st = self.state.lock();
        let pool = st.pool_for(size);
        let mut stage = 0u8;
        let mut gc_done = false;
        loop {
            if let Some(i) = st.take_free(pool, size) {
                return Ok(st.split_and_allocate(i, size, requested));
            }
            if !self.grow {
                st.stats.num_ooms += 1;
                return Err(self.oom(&st, requested, "pool", self.capacity));
            }
            let lim = self.effective_limit(&st);
            if size > lim {
                st.stats.num_ooms += 1;
                let what = if lim < self.capacity {
                    "quota"
                } else {
                    "device capacity"
                };
                return Err(self.oom(&st, requested, what, lim));
            }
            if !gc_done && self.trim_before_growth {
                // Growing past the peak footprint while cached segments sit entirely free
                // (all too small for this request): give those back first (see
                // `PoolConfig::trim_before_growth`).
                let peak = st.stats.reserved_bytes[crate::stats::ALL].peak as usize;
                let need = round_up(size, page_size()).unwrap_or(usize::MAX);
                if st.reserved + st.in_flight + need > peak {
                    st.release_free_segments(peak.saturating_sub(need), &mut garbage);
                }
            }
            if !gc_done {
                gc_done = true;
                if let Some(t) = self.gc_threshold {
                    let target = (t * lim as f64) as usize;
                    if st.reserved > target {
                        st.release_free_segments(target, &mut garbage);
                    }
                }
            }
            let planned = self.plan(&st, size, pool).map_err(String::from).and_then(|s| {
                // The device's room shared with other processes (one CAS when there is one).
                st.gate.as_ref().map_or(Ok(()), |g| g.try_reserve(s)).map(|()| s)
            });
            match planned {
                Ok(seg_size) => {
                    st.in_flight += seg_size;
                    drop(st);
                    drop(std::mem::take(&mut garbage));
                    let res = self.map_segment(seg_size);
                    st = self.state.lock();
                    st.in_flight -= seg_size;
                    if res.is_err() {
                        if let Some(g) = &st.gate {
                            g.release(seg_size);
                        }
                    }
                    let seg = match res {
                        Ok(seg) => seg,
                        Err(MemError::Os {
                            op: "mmap",
                            errno: libc::ENOMEM,
                        }) => {
                            st.stats.num_ooms += 1;
                            return Err(self.oom(&st, requested, "host memory (mmap ENOMEM)", lim));
                        }
                        Err(e) => return Err(e),
                    };
                    // Another thread may have added room while the lock was dropped:
                    // then use it and unmap the new segment instead of keeping both.
                    if let Some(i) = st.take_free(pool, size) {
                        let addr = st.split_and_allocate(i, size, requested);
                        if let Some(g) = &st.gate {
                            g.release(seg_size);
                        }
                        drop(st);
                        drop(seg);
                        return Ok(addr);
                    }
                    // hugetlb mappings are whole 2 MiB pages: use (and count) all of it
                    // when the limit allows.
                    let extra_ok = |st: &crate::state::State| {
                        st.gate
                            .as_ref()
                            .map_or(true, |g| g.try_reserve(seg.len() - seg_size).is_ok())
                    };
                    let usable =
                        if seg.len() > seg_size && st.reserved + st.in_flight + seg.len() <= lim && extra_ok(&st) {
                            seg.len()
                        } else {
                            seg_size
                        };
                    let bi = st.add_segment(seg, usable, pool, false);
                    return Ok(st.split_and_allocate(bi, size, requested));
                }
                Err(what) => {
                    stage += 1;
                    match stage {
                        1 => {
                            log::info!("no room to map {size} B ({what}): releasing cached segments and retrying");
                            st.stats.num_alloc_retries += 1;
                            st.release_free_segments(0, &mut garbage);
                        }
                        _ => {
                            st.stats.num_ooms += 1;
                            return Err(self.oom(&st, requested, &what, lim));
                        }
                    }
                }
            }
        }
    }
}
