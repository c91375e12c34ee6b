//! Big copies shared with helper threads, in chunks.
//!
//! One core's `memcpy` does not saturate memory bandwidth, so a big copy is cut into
//! [`CHUNK`]-byte chunks that the calling thread and a few persistent helper threads claim
//! with one `fetch_add` each. The caller never waits for a helper to *start*: a helper
//! that is slow to be scheduled (a loaded machine) finds nothing left to claim and touches
//! no memory, and the caller copies everything itself; the caller only waits for chunks a
//! helper has already claimed (at most one per helper, about 0.1 ms each). Before this, the
//! copy was split in two fixed halves on a thread spawned per copy, which waited for the
//! spawned thread whatever its delay.
//!
//! Helpers: up to three (so up to four threads per copy), one fewer than the CPUs the
//! process may use; none on a single CPU. They are started at the first big copy and block
//! on their queue when idle.

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, OnceLock};

/// Copies of at least this many bytes are shared with the helpers.
pub(super) const SPLIT_COPY: usize = 8 << 20;
/// Bytes per claimed chunk (a multiple of the page size).
const CHUNK: usize = 1 << 20;
/// At most this many helper threads.
const MAX_HELPERS: usize = 3;

/// One shared copy: disjoint `[src, src+n)` → `[dst, dst+n)`.
struct Job {
    dst: usize,
    src: usize,
    n: usize,
    chunks: usize,
    next: AtomicUsize,
    done: AtomicUsize,
}

impl Job {
    /// Claims and copies chunks until none is left.
    ///
    /// # Safety
    /// While `done < chunks`, both ranges must be valid as [`bulk_copy`] requires (its
    /// caller guarantees that until every claimed chunk is done).
    unsafe fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Relaxed);
            if i >= self.chunks {
                return; // nothing left: no memory is touched past this point
            }
            let off = i * CHUNK;
            let len = CHUNK.min(self.n - off);
            // SAFETY: chunk `i` lies inside both ranges (off < n) and was claimed by this
            // thread alone; the ranges are disjoint; they stay valid until `done` counts
            // this chunk (the caller of `bulk_copy` waits for that).
            unsafe { std::ptr::copy_nonoverlapping((self.src + off) as *const u8, (self.dst + off) as *mut u8, len) };
            self.done.fetch_add(1, Release);
        }
    }
}

/// The helpers' queues (empty: no helper could be started, or a single CPU).
fn helpers() -> &'static [Sender<Arc<Job>>] {
    static HELPERS: OnceLock<Vec<Sender<Arc<Job>>>> = OnceLock::new();
    HELPERS.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        (0..(cpus - 1).min(MAX_HELPERS))
            .map_while(|i| {
                let (tx, rx) = channel::<Arc<Job>>();
                std::thread::Builder::new()
                    .name(format!("npurt-memcpy-{i}"))
                    .spawn(move || {
                        while let Ok(job) = rx.recv() {
                            // SAFETY: `bulk_copy` keeps the ranges valid until every chunk
                            // claimed here is done; a late job claims none.
                            unsafe { job.work() };
                        }
                    })
                    .ok()
                    .map(|_| tx)
            })
            .collect()
    })
}

/// Copies `n` bytes between disjoint ranges, sharing the work with the helper threads.
///
/// # Safety
/// `[src, src+n)` must be readable and `[dst, dst+n)` writable for the whole call, they
/// must not overlap, and neither may be accessed through a Rust reference meanwhile.
pub(super) unsafe fn bulk_copy(dst: usize, src: usize, n: usize) {
    let job = Arc::new(Job {
        dst,
        src,
        n,
        chunks: n.div_ceil(CHUNK),
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
    });
    for h in helpers() {
        // A helper whose queue is gone (it could not run) just does not help.
        let _ = h.send(job.clone());
    }
    // SAFETY: the caller's contract holds for the whole call, which outlasts every chunk.
    unsafe { job.work() };
    // Wait for chunks the helpers claimed (each is one CHUNK copy already running).
    let mut spins = 0u32;
    while job.done.load(Acquire) < job.chunks {
        if spins < 1000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_copies_every_byte_of_odd_lengths() {
        for n in [SPLIT_COPY, SPLIT_COPY + 1, 3 * CHUNK + 4095, 9 * CHUNK + 7] {
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + i / 4099) as u8).collect();
            let mut dst = vec![0u8; n];
            // SAFETY: two distinct live vectors of n bytes, not otherwise used meanwhile.
            unsafe { bulk_copy(dst.as_mut_ptr() as usize, src.as_ptr() as usize, n) };
            assert!(dst == src, "n = {n}");
        }
    }

    #[test]
    fn concurrent_bulk_copies_share_the_helpers() {
        let n = SPLIT_COPY + 12345;
        std::thread::scope(|s| {
            for t in 0..3u8 {
                s.spawn(move || {
                    let src = vec![t + 1; n];
                    let mut dst = vec![0u8; n];
                    for _ in 0..4 {
                        // SAFETY: as above, per thread.
                        unsafe { bulk_copy(dst.as_mut_ptr() as usize, src.as_ptr() as usize, n) };
                        assert!(dst.iter().all(|&b| b == t + 1));
                        dst.fill(0);
                    }
                });
            }
        });
    }
}
