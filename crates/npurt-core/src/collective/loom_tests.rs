//! Loom models of the progress board (`board.rs`): threads stand for ranks (the board's
//! atomics are the same whether another thread or another process touches them; `shm`
//! maps the same block in every process). `make loom` runs them.
//!
//! - Two ranks publish different failures at once while a third reads: every rank ends
//!   with the same record, and a reader sees either no record or a whole one.
//! - Barriers: each rank publishes its phase and waits (`Board::wait_until`, sleeping on
//!   the futex word it read before checking): nobody sleeps through the last arrival (the
//!   model's sleeps have no timeout, so a lost wake-up is a deadlock), over two phases.
//! - Eager collectives (`eager.rs`: one barrier, rows and staging halves by the seq's
//!   parity, no closing barrier): what a rank compares and reads after arriving is never
//!   rewritten by a later collective before it is done, over three collectives.

use super::board::{AbortRecord, Board, ModelBlock};
use crate::sync::{Arc, AtomicU64};
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
fn loom_eager_halves_are_never_overwritten_while_read() {
    loom::model(|| {
        let b = board(2);
        // Three eager collectives (one barrier each, no closing barrier; `eager.rs`): a
        // rank stages its data in half `seq % 2`, publishes its row `seq % 2`, arrives,
        // then reads the other rank's row and half of `seq`. Collective 3 reuses the half
        // and row of collective 1: a reader of 1 must never see 3's data (the atomics stand
        // in for the staged bytes).
        let halves: Arc<[AtomicU64; 4]> = Arc::new(std::array::from_fn(|_| AtomicU64::new(0)));
        let rank = |b: Arc<(Board, ModelBlock)>, h: Arc<[AtomicU64; 4]>, me: u32| {
            move || {
                let bd = &b.0;
                let mut seen = Vec::new();
                for seq in 1..=3u64 {
                    let p = (seq & 1) as usize;
                    h[me as usize * 2 + p].store(seq, Relaxed);
                    bd.row(me, seq).seq.store(seq, Relaxed);
                    barrier(bd, me, seq);
                    let row = bd.row(1 - me, seq).seq.load(Relaxed);
                    let data = h[(1 - me) as usize * 2 + p].load(Relaxed);
                    seen.push((row, data));
                }
                seen
            }
        };
        let t = thread::spawn(rank(b.clone(), halves.clone(), 1));
        let mine = rank(b.clone(), halves.clone(), 0)();
        let theirs = t.join().unwrap();
        let want: Vec<(u64, u64)> = (1..=3).map(|s| (s, s)).collect();
        assert_eq!(mine, want, "rank 0 read a row or half of another collective");
        assert_eq!(theirs, want, "rank 1 read a row or half of another collective");
    });
}
