//! The `shm` transport's single-copy path: each rank reads its peers' buffers straight
//! into its own with `process_vm_readv` (Linux cross-memory attach, CMA: one copy, done
//! by the kernel from the peer's pages) instead of staging every byte through the slots
//! (two copies: [`super::algo::staged`]). Open MPI's `sm` transport does the same for
//! large messages (its `smsc/cma`). The steps are those of `local` ([`super::algo::direct`]):
//! every rank publishes its buffers' addresses at arrival; a reduction is a
//! reduce-scatter (rank `r` folds chunk `r` over every rank's input, in rank order, into
//! its own output: bitwise what the staged path computes) then an all-gather of the
//! chunks; one barrier between the steps and one before anyone leaves, so no rank changes
//! a buffer a peer still reads.
//!
//! When: the group agrees once (rank 0 publishes its setting, [`CMA_ENV`]; at the first
//! collective it puts on the single copy every rank tries to read every peer's memory,
//! and one that cannot turns the path off for the group: [`probe_peers`]) and per call on
//! what every rank's descriptor holds plus every rank's word that its buffers allow it
//! ([`preferred`], [`refused`], [`buffers_ok`]), read after arrival, so every rank chooses
//! the same path.
//! Only within a window of sizes per kind ([`window`]): each read is a system call that
//! pins the peer's pages, a lone reader leaves the root's core idle, and at sizes beyond
//! the caches the staged path's streaming stores win.

use super::algo::{chunk, copy, STREAM_BYTES};
use super::board::MAGIC;
use super::comm::CommInner;
use super::reduce::reduce;
use super::rendezvous::{CResult, Rendezvous, K_FAILED};
use super::types::{CollKind, OpDesc};
use std::ffi::c_void;
use std::sync::atomic::Ordering::*;

/// Environment variable: bytes a rank reads from each peer from which collectives take
/// the single copy, for every kind (0: never; unset: [`window`]'s defaults per kind).
/// Rank 0's value holds for the group.
pub const CMA_ENV: &str = "NPURT_SHM_CMA_BYTES";
/// The board's `cma_bytes` when [`CMA_ENV`] is unset: the defaults of [`window`]
/// ([`AUTO_CROWDED`]: the group has more ranks than the host has cores).
pub(crate) const AUTO: u64 = u64::MAX;
pub(crate) const AUTO_CROWDED: u64 = u64::MAX - 1;
/// Bytes of scratch per reduction step (the peers' parts of a piece, read before the fold).
const SCRATCH_BYTES: usize = 1 << 20;

