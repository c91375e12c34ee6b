//! The per-stream task queue: a bounded, lock-free, multi-producer ring (Vyukov's bounded
//! queue with one sequence stamp per slot) with a single consumer at a time.
//!
//! * Many threads may [`push`](TaskQueue::push) at once; each push claims the next
//!   *position* with one CAS and publishes its slot with a release store of the stamp.
//!   Positions are the stream's sequence numbers: the task at position `p` is the
//!   `p+1`-th task of the stream, which is what events and synchronisation count against.
//! * Exactly one thread pops at a time: the worker that currently owns the stream (the
//!   stream's scheduling state, see `stream.rs`, hands ownership over with acquire/release
//!   read-modify-writes, so a new owner sees everything the previous one did).
//! * A push into a full ring fails and gives the value back; the caller waits for the
//!   stream to drain (back-pressure) and retries. Nothing allocates after construction.
//!
//! Per-producer order holds because a producer's second CAS follows its first.

use crate::sync::{spin_hint, AtomicU64, UnsafeCell};
use crossbeam_utils::CachePadded;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

struct Slot<T> {
    stamp: AtomicU64,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// Bounded MPSC ring of tasks. See the module docs for the protocol.
pub(crate) struct TaskQueue<T> {
    slots: Box<[Slot<T>]>,
    mask: u64,
    /// Next position a producer will claim.
    tail: CachePadded<AtomicU64>,
    /// Next position the consumer will read.
    head: CachePadded<AtomicU64>,
}

// SAFETY: values are moved in by one producer and out by the single consumer; the slot
// stamp's release/acquire pair orders the write before the read, so `T: Send` suffices.
unsafe impl<T: Send> Send for TaskQueue<T> {}
// SAFETY: as above; shared access only goes through the stamp protocol.
unsafe impl<T: Send> Sync for TaskQueue<T> {}

impl<T> TaskQueue<T> {
    /// A ring of `capacity` slots, rounded up to a power of two (at least 2).
    pub(crate) fn new(capacity: usize) -> Self {
        let cap = capacity.max(2).next_power_of_two();
        let slots = (0..cap as u64)
            .map(|i| Slot {
                stamp: AtomicU64::new(i),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice();
        Self {
            slots,
            mask: cap as u64 - 1,
            tail: CachePadded::new(AtomicU64::new(0)),
            head: CachePadded::new(AtomicU64::new(0)),
        }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.mask + 1
    }

    /// Number of positions claimed so far (= sequence number of the next task).
    #[inline]
    pub(crate) fn tail(&self) -> u64 {
        self.tail.load(Acquire)
    }

    /// Pushes `value`, returning its position, or gives it back when the ring is full.
    #[inline]
    pub(crate) fn push(&self, value: T) -> Result<u64, T> {
        let mut pos = self.tail.load(Relaxed);
        loop {
            let slot = &self.slots[(pos & self.mask) as usize];
            let stamp = slot.stamp.load(Acquire);
            if stamp == pos {
                match self.tail.compare_exchange_weak(pos, pos + 1, Relaxed, Relaxed) {
                    Ok(_) => {
                        // SAFETY: the CAS made this thread the only writer of position `pos`,
                        // and stamp == pos means the consumer has finished with the slot's
                        // previous value (it stored pos after moving it out).
                        slot.value.with_mut(|p| unsafe { (*p).write(value) });
                        slot.stamp.store(pos + 1, Release);
                        return Ok(pos);
                    }
                    Err(current) => pos = current,
                }
            } else if stamp < pos {
                // The slot still holds the value from one lap ago: the ring is full.
                return Err(value);
            } else {
                // Another producer claimed `pos`; catch up.
                spin_hint();
                pos = self.tail.load(Relaxed);
            }
        }
    }

    /// Pops the next value in position order. Only the stream's current owner may call it.
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        let pos = self.head.load(Acquire);
        let slot = &self.slots[(pos & self.mask) as usize];
        if slot.stamp.load(Acquire) != pos + 1 {
            return None; // empty, or the producer of `pos` has not finished writing
        }
        // SAFETY: stamp == pos + 1 was stored (release) after the producer wrote the value,
        // and only the single consumer reads a slot, once per lap.
        let value = slot.value.with_mut(|p| unsafe { (*p).assume_init_read() });
        slot.stamp.store(pos + self.capacity(), Release);
        self.head.store(pos + 1, Release);
        Some(value)
    }

    /// True when no written value is waiting at the head.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        let pos = self.head.load(Acquire);
        self.slots[(pos & self.mask) as usize].stamp.load(Acquire) != pos + 1
    }
}

impl<T> Drop for TaskQueue<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_and_positions() {
        let q = TaskQueue::new(4);
        assert_eq!(q.capacity(), 4);
        for i in 0..4 {
            assert_eq!(q.push(i).unwrap(), i as u64);
        }
        assert_eq!(q.push(99), Err(99), "full ring gives the value back");
        assert_eq!(q.pop(), Some(0));
        assert_eq!(q.push(4).unwrap(), 4);
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, vec![1, 2, 3, 4]);
        assert!(q.is_empty());
    }

    #[test]
    fn drop_releases_queued_values() {
        let marker = Arc::new(());
        let q = TaskQueue::new(8);
        for _ in 0..5 {
            q.push(marker.clone()).unwrap();
        }
        drop(q);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn many_producers_keep_their_order() {
        const P: usize = 4;
        const N: usize = 20_000;
        let q = Arc::new(TaskQueue::new(64));
        let handles: Vec<_> = (0..P)
            .map(|p| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..N {
                        let mut v = (p, i);
                        while let Err(back) = q.push(v) {
                            v = back;
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut next = [0usize; P];
        let mut got = 0;
        while got < P * N {
            if let Some((p, i)) = q.pop() {
                assert_eq!(i, next[p], "producer {p} out of order");
                next[p] += 1;
                got += 1;
            } else {
                std::thread::yield_now();
            }
        }
        for h in handles {
            h.join().unwrap();
        }
        assert!(q.is_empty());
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two producers push two values each while the consumer pops concurrently: nothing is
    /// lost or duplicated and each producer's order is kept.
    #[test]
    fn loom_mpsc_order() {
        loom::model(|| {
            let q = Arc::new(TaskQueue::new(4));
            let producers: Vec<_> = (0..2u32)
                .map(|p| {
                    let q = q.clone();
                    thread::spawn(move || {
                        q.push(p * 10).unwrap();
                        q.push(p * 10 + 1).unwrap();
                    })
                })
                .collect();
            let mut seen = Vec::new();
            for _ in 0..2 {
                if let Some(v) = q.pop() {
                    seen.push(v);
                }
            }
            for h in producers {
                h.join().unwrap();
            }
            while let Some(v) = q.pop() {
                seen.push(v);
            }
            assert_eq!(seen.len(), 4);
            for p in 0..2u32 {
                let mine: Vec<_> = seen.iter().copied().filter(|v| v / 10 == p).collect();
                assert_eq!(mine, vec![p * 10, p * 10 + 1]);
            }
        });
    }

    /// A full ring: a push racing a pop either fails (value handed back) or lands after the
    /// old values, never overwriting one.
    #[test]
    fn loom_full_ring_wraps_safely() {
        loom::model(|| {
            let q = Arc::new(TaskQueue::new(2));
            q.push(0u32).unwrap();
            q.push(1).unwrap();
            let q2 = q.clone();
            let producer = thread::spawn(move || q2.push(2).is_ok());
            let first = q.pop();
            let pushed = producer.join().unwrap();
            assert_eq!(first, Some(0));
            let mut rest = Vec::new();
            while let Some(v) = q.pop() {
                rest.push(v);
            }
            if pushed {
                assert_eq!(rest, vec![1, 2]);
            } else {
                assert_eq!(rest, vec![1]);
            }
        });
    }
}
