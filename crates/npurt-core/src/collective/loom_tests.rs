//! Loom models of the progress board (`board.rs`): threads stand for ranks (the board's
//! atomics are the same whether another thread or another process touches them; `shm`
//! maps the same block in every process). `make loom` runs them.
//!
//! - Two ranks publish different failures at once while a third reads: every rank ends
//!   with the same record, and a reader sees either no record or a whole one.
//! - Barriers: each rank publishes its phase and waits (`Board::wait_until`, sleeping on
//!   the futex word it read before checking): nobody sleeps through the last arrival (the
//!   model's sleeps have no timeout, so a lost wake-up is a deadlock), over two phases.
//! - Eager collectives (`eager.rs`: one barrier, rows and staging areas by the seq modulo
//!   `DEPTH` (3 in the models), no closing barrier): what a rank compares and reads after
//!   arriving is never rewritten by a later collective before it is done, over `DEPTH + 1`
//!   collectives; and with broadcasts whose root does not wait for the reader and runs up
//!   to `DEPTH - 1` ahead (`catch_up`, through `catch_up_target`, is the flow control).

use super::board::{AbortRecord, Board, ModelBlock, DEPTH};
use super::rendezvous::catch_up_target;
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

/// The model's staged bytes: rank `r`'s area `i` is `areas[r * DEPTH + i]` (two ranks).
type Areas = [AtomicU64; 2 * DEPTH];

fn areas() -> Arc<Areas> {
    Arc::new(std::array::from_fn(|_| AtomicU64::new(0)))
}

/// What collective `seq` stages and publishes (0 means "nothing yet").
fn tag(seq: u64) -> u64 {
    seq + 1
}

#[test]
fn loom_eager_areas_are_never_overwritten_while_read() {
    loom::model(|| {
        let b = board(2);
        // DEPTH + 1 eager collectives (one barrier each, no closing barrier; `eager.rs`): a
        // rank stages its data in area `seq % DEPTH`, publishes its row `seq % DEPTH`,
        // arrives, then reads the other rank's row and area of `seq`. The last collective
        // reuses the area and row of the first: a reader of the first must never see the
        // last's data (the atomics stand in for the staged bytes).
        let rank = |b: Arc<(Board, ModelBlock)>, h: Arc<Areas>, me: u32| {
            move || {
                let bd = &b.0;
                let mut seen = Vec::new();
                for seq in 0..=DEPTH as u64 {
                    let i = (seq % DEPTH as u64) as usize;
                    h[me as usize * DEPTH + i].store(tag(seq), Relaxed);
                    bd.row(me, seq).seq.store(tag(seq), Relaxed);
                    barrier(bd, me, seq + 1);
                    let row = bd.row(1 - me, seq).seq.load(Relaxed);
                    let data = h[(1 - me) as usize * DEPTH + i].load(Relaxed);
                    seen.push((row, data));
                }
                seen
            }
        };
        let h = areas();
        let t = thread::spawn(rank(b.clone(), h.clone(), 1));
        let mine = rank(b.clone(), h.clone(), 0)();
        let theirs = t.join().unwrap();
        let want: Vec<(u64, u64)> = (0..=DEPTH as u64).map(|s| (tag(s), tag(s))).collect();
        assert_eq!(mine, want, "rank 0 read a row or area of another collective");
        assert_eq!(theirs, want, "rank 1 read a row or area of another collective");
    });
}

/// One collective of the broadcast model: a full-barrier eager one (every rank stages and
/// reads the other's area) or a broadcast from rank 0 (`eager.rs`: the root stages and
/// arrives without waiting; the reader waits for the root alone, reads, then arrives).
#[derive(Clone, Copy)]
enum Step {
    Full,
    Bcast,
}

/// `Rendezvous::catch_up`: every rank's phase reached `target`.
fn catch_up(b: &Board, target: u64) {
    let done = || (0..b.world()).all(|r| b.rank(r).phase.load(Acquire) >= target);
    b.wait_until(done, |seen| {
        b.sleep(seen, Duration::from_secs(60));
        Ok::<(), ()>(())
    })
    .unwrap();
}

/// Rank `me`'s side of `steps`: what it read (row, area contents) per collective. The
/// arrival bookkeeping is `Rendezvous`'s: `arrivals[seq % DEPTH]` and `catch_up_target`.
fn run_steps(b: &Board, h: &Areas, me: u32, steps: &[Step]) -> Vec<(u64, u64)> {
    let (mut phase, mut arrivals, mut seen) = (0u64, [0u64; DEPTH], Vec::new());
    for (seq, step) in steps.iter().enumerate() {
        let seq = seq as u64;
        let i = (seq % DEPTH as u64) as usize;
        let other = 1 - me;
        catch_up(b, catch_up_target(&arrivals, seq));
        match step {
            Step::Full => {
                h[me as usize * DEPTH + i].store(tag(seq), Relaxed);
                b.row(me, seq).seq.store(tag(seq), Relaxed);
                phase += 1;
                barrier(b, me, phase);
                arrivals[i] = phase;
                seen.push((
                    b.row(other, seq).seq.load(Relaxed),
                    h[other as usize * DEPTH + i].load(Relaxed),
                ));
            }
            Step::Bcast if me == 0 => {
                h[i].store(tag(seq), Relaxed);
                b.row(me, seq).seq.store(tag(seq), Relaxed);
                phase += 1;
                b.publish_phase(me, phase);
                arrivals[i] = phase;
                seen.push((tag(seq), tag(seq)));
            }
            Step::Bcast => {
                b.row(me, seq).seq.store(tag(seq), Relaxed);
                let target = phase + 1;
                let root = b.rank(0);
                b.wait_until(
                    || root.phase.load(Acquire) >= target,
                    |s| {
                        b.sleep(s, Duration::from_secs(60));
                        Ok::<(), ()>(())
                    },
                )
                .unwrap();
                seen.push((b.row(0, seq).seq.load(Relaxed), h[i].load(Relaxed)));
                phase += 1;
                b.publish_phase(me, phase);
                arrivals[i] = phase;
            }
        }
    }
    seen
}

fn broadcast_model(steps: &'static [Step]) {
    loom::model(move || {
        let b = board(2);
        let h = areas();
        let t = {
            let (b, h) = (b.clone(), h.clone());
            thread::spawn(move || run_steps(&b.0, &h, 1, steps))
        };
        let mine = run_steps(&b.0, &h, 0, steps);
        let theirs = t.join().unwrap();
        let want: Vec<(u64, u64)> = (0..steps.len() as u64).map(|s| (tag(s), tag(s))).collect();
        assert_eq!(mine, want, "rank 0 read a row or area of another collective");
        assert_eq!(theirs, want, "rank 1 read a row or area of another collective");
    });
}

/// Broadcasts whose root never waits for the reader (`eager.rs`): `catch_up` lets the root
/// run up to `DEPTH - 1` collectives ahead but keeps it from restaging an area, or
/// rewriting a row, the reader has not read yet — `DEPTH + 1` broadcasts in a row, and
/// broadcasts before a full-barrier collective that reuses an area the reader may still
/// be reading. Without `catch_up` both fail; with a target one collective earlier (the
/// arrival at `seq - DEPTH`: enough while only broadcasts, which read before they arrive,
/// reuse an area) the second does.
#[test]
fn loom_broadcast_root_never_overwrites_what_is_read() {
    use Step::*;
    const _: () = assert!(DEPTH == 3, "the step lists below are written for DEPTH 3");
    broadcast_model(&[Bcast, Bcast, Bcast, Bcast]);
    broadcast_model(&[Full, Bcast, Bcast, Full]);
}