/// The setting rank 0 publishes for a `world`-rank group on a host with `cpus` cores:
/// [`CMA_ENV`], else [`AUTO`] ([`AUTO_CROWDED`] with more ranks than cores).
pub(crate) fn setting(world: u32, cpus: usize) -> u64 {
    let auto = if world as usize > cpus.max(1) {
        AUTO_CROWDED
    } else {
        AUTO
    };
    std::env::var(CMA_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(auto, |v| v.min(AUTO_CROWDED - 1))
}

/// Bytes per peer `[from, to)` in which `kind` takes the single copy (`min`: the board's
/// setting, [`AUTO`] for these defaults), measured on 2 ranks of an Intel Xeon (Emerald
/// Rapids, 2 vCPUs), where a copy between cores runs at 10-17 GB/s, so the staged path's
/// second copy costs as much as the first (docs/BENCH.md, "The `shm` single copy"):
/// - all_gather, all_to_all from 8 KiB (16 KiB-16 MiB: up to 2.7x faster than the eager
///   and staged paths), up to where the staged path's streaming stores start (`group`,
///   the bytes of the group's results, reach `STREAM_BYTES`; 64 MiB: the staged path 1.3x
///   faster, its stores skip the reads); with more ranks than cores, all_to_all up to 4x
///   that (4 ranks on 2 cores, 16 MiB: 2.9-3.3 ms against the staged path's 4.6-4.7; 64
///   MiB 23.8-24.1 against 20.1-23.5; all_gather 64 MiB 20.9-25.2 against 11.9-13.8);
/// - broadcast 64 KiB-2 MiB (128 KiB-1 MiB 2-3x, 64 KiB 3.4 against the eager path's
///   4.2-4.3 µs, 32 KiB no faster; 4-64 MiB: the ring through the root's slot keeps both
///   cores busy, a lone reader does not);
/// - all_reduce from 1 MiB (buffers of 2-64 MiB on 2 ranks 1.2-2x; 1.5 MiB: 285 µs
///   against the slots' ring 242-256, 2 MiB 247-259 against 341-360: the fold then leaves
///   the L2, and a buffer of 2 MiB or more lies on huge pages: the kernel pins one page
///   for each 2 MiB read instead of 512);
/// - reduce_scatter 8 KiB-512 KiB (1.1-2x; from 4 MiB the staged path).
///
/// With more ranks than cores ([`AUTO_CROWDED`]) nothing below 64 KiB: each read is a
/// system call per peer, and the eager path's copies were faster there (4 ranks on 2
/// cores, 64 KiB all_gather 17 against 26 us).
pub(crate) fn window(kind: CollKind, min: u64, group: u64) -> (u64, u64) {
    let stream = group >= STREAM_BYTES as u64;
    let pick = |auto: u64| match min {
        AUTO => auto,
        AUTO_CROWDED => auto.max(64 << 10),
        explicit => explicit,
    };
    match kind {
        CollKind::AllGather | CollKind::AllToAll if !stream => (pick(8 << 10), u64::MAX),
        CollKind::AllToAll if min == AUTO_CROWDED && group < 4 * STREAM_BYTES as u64 => (pick(8 << 10), u64::MAX),
        // crowded: a reader per core at a time (4 ranks on 2 cores, 64 KiB: 15.9-17.9 µs
        // against the eager path's 11.0-11.7)
        CollKind::Broadcast if min == AUTO_CROWDED => (128 << 10, 2 << 20),
        CollKind::Broadcast => (pick(64 << 10), 2 << 20),
        CollKind::AllReduce => (pick(1 << 20), u64::MAX),
        CollKind::ReduceScatter => (pick(8 << 10), 512 << 10),
        _ => (u64::MAX, 0),
    }
}

/// Copies `len` bytes at `remote` in process `pid` to `local` in this one. Err: the errno
/// (`ESRCH`: the process is gone; `EFAULT`: the range is not mapped there; `EPERM`: not
/// allowed).
///
/// # Safety
/// `local` must be valid for `len` bytes of writes that nothing else reads or writes
/// meanwhile (the kernel writes it as this process would).
pub(crate) unsafe fn read(pid: u32, local: usize, remote: usize, len: usize) -> Result<(), i32> {
    let mut done = 0;
    while done < len {
        let l = libc::iovec {
            iov_base: (local + done) as *mut c_void,
            iov_len: len - done,
        };
        let r = libc::iovec {
            iov_base: (remote + done) as *mut c_void,
            iov_len: len - done,
        };
        // SAFETY: one local and one remote iovec; the local range is writable (the
        // caller's contract); the remote one is only read, and checked by the kernel.
        let got = unsafe { libc::process_vm_readv(pid as libc::pid_t, &l, 1, &r, 1, 0) };
        if got < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
        }
        if got == 0 {
            return Err(libc::EFAULT);
        }
        done += got as usize;
    }
    Ok(())
}

/// Whether this process can read 8 bytes at `addr` in process `pid` and finds `expect`
/// there (the probe round reads the magic of each peer's mapping of the board).
pub(crate) fn probe(pid: u32, addr: u64, expect: u64) -> bool {
    let mut v = 0u64;
    if pid == 0 || addr == 0 {
        return false;
    }
    // SAFETY: `v` is 8 writable bytes of this frame.
    unsafe { read(pid, &mut v as *mut u64 as usize, addr as usize, 8) }.is_ok() && v == expect
}

/// The group's probe round, at the first collective the setting puts on the single copy
/// (after arrival, so every rank has joined; every rank reaches it at the same collective,
/// since only the descriptor and the setting decide): this rank reads the magic of every
/// peer's mapping of the board; if any read fails (Yama's `ptrace_scope` 1 without
/// `CAP_SYS_PTRACE`, a seccomp filter, other credentials) it sets `cma_refused`, and after
/// one barrier every rank sees the same flag: nobody takes the single copy then.
pub(crate) fn probe_peers(c: &CommInner, rv: &mut Rendezvous<'_>) -> CResult<()> {
    let (n, me) = (rv.board.world(), rv.me);
    let readable = (0..n).filter(|&r| r != me).all(|r| {
        let s = rv.board.rank(r);
        probe(s.pid.load(Relaxed), s.base.load(Relaxed), MAGIC)
    });
    if !readable {
        rv.board.header().cma_refused.store(1, Release);
    }
    rv.barrier()?;
    c.cma_probed.store(true, Relaxed);
    Ok(())
}

