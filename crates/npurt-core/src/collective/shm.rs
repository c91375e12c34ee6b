//! The `shm` transport's segment: one shareable device buffer (a sealed memfd from the
//! shareable pool) holding the board and one staging slot per rank. Rank 0 creates and
//! exports it ([`crate::ipc::export`]: whitelist, `SO_PEERCRED`, `SCM_RIGHTS` — nothing
//! of that is repeated here); the others import the key they got from the bootstrap store.
//! Importers keep the pages mapped, so the board outlives a rank that dies.

use super::board::{Board, MAGIC, MAX_RANKS};
use super::cma;
use super::comm::{Areas, Backing, Communicator, Transport};
use super::eager;
use super::error::CollectiveError;
use crate::ipc::{self, Access};
use crate::memory::{malloc_on_ex, DeviceBuffer, DeviceMemory};
use npurt_mem::PagePolicy;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::Duration;

/// Environment variable: bytes per rank slot (default: [`default_slot_bytes`]).
pub const SLOT_ENV: &str = "NPURT_SHM_SLOT_BYTES";
/// The slot size when the CPU does not report its L2 cache.
pub const DEFAULT_SLOT_BYTES: usize = 512 << 10;
const MIN_SLOT_BYTES: usize = 4096;
const AUTO_MIN: usize = 256 << 10;
const AUTO_MAX: usize = 2 << 20;

/// The default slot of a `world`-rank group on a host with `cpus` cores: half a core's L2
/// (`l2`: its bytes, None when unknown) within 256 KiB..=2 MiB when every rank has a core,
/// else 2 MiB. With a core each the ranks run in step and a piece a rank stages is read
/// by its peers right after the barrier that publishes it: while it is still in the
/// writer's L2 those reads are cache-to-cache transfers, once it spilled they come from L3
/// or memory (a Zen 5, 1 MiB L2, 2 ranks, 512 KiB slots instead of 2 MiB: broadcast 1 MiB
/// 175 -> 21-38 us, 256 MiB 30.8 -> 12.1 ms, all_reduce 256 MiB 76 -> 36-50 ms). With more
/// ranks than cores each barrier waits for a rank to get a core back, so fewer, larger
/// pieces pay (4 ranks on 2 cores: all_to_all 64 MiB 11.5 ms with 2 MiB slots, 13.7 with
/// 512 KiB). docs/BENCH.md, "shm slots sized to the L2".
pub fn default_slot_bytes(l2: Option<usize>, world: u32, cpus: usize) -> usize {
    if world as usize > cpus.max(1) {
        return AUTO_MAX;
    }
    match l2 {
        Some(b) if b > 0 => (b / 2).clamp(AUTO_MIN, AUTO_MAX),
        _ => DEFAULT_SLOT_BYTES,
    }
}

/// Bytes of a broadcast's ring fragment (`ring.rs`) in a `world`-rank group with slots of
/// `slot` bytes on a host with `cpus` cores: 32 KiB (a piece that stays in the L1 between
/// the root's copy in and the readers' copy out; 2 ranks on 2 Zen 5 cores, 1 MiB: 8 KiB
/// 24-25 µs, 16 KiB 21.5-49, 32 KiB 19.7-38, 64 KiB 37-38, the former two-half pipeline
/// 36-42) when every rank has a core, else half a slot: with more ranks than cores every
/// hand-off of a fragment may wait for a context switch (4 ranks on 2 cores, 32 KiB
/// fragments: 4 MiB 290 -> 684 µs). docs/BENCH.md, "The `shm` broadcast as a ring".
pub fn default_fragment_bytes(world: u32, cpus: usize, slot: usize) -> usize {
    let f = if world as usize > cpus.max(1) {
        slot / 2
    } else {
        32 << 10
    };
    f.clamp(64, slot.max(64)).div_ceil(64) * 64
}

