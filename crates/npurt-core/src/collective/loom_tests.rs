//! Loom models of the progress board (`board.rs`): threads stand for ranks (the board's
//! atomics are the same whether another thread or another process touches them; `shm`
//! maps the same block in every process). `make loom` runs them.
//!
//! - Two ranks publish different failures at once while a third reads: every rank ends
//!   with the same record, and a reader sees either no record or a whole one.
//! - Barriers: each rank publishes its phase and waits (`Board::wait_until`, sleeping on
//!   the futex word it read before checking): nobody sleeps through the last arrival (the
//!   model's sleeps have no timeout, so a lost wake-up is a deadlock), over two phases.
//! - The rows a rank compares after a barrier (desync detection) are never rewritten by
//!   the next collective before the closing barrier: the rule `algo.rs` keeps for every
//!   collective, barriers included.

use super::board::{AbortRecord, Board, ModelBlock};
use crate::sync::Arc;
use loom::thread;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::Duration;

fn board(world: u32) -> Arc<(Board, ModelBlock)> {
    Arc::new(Board::for_model(world))
}

fn record(kind: u32, rank: u32, text: &str) -> AbortRecord {
    AbortRecord {
        kind,
        rank,
        seq: 7,
        mask: 1 << rank,
        secs: 0.5,
        text: text.into(),
    }
}

/// One rank's barrier to `target`: the code `Rendezvous::barrier` runs, without deadlines.
fn barrier(b: &Board, me: u32, target: u64) {
    b.publish_phase(me, target);
    let world = b.world();
    let done = || (0..world).all(|r| b.rank(r).phase.load(Acquire) >= target);
    b.wait_until(done, |seen| {
        b.sleep(seen, Duration::from_secs(60));
        Ok::<(), ()>(())
    })
    .unwrap();
}

#[test]
fn loom_abort_records_agree_and_are_read_whole() {
    loom::model(|| {
        let b = board(2);
        let publisher = |kind: u32, rank: u32, text: &'static str| {
            let b = b.clone();
            thread::spawn(move || b.0.abort(record(kind, rank, text)))
        };
        let (x, y) = (publisher(1, 0, "rank 0 timed out"), publisher(3, 1, "rank 1 died"));
        let seen = b.0.aborted(); // racing the publishers
        let (rx, ry) = (x.join().unwrap(), y.join().unwrap());
        // The text is cut to the board's words: compare what the board holds.
        let cut = |mut r: AbortRecord| {
            r.text.truncate(16);
            r
        };
        let published = b.0.aborted().expect("a record is published");
        assert!(
            published == cut(record(1, 0, "rank 0 timed out")) || published == cut(record(3, 1, "rank 1 died")),
            "{published:?}"
        );
        // Both publishers end with the one record in force (the winner its own).
        assert_eq!(cut(rx), published);
        assert_eq!(cut(ry), published);
        // A reader racing them saw nothing yet or the whole record, never a mix.
        if let Some(s) = seen {
            assert_eq!(s, published, "torn read");
        }
    });
}

#[test]
fn loom_barrier_never_sleeps_through_the_last_arrival() {
    loom::model(|| {
        let b = board(2);
        let other = {
            let b = b.clone();
            thread::spawn(move || {
                barrier(&b.0, 1, 1);
                barrier(&b.0, 1, 2);
            })
        };
        barrier(&b.0, 0, 1);
        barrier(&b.0, 0, 2);
        other.join().unwrap();
        assert_eq!(b.0.rank(0).phase.load(Relaxed), 2);
    });
}

#[test]
fn loom_rows_are_stable_until_the_closing_barrier() {
    loom::model(|| {
        let b = board(2);
        // Collective #1 (a barrier): publish the row, arrive, compare the rows, close; then
        // collective #2 rewrites the row. The comparison must only ever see #1.
        let rank = |b: Arc<(Board, ModelBlock)>, me: u32| {
            move || {
                let bd = &b.0;
                bd.rank(me).seq.store(1, Relaxed);
                barrier(bd, me, 1);
                let other = bd.rank(1 - me).seq.load(Relaxed);
                barrier(bd, me, 2); // the closing barrier
                bd.rank(me).seq.store(2, Relaxed);
                other
            }
        };
        let t = thread::spawn(rank(b.clone(), 1));
        let mine = rank(b.clone(), 0)();
        let theirs = t.join().unwrap();
        assert_eq!((mine, theirs), (1, 1), "a row of the next collective was compared");
    });
}