/// Whether the group's setting puts collective `d` on the single copy: the kind is one it
/// runs and each peer's part lies in its [`window`]. Only the descriptor and rank 0's
/// setting decide, so every rank answers alike even before all have joined: the eager
/// path leaves these to the general one (`comm.rs`), which takes them after arrival unless
/// the group [`refused`] or a rank's buffers do not allow it (`algo::staged`).
pub(crate) fn preferred(c: &CommInner, d: &OpDesc) -> bool {
    let min = c.cma_setting;
    if min == 0 {
        return false;
    }
    let n = c.world as u64;
    let e = d.dtype.size() as u64;
    let per_peer = match d.kind {
        CollKind::AllReduce => d.count * e / n,
        _ => d.count * e,
    };
    let group = d
        .buffer_bytes(c.world)
        .map_or(u64::MAX, |b| (b.1 as u64).saturating_mul(n));
    let (from, to) = window(d.kind, min, group);
    per_peer > 0 && per_peer >= from && per_peer < to
}

/// Whether a rank of the group could not read a peer's memory (call it after the probe
/// round, [`probe_peers`]): then no collective takes the single copy.
pub(crate) fn refused(c: &CommInner) -> bool {
    c.board.header().cma_refused.load(Acquire) != 0
}

/// Whether this rank's buffers allow the single copy's steps: disjoint, or one of the
/// in-place forms (all_reduce: the same buffer; all_gather: the input is this rank's own
/// part of the output; a broadcast has one buffer).
pub(crate) fn buffers_ok(d: &OpDesc, n: u32, me: u32, send: usize, recv: usize) -> bool {
    let Ok((sb, rb)) = d.buffer_bytes(n) else {
        return false;
    };
    let disjoint = sb == 0 || rb == 0 || send + sb <= recv || recv + rb <= send;
    disjoint
        || d.kind == CollKind::Broadcast
        || (d.kind == CollKind::AllReduce && send == recv)
        || (d.kind == CollKind::AllGather && send == recv + me as usize * sb)
}

