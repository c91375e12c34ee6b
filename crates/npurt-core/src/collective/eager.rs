//! The eager path: small collectives in one barrier, on both transports.
//!
//! The general algorithms (`algo.rs`) pay for bandwidth with steps: a barrier at arrival,
//! one or two between steps, and a closing one so that no rank reuses a slot (or leaves
//! with its buffer) while another still reads it. Below [`EAGER_BYTES`] of send data per
//! rank the barriers cost more than the bytes, so instead:
//!
//! 1. a rank copies its whole send buffer into its **eager area** for this collective
//!    (rank `r` has [`DEPTH`] of them; collective `seq` uses number `seq % DEPTH`),
//! 2. arrives (one barrier; the descriptors are compared: desync),
//! 3. computes its whole result from the peers' areas (reductions in rank order, so every
//!    rank gets bitwise the same result as the general path) and leaves — no closing
//!    barrier.
//!
//! Why leaving at once is safe: a rank writes area `seq % DEPTH` again only at collective
//! `seq + DEPTH`, and first waits until every rank arrived at `seq + 1` (`catch_up`), which
//! a rank does only after it finished reading the areas of `seq`. The board rows follow the
//! same rule ([`super::board::Board::row`]). Between the two, a general collective (which
//! writes its slots only after its arrival) or a send/recv (which uses the slots, never the
//! eager areas) cannot disturb an eager area still being read.
//!
//! A **broadcast** does not even wait for everyone: the root stages its data and arrives
//! without waiting (`announce`); each other rank waits for the root alone, checks the
//! root's descriptor against its own (`await_root`: on a mismatch it waits for everyone and
//! reports the desync as a full arrival does), copies, and only then arrives (`leave`). So
//! "arrived at `seq`" still means "done reading `seq`", `catch_up` keeps the rule above,
//! and a root is at most `DEPTH - 1` collectives ahead of the slowest rank (as MPI's eager
//! broadcast, whose root returns once its data is sent into the readers' FIFOs): with
//! more ranks than cores, a root that runs ahead and readers that then catch up several
//! broadcasts in one time slice switch cores far less often than one collective apart. A
//! failure of a reader reaches the root at its next collective (the abort record). The
//! loom models `loom_eager_areas_are_never_overwritten_while_read` (full-barrier
//! collectives) and `loom_broadcast_root_never_overwrites_what_is_read` (broadcasts around
//! them, the root running ahead) check the rule.

use super::algo::copy;
use super::board::DEPTH;
use super::comm::CommInner;
use super::reduce::reduce;
use super::rendezvous::{CResult, Rendezvous};
use super::types::{CollKind, OpDesc};

/// Bytes of one eager area: collectives whose send buffer is at most this large take the
/// eager path (unless the group's limit is lower).
pub const EAGER_BYTES: usize = 64 << 10;

/// Environment variable: the eager limit in bytes of the groups this process creates
/// (0: every collective takes the general path; at most [`EAGER_BYTES`]). The creating
/// rank's value holds for the whole group (it is on the board), so ranks never disagree.
pub const EAGER_ENV: &str = "NPURT_COLLECTIVE_EAGER_BYTES";

