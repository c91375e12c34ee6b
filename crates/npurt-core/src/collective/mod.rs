//! HCCL-style collectives: communicators, the progress board, rendezvous with deadlines,
//! desync and dead-rank detection, deterministic reductions, and two transports.
//!
//! * [`Communicator`] (`comm.rs`): a rank's handle; collectives run one at a time in call
//!   order, each with a sequence number and a deadline (the group's, a per-call one, or
//!   `HCCL_EXEC_TIMEOUT`).
//! * The board (`board.rs`): a control block of atomics every rank maps — per rank its
//!   phase, seq and descriptor (`DEPTH` rows, by the seq modulo `DEPTH`), state, pid, heartbeat;
//!   per pair a send/recv mailbox; the abort
//!   record; a futex word waiters sleep on. `rendezvous.rs` is one rank's side of one
//!   collective: arrive (desync check), barriers, waits that end in
//!   [`CollectiveError::Timeout`] / [`CollectiveError::RankFailed`] instead of hanging.
//! * Algorithms (`algo.rs`): `direct` (`local`: peers' buffers read directly;
//!   reduce-scatter then all-gather), `staged` (`shm`: through per-rank slots of a shared
//!   segment), `p2p` (send/recv); `eager.rs` small collectives on either transport in one
//!   barrier (send data staged in per-rank areas used by the seq modulo `DEPTH`, no closing
//!   barrier); `reduce.rs` the kernels, always in rank order (bitwise identical results on
//!   every rank and run, whichever path ran).
//! * Bootstrap: [`local`] (threads of one process; `HcclCommInitAll`), [`shm`] (a
//!   shareable memfd segment exported with [`crate::ipc`]).
//! * [`enqueue`] (below): a collective as a task on a stream's host engine; [`enqueue_or_run`]
//!   runs it on the calling thread when the stream is idle (host-synchronous). It claims the
//!   collective's sequence number in call order and queues it, so it runs after the
//!   stream's earlier work, later work waits for it, and profiles show it. The host engine
//!   grows a thread when jobs outnumber idle threads, so a rank blocked at a rendezvous
//!   holds only its own stream. A queued collective that never runs (its stream failed
//!   first) aborts the group, so the other ranks get an error instead of waiting for it.
//!   [`run_now`] (the bindings' blocking calls, when [`direct_ok`]) runs it on the calling
//!   thread with no task at all; only a failure becomes a (failed) task of the stream.

mod algo;
mod board;
mod cma;
mod comm;
mod eager;
mod error;
pub mod local;
#[cfg(all(test, loom))]
mod loom_tests;
pub mod mpi;
mod reduce;
mod rendezvous;
mod ring;
pub mod shm;
mod types;

pub use board::{DEPTH as EAGER_DEPTH, MAX_RANKS};
pub use cma::CMA_ENV;
pub use comm::{default_timeout, Communicator, Transport, DEFAULT_TIMEOUT, TIMEOUT_ENV};
pub use eager::{EAGER_BYTES, EAGER_ENV};
pub use error::{AbortCause, CollectiveError, HcclResult, Ranks};
pub use rendezvous::{pid_dead, with_interrupt};
pub use types::{overlap_error, CollKind, HcclDataType, OpDesc, ReduceOp, Region};

use crate::error::{Error, TaskError};
use crate::profiler::TaskKind;
use crate::stream::task::{Engine, EngineDesc};
use crate::stream::{Pending, Stream};
use comm::Ticket;
use std::time::Duration;
use types::check_regions;

struct Job {
    comm: Communicator,
    ticket: Ticket,
    desc: OpDesc,
    send: Option<Region>,
    recv: Option<Region>,
    timeout: Option<Duration>,
    ran: bool,
}

impl Job {
    fn run(mut self) -> Result<(), TaskError> {
        self.ran = true;
        self.comm
            .execute(
                self.ticket,
                self.desc,
                self.send.as_ref(),
                self.recv.as_ref(),
                self.timeout,
            )
            .map_err(TaskError::Collective)
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if !self.ran {
            self.comm.skip(self.ticket, self.desc);
        }
    }
}

/// Queues `desc` on `stream`; returns its sequence number and the launch (a full ring
/// gives the task back as a [`Pending`] to push without the interpreter lock). A group
/// already aborted fails here, not on the stream: the call raises whatever ran meanwhile.
pub fn enqueue(
    comm: &Communicator,
    stream: &Stream,
    desc: OpDesc,
    send: Option<Region>,
    recv: Option<Region>,
    timeout: Option<Duration>,
) -> crate::Result<(u64, Result<u64, Pending>)> {
    launch(comm, stream, desc, send, recv, timeout, false)
}