/// One rank's side of a collective that takes the single copy ([`preferred`], nobody
/// [`refused`], every rank's buffers allow it), after
/// `rv.arrive(send, recv)` (every rank's addresses are on the board); `recv`: this rank's
/// output; ends with the closing barrier. `scratch`: this rank's
/// reusable scratch (grown to [`SCRATCH_BYTES`] at most).
pub(crate) fn run(rv: &mut Rendezvous<'_>, recv: usize, scratch: &mut Vec<u8>) -> CResult<()> {
    let d = rv.desc;
    let (n, me) = (rv.board.world(), rv.me);
    let at = |r: u32| {
        let s = rv.board.rank(r);
        (
            s.send_ptr.load(Relaxed) as usize,
            s.recv_ptr.load(Relaxed) as usize,
            s.pid.load(Relaxed),
        )
    };
    let ranks: Vec<(usize, usize, u32)> = (0..n).map(at).collect();
    let e = d.dtype.size();
    let c = d.count as usize;
    // Reads rank `r`'s bytes at `src` into this rank's `dst` (its own: a local copy).
    // SAFETY (every call): `dst` lies in this rank's checked output (`check_regions`)
    // at a part no other rank reads in this step, or in `scratch`; `src` in rank `r`'s
    // checked buffers, alive and unchanged until the closing barrier.
    let get = |rv: &Rendezvous<'_>, r: u32, dst: usize, src: usize, len: usize| -> CResult<()> {
        if r == me {
            unsafe { copy(dst, src, len) };
            return Ok(());
        }
        let pid = ranks[r as usize].2;
        unsafe { read(pid, dst, src, len) }.map_err(|errno| {
            let why = if errno == libc::ESRCH {
                format!("died (pid {pid})")
            } else {
                format!(
                    "could not be read (process_vm_readv: {})",
                    std::io::Error::from_raw_os_error(errno)
                )
            };
            rv.fail(K_FAILED, 1 << r, 0.0, why)
        })
    };
    match d.kind {
        CollKind::AllToAll => {
            for j in 0..n {
                get(
                    rv,
                    j,
                    recv + j as usize * c * e,
                    ranks[j as usize].0 + me as usize * c * e,
                    c * e,
                )?;
            }
        }
        CollKind::AllGather => {
            for j in 0..n {
                get(rv, j, recv + j as usize * c * e, ranks[j as usize].0, c * e)?;
            }
        }
        CollKind::Broadcast => {
            if me != d.root {
                get(rv, d.root, recv, ranks[d.root as usize].0, c * e)?;
            }
        }
        CollKind::AllReduce | CollKind::ReduceScatter => {
            // this rank's chunk: all_reduce's chunk `me` of the whole, reduce_scatter's
            // output (chunk `me` of every input)
            let (a, b, base) = match d.kind {
                CollKind::AllReduce => {
                    let (a, b) = chunk(d.count, n, me);
                    (a, b, 0)
                }
                _ => (0, c, me as usize * c),
            };
            let step = (SCRATCH_BYTES / (e * (n as usize - 1).max(1))).max(1);
            scratch.resize(step * e * (n as usize - 1), 0); // at most SCRATCH_BYTES
            let mut p = a;
            while p < b {
                let len = step.min(b - p);
                let mut srcs = Vec::with_capacity(n as usize);
                let mut k = 0;
                for r in 0..n {
                    let src = ranks[r as usize].0 + (base + p) * e;
                    if r == me {
                        srcs.push(src as *const u8);
                    } else {
                        let dst = scratch.as_mut_ptr() as usize + k * step * e;
                        get(rv, r, dst, src, len * e)?;
                        srcs.push(dst as *const u8);
                        k += 1;
                    }
                }
                // SAFETY: every source is `len` elements (a peer's part now in `scratch`, or
                // this rank's input, which equals the output in place, never partly); the
                // output (reduce_scatter: a = 0) is this rank's part, no peer reads it now.
                unsafe { reduce((recv + p * e) as *mut u8, &srcs, len, d.dtype, d.op) };
                p += len;
            }
            if d.kind == CollKind::AllReduce {
                rv.barrier()?;
                for j in (0..n).filter(|&j| j != me) {
                    let (a, b) = chunk(d.count, n, j);
                    get(rv, j, recv + a * e, ranks[j as usize].1 + a * e, (b - a) * e)?;
                }
            }
        }
        _ => unreachable!("preferred() admits only the kinds above"),
    }
    // No rank leaves (and changes its buffers or its board row) while another still reads.
    rv.barrier()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_and_reports_bad_ranges() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        let me = std::process::id();
        // SAFETY: `dst` is ours, as long as `src`.
        unsafe { read(me, dst.as_mut_ptr() as usize, src.as_ptr() as usize, src.len()) }.unwrap();
        assert_eq!(dst, src);
        // an unmapped remote range: EFAULT, not a crash
        let mut one = [0u8; 8];
        // SAFETY: `one` is ours.
        let r = unsafe { read(me, one.as_mut_ptr() as usize, 8, 8) };
        assert_eq!(r, Err(libc::EFAULT));
        let magic = 0x1234_5678_9abc_def0u64;
        assert!(probe(me, &magic as *const u64 as u64, magic));
        assert!(!probe(me, &magic as *const u64 as u64, 1));
        assert!(!probe(0, &magic as *const u64 as u64, magic));
        // a process that is gone: ESRCH (the collective names the rank as dead)
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // SAFETY: `one` is ours.
        let r = unsafe { read(pid, one.as_mut_ptr() as usize, one.as_ptr() as usize, 8) };
        assert_eq!(r, Err(libc::ESRCH));
    }

    #[test]
    fn the_windows_per_kind() {
        use CollKind::*;
        let k = 1u64 << 10;
        let (small, big) = (k, 64 * 1024 * k); // the group's results: below / at STREAM_BYTES
        assert_eq!(window(AllToAll, AUTO, small), (8 * k, u64::MAX));
        assert_eq!(window(AllGather, AUTO, big).0, u64::MAX); // streaming stores: staged
        assert_eq!(window(AllToAll, AUTO, big).0, u64::MAX);
        assert_eq!(window(Broadcast, AUTO, small), (64 * k, 2048 * k));
        assert_eq!(window(AllGather, AUTO_CROWDED, small).0, 64 * k); // more ranks than cores
        assert_eq!(window(AllGather, AUTO_CROWDED, big).0, u64::MAX);
        assert_eq!(window(AllToAll, AUTO_CROWDED, big).0, 64 * k); // crowded: up to 4x
        assert_eq!(window(AllToAll, AUTO_CROWDED, 4 * big).0, u64::MAX);
        assert_eq!(window(Broadcast, AUTO_CROWDED, small).0, 128 * k);
        assert_eq!(window(AllReduce, AUTO_CROWDED, small).0, 1024 * k);
        assert_eq!(window(AllReduce, AUTO, big), (1024 * k, u64::MAX));
        assert_eq!(window(ReduceScatter, AUTO, small), (8 * k, 512 * k));
        assert_eq!(window(AllReduce, 1, small).0, 1); // an explicit setting: every kind
        assert_eq!(window(Reduce, AUTO, small).0, u64::MAX); // not run here
        assert_eq!(window(Barrier, 1, small).0, u64::MAX);
    }
}
