//! The per-stream task queue: a bounded, lock-free, multi-producer ring (Vyukov's bounded
//! queue with one sequence stamp per slot) with a single consumer at a time, grown on
//! demand.
//!
//! * Many threads may [`push`](TaskQueue::push) at once; each push claims the next
//!   *position* with one CAS and publishes its slot with a release store of the stamp.
//!   Positions are the stream's sequence numbers: the task at position `p` is the
//!   `p+1`-th task of the stream, which is what events and synchronisation count against.
//! * Exactly one thread pops at a time: the worker that currently owns the stream (the
//!   stream's scheduling state, see `stream.rs`, hands ownership over with acquire/release
//!   read-modify-writes, so a new owner sees everything the previous one did).
//! * The ring starts small ([`FIRST_RING`] slots: 4 KiB) and grows when a push finds it
//!   full, by [`GROWTH`] up to the configured depth. A stream's launches walk through its
//!   whole ring however few tasks are queued, so 64 streams with 1024-slot rings cycled
//!   4 MiB (more than a core's L2) where a few tasks per stream were queued; small rings
//!   keep that at 256 KiB and deep queues still get the depth. Growing does not copy: the
//!   grower locks the tail (a bit in the tail word), starts a new ring at the tail's
//!   position and unlocks with the ring's number in the tail word; positions before that
//!   stay in the old ring, where the consumer drains them before it moves on. Old rings
//!   live until the queue is dropped (a producer may still be looking at one), at most
//!   [`MAX_RINGS`] of them, less than the largest one in all.
//! * A push into a full ring of the full depth fails and gives the value back; the caller
//!   waits for the stream to drain (back-pressure) and retries.
//!
//! The tail word is `position | ring << RING_SHIFT | LOCK`; a ring number only grows, so a
//! producer's CAS from the value it loaded fails if a ring was added since: a claimed
//! position is always in the ring the claimer looked at. Per-producer order holds because a
//! producer's second CAS follows its first.

use crate::sync::{spin_hint, AtomicU64, UnsafeCell};
use crossbeam_utils::CachePadded;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// Slots of a queue's first ring (at most the configured depth).
pub(crate) const FIRST_RING: usize = 64;
/// Each new ring is this many times the previous one (up to the depth).
const GROWTH: u64 = 4;
/// Rings one queue may have: 64 · 4⁷ = 2²⁰, the largest depth the configuration accepts.
const MAX_RINGS: usize = 8;
const RING_SHIFT: u32 = 56;
const POS_MASK: u64 = (1 << RING_SHIFT) - 1;
const RING_MASK: u64 = 0x7f;
const LOCK: u64 = 1 << 63;

