//! The one-phase path's messages and local completion, without MPI (the `mpi` backend's
//! `_mpi_small` protocol, bit for bit): the 64-byte header, which bytes each peer gets,
//! and the collective completed from every rank's part (a fold in rank order for the
//! reductions: `reduce.rs`, the `local` / `shm` kernels).

use super::super::reduce::reduce;
use super::super::types::{CollKind, HcclDataType, ReduceOp};

/// Bytes of the header: `(magic, seq, kind, dtype, count, op, root, one-phase?)` as i64.
pub const HEADER_BYTES: usize = 64;
/// Payload bytes per peer the one-phase path takes at most (the receive rows' size).
pub const MAX_EAGER: usize = 64 * 1024;
/// The largest group on the one-phase path (larger: n - 1 copies of an all_reduce's input
/// cost more than MPI's own algorithms).
pub const MAX_RANKS: usize = 16;

/// Whether `c` takes the one-phase path in a group of `n` ranks with a limit of `limit`
/// payload bytes per peer (capped at [`MAX_EAGER`], and at [`two_phase_from`] when the
/// data phase runs natively and `spread`: every rank of the group has a core of its own):
/// only header fields and group-wide settings decide, so ranks whose headers agree take
/// the same path. The one rule both the blocking one-call path and `_mpi_small.eligible`
/// ask. (With more ranks than cores each extra round of headers waits for a context
/// switch: 4 ranks on 2 cores, broadcast 64 KiB took 24 us in two phases against 20.5.)
pub fn one_phase(c: &Call, n: usize, limit: usize, spread: bool) -> bool {
    let cap = if spread && super::data::native_data(c, n) {
        two_phase_from(c.kind)
    } else {
        MAX_EAGER
    };
    collective(c.kind) && (2..=MAX_RANKS).contains(&n) && limit > 0 && c.peer_bytes(n) <= limit.min(cap)
}

/// Payload bytes per peer that fit one message, header included, within Open MPI's
/// shared-memory eager size (`btl_sm_eager_limit` 4096 less its own headers: a ping-pong
/// took 1.4 us one way at 4000 bytes, 3.1 at 4032, when the message goes rendezvous).
pub const EAGER_FIT: usize = 4000 - HEADER_BYTES;

/// Payload bytes per peer up to which the one-phase path beats a two-phase call whose data
/// phase runs natively (`data.rs`): the one-phase path copies every part twice (into the
/// message, out of the inbox), and the peer reads lines this rank has just written; the
/// two-phase one moves it once, from the caller's buffer, after one more round of headers.
/// The copy kinds take two phases once a message no longer fits [`EAGER_FIT`]: past it
/// the message goes rendezvous anyway (2 ranks on an Intel Xeon, broadcast 8-32 KiB 5.0-10
/// -> 3.9-5.0 us, all_gather 16 KiB 6.3 -> 4.6, all_to_all 32 KiB 8.3 -> 5.5; on a Zen 5
/// the limits had been 8 KiB per peer for all_gather, 16 for all_to_all, 32 for broadcast:
/// docs/BENCH.md). all_reduce keeps the one-phase fold to 32 KiB, reduce_scatter to the
/// 64 KiB limit: MPI's non-blocking reductions are slower than the fold there.
fn two_phase_from(k: CollKind) -> usize {
    match k {
        CollKind::AllGather | CollKind::AllToAll | CollKind::Broadcast => EAGER_FIT,
        CollKind::AllReduce => 32 << 10,
        _ => MAX_EAGER,
    }
}

/// Bytes of each per-peer receive row of a group of `n`: room for any header plus the
/// payload a peer may send (the header alone when the group never takes the path).
pub fn inbox_bytes(n: usize) -> usize {
    HEADER_BYTES + if (2..=MAX_RANKS).contains(&n) { MAX_EAGER } else { 0 }
}
const MAGIC: i64 = 0x6E70_7572;

/// Whether the header carries the op (the reductions).
fn reducing(k: CollKind) -> bool {
    matches!(k, CollKind::AllReduce | CollKind::Reduce | CollKind::ReduceScatter)
}

/// Whether the header carries the root.
fn rooted(k: CollKind) -> bool {
    matches!(k, CollKind::Broadcast | CollKind::Reduce)
}

/// Whether each peer gets its own chunk of the input (the header's count: the whole input).
pub(super) fn per_peer_chunk(k: CollKind) -> bool {
    matches!(k, CollKind::ReduceScatter | CollKind::AllToAll)
}

/// Whether the path runs `k` at all (send / recv are point-to-point, `_p2p`).
fn collective(k: CollKind) -> bool {
    !matches!(k, CollKind::Send | CollKind::Recv)
}

/// One collective as every rank describes it. `count`: the header's (HCCL's count;
/// reduce_scatter / all_to_all: the whole input's elements). `eager`: the one-phase path
/// (else the header alone is exchanged).
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub kind: CollKind,
    pub seq: u64,
    pub dtype: HcclDataType,
    pub count: u64,
    pub op: ReduceOp,
    pub root: u32,
    pub eager: bool,
}

