//! The algorithms, one rank's side of each collective after [`Rendezvous::arrive`].
//!
//! **`local`** ([`direct`]): every rank of the process publishes its buffers' addresses
//! at the rendezvous and reads its peers' buffers directly. The reductions are a
//! reduce-scatter (rank `r` reduces chunk `r` of the output over every rank's input, in
//! rank order, into its own output) followed by an all-gather (each rank copies the other
//! chunks from their owners' outputs), with a barrier between the steps and one before
//! release (no rank leaves while another still reads its buffers). In-place calls
//! (send = recv) are safe: a rank writes only the part of its buffer that no other rank
//! reads in the same step.
//!
//! **`shm`** ([`staged`]): each process's buffers are its own, so data is staged through
//! the per-rank slots of the communicator's shared segment, in pieces of at most one slot:
//! a rank copies its piece into its slot, a barrier, every rank works on its share
//! reading the peers' slots, a barrier before the slots are reused. In an all_to_all or
//! reduce_scatter a rank stages only the sub-pieces its peers need and reads its own from
//! its send buffer (unless the buffers overlap); copies into receive buffers adding up to
//! [`STREAM_BYTES`] over the group use non-temporal stores ([`copy_out`]). A broadcast is
//! a ring of fragments in the root's slot, an all_gather and an all_reduce (or reduce)
//! rings through every rank's slot (`ring.rs`).
//!
//! **send / recv** ([`p2p`]) use the pair mailboxes of the board. The k-th chunk from
//! `src` to `dst`: the sender fills in the mailbox (descriptor, and the data's address for
//! `local`, or the data staged in its own slot for `shm`), posts `k` and waits until the
//! receiver took it; the receiver waits for `k`, checks the descriptor (a mismatch is a
//! desync), copies, and marks it taken. Only the two ranks wait on each other.

use super::comm::{CommInner, Transport};
use super::reduce::reduce;
use super::rendezvous::{CResult, Rendezvous, K_DESYNC};
use super::types::Region;
use super::types::{CollKind, OpDesc};
use std::sync::atomic::Ordering::*;

/// Elements `[start, end)` of chunk `j` of `count` elements split over `n` ranks.
pub(crate) fn chunk(count: u64, n: u32, j: u32) -> (usize, usize) {
    let (c, n, j) = (count as u128, n as u128, j as u128);
    ((c * j / n) as usize, (c * (j + 1) / n) as usize)
}

/// `memmove` of `n` bytes unless the ranges are the same.
///
/// # Safety
/// Both ranges must be valid for `n` bytes and not written by anyone else meanwhile.
pub(crate) unsafe fn copy(dst: usize, src: usize, n: usize) {
    if n > 0 && dst != src {
        // SAFETY: the caller's contract; `copy` allows overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) }
    }
}

/// When the group's results (every rank's receive buffer) add up to at least this many
/// bytes, the `shm` copies out of the slots use non-temporal stores ([`copy_out`]): twice
/// a Zen 5's L3, so the lines would be evicted before anyone reads them; a plain store
/// first reads each line from DRAM (read-for-ownership), a streaming store does not (512
/// KiB pieces into 256 MiB on one Zen 5 core: ~30 GB/s plain, ~40 GB/s streaming). Below
/// it the results stay in the L3 for the caller's next read: 2 ranks at 16 MiB (32 MiB of
/// results), plain stores took all_reduce 3.5 -> 2.8 ms, all_gather 1.23 -> 1.02 ms.
pub(crate) const STREAM_BYTES: usize = 64 << 20;

/// [`copy`], with non-temporal stores when `stream` (the destination is not read soon:
/// see [`STREAM_BYTES`]) and the ranges do not overlap; ends with a store fence, so the
/// data is visible before any later store (a barrier's phase) is.
///
/// # Safety
/// As [`copy`].
pub(crate) unsafe fn copy_out(dst: usize, src: usize, n: usize, stream: bool) {
    #[cfg(target_arch = "x86_64")]
    if stream && n >= 4096 && (dst + n <= src || src + n <= dst) {
        // SAFETY: the caller's contract, and the ranges do not overlap.
        unsafe { stream_copy(dst, src, n) };
        return;
    }
    let _ = stream;
    // SAFETY: the caller's contract.
    unsafe { copy(dst, src, n) }
}

