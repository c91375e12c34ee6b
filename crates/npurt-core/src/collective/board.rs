//! The progress board: a control block of atomics that every rank of a communicator maps
//! (heap memory for `local`, the communicator's memfd segment for `shm`). Per rank: its
//! barrier phase, the seq and descriptor of the collective it is in ([`DEPTH`] rows, by
//! the seq modulo [`DEPTH`]: see [`Board::row`]), state, pid and a heartbeat; per ordered pair of ranks: a mailbox for send/recv; one abort record that
//! the rank detecting a failure publishes and every other rank reads; one futex word
//! (`epoch`) bumped on every change, which waiters sleep on.
//!
//! Layout (`repr(C)`, 8-byte aligned, position-independent: no pointers into the block):
//! `Header`, then `world` × `RankSlot`, then `world²` × `PairSlot`.

use crate::sync::{AtomicU32, AtomicU64};
use std::sync::atomic::Ordering::*;
use std::time::Duration;

pub(crate) const MAGIC: u64 = 0x6e70_7572_7443_4f4d; // "nprutCOM"
/// Largest world size of `local` and `shm` communicators (the abort record's rank mask).
pub const MAX_RANKS: u32 = 64;
#[cfg(not(loom))]
const TEXT_WORDS: usize = 64; // 512 bytes of abort detail
#[cfg(loom)]
const TEXT_WORDS: usize = 2; // (the models keep the state space small)

/// Rows per rank, and eager staging areas per rank (`eager.rs`): collective `seq` uses
/// number `seq % DEPTH`, so a rank that waits for nobody (a broadcast's root) may run up to
/// `DEPTH - 1` collectives ahead of the slowest rank (`Rendezvous::catch_up`).
#[cfg(not(loom))]
pub const DEPTH: usize = 8;
#[cfg(loom)]
pub const DEPTH: usize = 3; // (small state spaces; still more than two)

/// The futex word's low bit: a waiter sleeps on it (see [`Board::wake`]).
pub(crate) const SLEEPING: u32 = 1;

/// Rank states on the board.
pub(crate) const ST_EMPTY: u32 = 0;
pub(crate) const ST_JOINED: u32 = 1;
pub(crate) const ST_LEFT: u32 = 2;

/// Abort record states.
pub(crate) const AB_NONE: u64 = 0;
const AB_WRITING: u64 = 1;
const AB_PUBLISHED: u64 = 2;

#[repr(C)]
pub(crate) struct Header {
    pub(crate) magic: AtomicU64,
    pub(crate) world: AtomicU32,
    /// Futex word: bumped by 2 on every phase, mailbox or abort change; its low bit
    /// ([`SLEEPING`]) says a waiter sleeps on it (only then does a change make the wake
    /// syscall).
    pub(crate) epoch: AtomicU32,
    pub(crate) slot_bytes: AtomicU64,
    pub(crate) joined: AtomicU32,
    /// Send bytes up to which collectives take the eager path, for the whole group (set
    /// by the rank that creates the block, read by the others: every rank must agree).
    pub(crate) eager_limit: AtomicU32,
    /// Bytes of a broadcast's ring fragment (`ring.rs`), set with the slot size.
    pub(crate) fragment_bytes: AtomicU32,
    /// `shm`: the single copy's setting (`cma.rs`; 0: never), set by rank 0; non-zero
    /// `cma_refused`: a rank could not read a peer's memory (`cma::probe_peers`).
    pub(crate) cma_bytes: AtomicU64,
    pub(crate) cma_refused: AtomicU32,
    abort: AtomicU64,
    abort_kind: AtomicU32,
    abort_rank: AtomicU32,
    abort_seq: AtomicU64,
    abort_mask: AtomicU64,
    abort_secs: AtomicU64,
    abort_len: AtomicU64,
    abort_text: [AtomicU64; TEXT_WORDS],
}

/// What a rank published for one collective: its seq and packed descriptor.
#[repr(C)]
pub(crate) struct Row {
    pub(crate) seq: AtomicU64,
    pub(crate) desc: AtomicU64,
    pub(crate) count: AtomicU64,
}

