//! [`Communicator`]: one rank's handle on a group — world size, rank, the sequence
//! counter, the board (and what keeps its memory alive), the transport and the default
//! deadline. Collectives on one communicator run one at a time in the order they were
//! called ([`Communicator::execute`] waits for its turn), whatever streams they were
//! queued on, so every rank sees the same sequence.

use super::board::{Board, DEPTH, ST_JOINED, ST_LEFT};
use super::error::CollectiveError;
use super::rendezvous::{CResult, Rendezvous, K_FAILED};
use super::types::{check_regions, CollKind, OpDesc, Region};
use crate::memory::DeviceBuffer;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Environment variable with the default deadline in seconds (HCCL's name; 0: none).
pub const TIMEOUT_ENV: &str = "HCCL_EXEC_TIMEOUT";
/// HCCL's default deadline (1800 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// The default deadline: `HCCL_EXEC_TIMEOUT` seconds (0 or unparsable: 1800 s... 0 means
/// "never", which npurt caps at a year so that nothing waits forever by accident).
pub fn default_timeout() -> Duration {
    match std::env::var(TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
    {
        Some(s) if s > 0.0 && s.is_finite() => Duration::from_secs_f64(s.min(3.15e7)),
        Some(0.0) => Duration::from_secs(31_536_000),
        _ => DEFAULT_TIMEOUT,
    }
}

/// How ranks reach each other's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Ranks in one process: direct reads of the peers' buffers.
    Local,
    /// Processes on one host: staging through per-rank slots of a shared segment.
    Shm,
}

/// The memory behind a board (kept alive by the communicator).
pub(crate) enum Backing {
    Heap(#[allow(dead_code)] Arc<Box<[AtomicU64]>>),
    Shm(#[allow(dead_code)] DeviceBuffer),
}

/// Where a communicator's staging memory lies: the slots (`shm`; 0 for `local`) and the
/// eager areas.
pub(crate) struct Areas {
    pub(crate) slots: usize,
    pub(crate) slot_bytes: usize,
    pub(crate) fragment_bytes: usize,
    pub(crate) eager: usize,
}

/// A claimed collective: its place in this rank's execution order and its sequence number.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    pub(crate) turn: u64,
    pub(crate) seq: u64,
}

pub(crate) struct ExecState {
    turn: u64,
    skipped: BTreeSet<u64>,
    pub(crate) phase: u64,
    /// The phases this rank published when it arrived at its last collectives, by seq
    /// modulo [`DEPTH`] (see `Rendezvous::catch_up`).
    pub(crate) arrivals: [u64; DEPTH],
    pub(crate) sent: Vec<u64>,
    pub(crate) received: Vec<u64>,
    /// `shm`'s single-copy reductions: the peers' parts of a piece (`cma.rs`).
    pub(crate) scratch: Vec<u8>,
}

pub(crate) struct CommInner {
    pub(crate) rank: u32,
    pub(crate) world: u32,
    pub(crate) transport: Transport,
    pub(crate) board: Board,
    /// `shm`: the slot area (address of slot 0) and the bytes per slot.
    pub(crate) slots: usize,
    pub(crate) slot_bytes: usize,
    /// A broadcast's ring fragment (`ring.rs`; `shm::default_fragment_bytes`).
    pub(crate) fragment_bytes: usize,
    /// The eager areas (address of rank 0's; [`super::eager`]), in the board's memory, and
    /// the group's eager limit (read from the board once).
    pub(crate) eager: usize,
    pub(crate) eager_limit: u32,
    /// `shm`: the group's single-copy setting (`cma.rs`), read from the board once (the
    /// board's header line is written at every phase: reading it per call is a miss).
    pub(crate) cma_setting: u64,
    /// Whether this rank took part in the group's probe round (`cma::probe_peers`).
    pub(crate) cma_probed: AtomicBool,
    _backing: Backing,
    timeout_ns: AtomicU64,
    /// (next ticket, next collective seq, next send/recv seq), claimed together.
    claims: Mutex<(u64, u64, u64)>,
    next_seq: AtomicU64,
    exec: Mutex<ExecState>,
    turn_cv: Condvar,
    destroyed: AtomicBool,
}

/// One rank of a communicator (cheap to clone).
#[derive(Clone)]
pub struct Communicator(pub(crate) Arc<CommInner>);

impl Communicator {
    pub(crate) fn new(
        rank: u32,
        world: u32,
        transport: Transport,
        board: Board,
        backing: Backing,
        areas: Areas,
        timeout: Duration,
    ) -> Self {
        let slot = board.rank(rank);
        slot.pid.store(std::process::id(), Relaxed);
        slot.base.store(board.base() as u64, Relaxed);
        slot.state.store(ST_JOINED, Release);
        board.header().joined.fetch_add(1, AcqRel);
        board.wake();
        let w = world as usize;
        let eager_limit = board.header().eager_limit.load(Acquire);
        let cma_setting = board.header().cma_bytes.load(Acquire);
        Communicator(Arc::new(CommInner {
            rank,
            world,
            transport,
            board,
            slots: areas.slots,
            slot_bytes: areas.slot_bytes,
            fragment_bytes: areas.fragment_bytes,
            eager: areas.eager,
            eager_limit,
            cma_setting,
            cma_probed: AtomicBool::new(false),
            _backing: backing,
            timeout_ns: AtomicU64::new(timeout.as_nanos().min(u64::MAX as u128) as u64),
            claims: Mutex::new((0, 0, 0)),
            next_seq: AtomicU64::new(0),
            exec: Mutex::new(ExecState {
                turn: 0,
                skipped: BTreeSet::new(),
                phase: 0,
                arrivals: [0; DEPTH],
                sent: vec![0; w],
                received: vec![0; w],
                scratch: Vec::new(),
            }),
            turn_cv: Condvar::new(),
            destroyed: AtomicBool::new(false),
        }))
    }

    pub fn rank(&self) -> u32 {
        self.0.rank
    }
    pub fn world(&self) -> u32 {
        self.0.world
    }
    pub fn transport(&self) -> Transport {
        self.0.transport
    }
    /// The group's default deadline.
    pub fn timeout(&self) -> Duration {
        Duration::from_nanos(self.0.timeout_ns.load(Relaxed))
    }
    pub fn set_timeout(&self, t: Duration) {
        self.0
            .timeout_ns
            .store(t.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
    }
    /// Collectives (not counting send/recv) called so far: the next one's sequence number.
    pub fn seq(&self) -> u64 {
        self.0.next_seq.load(Relaxed)
    }
    /// Whether a failure aborted the group (every later collective fails at once).
    pub fn is_aborted(&self) -> bool {
        self.0.board.is_aborted()
    }
    pub fn is_destroyed(&self) -> bool {
        self.0.destroyed.load(Acquire)
    }

    /// Claims the next ticket (execution order on this rank) and sequence number:
    /// collectives count group-wide (compared at the rendezvous), send/recv apart (only
    /// two ranks take part).
    pub(crate) fn claim(&self, kind: CollKind) -> CResult<Ticket> {
        if self.is_destroyed() {
            return Err(CollectiveError::param(kind.name(), "the communicator was destroyed"));
        }
        let mut c = self.0.claims.lock();
        let turn = c.0;
        c.0 += 1;
        let seq = if matches!(kind, CollKind::Send | CollKind::Recv) {
            c.2 += 1;
            c.2 - 1
        } else {
            c.1 += 1;
            self.0.next_seq.store(c.1, Release);
            c.1 - 1
        };
        Ok(Ticket { turn, seq })
    }

    /// Runs a collective on the calling thread and blocks until it is done (the stream
    /// front is [`Communicator::enqueue`]).
    pub fn run(
        &self,
        desc: OpDesc,
        send: Option<Region>,
        recv: Option<Region>,
        timeout: Option<Duration>,
    ) -> CResult<()> {
        check_regions(&desc, self.world(), send.as_ref(), recv.as_ref())?;
        let t = self.claim(desc.kind)?;
        self.execute(t, desc, send.as_ref(), recv.as_ref(), timeout)
    }

    /// Runs collective `seq` once every earlier one on this rank ran.
    pub(crate) fn execute(
        &self,
        ticket: Ticket,
        desc: OpDesc,
        send: Option<&Region>,
        recv: Option<&Region>,
        timeout: Option<Duration>,
    ) -> CResult<()> {
        let start = Instant::now();
        let deadline = start + timeout.unwrap_or_else(|| self.timeout());
        let seq = ticket.seq;
        let mut st = self.0.exec.lock();
        while st.turn != ticket.turn {
            if self.0.turn_cv.wait_until(&mut st, deadline).timed_out() && st.turn != ticket.turn {
                return Err(CollectiveError::Timeout {
                    op: desc.describe(),
                    seq,
                    rank: self.rank(),
                    secs: deadline.duration_since(start).as_secs_f64(),
                    missing: super::error::Ranks(vec![self.rank()]),
                    arrived: super::error::Ranks(Vec::new()),
                });
            }
        }
        let result = {
            let ExecState {
                phase,
                arrivals,
                sent,
                received,
                scratch,
                ..
            } = &mut *st;
            let mut rv = Rendezvous {
                board: &self.0.board,
                me: self.rank(),
                seq,
                desc,
                phase,
                arrivals,
                start,
                deadline,
                check_pids: self.transport() == Transport::Shm,
            };
            let addr = |r: Option<&Region>| r.map_or(0, |r| r.addr);
            match desc.kind {
                CollKind::Send | CollKind::Recv => super::algo::p2p(&self.0, &mut rv, sent, received, send, recv),
                // (collectives the single copy runs leave the eager path: `cma::preferred`)
                _ if super::eager::fits(&desc, self.world(), self.0.eager_limit)
                    && !(self.transport() == Transport::Shm && super::cma::preferred(&self.0, &desc)) =>
                {
                    super::eager::run(&self.0, &mut rv, addr(send), addr(recv))
                }
                _ => match self.transport() {
                    Transport::Local => super::algo::direct(&mut rv, addr(send), addr(recv)),
                    Transport::Shm => super::algo::staged(&self.0, &mut rv, addr(send), addr(recv), scratch),
                },
            }
        };
        self.advance(&mut st);
        result
    }

    fn advance(&self, st: &mut ExecState) {
        st.turn += 1;
        while st.skipped.remove(&st.turn) {
            st.turn += 1;
        }
        self.0.turn_cv.notify_all();
    }

    /// The error of collective `seq` when the group was aborted before it was queued (None
    /// while the group is usable): such a call fails at once, as HCCL's and torch's do.
    pub(crate) fn aborted_error(&self, seq: u64, desc: OpDesc) -> Option<CollectiveError> {
        let rec = self.0.board.aborted()?;
        Some(self.at_once(seq, desc, &mut 0, &mut [0; DEPTH]).error_of(&rec))
    }

    /// A rendezvous of collective `seq` that waits for nothing (its deadline is now): for
    /// reading or publishing the group's abort record.
    fn at_once<'a>(
        &'a self,
        seq: u64,
        desc: OpDesc,
        phase: &'a mut u64,
        arrivals: &'a mut [u64; DEPTH],
    ) -> Rendezvous<'a> {
        let now = Instant::now();
        Rendezvous {
            board: &self.0.board,
            me: self.rank(),
            seq,
            desc,
            phase,
            arrivals,
            start: now,
            deadline: now,
            check_pids: false,
        }
    }

    /// A queued collective that will never run (its stream failed first): its turn
    /// passes, and the group is aborted so that the other ranks do not wait for it.
    pub(crate) fn skip(&self, ticket: Ticket, desc: OpDesc) {
        let seq = ticket.seq;
        let mut st = self.0.exec.lock();
        if st.turn == ticket.turn {
            self.advance(&mut st);
        } else {
            st.skipped.insert(ticket.turn);
        }
        drop(st);
        self.at_once(seq, desc, &mut 0, &mut [0; DEPTH]).fail(
            K_FAILED,
            1 << self.rank(),
            0.0,
            "skipped it: an earlier task on its stream had failed".into(),
        );
    }

    /// Leaves the group: ranks waiting for this one get [`CollectiveError::RankFailed`].
    pub fn destroy(&self) {
        if !self.0.destroyed.swap(true, AcqRel) {
            self.0.board.rank(self.rank()).state.store(ST_LEFT, Release);
            self.0.board.wake();
        }
    }

    /// The progress board as rows `(rank, seq, collective, phase, state, pid, heartbeat ms)`
    /// for hang diagnosis.
    pub fn board_rows(&self) -> Vec<(u32, u64, String, u64, u32, u32, u64)> {
        let b = &self.0.board;
        (0..self.world())
            .map(|r| {
                let s = b.rank(r);
                // The newest row (the collective it is in or left last; unused rows hold
                // seq 0, as collective 0's does: ties go to the first).
                let row = s.rows[1..].iter().fold(&s.rows[0], |best, r| {
                    if r.seq.load(Relaxed) > best.seq.load(Relaxed) {
                        r
                    } else {
                        best
                    }
                });
                let d = OpDesc::unpack(row.desc.load(Relaxed), row.count.load(Relaxed))
                    .map_or_else(|| "-".into(), |d| d.describe());
                let (seq, phase) = (row.seq.load(Relaxed), s.phase.load(Acquire));
                (
                    r,
                    seq,
                    d,
                    phase,
                    s.state.load(Relaxed),
                    s.pid.load(Relaxed),
                    s.heartbeat_ms.load(Relaxed),
                )
            })
            .collect()
    }
}

impl Drop for CommInner {
    fn drop(&mut self) {
        self.board.rank(self.rank).state.store(ST_LEFT, Release);
        self.board.wake();
    }
}