/// The limit a new group gets: [`EAGER_ENV`], else [`EAGER_BYTES`].
pub(crate) fn limit_from_env() -> u32 {
    std::env::var(EAGER_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(EAGER_BYTES)
        .min(EAGER_BYTES) as u32
}

/// Bytes of the eager areas of `world` ranks ([`DEPTH`] each).
pub(crate) fn area_bytes(world: u32) -> usize {
    world as usize * DEPTH * EAGER_BYTES
}

/// Whether `desc` takes the eager path (every rank decides the same from the descriptor
/// and the group's `limit`). Barriers always do.
pub(crate) fn fits(desc: &OpDesc, world: u32, limit: u32) -> bool {
    match desc.kind {
        CollKind::Send | CollKind::Recv => false,
        CollKind::Barrier => true,
        _ => desc
            .buffer_bytes(world)
            .is_ok_and(|(send, _)| send <= limit as usize && send <= EAGER_BYTES),
    }
}

/// One rank's side of an eager collective (`fits` was true).
pub(crate) fn run(c: &CommInner, rv: &mut Rendezvous<'_>, send: usize, recv: usize) -> CResult<()> {
    let d = rv.desc;
    let (n, me) = (rv.board.world(), rv.me);
    let e = d.dtype.size();
    let count = d.count as usize;
    let which = (rv.seq % DEPTH as u64) as usize;
    let area = |r: u32| c.eager + (r as usize * DEPTH + which) * EAGER_BYTES;
    // Where `peers` lists every rank's area (no allocation up to 8 ranks).
    let (mut small, mut big) = ([std::ptr::null::<u8>(); 8], Vec::new());
    let (send_bytes, _) = d.buffer_bytes(n)?;
    // A broadcast's root waits for nobody: every other rank only reads from it.
    rv.catch_up()?;
    if d.kind == CollKind::Broadcast {
        if me == d.root {
            // SAFETY: as the staging below (`catch_up` made this area free).
            unsafe { copy(area(me), send, send_bytes) };
            rv.announce();
        } else {
            rv.await_root()?;
            // SAFETY: the root's area holds its data (published with its phase, which
            // `await_root` read with Acquire) and it stays until this rank leaves: the
            // root writes it again only after `catch_up` saw this rank arrive later.
            unsafe { copy(recv, area(d.root), count * e) };
            rv.leave();
        }
        return Ok(());
    }
    let stages = d.kind != CollKind::Barrier;
    if stages {
        // SAFETY: `send` is this rank's checked buffer of `send_bytes` (`check_regions`),
        // at most EAGER_BYTES (`fits`), and the area is this rank's, which no rank reads
        // now (module docs: the last reader of this area, at `seq - DEPTH`, left it before
        // arriving at `seq - DEPTH + 1`, which `catch_up` saw every rank do).
        unsafe { copy(area(me), send, send_bytes) };
    }
    rv.arrive(0, 0)?;
    // SAFETY (every block below): after the arrival every rank's area holds its send data
    // (published with the phase, Release/Acquire) and nobody writes it until this rank
    // arrives at the next collective; `recv` is this rank's checked receive buffer, no
    // other rank touches it; reads stay inside the areas (`fits`) and the offsets follow
    // the descriptor every rank matched at arrival.
    match d.kind {
        // Every rank's result for an all_reduce, the root's alone for a reduce.
        CollKind::AllReduce | CollKind::Reduce if d.kind == CollKind::AllReduce || me == d.root => unsafe {
            reduce(
                recv as *mut u8,
                peers(&mut small, &mut big, n, area),
                count,
                d.dtype,
                d.op,
            )
        },
        CollKind::AllGather => {
            for j in 0..n {
                unsafe { copy(recv + j as usize * count * e, area(j), count * e) };
            }
        }
        CollKind::ReduceScatter => unsafe {
            reduce(
                recv as *mut u8,
                peers(&mut small, &mut big, n, |r| area(r) + me as usize * count * e),
                count,
                d.dtype,
                d.op,
            )
        },
        CollKind::AllToAll => {
            for j in 0..n {
                unsafe {
                    copy(
                        recv + j as usize * count * e,
                        area(j) + me as usize * count * e,
                        count * e,
                    )
                };
            }
        }
        _ => {}
    }
    Ok(())
}

/// The addresses `at(0)`, `at(1)`, ... `at(n - 1)`: in `small` up to its length (no
/// allocation on the small-collective path), else in `big`.
fn peers<'a>(
    small: &'a mut [*const u8; 8],
    big: &'a mut Vec<*const u8>,
    n: u32,
    at: impl Fn(u32) -> usize,
) -> &'a [*const u8] {
    let n = n as usize;
    if n <= small.len() {
        for (r, p) in small[..n].iter_mut().enumerate() {
            *p = at(r as u32) as *const u8;
        }
        return &small[..n];
    }
    big.clear();
    big.extend((0..n as u32).map(|r| at(r) as *const u8));
    big
}