/// One rank's slot on the board (56 + 24 × [`DEPTH`] bytes).
#[repr(C)]
pub(crate) struct RankSlot {
    pub(crate) phase: AtomicU64,
    /// Rows of the collectives, by seq modulo [`DEPTH`].
    pub(crate) rows: [Row; DEPTH],
    pub(crate) state: AtomicU32,
    pub(crate) pid: AtomicU32,
    pub(crate) heartbeat_ms: AtomicU64,
    /// `local`: the addresses of this rank's send / recv buffers for the current collective.
    pub(crate) send_ptr: AtomicU64,
    pub(crate) recv_ptr: AtomicU64,
    /// `shm`: non-zero when this rank's buffers allow the single copy (`cma::buffers_ok`);
    /// this rank's address of the block (peers read its magic there: `cma::probe_peers`).
    pub(crate) single_copy: AtomicU64,
    pub(crate) base: AtomicU64,
}

/// The mailbox of one ordered pair (src → dst) for send/recv (40 bytes).
#[repr(C)]
pub(crate) struct PairSlot {
    /// Chunks the sender posted / the receiver took (monotonic).
    pub(crate) posted: AtomicU64,
    pub(crate) taken: AtomicU64,
    pub(crate) desc: AtomicU64,
    pub(crate) count: AtomicU64,
    /// `local`: the sender's address; `shm`: the chunk's bytes in the sender's slot.
    pub(crate) arg: AtomicU64,
}

/// A published failure, as read back from the board.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AbortRecord {
    pub(crate) kind: u32,
    pub(crate) rank: u32,
    pub(crate) seq: u64,
    pub(crate) mask: u64,
    pub(crate) secs: f64,
    pub(crate) text: String,
}

/// A view of a control block. It does not own the memory: the communicator keeps the
/// block's owner (heap allocation or segment mapping) alive for as long as the board.
pub(crate) struct Board {
    header: *const Header,
    ranks: *const RankSlot,
    pairs: *const PairSlot,
    world: u32,
}

// SAFETY: the block holds only atomics; every access goes through them.
unsafe impl Send for Board {}
// SAFETY: as above: shared access is through atomics only.
unsafe impl Sync for Board {}

impl Board {
    /// Bytes of a control block for `world` ranks (a multiple of 64).
    pub(crate) fn bytes(world: u32) -> usize {
        let w = world as usize;
        let n = std::mem::size_of::<Header>()
            + w * std::mem::size_of::<RankSlot>()
            + w * w * std::mem::size_of::<PairSlot>();
        n.div_ceil(64) * 64
    }

    /// A board over `base`.
    ///
    /// # Safety
    /// `base` must be 8-byte aligned, valid for [`Board::bytes`]`(world)` bytes for the
    /// board's whole life, and either zeroed or a block another rank initialised; it is
    /// only accessed through atomics.
    pub(crate) unsafe fn new(base: *const u8, world: u32) -> Self {
        debug_assert_eq!(base as usize % 8, 0);
        let w = world as usize;
        let ranks = std::mem::size_of::<Header>();
        let pairs = ranks + w * std::mem::size_of::<RankSlot>();
        // SAFETY: both offsets lie inside the block (`bytes(world)`), by the contract.
        let (r, p) = unsafe { (base.add(ranks), base.add(pairs)) };
        Board {
            header: base.cast(),
            ranks: r.cast(),
            pairs: p.cast(),
            world,
        }
    }

    /// The block's address in this process.
    pub(crate) fn base(&self) -> usize {
        self.header as usize
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: `new`'s contract: the block is valid, aligned and starts with a Header.
        unsafe { &*self.header }
    }

    pub(crate) fn rank(&self, r: u32) -> &RankSlot {
        assert!(r < self.world);
        // SAFETY: `r < world`, so the slot lies inside the block (`new`); 8-aligned.
        unsafe { &*self.ranks.add(r as usize) }
    }