/// Copies `n >= 64` bytes with SSE2 (x86-64's baseline) streaming stores of whole 64-byte
/// lines of the destination, plain copies for the unaligned head and tail.
///
/// # Safety
/// Both ranges valid for `n` bytes, not overlapping, not written by anyone else meanwhile.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_copy(dst: usize, src: usize, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let head = dst.next_multiple_of(64) - dst;
    let body = (n - head) & !63;
    // SAFETY: `head < 64 <= n`: the first bytes of both ranges.
    unsafe { copy(dst, src, head) };
    let (mut d, mut s) = (dst + head, src + head);
    let end = d + body;
    while d < end {
        for k in 0..4 {
            // SAFETY: `d + 16k .. d + 16k + 16` lies inside the destination's 64-byte
            // aligned body (16-byte alignment, as `_mm_stream_si128` needs) and the source
            // bytes at the same offset inside the source (unaligned loads are allowed);
            // SSE2 is part of x86-64.
            unsafe {
                let v = _mm_loadu_si128((s + 16 * k) as *const __m128i);
                _mm_stream_si128((d + 16 * k) as *mut __m128i, v);
            }
        }
        d += 64;
        s += 64;
    }
    // SAFETY: a fence (SSE, part of x86-64): the streaming stores are ordered before
    // every later store.
    unsafe { _mm_sfence() };
    // SAFETY: the last `n - head - body < 64` bytes of both ranges.
    unsafe { copy(end, s, n - head - body) };
}

pub(crate) fn direct(rv: &mut Rendezvous<'_>, send: usize, recv: usize) -> CResult<()> {
    rv.arrive(send as u64, recv as u64)?;
    let d = rv.desc;
    let (n, me) = (rv.board.world(), rv.me);
    let sends: Vec<usize> = (0..n)
        .map(|r| rv.board.rank(r).send_ptr.load(Relaxed) as usize)
        .collect();
    let recvs: Vec<usize> = (0..n)
        .map(|r| rv.board.rank(r).recv_ptr.load(Relaxed) as usize)
        .collect();
    let e = d.dtype.size();
    let c = d.count as usize;
    // SAFETY (every block below): the addresses are the ranks' checked buffers
    // (`check_regions`: each holds the bytes the descriptor needs, and every rank's
    // descriptor matched at arrival), alive until the final barrier, which no rank passes
    // before all are done; in each step a byte is written by at most one rank and no rank
    // reads a byte another writes in the same step (see the module docs).
    match d.kind {
        CollKind::AllReduce => {
            let (a, b) = chunk(d.count, n, me);
            let srcs: Vec<*const u8> = sends.iter().map(|&s| (s + a * e) as *const u8).collect();
            unsafe { reduce((recv + a * e) as *mut u8, &srcs, b - a, d.dtype, d.op) };
            rv.barrier()?;
            for j in (0..n).filter(|&j| j != me) {
                let (a, b) = chunk(d.count, n, j);
                unsafe { copy(recv + a * e, recvs[j as usize] + a * e, (b - a) * e) };
            }
        }
        CollKind::Reduce => {
            let root = recvs[d.root as usize];
            let (a, b) = chunk(d.count, n, me);
            let srcs: Vec<*const u8> = sends.iter().map(|&s| (s + a * e) as *const u8).collect();
            unsafe { reduce((root + a * e) as *mut u8, &srcs, b - a, d.dtype, d.op) };
        }
        CollKind::Broadcast => {
            if me != d.root {
                unsafe { copy(recv, sends[d.root as usize], c * e) };
            }
        }
        CollKind::AllGather => {
            for (j, &s) in sends.iter().enumerate() {
                unsafe { copy(recv + j * c * e, s, c * e) };
            }
        }
        CollKind::ReduceScatter => {
            let srcs: Vec<*const u8> = sends.iter().map(|&s| (s + me as usize * c * e) as *const u8).collect();
            unsafe { reduce(recv as *mut u8, &srcs, c, d.dtype, d.op) };
        }
        CollKind::AllToAll => {
            for (j, &s) in sends.iter().enumerate() {
                unsafe { copy(recv + j * c * e, s + me as usize * c * e, c * e) };
            }
        }
        CollKind::Barrier | CollKind::Send | CollKind::Recv => {}
    }
    // Also after a barrier: no rank may overwrite its board row with the next collective
    // while another still compares the rows of this one (`check_desync`).
    rv.barrier()?;
    Ok(())
}