struct Slot<T> {
    stamp: AtomicU64,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// One ring: slots for the positions from `start` on (until the next ring's start).
struct Ring<T> {
    slots: Box<[Slot<T>]>,
    mask: u64,
    start: u64,
}

impl<T> Ring<T> {
    fn new(cap: u64, start: u64) -> Self {
        let mask = cap - 1;
        // Slot i is free for the first position from `start` on that maps to it.
        let slots = (0..cap)
            .map(|i| Slot {
                stamp: AtomicU64::new(start + (i.wrapping_sub(start) & mask)),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice();
        Self { slots, mask, start }
    }

    #[inline]
    fn slot(&self, pos: u64) -> &Slot<T> {
        &self.slots[(pos & self.mask) as usize]
    }

    #[inline]
    fn cap(&self) -> u64 {
        self.mask + 1
    }
}

#[inline]
fn split(word: u64) -> (u64, usize) {
    (word & POS_MASK, ((word >> RING_SHIFT) & RING_MASK) as usize)
}

/// Bounded MPSC ring of tasks. See the module docs for the protocol.
pub(crate) struct TaskQueue<T> {
    rings: [UnsafeCell<Option<Ring<T>>>; MAX_RINGS],
    /// The configured depth (a power of two): the largest ring.
    max_cap: u64,
    /// The newest ring's number, for the consumer: written only when a ring is added
    /// (before the tail word names it), so the consumer's look for a newer ring reads a
    /// line no push writes. Reading the tail word there instead made every empty poll of
    /// the owner pull the producers' line into its cache: the next push's CAS then missed.
    newest: AtomicU64,
    /// Next position a producer will claim, the newest ring's number, the grow lock.
    tail: CachePadded<AtomicU64>,
    /// Next position the consumer will read, and the ring it is in.
    head: CachePadded<AtomicU64>,
}

// SAFETY: values are moved in by one producer and out by the single consumer; the slot
// stamp's release/acquire pair orders the write before the read, so `T: Send` suffices.
// A ring is written once, by the grower holding the tail lock, before the tail word that
// names it is released; everyone else reads it after acquiring that word.
unsafe impl<T: Send> Send for TaskQueue<T> {}
// SAFETY: as above; shared access only goes through the stamp and tail protocols.
unsafe impl<T: Send> Sync for TaskQueue<T> {}

impl<T> TaskQueue<T> {
    /// A queue of up to `capacity` slots (rounded up to a power of two, at least 2).
    pub(crate) fn new(capacity: usize) -> Self {
        Self::with_first_ring(capacity, FIRST_RING)
    }

    /// A queue whose first ring has `first` slots (tests and models use small ones).
    pub(crate) fn with_first_ring(capacity: usize, first: usize) -> Self {
        let max_cap = capacity.max(2).next_power_of_two() as u64;
        let first = (first.max(2).next_power_of_two() as u64).min(max_cap);
        let rings = std::array::from_fn(|i| UnsafeCell::new((i == 0).then(|| Ring::new(first, 0))));
        Self {
            rings,
            max_cap,
            newest: AtomicU64::new(0),
            tail: CachePadded::new(AtomicU64::new(0)),
            head: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Ring `i`, which the caller learned exists from a tail or head word it acquired.
    #[inline]
    fn ring(&self, i: usize) -> &Ring<T> {
        // SAFETY: ring `i` was written before the release of the first word naming it
        // (or at construction) and is never written again while the queue is shared.
        let r = self.rings[i].with(|p| unsafe { (*p).as_ref() }.map(|r| r as *const Ring<T>));
        // SAFETY: the ring lives as long as the queue (rings are only dropped with it).
        unsafe { &*r.expect("a ring named by the tail or head word exists") }
    }

    /// Slots of the ring pushes go to now. When a push failed, that ring is full: its slot
    /// for the tail still holds position `tail - capacity`, whose completion makes room.
    pub(crate) fn capacity(&self) -> u64 {
        self.ring(split(self.tail.load(Acquire)).1).cap()
    }

    /// The configured depth: the largest ring.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn depth(&self) -> u64 {
        self.max_cap
    }

    /// Number of positions claimed so far (= sequence number of the next task).
    #[inline]
    pub(crate) fn tail(&self) -> u64 {
        self.tail.load(Acquire) & POS_MASK
    }

    /// Pushes `value`, returning its position, or gives it back when the ring is full.
    #[inline]
    pub(crate) fn push(&self, value: T) -> Result<u64, T> {
        let mut t = self.tail.load(Acquire);
        loop {
            if t & LOCK != 0 {
                spin_hint(); // a ring is being added: a few hundred nanoseconds
                t = self.tail.load(Acquire);
                continue;
            }
            let (pos, r) = split(t);
            let ring = self.ring(r);
            let slot = ring.slot(pos);
            let stamp = slot.stamp.load(Acquire);
            if stamp == pos {
                match self.tail.compare_exchange_weak(t, t + 1, Relaxed, Acquire) {
                    Ok(_) => {
                        // SAFETY: the CAS made this thread the only writer of position `pos`
                        // (in ring `r`: the CAS fails once a ring was added), and stamp ==
                        // pos means the consumer has finished with the slot's previous value.
                        slot.value.with_mut(|p| unsafe { (*p).write(value) });
                        slot.stamp.store(pos + 1, Release);
                        return Ok(pos);
                    }
                    Err(current) => t = current,
                }
            } else if stamp < pos {
                // The slot still holds the value from one lap ago: the ring is full.
                if ring.cap() >= self.max_cap || r + 1 >= MAX_RINGS {
                    return Err(value);
                }
                match self.tail.compare_exchange(t, t | LOCK, Acquire, Acquire) {
                    Ok(_) => t = self.grow(pos, r, ring.cap()),
                    Err(current) => t = current,
                }
            } else {
                // Another producer claimed `pos`; catch up.
                spin_hint();
                t = self.tail.load(Acquire);
            }
        }
    }

    /// Adds ring `r + 1` starting at `pos` (the caller holds the tail lock, taken at `pos`)
    /// and unlocks; returns the new tail word.
    #[cold]
    fn grow(&self, pos: u64, r: usize, cap: u64) -> u64 {
        let ring = Ring::new((cap * GROWTH).min(self.max_cap), pos);
        // SAFETY: only the lock holder writes a ring, and nobody reads ring r + 1 before
        // the release below names it.
        self.rings[r + 1].with_mut(|p| unsafe { *p = Some(ring) });
        self.newest.store(r as u64 + 1, Release);
        let t = pos | ((r as u64 + 1) << RING_SHIFT);
        self.tail.store(t, Release);
        t
    }

    /// The ring holding position `pos`, from the consumer's ring `r` on (true if it moved).
    #[inline]
    fn locate(&self, pos: u64, mut r: usize) -> (usize, bool) {
        // A ring named here was written before this store (and a value pushed into it was
        // pushed after it: the pusher acquired the tail word released after it).
        let newest = self.newest.load(Acquire) as usize;
        let mut moved = false;
        while r < newest && self.ring(r + 1).start <= pos {
            r += 1;
            moved = true;
        }
        (r, moved)
    }

    /// Pops the next value in position order. Only the stream's current owner may call it.
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        let (pos, mut r) = split(self.head.load(Acquire));
        loop {
            let ring = self.ring(r);
            let slot = ring.slot(pos);
            if slot.stamp.load(Acquire) == pos + 1 {
                // SAFETY: stamp == pos + 1 was stored (release) after the producer wrote the
                // value, and only the single consumer reads a slot, once per lap.
                let value = slot.value.with_mut(|p| unsafe { (*p).assume_init_read() });
                slot.stamp.store(pos + ring.cap(), Release);
                self.head.store((pos + 1) | ((r as u64) << RING_SHIFT), Release);
                return Some(value);
            }
            // Empty here, or the producers moved on to a newer ring at this position (every
            // earlier position was in this ring and has been popped).
            match self.locate(pos, r) {
                (next, true) => r = next,
                _ => return None, // empty, or the producer of `pos` has not finished writing
            }
        }
    }

    /// `f` of the value at the head, without popping it (None when none is written there
    /// yet). Only the stream's current owner may call it, as for [`pop`](Self::pop): the
    /// head then cannot move until this owner pops it.
    #[inline]
    pub(crate) fn peek<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        let (pos, mut r) = split(self.head.load(Acquire));
        loop {
            let slot = self.ring(r).slot(pos);
            if slot.stamp.load(Acquire) == pos + 1 {
                // SAFETY: stamp == pos + 1 was stored (release) after the producer wrote the
                // value; only the single consumer reads a slot, and this read leaves the
                // value in place (the slot stays full until that consumer pops it).
                return Some(slot.value.with(|p| f(unsafe { (*p).assume_init_ref() })));
            }
            match self.locate(pos, r) {
                (next, true) => r = next,
                _ => return None,
            }
        }
    }

    /// True when no written value is waiting at the head.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        let (pos, r) = split(self.head.load(Acquire));
        if self.ring(r).slot(pos).stamp.load(Acquire) == pos + 1 {
            return false;
        }
        match self.locate(pos, r) {
            (next, true) => self.ring(next).slot(pos).stamp.load(Acquire) != pos + 1,
            _ => true,
        }
    }

    /// Tasks queued (claimed by producers, not yet popped); only the consumer's view is
    /// exact.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> u64 {
        self.tail().saturating_sub(self.head.load(Relaxed) & POS_MASK)
    }
}

impl<T> Drop for TaskQueue<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

#[cfg(test)]
mod tests;