    /// Rank `r`'s row for collective `seq`. The [`DEPTH`] collectives from `seq` on use
    /// different rows, so a rank that left collective `seq` (one barrier after arriving,
    /// for an eager one; none for a broadcast's root) may publish later ones while the
    /// others still compare the rows of `seq`; it cannot reach `seq + DEPTH` (the same row
    /// again) before every rank arrived at `seq + 1` (`Rendezvous::catch_up`), which each
    /// does only after its comparison of `seq`.
    pub(crate) fn row(&self, r: u32, seq: u64) -> &Row {
        &self.rank(r).rows[(seq % DEPTH as u64) as usize]
    }

    pub(crate) fn pair(&self, src: u32, dst: u32) -> &PairSlot {
        assert!(src < self.world && dst < self.world);
        let i = src as usize * self.world as usize + dst as usize;
        // SAFETY: both ranks are < world, so the pair slot lies inside the block; 8-aligned.
        unsafe { &*self.pairs.add(i) }
    }

    pub(crate) fn world(&self) -> u32 {
        self.world
    }

    /// Publishes that rank `me` reached barrier phase `target` and wakes the waiters.
    pub(crate) fn publish_phase(&self, me: u32, target: u64) {
        self.rank(me).phase.store(target, Release);
        self.wake();
    }

    /// Bumps the futex word and wakes every waiter (in every process) if one sleeps.
    /// Called after every change a waiter may wait for (a phase, a mailbox, the abort
    /// record). The bump clears [`SLEEPING`] in the same read-modify-write, so a sleeper
    /// either saw the word move (its `sleep` returns at once) or set the flag first (and
    /// is woken here).
    pub(crate) fn wake(&self) {
        let e = &self.header().epoch;
        let old = e
            .fetch_update(AcqRel, Acquire, |v| Some((v & !SLEEPING).wrapping_add(2)))
            .unwrap_or_else(|v| v);
        if old & SLEEPING != 0 {
            crate::futex::wake(e);
        }
    }

    /// Sleeps until the futex word moves from `seen` or `max` passes: sets [`SLEEPING`]
    /// (unless the word moved already: then it returns at once) and sleeps on the word
    /// with the flag.
    pub(crate) fn sleep(&self, seen: u32, max: Duration) {
        let e = &self.header().epoch;
        let flagged = seen | SLEEPING;
        if seen & SLEEPING == 0 && e.compare_exchange(seen, flagged, AcqRel, Acquire).is_err() {
            return;
        }
        crate::futex::wait(e, flagged, max);
    }

    /// Waits until `done()`: reads the futex word, then checks `done`; if not done,
    /// `idle(seen)` runs (spin, check deadlines and the abort record, or [`Self::sleep`]
    /// on `seen`) and may end the wait with an error. Reading the word *before* the check
    /// is what makes a sleep safe: a change made after the check also moved the word, so
    /// the sleep returns at once.
    pub(crate) fn wait_until<E>(
        &self,
        done: impl Fn() -> bool,
        mut idle: impl FnMut(u32) -> Result<(), E>,
    ) -> Result<(), E> {
        loop {
            let seen = self.header().epoch.load(Acquire);
            if done() {
                return Ok(());
            }
            idle(seen)?;
        }
    }