pub(crate) fn staged(
    c: &CommInner,
    rv: &mut Rendezvous<'_>,
    send: usize,
    recv: usize,
    scratch: &mut Vec<u8>,
) -> CResult<()> {
    let d = rv.desc;
    let (n, me) = (rv.board.world(), rv.me);
    // Whether this rank's buffers allow the single copy, published before arrival; after
    // it every rank sees every rank's answer and the same descriptor, so all choose alike
    // (the answers stay until the next barrier, which nobody passes before reading them).
    if c.cma_setting != 0 {
        let ok = super::cma::buffers_ok(&d, n, me, send, recv);
        rv.board.rank(me).single_copy.store(ok as u64, Relaxed);
    }
    rv.arrive(send as u64, recv as u64)?;
    if super::cma::preferred(c, &d) {
        if !c.cma_probed.load(Relaxed) {
            super::cma::probe_peers(c, rv)?;
        }
        let all_ok = || (0..n).all(|r| rv.board.rank(r).single_copy.load(Relaxed) != 0);
        if !super::cma::refused(c) && all_ok() {
            return super::cma::run(rv, recv, scratch);
        }
    }
    let e = d.dtype.size();
    let count = d.count as usize;
    let slot = |r: u32| c.slots + r as usize * c.slot_bytes;
    let mine = slot(me);
    let per_slot = (c.slot_bytes / e).max(1);
    let out = d.buffer_bytes(n)?.1.saturating_mul(n as usize) >= STREAM_BYTES;
    // all_gather as a ring (`ring.rs`) unless its buffers overlap other than as this rank's
    // own part of the output (all_to_all as a ring was no faster: docs/BENCH.md)
    let ring_ok = {
        let (sb, rb) = d.buffer_bytes(n)?;
        send + sb <= recv || recv + rb <= send || send == recv + me as usize * count * e
    };
    // SAFETY (every block below): `send`/`recv` are this rank's checked buffers
    // (`check_regions`), the slots lie inside the mapped segment (the communicator keeps
    // it), pieces never exceed a slot, and within each step between two barriers every
    // byte of a slot is written by at most one rank while no other rank reads it.
    match d.kind {
        CollKind::AllReduce | CollKind::Reduce => {
            super::ring::all_reduce(rv, (c.slots, c.slot_bytes, c.fragment_bytes), send, recv, out)?
        }
        CollKind::Broadcast => {
            super::ring::broadcast(rv, (slot(d.root), c.slot_bytes, c.fragment_bytes), send, recv, out)?
        }
        CollKind::AllGather if ring_ok => {
            super::ring::all_gather(rv, (c.slots, c.slot_bytes, c.fragment_bytes), send, recv, out)?
        }
        CollKind::AllGather => {
            for p in (0..count).step_by(per_slot) {
                let len = per_slot.min(count - p);
                unsafe { copy(mine, send + p * e, len * e) };
                rv.barrier()?;
                for j in 0..n as usize {
                    unsafe { copy_out(recv + (j * count + p) * e, slot(j as u32), len * e, out) };
                }
                rv.barrier()?;
            }
        }
        CollKind::ReduceScatter | CollKind::AllToAll => {
            // A slot holds one sub-piece per destination rank. This rank's own sub-piece is
            // read from its send buffer, not staged (1/n less copying), unless the buffers
            // overlap (all_to_all forbids it; reduce_scatter may: recv is written before the
            // send data of the later pieces is read).
            let q = (c.slot_bytes / (e * n as usize)).max(1);
            let (sb, rb) = d.buffer_bytes(n)?;
            let direct = send + sb <= recv || recv + rb <= send;
            let own = |p: usize| send + (me as usize * count + p) * e;
            for p in (0..count).step_by(q) {
                let len = q.min(count - p);
                for dst in (0..n as usize).filter(|&r| !direct || r != me as usize) {
                    unsafe { copy(mine + dst * len * e, send + (dst * count + p) * e, len * e) };
                }
                rv.barrier()?;
                let at = me as usize * len * e;
                let from = |r: u32| if direct && r == me { own(p) } else { slot(r) + at };
                if d.kind == CollKind::ReduceScatter {
                    let srcs: Vec<*const u8> = (0..n).map(|r| from(r) as *const u8).collect();
                    unsafe { reduce((recv + p * e) as *mut u8, &srcs, len, d.dtype, d.op) };
                } else {
                    for j in 0..n {
                        unsafe { copy_out(recv + (j as usize * count + p) * e, from(j), len * e, out) };
                    }
                }
                rv.barrier()?;
            }
        }
        // The closing barrier: see `direct`.
        CollKind::Barrier => rv.barrier()?,
        CollKind::Send | CollKind::Recv => {}
    }
    Ok(())
}

