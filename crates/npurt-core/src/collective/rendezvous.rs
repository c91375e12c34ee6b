//! One rank's side of one collective on the board: arrival (publish the descriptor, wait
//! for everyone, compare descriptors: desync), barriers between the algorithm's steps,
//! and the waits — which never hang: each ends at the collective's deadline
//! ([`CollectiveError::Timeout`] naming the ranks that never arrived), when a rank it
//! waits for died or left ([`CollectiveError::RankFailed`]) or when another rank
//! published a failure (the same error, read back from the board).

use super::board::{now_ms, AbortRecord, Board, DEPTH, ST_LEFT};
use super::error::{AbortCause, CollectiveError, Ranks};
use super::types::OpDesc;
use std::sync::atomic::Ordering::*;
use std::time::{Duration, Instant};

pub(crate) const K_TIMEOUT: u32 = 1;
pub(crate) const K_DESYNC: u32 = 2;
pub(crate) const K_FAILED: u32 = 3;

/// How long a waiter yields its core before it sleeps on the board's futex word. With
/// more ranks than cores, the ranks it waits for need that core: yielding hands it over
/// at once, while a sleep and its wake-up cost a few microseconds each (4 ranks on 2
/// vCPUs: 1 KiB broadcast ~30 µs a call sleeping at once, ~15 µs yielding 50 µs first).
const YIELD_FOR: Duration = Duration::from_micros(50);