    /// Publishes a failure unless one was published already; returns the record in force.
    pub(crate) fn abort(&self, rec: AbortRecord) -> AbortRecord {
        let h = self.header();
        if h.abort.compare_exchange(AB_NONE, AB_WRITING, AcqRel, Acquire).is_ok() {
            h.abort_kind.store(rec.kind, Relaxed);
            h.abort_rank.store(rec.rank, Relaxed);
            h.abort_seq.store(rec.seq, Relaxed);
            h.abort_mask.store(rec.mask, Relaxed);
            h.abort_secs.store(rec.secs.to_bits(), Relaxed);
            let bytes = rec.text.as_bytes();
            let n = bytes.len().min(TEXT_WORDS * 8);
            for (i, w) in h.abort_text.iter().enumerate() {
                let mut b = [0u8; 8];
                for (j, x) in b.iter_mut().enumerate() {
                    if let Some(&c) = bytes.get(i * 8 + j).filter(|_| i * 8 + j < n) {
                        *x = c;
                    }
                }
                w.store(u64::from_le_bytes(b), Relaxed);
            }
            h.abort_len.store(n as u64, Relaxed);
            h.abort.store(AB_PUBLISHED, Release);
            self.wake();
            return rec;
        }
        loop {
            if let Some(r) = self.aborted() {
                return r;
            }
            #[cfg(loom)]
            loom::thread::yield_now();
            #[cfg(not(loom))]
            std::thread::yield_now();
        }
    }

    /// The published failure, if any.
    pub(crate) fn aborted(&self) -> Option<AbortRecord> {
        let h = self.header();
        if h.abort.load(Acquire) != AB_PUBLISHED {
            return None;
        }
        let n = h.abort_len.load(Relaxed) as usize;
        let mut bytes: Vec<u8> = h
            .abort_text
            .iter()
            .flat_map(|w| w.load(Relaxed).to_le_bytes())
            .collect();
        bytes.truncate(n);
        Some(AbortRecord {
            kind: h.abort_kind.load(Relaxed),
            rank: h.abort_rank.load(Relaxed),
            seq: h.abort_seq.load(Relaxed),
            mask: h.abort_mask.load(Relaxed),
            secs: f64::from_bits(h.abort_secs.load(Relaxed)),
            text: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    pub(crate) fn is_aborted(&self) -> bool {
        self.header().abort.load(Relaxed) != AB_NONE
    }
}

/// Milliseconds since the epoch (heartbeats; comparable across processes).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A control block outside any mapping, for the loom models (loom's atomics cannot live in
/// raw memory): the parts a [`Board`] points into.
#[cfg(loom)]
pub(crate) struct ModelBlock {
    _header: Box<Header>,
    _ranks: Vec<RankSlot>,
    _pairs: Vec<PairSlot>,
}

#[cfg(loom)]
impl Board {
    /// A zeroed board of `world` ranks and the block it points into (keep both).
    pub(crate) fn for_model(world: u32) -> (Board, ModelBlock) {
        let (z64, z32) = (|| AtomicU64::new(0), || AtomicU32::new(0));
        let header = Box::new(Header {
            magic: AtomicU64::new(MAGIC),
            world: AtomicU32::new(world),
            epoch: z32(),
            slot_bytes: z64(),
            joined: z32(),
            eager_limit: z32(),
            fragment_bytes: z32(),
            cma_bytes: z64(),
            cma_refused: z32(),
            abort: AtomicU64::new(AB_NONE),
            abort_kind: z32(),
            abort_rank: z32(),
            abort_seq: z64(),
            abort_mask: z64(),
            abort_secs: z64(),
            abort_len: z64(),
            abort_text: std::array::from_fn(|_| z64()),
        });
        let w = world as usize;
        let ranks: Vec<RankSlot> = (0..w)
            .map(|_| RankSlot {
                phase: z64(),
                rows: std::array::from_fn(|_| Row {
                    seq: z64(),
                    desc: z64(),
                    count: z64(),
                }),
                state: z32(),
                pid: z32(),
                heartbeat_ms: z64(),
                send_ptr: z64(),
                recv_ptr: z64(),
                single_copy: z64(),
                base: z64(),
            })
            .collect();
        let pairs: Vec<PairSlot> = (0..w * w)
            .map(|_| PairSlot {
                posted: z64(),
                taken: z64(),
                desc: z64(),
                count: z64(),
                arg: z64(),
            })
            .collect();
        let board = Board {
            header: &*header,
            ranks: ranks.as_ptr(),
            pairs: pairs.as_ptr(),
            world,
        };
        let block = ModelBlock {
            _header: header,
            _ranks: ranks,
            _pairs: pairs,
        };
        (board, block)
    }
}
