//! Loom models of the shared region's slot protocol (`protocol.rs`), on slots built outside
//! a mapping: threads stand for processes (the region's atomics are the same whether
//! another thread or another process touches them). `make loom` runs them.

use super::protocol;
use super::region::{EventSlot, Header, ProcSlot, LIVE};
use crate::sync::Arc;
use loom::thread;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::Duration;

/// Two processes charge against a capacity that fits only one of them while a third
/// releases what it held: the capacity is never exceeded, exactly the charges that fit
/// succeed, and the header's `reserved` ends as the sum of the slots'.
#[test]
fn loom_charges_hold_the_capacity_and_the_sum() {
    loom::model(|| {
        let h = Arc::new(Header::for_model(100));
        let slots: Arc<[ProcSlot; 3]> = Arc::new(std::array::from_fn(|_| ProcSlot::for_model()));
        assert!(protocol::try_charge(&h, &slots[2], 40));
        let charger = |i: usize| {
            let (h, slots) = (h.clone(), slots.clone());
            thread::spawn(move || {
                let ok = protocol::try_charge(&h, &slots[i], 50);
                assert!(h.reserved.load(Relaxed) <= 100);
                ok
            })
        };
        let (a, b) = (charger(0), charger(1));
        let releaser = {
            let (h, slots) = (h.clone(), slots.clone());
            thread::spawn(move || protocol::release(&h, &slots[2], 40))
        };
        let (ok_a, ok_b) = (a.join().unwrap(), b.join().unwrap());
        releaser.join().unwrap();
        // 40 + 50 fit, 40 + 50 + 50 do not: at least one charge succeeds; both only if
        // the release came first for one of them.
        assert!(ok_a || ok_b);
        let sum: u64 = slots.iter().map(|s| s.reserved.load(Relaxed)).sum();
        assert_eq!(h.reserved.load(Relaxed), sum);
        assert_eq!(sum, 50 * (ok_a as u64 + ok_b as u64));
    });
}

/// A late release racing with the slot being cleared (detach) gives back each byte once:
/// the header never underflows and ends at zero.
#[test]
fn loom_release_racing_clear_counts_each_byte_once() {
    loom::model(|| {
        let h = Arc::new(Header::for_model(1 << 20));
        let s = Arc::new(ProcSlot::for_model());
        assert!(protocol::try_charge(&h, &s, 300));
        let t = {
            let (h, s) = (h.clone(), s.clone());
            thread::spawn(move || protocol::release(&h, &s, 100))
        };
        let cleared = protocol::clear(&h, &s);
        t.join().unwrap();
        assert!(cleared == 300 || cleared == 200, "{cleared}");
        assert_eq!(h.reserved.load(Relaxed), 0);
        assert_eq!(s.reserved.load(Relaxed), 0);
    });
}

/// A reader that sees a process slot LIVE sees the pid published with it.
#[test]
fn loom_a_live_slot_shows_its_pid() {
    loom::model(|| {
        let s = Arc::new(ProcSlot::for_model());
        let w = {
            let s = s.clone();
            thread::spawn(move || protocol::publish(&s, 4242, 7))
        };
        if let Some(pid) = protocol::live_pid(&s) {
            assert_eq!(pid, 4242);
            assert_eq!(s.start.load(Relaxed), 7);
        }
        w.join().unwrap();
        assert_eq!(protocol::live_pid(&s), Some(4242));
    });
}

/// The wait loop of `IpcEvent::wait` / the external-wait thread on one slot: read `seq`,
/// check, sleep while `seq` is unchanged.
fn wait_until(e: &EventSlot, done: impl Fn(&EventSlot) -> bool) {
    loop {
        let seen = e.seq.load(Acquire);
        if done(e) {
            return;
        }
        protocol::sleep(e, seen, Duration::from_millis(1));
    }
}

/// A consumer sleeping on record 2 while the producer's two records complete (in either
/// order, from two streams): the consumer always wakes (a lost wakeup would be a
/// deadlock in the model, whose futex sleeps without a timeout), and `completed` ends at 2.
#[test]
fn loom_completion_wakes_a_sleeper() {
    loom::model(|| {
        let e = Arc::new(EventSlot::for_model());
        let n1 = e.recorded.fetch_add(1, Relaxed) + 1;
        let n2 = e.recorded.fetch_add(1, Relaxed) + 1;
        let completers: Vec<_> = [n2, n1]
            .into_iter()
            .map(|n| {
                let e = e.clone();
                thread::spawn(move || protocol::complete(&e, n))
            })
            .collect();
        wait_until(&e, |e| protocol::reached(e, n2));
        for c in completers {
            c.join().unwrap();
        }
        assert_eq!(e.completed.load(Relaxed), 2);
        assert_eq!(e.waiters.load(Relaxed), 0);
    });
}

/// A producer that closes its event (it dropped it or died) wakes a consumer sleeping on
/// a record that will never complete: the consumer sees CLOSED instead of sleeping forever.
#[test]
fn loom_close_wakes_a_sleeper() {
    loom::model(|| {
        let e = Arc::new(EventSlot::for_model());
        let closer = {
            let e = e.clone();
            thread::spawn(move || protocol::close(&e))
        };
        wait_until(&e, |e| protocol::reached(e, 1) || e.state.load(Acquire) != LIVE);
        closer.join().unwrap();
        assert!(!protocol::reached(&e, 1));
    });
}