/// [`enqueue`], but if `stream` is idle (nothing queued or in flight) the calling thread
/// runs the collective itself and returns once it is done, gloo-style: no hand-off to a
/// host-engine thread and back, the thread that waits is the one that called. Everything
/// else is [`enqueue`]'s: the collective is a task of `stream` (its position, profiles, its
/// failure as the stream's sticky error, raised where its result is waited for), its
/// deadline and desync and dead-rank checks are the same code. When `stream` is busy the
/// collective is queued and this returns at once. The caller must be able to block (not
/// a runtime thread: then it is always queued) and must hold no lock the collective's
/// peers need (bindings release their interpreter lock).
pub fn enqueue_or_run(
    comm: &Communicator,
    stream: &Stream,
    desc: OpDesc,
    send: Option<Region>,
    recv: Option<Region>,
    timeout: Option<Duration>,
) -> crate::Result<(u64, Result<u64, Pending>)> {
    launch(comm, stream, desc, send, recv, timeout, true)
}

/// The checks, the ticket and the task description of a collective; a group already
/// aborted fails here (dropping the job passes its turn).
fn claim(
    comm: &Communicator,
    desc: OpDesc,
    send: Option<Region>,
    recv: Option<Region>,
    timeout: Option<Duration>,
) -> crate::Result<(Job, EngineDesc)> {
    check_regions(&desc, comm.world(), send.as_ref(), recv.as_ref()).map_err(Error::Collective)?;
    let bytes = send.as_ref().or(recv.as_ref()).map_or(0, |r| r.len) as u64;
    let ticket = comm.claim(desc.kind).map_err(Error::Collective)?;
    let job = Job {
        comm: comm.clone(),
        ticket,
        desc,
        send,
        recv,
        timeout,
        ran: false,
    };
    if let Some(e) = comm.aborted_error(ticket.seq, desc) {
        return Err(Error::Collective(e));
    }
    let d = EngineDesc {
        name: Some(desc.kind.hccl_name()),
        ..EngineDesc::new(TaskKind::HostFunc, bytes)
    };
    Ok((job, d))
}

fn launch(
    comm: &Communicator,
    stream: &Stream,
    desc: OpDesc,
    send: Option<Region>,
    recv: Option<Region>,
    timeout: Option<Duration>,
    here: bool,
) -> crate::Result<(u64, Result<u64, Pending>)> {
    let (job, d) = claim(comm, desc, send, recv, timeout)?;
    let seq = job.ticket.seq;
    let op = Box::new(move || job.run());
    let r = if here {
        stream.try_launch_host_here(op, d)?
    } else {
        stream.try_launch_described(Engine::Host, op, d)?
    };
    Ok((seq, r))
}

/// Whether a blocking collective may run on the calling thread with no task on `stream`
/// (the direct path; the caller adds its own conditions: nothing pending that the call
/// must wait for): the stream is idle and usable, no profiler or sanitizer expects its
/// tasks, and this thread may block (not a runtime thread). The stream is the group's
/// own communication stream, whose collectives the communicator (tickets) or the `mpi`
/// exchange's lock serialise, so nothing else runs on it meanwhile.
pub fn direct_ok(stream: &Stream) -> bool {
    !crate::profiler::active()
        && !crate::sanitizer::on()
        && !crate::thread_role::is_runtime_thread()
        && stream.is_idle()
        && stream.is_usable()
}

/// A blocking collective on the calling thread, no task ([`direct_ok`] held: the caller
/// checked it). Returns its sequence number and, when it failed, the launch of a task of
/// `stream` that fails with its error (the stream's sticky error, raised where the result
/// is waited for, as on the task path). A group already aborted fails here, as [`enqueue`].
pub fn run_now(
    comm: &Communicator,
    stream: &Stream,
    desc: OpDesc,
    send: Option<Region>,
    recv: Option<Region>,
    timeout: Option<Duration>,
) -> crate::Result<(u64, Option<Result<u64, Pending>>)> {
    let (mut job, d) = claim(comm, desc, send, recv, timeout)?;
    let seq = job.ticket.seq;
    job.ran = true;
    let e = match comm.execute(job.ticket, desc, job.send.as_ref(), job.recv.as_ref(), timeout) {
        Ok(()) => return Ok((seq, None)),
        Err(e) => e,
    };
    let op = Box::new(move || Err(TaskError::Collective(e)));
    Ok((seq, Some(stream.try_launch_host_here(op, d)?)))
}

/// [`reduce`](reduce::reduce) over byte slices (benchmarks and tests): `dst = srcs[0] ∘
/// srcs[1] ∘ ...` element-wise in order. Panics if a slice is shorter than `nelem`
/// elements.
pub fn reduce_slices(dst: &mut [u8], srcs: &[&[u8]], nelem: usize, dtype: HcclDataType, op: ReduceOp) {
    let n = nelem * dtype.size();
    assert!(!srcs.is_empty() && dst.len() >= n && srcs.iter().all(|s| s.len() >= n));
    let ptrs: Vec<*const u8> = srcs.iter().map(|s| s.as_ptr()).collect();
    // SAFETY: every slice holds `n` bytes (asserted); `dst` is borrowed mutably, so it
    // cannot overlap the shared `srcs`.
    unsafe { reduce::reduce(dst.as_mut_ptr(), &ptrs, nelem, dtype, op) }
}