/// Environment variable: a broadcast's ring fragment in bytes (default:
/// [`default_fragment_bytes`]; rank 0 decides, as for the slot).
pub const FRAGMENT_ENV: &str = "NPURT_SHM_FRAGMENT_BYTES";

/// This CPU's L2 cache bytes per core (`sysconf(_SC_LEVEL2_CACHE_SIZE)`), if it says.
fn l2_bytes() -> Option<usize> {
    // SAFETY: sysconf only reads a configuration value.
    let v = unsafe { libc::sysconf(libc::_SC_LEVEL2_CACHE_SIZE) };
    usize::try_from(v).ok().filter(|&b| b > 0)
}

/// The slot size of a `world`-rank group: `slot_bytes`, else `NPURT_SHM_SLOT_BYTES`, else
/// [`default_slot_bytes`] for this host (rounded up to 64). Rank 0 decides; the others read
/// it from the segment.
pub fn slot_bytes(slot_bytes: Option<usize>, world: u32) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let s = slot_bytes
        .or_else(|| std::env::var(SLOT_ENV).ok().and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| default_slot_bytes(l2_bytes(), world, cpus));
    s.clamp(MIN_SLOT_BYTES, 1 << 30).div_ceil(64) * 64
}

fn err(reason: impl Into<String>) -> CollectiveError {
    CollectiveError::internal("init_process_group(shm)", reason)
}

fn attach(buf: DeviceBuffer, rank: u32, world: u32, slot: usize, fragment: usize, timeout: Duration) -> Communicator {
    // SAFETY: the buffer is at least `segment_bytes(world, slot)` bytes (checked by the
    // callers), 512-aligned, and kept alive by the communicator (Backing::Shm).
    let board = unsafe { Board::new(buf.addr() as *const u8, world) };
    let slots = buf.addr() + Board::bytes(world);
    let eager = slots + world as usize * slot;
    Communicator::new(
        rank,
        world,
        Transport::Shm,
        board,
        Backing::Shm(buf),
        Areas {
            slots,
            slot_bytes: slot,
            fragment_bytes: fragment,
            eager,
        },
        timeout,
    )
}

/// Bytes of a `world`-rank segment: the board, the slots, the eager areas.
fn segment_bytes(world: u32, slot: usize) -> usize {
    Board::bytes(world) + world as usize * slot + eager::area_bytes(world)
}