pub(crate) fn p2p(
    c: &CommInner,
    rv: &mut Rendezvous<'_>,
    sent: &mut [u64],
    received: &mut [u64],
    send: Option<&Region>,
    recv: Option<&Region>,
) -> CResult<()> {
    if let Some(rec) = rv.board.aborted() {
        return Err(rv.error_of(&rec));
    }
    let d = rv.desc;
    let (me, peer) = (rv.me, d.root);
    let bytes = d.count as usize * d.dtype.size();
    let staged = c.transport == Transport::Shm;
    let piece = if staged { c.slot_bytes } else { bytes.max(1) };
    let my_slot = c.slots + me as usize * c.slot_bytes;
    let (a, cnt) = d.pack();
    let mut off = 0usize;
    loop {
        let len = piece.min(bytes - off);
        if d.kind == CollKind::Send {
            let src = send.map_or(0, |r| r.addr) + off;
            let mbox = rv.board.pair(me, peer);
            let arg = if staged {
                // SAFETY: `src` is inside the checked send buffer and the slot is this
                // rank's, which nobody reads until the chunk is posted.
                unsafe { copy(my_slot, src, len) };
                len as u64
            } else {
                src as u64
            };
            mbox.desc.store(a, Relaxed);
            mbox.count.store(cnt, Relaxed);
            mbox.arg.store(arg, Relaxed);
            sent[peer as usize] += 1;
            let k = sent[peer as usize];
            mbox.posted.store(k, Release);
            rv.board.wake();
            rv.wait_for(&|| mbox.taken.load(Acquire) >= k, &|| vec![peer])?;
        } else {
            let dst = recv.map_or(0, |r| r.addr) + off;
            let mbox = rv.board.pair(peer, me);
            received[peer as usize] += 1;
            let k = received[peer as usize];
            rv.wait_for(&|| mbox.posted.load(Acquire) >= k, &|| vec![peer])?;
            let theirs = OpDesc::unpack(mbox.desc.load(Relaxed), mbox.count.load(Relaxed));
            let fits = theirs.is_some_and(|t| t.count == d.count && t.dtype == d.dtype && t.root == me);
            if !fits {
                let what = theirs.map_or_else(|| "an unknown message".into(), |t| t.describe());
                let detail = format!("rank {me} called {}; rank {peer} called {what}", d.describe());
                return Err(rv.fail(K_DESYNC, 1 << peer, 0.0, detail));
            }
            let arg = mbox.arg.load(Relaxed) as usize;
            let src = if staged {
                c.slots + peer as usize * c.slot_bytes
            } else {
                arg
            };
            // SAFETY: `dst` is inside the checked receive buffer; `src` is the sender's
            // posted chunk (its slot, or its send buffer for `local`), which it does not
            // touch until the chunk is marked taken; both are `len` bytes (same count).
            unsafe { copy(dst, src, len) };
            mbox.taken.store(k, Release);
            rv.board.wake();
        }
        off += len;
        if off >= bytes {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_out_streams_any_alignment_and_length_exactly() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
        for (d_off, s_off, n) in [
            (0, 0, 4096),
            (1, 0, 4096),
            (63, 5, 10_007),
            (17, 33, 12_345),
            (0, 0, 100),
        ] {
            for stream in [true, false] {
                let mut dst = vec![0xAAu8; 16_384 + 128];
                // SAFETY: both ranges lie inside their vectors (n + offsets < their lengths).
                unsafe {
                    copy_out(
                        dst.as_mut_ptr() as usize + d_off,
                        src.as_ptr() as usize + s_off,
                        n,
                        stream,
                    )
                };
                assert_eq!(
                    &dst[d_off..d_off + n],
                    &src[s_off..s_off + n],
                    "{d_off} {s_off} {n} {stream}"
                );
                assert!(dst[..d_off].iter().all(|&b| b == 0xAA), "wrote before the range");
                assert!(dst[d_off + n..].iter().all(|&b| b == 0xAA), "wrote after the range");
            }
        }
    }

    #[test]
    fn copy_out_of_overlapping_ranges_is_a_memmove() {
        let mut v: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let want: Vec<u8> = v[100..8_100].to_vec();
        let p = v.as_mut_ptr() as usize;
        // SAFETY: both ranges lie inside `v`; `copy_out` falls back to a memmove.
        unsafe { copy_out(p + 1_000, p + 100, 8_000, true) };
        assert_eq!(&v[1_000..9_000], &want[..]);
    }
}
