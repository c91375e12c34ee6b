//! The `shm` transport's segment: one shareable device buffer (a sealed memfd from the
//! shareable pool) holding the board and one staging slot per rank. Rank 0 creates and
//! exports it ([`crate::ipc::export`]: whitelist, `SO_PEERCRED`, `SCM_RIGHTS` — nothing
//! of that is repeated here); the others import the key they got from the bootstrap store.
//! Importers keep the pages mapped, so the board outlives a rank that dies.

use super::board::{Board, MAGIC, MAX_RANKS};
use super::comm::{Areas, Backing, Communicator, Transport};
use super::eager;
use super::error::CollectiveError;
use crate::ipc::{self, Access};
use crate::memory::{malloc_on_ex, DeviceBuffer, DeviceMemory};
use npurt_mem::PagePolicy;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::Duration;

/// Environment variable: bytes per rank slot (default [`DEFAULT_SLOT_BYTES`]).
pub const SLOT_ENV: &str = "NPURT_SHM_SLOT_BYTES";
pub const DEFAULT_SLOT_BYTES: usize = 2 << 20;
const MIN_SLOT_BYTES: usize = 4096;

/// The slot size: `slot_bytes`, else `NPURT_SHM_SLOT_BYTES`, else 2 MiB (rounded up to 64).
pub fn slot_bytes(slot_bytes: Option<usize>) -> usize {
    let s = slot_bytes
        .or_else(|| std::env::var(SLOT_ENV).ok().and_then(|v| v.trim().parse().ok()))
        .unwrap_or(DEFAULT_SLOT_BYTES);
    s.clamp(MIN_SLOT_BYTES, 1 << 30).div_ceil(64) * 64
}

fn err(reason: impl Into<String>) -> CollectiveError {
    CollectiveError::internal("init_process_group(shm)", reason)
}

fn attach(buf: DeviceBuffer, rank: u32, world: u32, slot: usize, timeout: Duration) -> Communicator {
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
    let slot = slot_bytes(slot);
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
        h.eager_limit.store(eager::limit_from_env(), Relaxed);
        h.magic.store(MAGIC, Release);
    }
    Ok((attach(buf, 0, world, slot, timeout), key))
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
    if buf.nbytes() < segment_bytes(world, slot) {
        return Err(err("the segment is smaller than its slots").into());
    }
    if board.rank(rank).state.load(Acquire) != super::board::ST_EMPTY {
        return Err(err(format!("rank {rank} already joined this group")).into());
    }
    Ok(attach(buf, rank, world, slot, timeout))
}