/// Creates the segment of a `world`-rank group as rank 0 on `mem` and exports it; returns
/// the communicator and the key for the other ranks (`pids`: the whitelist; None: any
/// process of this user).
pub fn create(
    mem: &Arc<DeviceMemory>,
    world: u32,
    slot: Option<usize>,
    pids: Option<&[i64]>,
    timeout: Duration,
) -> crate::Result<(Communicator, String)> {
    if world == 0 || world > MAX_RANKS {
        return Err(crate::Error::invalid(format!(
            "world size {world} is out of range (1..={MAX_RANKS})"
        )));
    }
    let slot = slot_bytes(slot, world);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let fragment = std::env::var(FRAGMENT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or_else(|| default_fragment_bytes(world, cpus, slot), |f| f.clamp(64, slot));
    let total = segment_bytes(world, slot);
    let buf = malloc_on_ex(mem, total, PagePolicy::HugeFirst, Some(true))?;
    // SAFETY: the buffer was just allocated with `total >= Board::bytes(world)` bytes and
    // nobody else can see it yet: zeroing the board part is a plain write.
    unsafe { std::ptr::write_bytes(buf.addr() as *mut u8, 0, Board::bytes(world)) };
    let access = match pids {
        Some(p) => Access::pids(p)?,
        None => Access::SameUser,
    };
    let key = ipc::export(&buf, 0, 0, access)?;
    {
        // SAFETY: as in `attach` (the same buffer, alive here).
        let board = unsafe { Board::new(buf.addr() as *const u8, world) };
        let h = board.header();
        h.world.store(world, Relaxed);
        h.slot_bytes.store(slot as u64, Relaxed);
        h.fragment_bytes.store(fragment as u32, Relaxed);
        h.eager_limit.store(eager::limit_from_env(), Relaxed);
        h.cma_bytes.store(cma::setting(world, cpus), Relaxed);
        h.magic.store(MAGIC, Release);
    }
    Ok((attach(buf, 0, world, slot, fragment, timeout), key))
}

/// Joins the group whose segment rank 0 exported as `key`, as `rank` of `world`.
pub fn join(
    key: &str,
    mem: &Arc<DeviceMemory>,
    rank: u32,
    world: u32,
    timeout: Duration,
) -> crate::Result<Communicator> {
    if world == 0 || world > MAX_RANKS || rank >= world {
        return Err(crate::Error::invalid(format!(
            "rank {rank} / world size {world} out of range (world 1..={MAX_RANKS})"
        )));
    }
    let buf = ipc::import(key, mem, timeout.min(Duration::from_secs(60)))?;
    if buf.nbytes() < Board::bytes(world) {
        return Err(err(format!(
            "the segment holds {} bytes: too small for {world} ranks",
            buf.nbytes()
        ))
        .into());
    }
    // SAFETY: the mapping holds at least the board (checked above) and stays mapped while
    // `buf` lives (here).
    let board = unsafe { Board::new(buf.addr() as *const u8, world) };
    let h = board.header();
    if h.magic.load(Acquire) != MAGIC {
        return Err(err("the key does not name a communicator segment").into());
    }
    let w = h.world.load(Relaxed);
    if w != world {
        return Err(err(format!(
            "the group has world size {w}, but rank {rank} asked for {world}"
        ))
        .into());
    }
    let slot = h.slot_bytes.load(Relaxed) as usize;
    let fragment = (h.fragment_bytes.load(Relaxed) as usize).clamp(64, slot.max(64));
    if buf.nbytes() < segment_bytes(world, slot) {
        return Err(err("the segment is smaller than its slots").into());
    }
    if board.rank(rank).state.load(Acquire) != super::board::ST_EMPTY {
        return Err(err(format!("rank {rank} already joined this group")).into());
    }
    Ok(attach(buf, rank, world, slot, fragment, timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_slot_is_half_the_l2_within_bounds_unless_oversubscribed() {
        let mib = 1 << 20;
        assert_eq!(default_slot_bytes(Some(mib), 2, 2), 512 << 10); // Zen 4/5
        assert_eq!(default_slot_bytes(Some(2 * mib), 4, 8), mib); // Sapphire Rapids
        assert_eq!(default_slot_bytes(Some(256 << 10), 2, 2), 256 << 10); // the floor
        assert_eq!(default_slot_bytes(Some(32 * mib), 2, 2), 2 * mib); // the ceiling
        assert_eq!(default_slot_bytes(None, 2, 2), DEFAULT_SLOT_BYTES);
        assert_eq!(default_slot_bytes(Some(0), 1, 1), DEFAULT_SLOT_BYTES);
        // more ranks than cores: fewer, larger pieces
        assert_eq!(default_slot_bytes(Some(mib), 4, 2), 2 * mib);
        assert_eq!(default_slot_bytes(None, 3, 0), 2 * mib);
        // a broadcast's fragment: 32 KiB with a core per rank, half a slot without
        assert_eq!(default_fragment_bytes(2, 2, 512 << 10), 32 << 10);
        assert_eq!(default_fragment_bytes(4, 2, 2 * mib), mib);
        assert_eq!(default_fragment_bytes(2, 8, 16384), 16384); // never above the slot
        assert_eq!(default_fragment_bytes(2, 2, 4096), 4096);
        // an explicit size wins, rounded up to 64 and kept in range
        assert_eq!(slot_bytes(Some(100_000), 2), 100_032);
        assert_eq!(slot_bytes(Some(1), 2), MIN_SLOT_BYTES);
    }
}
