//! The `shm` broadcast, all_gather and all_reduce (reduce) above the eager size as rings
//! of fragments in the slots.
//!
//! **Broadcast**: a ring of fragments in the root's slot. The
//! root copies fragment k of its buffer into ring entry k mod R and advances its phase;
//! every other rank waits for the root's phase to pass k, copies the fragment out and
//! advances its own; the root reuses an entry once every reader's phase passed the
//! fragment that was in it. No barrier until the closing one: the root runs up to R
//! fragments ahead and the readers follow it fragment by fragment, so the copies in and
//! out overlap in pieces that stay in the caches (the former pipeline went through the two
//! halves of the slot with a full barrier a step: 2 ranks, 1 MiB 36-42 µs, now 20 with
//! the vCPUs close together). Every rank
//! advances its phase once per fragment, so phases still count the same on every rank.

use super::algo::{chunk, copy, copy_out};
use super::reduce::reduce;
use super::rendezvous::{CResult, Rendezvous};
use super::types::CollKind;

/// One rank's side of a broadcast of `d.count` elements through the root's slot
/// (`slot_bytes` at `slot_addr`) in fragments of `fragment` bytes (the group's:
/// `shm::default_fragment_bytes`); `send` / `recv` as in `staged`, `out`: streaming stores.
pub(crate) fn broadcast(
    rv: &mut Rendezvous<'_>,
    (slot_addr, slot_bytes, fragment): (usize, usize, usize),
    send: usize,
    recv: usize,
    out: bool,
) -> CResult<()> {
    let d = rv.desc;
    let (me, root) = (rv.me, d.root);
    let e = d.dtype.size();
    let count = d.count as usize;
    // Large broadcasts take larger fragments, up to half the slot: the hand-offs cost more
    // than the caches save once the copies stream (2 ranks, 16-64 MiB: 32 KiB fragments
    // 574-593 µs / 3.4-3.5 ms, 256 KiB 497-503 µs / 2.8-3.0 ms); 1 MiB keeps 32 KiB.
    let total = count * e;
    let bytes = (total / 32)
        .max(fragment)
        .min((slot_bytes / 2).max(fragment))
        .min(slot_bytes);
    let frag = (bytes / e).max(1);
    let depth = (slot_bytes / (frag * e)).max(1);
    let entry = |k: usize| slot_addr + (k % depth) * frag * e;
    let pieces = count.div_ceil(frag);
    let base = *rv.phase;
    for k in 0..pieces {
        let (p, len) = (k * frag, frag.min(count - k * frag));
        if me == root {
            if k >= depth {
                // every reader copied out the fragment this entry held
                rv.wait_phase(&|r| r != root, base + (k - depth) as u64 + 1)?;
            }
            // SAFETY: `send` is the root's checked buffer (`count` elements), the entry a
            // `frag`-element part of its slot inside the mapped segment that no reader
            // reads until the phase below says it is written.
            unsafe { copy(entry(k), send + p * e, len * e) };
        } else {
            rv.wait_phase(&|r| r == root, base + k as u64 + 1)?;
            // SAFETY: the root wrote this entry before it published the phase waited for
            // (Release / Acquire) and does not overwrite it before this rank's phase passes
            // `k`; `recv` is this rank's checked buffer.
            unsafe { copy_out(recv + p * e, entry(k), len * e, out) };
        }
        rv.advance();
    }
    // The closing barrier: the root's slot is free again once every reader is done.
    rv.barrier()
}

/// all_gather through every rank's own slot as a ring: at fragment k a rank waits until
/// every peer is done with the ring entry it is about to refill (phase past `2(k - R) + 2`),
/// stages its input's fragment k and advances its phase (`2k + 1`), waits until every peer
/// staged theirs, copies the parts out (its own straight from its input) and advances
/// (`2k + 2`). Two advances a fragment on every rank: phases still count the same
/// everywhere. The buffers must not overlap, except when the input is this rank's own part
/// of the output. `slots`: rank 0's slot; `(slot_bytes, fragment)`: the group's.
pub(crate) fn all_gather(
    rv: &mut Rendezvous<'_>,
    (slots, slot_bytes, fragment): (usize, usize, usize),
    send: usize,
    recv: usize,
    out: bool,
) -> CResult<()> {
    let d = rv.desc;
    let (n, me) = (rv.board.world() as usize, rv.me as usize);
    let e = d.dtype.size();
    let count = d.count as usize; // elements per rank
                                  // Fragments of a quarter to half a slot (1/32 of the part when that is more): every
                                  // fragment costs a synchronisation of all ranks here (each stages one), so they are
                                  // larger than the broadcast's (2 ranks, vCPUs far apart: 128 KiB 1 MiB 39-41 µs, 16
                                  // MiB 0.75-0.79 ms; 32 KiB 48-50 µs, 0.72-0.91 ms; the two-barrier pieces 48-54 µs,
                                  // 1.0-1.3 ms).
    let most = slot_bytes.max(e);
    let lo = fragment.max(most / 4).min(most);
    let f = ((count * e / 32).clamp(lo, (most / 2).max(lo)) / e).max(1);
    let depth = (slot_bytes / (f * e)).max(1);
    let entry = |r: usize, k: usize| slots + r * slot_bytes + (k % depth) * f * e;
    let pieces = count.div_ceil(f);
    let base = *rv.phase;
    let others = |r: u32| r as usize != me;
    for k in 0..pieces {
        let (p, len) = (k * f, f.min(count - k * f));
        if k >= depth {
            rv.wait_phase(&others, base + 2 * (k - depth) as u64 + 2)?;
        }
        // SAFETY: `send` is this rank's checked input (`count` elements), the entry a part
        // of its own slot inside the mapped segment that no peer reads until the phase
        // below says it is written, and that every peer finished reading (the wait above).
        unsafe { copy(entry(me, k), send + p * e, len * e) };
        rv.advance();
        rv.wait_phase(&others, base + 2 * k as u64 + 1)?;
        for j in 0..n {
            let src = if j == me { send + p * e } else { entry(j, k) };
            // SAFETY: a peer's entry is written before the phase waited for (Release /
            // Acquire) and not refilled before this rank's next advance; `recv` is this
            // rank's checked output, part `j` of it written only here (its own part may be
            // the input itself: `copy` skips a copy onto itself).
            unsafe { copy_out(recv + (j * count + p) * e, src, len * e, out) };
        }
        rv.advance();
    }
    rv.barrier()
}