thread_local! {
    /// This thread's interrupt check while it runs a collective itself ([`with_interrupt`]).
    static INTERRUPT: std::cell::Cell<Option<fn() -> bool>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` (which may run a collective on this thread: `enqueue_or_run`) with
/// `interrupted` as this thread's interrupt check: a wait inside the collective calls it
/// every [`LIVENESS_EVERY`] (not on the fast path) and, when it returns true, fails the
/// collective as this rank's failure ([`CollectiveError::RankFailed`] naming this rank,
/// on every rank), so a signal (Ctrl-C) need not wait for the deadline. Bindings pass a
/// check that looks for pending signals and keeps the exception for the caller.
pub fn with_interrupt<R>(interrupted: fn() -> bool, f: impl FnOnce() -> R) -> R {
    let prev = INTERRUPT.with(|i| i.replace(Some(interrupted)));
    let r = f();
    INTERRUPT.with(|i| i.set(prev));
    r
}

/// How often a waiter looks at the pids of the ranks it waits for.
const LIVENESS_EVERY: Duration = Duration::from_millis(20);

pub(crate) type CResult<T> = Result<T, CollectiveError>;

/// One rank inside one collective.
pub(crate) struct Rendezvous<'a> {
    pub(crate) board: &'a Board,
    pub(crate) me: u32,
    pub(crate) seq: u64,
    pub(crate) desc: OpDesc,
    /// This rank's barrier phase (monotonic over the communicator's life).
    pub(crate) phase: &'a mut u64,
    /// The phases this rank published when it arrived at its last [`DEPTH`] collectives
    /// (collective `s`'s at `s % DEPTH`; see [`catch_up`](Self::catch_up)).
    pub(crate) arrivals: &'a mut [u64; DEPTH],
    pub(crate) start: Instant,
    pub(crate) deadline: Instant,
    /// Whether peers are other processes (their pids are watched).
    pub(crate) check_pids: bool,
}

impl Rendezvous<'_> {
    /// Publishes this rank's descriptor, waits for every rank, and checks that they all
    /// called the same collective.
    pub(crate) fn arrive(&mut self, send: u64, recv: u64) -> CResult<()> {
        self.catch_up()?;
        let slot = self.board.rank(self.me);
        slot.send_ptr.store(send, Relaxed);
        slot.recv_ptr.store(recv, Relaxed);
        self.publish_row();
        self.barrier()?;
        self.arrived();
        self.check_desync()
    }

    /// Records this rank's arrival at this collective (its current phase).
    fn arrived(&mut self) {
        self.arrivals[(self.seq % DEPTH as u64) as usize] = *self.phase;
    }

    /// Waits until every rank arrived at collective `seq - DEPTH + 1`: before this rank
    /// writes its row or eager area of number `seq % DEPTH` again, whoever read those of
    /// `seq - DEPTH` is done (a rank reads them before it arrives at the next collective).
    /// After a collective that began with a full barrier this holds already (one look at
    /// the phases); after ones that did not wait for everyone (a broadcast's root, see
    /// [`announce`](Self::announce)) it is the flow control: that rank is at most
    /// `DEPTH - 1` collectives ahead. Phases count the same on every rank, so this rank's
    /// own arrival phase at `seq - DEPTH + 1` is the one to wait for. Fails at once on an
    /// aborted group.
    pub(crate) fn catch_up(&self) -> CResult<()> {
        if let Some(rec) = self.board.aborted() {
            return Err(self.error_of(&rec));
        }
        let (world, target) = (self.board.world(), catch_up_target(self.arrivals, self.seq));
        let done = || (0..world).all(|r| self.board.rank(r).phase.load(Acquire) >= target);
        if done() {
            return Ok(());
        }
        let behind = || -> Vec<u32> {
            (0..world)
                .filter(|&r| self.board.rank(r).phase.load(Acquire) < target)
                .collect()
        };
        self.wait_for(&done, &behind)
    }

    fn publish_row(&self) {
        let row = self.board.row(self.me, self.seq);
        let (a, c) = self.desc.pack();
        row.desc.store(a, Relaxed);
        row.count.store(c, Relaxed);
        row.seq.store(self.seq, Relaxed);
    }

    /// The root of a collective whose other ranks only read from it (an eager broadcast):
    /// publishes its descriptor and arrives without waiting for anyone (its data must be
    /// staged, after [`catch_up`](Self::catch_up)). The others check the descriptor
    /// against theirs ([`await_root`](Self::await_root)); a failure of theirs reaches
    /// this rank at its next collective, through the abort record.
    pub(crate) fn announce(&mut self) {
        self.publish_row();
        *self.phase += 1;
        self.board.publish_phase(self.me, *self.phase);
        self.arrived();
    }

    /// A reader of an [`announce`](Self::announce)d collective: publishes its descriptor,
    /// waits for the root alone and checks that it called the same collective. Then the
    /// caller reads the root's data and [`leaves`](Self::leave). On a mismatch this rank
    /// waits for every rank (they all arrive: whoever did not announce or read waits for
    /// everyone) and reports the desync as a full arrival does: the same text everywhere.
    pub(crate) fn await_root(&mut self) -> CResult<()> {
        self.catch_up()?;
        self.publish_row();
        let (root, target) = (self.desc.root, *self.phase + 1);
        let slot = self.board.rank(root);
        self.wait_for(&|| slot.phase.load(Acquire) >= target, &|| vec![root])?;
        let row = self.board.row(root, self.seq);
        let theirs = OpDesc::unpack(row.desc.load(Relaxed), row.count.load(Relaxed));
        if row.seq.load(Relaxed) == self.seq && theirs.is_some_and(|d| d.matches(&self.desc)) {
            return Ok(());
        }
        self.barrier()?;
        self.arrived();
        self.check_desync()?;
        Err(CollectiveError::internal(
            self.desc.describe(),
            "the root's descriptor differed, but every rank's matched",
        ))
    }

    /// A reader of an announced collective is done with the root's data: it arrives.
    pub(crate) fn leave(&mut self) {
        *self.phase += 1;
        self.board.publish_phase(self.me, *self.phase);
        self.arrived();
    }

    /// Advances this rank's phase without waiting (a step of a pipeline whose ranks wait
    /// on each other's phases with [`wait_phase`](Self::wait_phase)).
    pub(crate) fn advance(&mut self) {
        *self.phase += 1;
        self.board.publish_phase(self.me, *self.phase);
    }

    /// Waits until every rank `r` with `of(r)` reached phase `target`.
    pub(crate) fn wait_phase(&self, of: &dyn Fn(u32) -> bool, target: u64) -> CResult<()> {
        let world = self.board.world();
        let at = |r: u32| !of(r) || self.board.rank(r).phase.load(Acquire) >= target;
        self.wait_for(&|| (0..world).all(at), &|| (0..world).filter(|&r| !at(r)).collect())
    }

    /// Advances this rank's phase and waits until every rank reached it.
    pub(crate) fn barrier(&mut self) -> CResult<()> {
        *self.phase += 1;
        let target = *self.phase;
        self.board.publish_phase(self.me, target);
        let world = self.board.world();
        let behind = || -> Vec<u32> {
            (0..world)
                .filter(|&r| self.board.rank(r).phase.load(Acquire) < target)
                .collect()
        };
        let done = || (0..world).all(|r| self.board.rank(r).phase.load(Acquire) >= target);
        self.wait_for(&done, &behind)
    }

    /// Waits until `done()`; `behind()` names the ranks still awaited.
    pub(crate) fn wait_for(&self, done: &dyn Fn() -> bool, behind: &dyn Fn() -> Vec<u32>) -> CResult<()> {
        let mut spins = 0u32;
        // When the wait began and the liveness check was last made (read from the clock
        // only once the wait did not end at once: most end at the first look).
        let mut since: Option<(Instant, Instant)> = None;
        self.board.wait_until(done, |seen| {
            if let Some(rec) = self.board.aborted() {
                return Err(self.error_of(&rec));
            }
            if spins < 16 {
                spins += 1;
                std::hint::spin_loop();
                return Ok(());
            }
            let now = Instant::now();
            let (waiting, last_check) = since.get_or_insert((now, now));
            if now.duration_since(*waiting) < YIELD_FOR {
                std::thread::yield_now();
                return Ok(());
            }
            if now >= self.deadline {
                return Err(self.fail_timeout(&behind()));
            }
            if now.duration_since(*last_check) >= LIVENESS_EVERY {
                *last_check = now;
                self.board.rank(self.me).heartbeat_ms.store(now_ms(), Relaxed);
                self.check_alive(done, behind)?;
                if INTERRUPT.with(|i| i.get()).is_some_and(|interrupted| interrupted()) {
                    let what = "was interrupted (a signal reached the thread that ran it)";
                    return Err(self.fail(K_FAILED, 1 << self.me, 0.0, what.into()));
                }
            }
            self.board.sleep(seen, (self.deadline - now).min(LIVENESS_EVERY));
            Ok(())
        })
    }

    /// Fails the collective if a rank it still waits for left or died. What `behind()`
    /// said before the look may be stale: a rank that arrived meanwhile may have left or
    /// exited since, so a departure counts only if the wait is still not done and the
    /// rank still behind after it was seen (a departed rank's progress cannot change).
    fn check_alive(&self, done: &dyn Fn() -> bool, behind: &dyn Fn() -> Vec<u32>) -> CResult<()> {
        let mypid = std::process::id();
        let ranks = behind();
        let still = |r: u32| !done() && behind().contains(&r);
        for r in ranks {
            let slot = self.board.rank(r);
            if slot.state.load(Acquire) == ST_LEFT && still(r) {
                return Err(self.fail(
                    K_FAILED,
                    1 << r,
                    0.0,
                    "left the group (destroy_process_group / HcclCommDestroy)".into(),
                ));
            }
            let pid = slot.pid.load(Relaxed);
            if self.check_pids && pid != 0 && pid != mypid && pid_dead(pid) && still(r) {
                return Err(self.fail(K_FAILED, 1 << r, 0.0, format!("died (pid {pid})")));
            }
        }
        Ok(())
    }

    fn check_desync(&self) -> CResult<()> {
        let world = self.board.world();
        let row = |r: u32| {
            let s = self.board.row(r, self.seq);
            (
                s.seq.load(Relaxed),
                OpDesc::unpack(s.desc.load(Relaxed), s.count.load(Relaxed)),
            )
        };
        let first = row(0);
        let same = |row: &(u64, Option<OpDesc>)| {
            row.0 == first.0 && matches!((&row.1, &first.1), (Some(a), Some(b)) if a.matches(b))
        };
        // Every call checks; only a mismatch collects the rows (no allocation otherwise).
        if (1..world).all(|r| same(&row(r))) {
            return Ok(());
        }
        let rows: Vec<(u64, Option<OpDesc>)> = (0..world).map(row).collect();
        // Group the ranks by what they called (the same text on every rank).
        let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
        for (r, (seq, d)) in rows.iter().enumerate() {
            let what = match d {
                Some(d) if *seq == self.seq => d.describe(),
                Some(d) => format!("{} as collective #{seq}", d.describe()),
                None => "an unknown collective".into(),
            };
            match groups.iter_mut().find(|g| g.0 == what) {
                Some(g) => g.1.push(r as u32),
                None => groups.push((what, vec![r as u32])),
            }
        }
        let detail = groups
            .iter()
            .map(|(what, ranks)| {
                let who = if ranks.len() == 1 { "rank" } else { "ranks" };
                format!("{who} {} called {what}", Ranks(ranks.clone()))
            })
            .collect::<Vec<_>>()
            .join("; ");
        let mask = groups
            .iter()
            .skip(1)
            .flat_map(|g| g.1.iter())
            .fold(0u64, |m, r| m | 1 << r);
        Err(self.fail(K_DESYNC, mask, 0.0, detail))
    }

    fn fail_timeout(&self, missing: &[u32]) -> CollectiveError {
        let mask = missing.iter().fold(0u64, |m, r| m | 1 << r);
        let secs = self.deadline.duration_since(self.start).as_secs_f64();
        self.fail(K_TIMEOUT, mask, secs, String::new())
    }

    /// Publishes a failure on the board (unless another rank was first) and returns the
    /// error of the record in force.
    pub(crate) fn fail(&self, kind: u32, mask: u64, secs: f64, detail: String) -> CollectiveError {
        let rec = AbortRecord {
            kind,
            rank: self.me,
            seq: self.seq,
            mask,
            secs,
            text: format!("{}\n{detail}", self.desc.describe()),
        };
        let rec = self.board.abort(rec);
        self.error_of(&rec)
    }

    /// The error a published record means for this rank's collective.
    pub(crate) fn error_of(&self, rec: &AbortRecord) -> CollectiveError {
        let (op, detail) = rec.text.split_once('\n').unwrap_or((rec.text.as_str(), ""));
        let ranks = |mask: u64| Ranks((0..64).filter(|r| mask >> r & 1 == 1).collect());
        let world_mask = if self.board.world() >= 64 {
            u64::MAX
        } else {
            (1u64 << self.board.world()) - 1
        };
        let (orig, cause) = match rec.kind {
            K_TIMEOUT => (
                CollectiveError::Timeout {
                    op: op.into(),
                    seq: rec.seq,
                    rank: rec.rank,
                    secs: rec.secs,
                    missing: ranks(rec.mask),
                    arrived: ranks(world_mask & !rec.mask),
                },
                AbortCause::Timeout,
            ),
            K_DESYNC => (
                CollectiveError::Desync {
                    seq: rec.seq,
                    detail: detail.into(),
                },
                AbortCause::Desync,
            ),
            _ => (
                CollectiveError::RankFailed {
                    op: op.into(),
                    seq: rec.seq,
                    rank: rec.mask.trailing_zeros().min(63),
                    what: detail.into(),
                },
                AbortCause::RankFailed,
            ),
        };
        if rec.seq == self.seq {
            orig
        } else {
            CollectiveError::Aborted {
                op: self.desc.describe(),
                seq: self.seq,
                at: rec.seq,
                reason: orig.to_string(),
                cause,
            }
        }
    }
}

/// The phase every rank must have reached before this rank starts collective `seq`
/// ([`Rendezvous::catch_up`]): its own arrival phase at `seq - DEPTH + 1` (0 before that),
/// which `arrivals` (arrival phases by seq modulo [`DEPTH`]) holds at `(seq + 1) % DEPTH`
/// until collective `seq` overwrites its own entry.
pub(crate) fn catch_up_target(arrivals: &[u64; DEPTH], seq: u64) -> u64 {
    arrivals[((seq + 1) % DEPTH as u64) as usize]
}

/// Whether process `pid` is gone (no such process, or a zombie waiting to be reaped).
pub fn pid_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => match s.rfind(')').and_then(|i| s[i + 1..].split_whitespace().next()) {
            Some(st) => st == "Z" || st == "X",
            None => false,
        },
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}
