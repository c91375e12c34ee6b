//! The `local` transport's bootstrap: ranks that are threads (or virtual devices) of one
//! process. [`join`] is `init_process_group("local", rank, world_size)` from one thread
//! per rank: the first rank of a name creates the group (a heap board), the others find
//! it in a process-wide table; [`init_all`] is `HcclCommInitAll` (one thread creates every
//! rank's communicator).

use super::board::{Board, MAX_RANKS, ST_EMPTY};
use super::comm::{Areas, Backing, Communicator, Transport};
use super::eager;
use super::error::CollectiveError;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::Duration;

struct Pending {
    world: u32,
    block: Arc<Box<[AtomicU64]>>,
    joined: Vec<bool>,
}

static GROUPS: Mutex<Option<HashMap<String, Pending>>> = Mutex::new(None);

fn check_world(op: &str, rank: u32, world: u32) -> Result<(), CollectiveError> {
    if world == 0 || world > MAX_RANKS {
        return Err(CollectiveError::param(
            op,
            format!("world size {world} is out of range (1..={MAX_RANKS})"),
        ));
    }
    if rank >= world {
        return Err(CollectiveError::param(
            op,
            format!("rank {rank} is out of range for world size {world}"),
        ));
    }
    Ok(())
}

/// The board and, after it, the eager areas (zeroed words).
fn new_block(world: u32) -> Arc<Box<[AtomicU64]>> {
    let words = (Board::bytes(world) + eager::area_bytes(world)).div_ceil(8);
    let block: Box<[AtomicU64]> = (0..words).map(|_| AtomicU64::new(0)).collect();
    // SAFETY: the block is 8-aligned, zeroed and `Board::bytes(world)` long; nobody else
    // sees it yet. The creator's eager limit holds for every rank that joins.
    let board = unsafe { Board::new(block.as_ptr().cast(), world) };
    board.header().eager_limit.store(eager::limit_from_env(), Relaxed);
    Arc::new(block)
}

fn comm_on(block: &Arc<Box<[AtomicU64]>>, rank: u32, world: u32, timeout: Duration) -> Communicator {
    // SAFETY: the block is 8-aligned (u64s), `Board::bytes(world)` long and zeroed; the
    // communicator keeps the Arc (Backing::Heap) for as long as it uses the board.
    let board = unsafe { Board::new(block.as_ptr().cast(), world) };
    let eager = block.as_ptr() as usize + Board::bytes(world);
    Communicator::new(
        rank,
        world,
        Transport::Local,
        board,
        Backing::Heap(block.clone()),
        Areas {
            slots: 0,
            slot_bytes: 0,
            fragment_bytes: 0,
            eager,
        },
        timeout,
    )
}

/// Rank `rank` of the process-local group `name` of `world` ranks.
pub fn join(name: &str, rank: u32, world: u32, timeout: Duration) -> Result<Communicator, CollectiveError> {
    let op = "init_process_group(local)";
    check_world(op, rank, world)?;
    let mut groups = GROUPS.lock();
    let table = groups.get_or_insert_with(HashMap::new);
    let entry = table.entry(name.to_string()).or_insert_with(|| Pending {
        world,
        block: new_block(world),
        joined: vec![false; world as usize],
    });
    if entry.world != world {
        return Err(CollectiveError::param(
            op,
            format!(
                "group {name:?} has world size {}, but rank {rank} asked for {world}",
                entry.world
            ),
        ));
    }
    if std::mem::replace(&mut entry.joined[rank as usize], true) {
        return Err(CollectiveError::param(
            op,
            format!("rank {rank} already joined group {name:?}"),
        ));
    }
    let comm = comm_on(&entry.block, rank, world, timeout);
    if entry.joined.iter().all(|&j| j) {
        table.remove(name); // complete: the name can start a new group
    }
    Ok(comm)
}

/// Abandons a group name whose ranks never all joined (its board stays with the ranks
/// that did).
pub fn forget(name: &str) {
    if let Some(t) = GROUPS.lock().as_mut() {
        t.remove(name);
    }
}

/// Every rank's communicator of a new group of `world` ranks (`HcclCommInitAll`).
pub fn init_all(world: u32, timeout: Duration) -> Result<Vec<Communicator>, CollectiveError> {
    check_world("HcclCommInitAll", 0, world)?;
    let block = new_block(world);
    Ok((0..world).map(|r| comm_on(&block, r, world, timeout)).collect())
}

/// Whether every rank of the board joined (for tests and diagnostics).
pub fn all_joined(c: &Communicator) -> bool {
    (0..c.world()).all(|r| c.0.board.rank(r).state.load(Acquire) != ST_EMPTY)
}