/// all_reduce (and reduce to a root) through every rank's own slot as a ring of
/// fragments: at fragment k a rank waits until every peer is done with the ring entry it
/// is about to refill (phase past `3(k - R) + 3`), stages the peers' chunks of its
/// input's fragment k into it and advances (`3k + 1`), waits until every peer staged
/// theirs, folds its own chunk (from its input) with every peer's (from their entries), in
/// rank order, into its entry and advances (`3k + 2`), waits for every peer's fold, copies
/// the chunks of the result out, its own first, and advances (`3k + 3`). Three advances a
/// fragment on every rank. Its own chunk is read from its input, never staged (1/n less
/// copying); the copies out start at the rank's own chunk and go round, so two ranks never
/// read the same chunk at once (a chunk read by its owner while a peer pulls it across:
/// 2 ranks, 1 MiB 201-208 µs; each its own first: 174-181). Fragments of an eighth of a
/// slot (at least the group's fragment; 2 ranks on 2 Xeon vCPUs, 1 MiB slots, 1 MiB: 64
/// KiB fragments 182 µs, 128 KiB 152-160; the one piece of a whole slot with three
/// barriers: 174-181): a fragment stays in the caches between the stages.
pub(crate) fn all_reduce(
    rv: &mut Rendezvous<'_>,
    (slots, slot_bytes, fragment): (usize, usize, usize),
    send: usize,
    recv: usize,
    out: bool,
) -> CResult<()> {
    let d = rv.desc;
    let (n, me) = (rv.board.world(), rv.me);
    let e = d.dtype.size();
    let count = d.count as usize;
    let most = slot_bytes.max(e);
    let f = (fragment.max(most / 8).min(most) / e).max(1);
    let depth = (slot_bytes / (f * e)).max(1);
    let entry = |r: u32, k: usize| slots + r as usize * slot_bytes + (k % depth) * f * e;
    let pieces = count.div_ceil(f);
    let base = *rv.phase;
    let others = |r: u32| r != me;
    let keep = d.kind == CollKind::AllReduce || me == d.root;
    let mut srcs: Vec<*const u8> = Vec::with_capacity(n as usize);
    for k in 0..pieces {
        let (p, len) = (k * f, f.min(count - k * f));
        let part = |j: u32| chunk(len as u64, n, j);
        if k >= depth {
            rv.wait_phase(&others, base + 3 * (k - depth) as u64 + 3)?;
        }
        for j in (0..n).filter(|&j| j != me) {
            let (a, b) = part(j);
            // SAFETY: `send` is this rank's checked input (`count` elements), the entry a
            // `f`-element part of its own slot inside the mapped segment that no peer
            // reads until the phase below says it is written, and that every peer
            // finished reading (the wait above).
            unsafe { copy(entry(me, k) + a * e, send + (p + a) * e, (b - a) * e) };
        }
        rv.advance();
        rv.wait_phase(&others, base + 3 * k as u64 + 1)?;
        let (a, b) = part(me);
        let at = |r: u32| {
            if r == me {
                send + (p + a) * e
            } else {
                entry(r, k) + a * e
            }
        };
        srcs.clear();
        srcs.extend((0..n).map(|r| at(r) as *const u8));
        // SAFETY: chunk `me` of every peer's entry was staged before the phase waited for
        // (Release / Acquire) and is not refilled before this rank's next advances; this
        // rank alone writes chunk `me` of its entry in this stage (the peers read it only
        // after the next phase); its own part of `send` is read before `recv` is written.
        unsafe { reduce((entry(me, k) + a * e) as *mut u8, &srcs, b - a, d.dtype, d.op) };
        rv.advance();
        rv.wait_phase(&others, base + 3 * k as u64 + 2)?;
        if keep {
            for j in (0..n).map(|i| (me + i) % n) {
                let (a, b) = part(j);
                // SAFETY: chunk `j` of rank `j`'s entry holds its fold (published by the
                // phase waited for), unchanged until this rank advances; `recv` is this
                // rank's checked output.
                unsafe { copy_out(recv + (p + a) * e, entry(j, k) + a * e, (b - a) * e, out) };
            }
        }
        rv.advance();
    }
    rv.barrier()
}