impl Call {
    /// The header's bytes (native-endian i64s, as numpy's `Call.header().view(uint8)`).
    pub fn header(&self) -> [u8; HEADER_BYTES] {
        let op = if reducing(self.kind) { self.op as i64 } else { -1 };
        let root = if rooted(self.kind) { self.root as i64 } else { -1 };
        let f = [
            MAGIC,
            self.seq as i64,
            self.kind as i64,
            self.dtype as i64,
            self.count as i64,
            op,
            root,
            self.eager as i64,
        ];
        let mut h = [0u8; HEADER_BYTES];
        for (d, v) in h.chunks_exact_mut(8).zip(f) {
            d.copy_from_slice(&v.to_ne_bytes());
        }
        h
    }

    /// Payload bytes per peer in a group of `n`.
    pub fn peer_bytes(&self, n: usize) -> usize {
        if matches!(self.kind, CollKind::Barrier | CollKind::Send | CollKind::Recv) {
            return 0;
        }
        let elems = if per_peer_chunk(self.kind) {
            self.count as usize / n
        } else {
            self.count as usize
        };
        elems * self.dtype.size()
    }
}

/// What rank `rank` sends `peer`: `Own(len)`: its own row's first `len` bytes (the header,
/// then the payload every peer gets, or nothing); `Chunk(i, len)`: outbox row `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Msg {
    Own(usize),
    Chunk(usize, usize),
}

/// Fills this rank's own row (`own`: header + its part) and, for the per-peer chunk
/// collectives, the outbox (row `i`, `stride` bytes apart: the message of the `i`-th peer),
/// from `send` (the input; broadcast: the root's buffer; empty when the call has none);
/// returns the message of each peer in rank order (this rank skipped). Header-only when
/// not eager.
pub(super) fn fill(
    c: &Call,
    rank: usize,
    n: usize,
    send: &[u8],
    own: &mut [u8],
    outbox: &mut [u8],
    stride: usize,
) -> Vec<(usize, Msg)> {
    own[..HEADER_BYTES].copy_from_slice(&c.header());
    let peers = (0..n).filter(|&p| p != rank);
    if !c.eager {
        return peers.map(|p| (p, Msg::Own(HEADER_BYTES))).collect();
    }
    let chunk = c.peer_bytes(n);
    match c.kind {
        CollKind::ReduceScatter | CollKind::AllToAll => {
            own[HEADER_BYTES..HEADER_BYTES + chunk].copy_from_slice(&send[rank * chunk..(rank + 1) * chunk]);
            peers
                .enumerate()
                .map(|(i, p)| {
                    let row = &mut outbox[i * stride..i * stride + HEADER_BYTES + chunk];
                    row[..HEADER_BYTES].copy_from_slice(&own[..HEADER_BYTES]);
                    row[HEADER_BYTES..].copy_from_slice(&send[p * chunk..(p + 1) * chunk]);
                    (p, Msg::Chunk(i, HEADER_BYTES + chunk))
                })
                .collect()
        }
        _ => {
            let payload = match c.kind {
                CollKind::AllReduce | CollKind::AllGather | CollKind::Reduce => chunk,
                CollKind::Broadcast if rank == c.root as usize => chunk,
                _ => 0,
            };
            own[HEADER_BYTES..HEADER_BYTES + payload].copy_from_slice(&send[..payload]);
            let full = HEADER_BYTES + payload;
            peers
                .map(|p| match c.kind {
                    // The input to the root only (a root sends every peer the header alone).
                    CollKind::Reduce if p != c.root as usize => (p, Msg::Own(HEADER_BYTES)),
                    _ => (p, Msg::Own(full)),
                })
                .collect()
        }
    }
}

/// Whether every rank's header (row `p` of `rows`, `stride` bytes apart) equals rank 0's.
pub(super) fn headers_agree(n: usize, rows: &[u8], stride: usize) -> bool {
    let first = &rows[..HEADER_BYTES];
    (1..n).all(|p| rows[p * stride..p * stride + HEADER_BYTES] == *first)
}

/// Completes the collective into `out` (the receive buffer) from every rank's part (row
/// `p` of `rows`, `stride` bytes apart: rank p's message, this rank's own included; headers
/// already equal, so every part has the expected size). `_mpi_small.finish`.
pub(super) fn finish(c: &Call, rank: usize, n: usize, rows: &[u8], stride: usize, out: &mut [u8]) {
    let k = c.kind;
    if !collective(k) || k == CollKind::Barrier || (k == CollKind::Reduce && rank != c.root as usize) {
        return;
    }
    let chunk = c.peer_bytes(n);
    let part = |p: usize| &rows[p * stride + HEADER_BYTES..p * stride + HEADER_BYTES + chunk];
    match k {
        CollKind::Broadcast => {
            if rank != c.root as usize {
                out[..chunk].copy_from_slice(part(c.root as usize));
            }
        }
        CollKind::AllGather | CollKind::AllToAll => {
            for p in 0..n {
                out[p * chunk..(p + 1) * chunk].copy_from_slice(part(p));
            }
        }
        _ => {
            let out = &mut out[..chunk];
            let srcs: Vec<*const u8> = (0..n).map(|p| part(p).as_ptr()).collect();
            // SAFETY: every source is a `chunk`-byte slice of `rows` (bounds-checked above),
            // `out` a `chunk`-byte exclusive slice (so no source overlaps it), chunk =
            // nelem * the dtype's size.
            unsafe { reduce(out.as_mut_ptr(), &srcs, chunk / c.dtype.size(), c.dtype, c.op) };
        }
    }
}
