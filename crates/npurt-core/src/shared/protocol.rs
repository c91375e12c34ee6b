//! The slot protocol of the shared region, on single slots (no `/proc`, no files), so that
//! the loom models (`loom_tests.rs`) check the code the region runs:
//!
//! - **Process slots.** [`try_charge`] takes device room with one CAS loop on the header's
//!   `reserved` against the capacity, then counts it on the slot; [`release`] gives back at
//!   most what the slot holds (a slot cleared meanwhile already gave everything back);
//!   [`clear`] empties a slot (detach, reclaim). Invariant: the header's `reserved` is the
//!   sum of the slots' and never exceeds the capacity. [`publish`] fills a slot and makes
//!   it LIVE with a release store: a reader that sees LIVE (acquire) sees the fields.
//! - **Event slots.** [`complete`] raises `completed` to a record number and bumps the
//!   futex word `seq`; [`close`] marks the slot CLOSED and bumps `seq`; both wake sleepers
//!   only when `waiters > 0`. A sleeper reads `seq`, checks its condition, counts itself in
//!   `waiters` and sleeps on `seq` only while it still holds the value it read (the futex's
//!   atomic check). The two SeqCst fences (after the bump, after counting a waiter) keep a
//!   waker from missing a sleeper that counted itself: the store-buffering case that
//!   acquire/release alone allows.

use super::region::{EventSlot, Header, ProcSlot, CLOSED, FREE, LIVE};
use crate::sync::{fence, AtomicU32};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::time::Duration;

/// Takes `bytes` of the device's room for the process in `s`; false when the capacity
/// would be exceeded.
pub(crate) fn try_charge(h: &Header, s: &ProcSlot, bytes: u64) -> bool {
    let cap = h.capacity.load(Relaxed);
    let mut cur = h.reserved.load(Relaxed);
    while let Some(new) = cur.checked_add(bytes).filter(|&n| n <= cap) {
        match h.reserved.compare_exchange_weak(cur, new, AcqRel, Relaxed) {
            Ok(_) => {
                s.reserved.fetch_add(bytes, Relaxed);
                return true;
            }
            Err(c) => cur = c,
        }
    }
    false
}

/// Gives back `bytes` taken with [`try_charge`] (no more than the slot still holds).
pub(crate) fn release(h: &Header, s: &ProcSlot, bytes: u64) {
    let prev = s
        .reserved
        .fetch_update(AcqRel, Relaxed, |v| Some(v.saturating_sub(bytes)));
    let taken = prev.map_or(0, |v| v.min(bytes));
    h.reserved.fetch_sub(taken, AcqRel);
}

/// Empties a slot and gives its reserved bytes back to the device; returns them.
pub(crate) fn clear(h: &Header, s: &ProcSlot) -> u64 {
    let bytes = s.reserved.swap(0, AcqRel);
    h.reserved.fetch_sub(bytes, AcqRel);
    for f in [&s.allocated, &s.quota, &s.streams, &s.events] {
        f.store(0, Relaxed);
    }
    s.state.store(FREE, Release);
    bytes
}

/// Fills a free slot for process `(pid, start)` and makes it LIVE (under the file lock:
/// one writer; readers may look at any time).
pub(crate) fn publish(s: &ProcSlot, pid: u32, start: u64) {
    s.pid.store(pid, Relaxed);
    s.start.store(start, Relaxed);
    for f in [&s.allocated, &s.reserved, &s.quota, &s.streams, &s.events] {
        f.store(0, Relaxed);
    }
    s.state.store(LIVE, Release);
}

/// The pid of a LIVE slot (what `list` and `npurt-smi` read), `None` otherwise.
pub(crate) fn live_pid(s: &ProcSlot) -> Option<u32> {
    (s.state.load(Acquire) == LIVE).then(|| s.pid.load(Relaxed))
}

/// Marks record `n` (and every earlier one) of the event complete and wakes sleepers.
pub(crate) fn complete(e: &EventSlot, n: u64) {
    e.completed.fetch_max(n, AcqRel);
    wake(&e.seq, &e.waiters);
}

/// Closes a LIVE event slot (its producer dropped it or died) and wakes sleepers.
pub(crate) fn close(e: &EventSlot) {
    e.state.store(CLOSED, Release);
    wake(&e.seq, &e.waiters);
}

/// True once record `target` completed.
pub(crate) fn reached(e: &EventSlot, target: u64) -> bool {
    e.completed.load(Acquire) >= target
}

/// Bumps the futex word and wakes its sleepers if any counted themselves.
pub(crate) fn wake(seq: &AtomicU32, waiters: &AtomicU32) {
    seq.fetch_add(1, AcqRel);
    fence(SeqCst); // pairs with the sleeper's fence: see the module docs
    if waiters.load(Acquire) > 0 {
        crate::futex::wake(seq);
    }
}

/// Sleeps until `seq` moves from `seen` (read before the caller checked its condition)
/// or `timeout` passes.
pub(crate) fn sleep(e: &EventSlot, seen: u32, timeout: Duration) {
    e.waiters.fetch_add(1, AcqRel);
    fence(SeqCst);
    crate::futex::wait(&e.seq, seen, timeout);
    e.waiters.fetch_sub(1, AcqRel);
}
