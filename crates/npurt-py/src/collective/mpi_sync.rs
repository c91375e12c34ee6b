//! `_MpiExchange.run_sync`: the `mpi` backend's blocking one-phase collective in one native
//! call (`ProcessGroup.one_call`), and the host task that runs it on the communication
//! stream. No `unsafe`: MPI is `npurt_core::collective::mpi`'s.

use super::mpi::{deadline, lock, PyMpiExchange};
use super::signal_pending;
use super::sync::check;
use super::SETTLE;
use crate::stream::submit;
use npurt_core::collective::mpi::{Call, Exchange, Outcome};
use npurt_core::collective::{CollKind, Region};
use npurt_core::error::TaskError;
use npurt_core::profiler::TaskKind;
use npurt_core::{Engine, EngineDesc, EngineOp};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

impl PyMpiExchange {
    /// `dist.all_reduce(t)` and the other one-call collectives (`sync::check`'s) on the
    /// one-phase path with no Python in between: the checks and stream ordering of
    /// `_Comm.run_sync`, the collective number, then the exchange as a host task on the
    /// communication stream (this thread runs it when that stream is idle, GIL released).
    /// Calls above the one-phase limit whose data phase runs natively too
    /// (`collective::mpi::native_data`) take this path as two-phase calls: the headers,
    /// then the data on the data communicator, in the same host task.
    /// False (nothing done) when the general path must take the call: the path off (group
    /// failed, a rank left, closed), a call the checks or both native rules refuse, or
    /// shapes the general path reports as errors.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn one_call(
        &self,
        py: Python<'_>,
        kind: &str,
        array: &Bound<'_, PyAny>,
        op: &Bound<'_, PyAny>,
        root: u32,
        streams: &Bound<'_, PyDict>,
        output: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if !self.fast.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let Some(c) = check(kind, array, op, streams, output)? else {
            return Ok(false);
        };
        let n = self.n;
        let numel = c.a.tensor().numel();
        // The general path's shape rules (`_shape_error`): anything else is its error to raise.
        let shapes_ok = match (c.kind, &c.out) {
            (CollKind::AllReduce | CollKind::Broadcast | CollKind::Reduce, None) => true,
            (CollKind::AllGather, Some(o)) => o.tensor().numel() == numel * n,
            (CollKind::ReduceScatter, Some(o)) => numel % n == 0 && o.tensor().numel() == numel / n,
            (CollKind::AllToAll, Some(o)) => numel % n == 0 && o.tensor().numel() == numel,
            _ => false,
        };
        if !shapes_ok || (root as usize) >= n {
            return Ok(false);
        }
        let mut call = Call {
            kind: c.kind,
            seq: 0,
            dtype: c.dtype,
            count: numel as u64,
            op: c.op,
            root,
            eager: true,
        };
        // the one rule of which calls take the one-phase path (`_mpi_small.eligible` asks it too)
        let (limit, spread) = (self.limit.load(Ordering::SeqCst), self.spread.load(Ordering::SeqCst));
        if !npurt_core::collective::mpi::one_phase(&call, n, limit, spread) {
            call.eager = false;
            if !npurt_core::collective::mpi::native_data(&call, n) {
                return Ok(false);
            }
        }
        let handler = match lock(&self.handler).clone() {
            Some(h) => h,
            None => return Ok(false),
        };
        c.order(&self.marks)?;
        let s = &c.cs;
        let tail = {
            let mut t = lock(&self.tails);
            t.iter().position(|e| e.0 == s.id()).map(|i| t.swap_remove(i).1)
        };
        if let Some(tail) = tail {
            if s.submitted_count() == tail && s.has_pending_work() {
                // nothing came since this group's last (queued) call: wait for it (a failed
                // one: the launch below reports the stream's error)
                let _ = py.detach(|| s.wait_completed(tail, None));
            }
        }
        call.seq = self.next_seq();
        let a = &c.a;
        let send = Region::of(a.buffer(), a.offset(), a.tensor().nbytes());
        let recv = match &c.out {
            Some(o) => Region::of(o.buffer(), o.offset(), o.tensor().nbytes()),
            None => send.clone(),
        };
        // one-phase: the payload (broadcast: the root's buffer); two-phase: the input
        let src = if c.kind == CollKind::Broadcast && call.eager {
            recv.clone()
        } else {
            send.clone()
        };
        let arrays = (array.clone().unbind(), output.map(|o| o.clone().unbind()));
        let ran = Arc::new(AtomicBool::new(false));
        let job = Job {
            ran: ran.clone(),
            caller: std::thread::current().id(),
            stats: self.stats.clone(),
            x: self.x.clone(),
            fast: self.fast.clone(),
            notice: self.notice.clone(),
            timeout_ns: self.timeout_ns.load(Ordering::SeqCst),
            call,
            src,
            recv,
            handler,
            arrays,
        };
        let desc = EngineDesc {
            name: Some(c.kind.hccl_name()),
            ..EngineDesc::new(TaskKind::HostFunc, a.tensor().nbytes() as u64)
        };
        let op: EngineOp = Box::new(move || job.run());
        let here = s.is_idle() || py.detach(|| s.settle(SETTLE));
        let r = if here {
            py.detach(|| s.try_launch_host_here(op, desc))
        } else {
            s.try_launch_described(Engine::Host, op, desc)
        };
        submit(py, s, r)?;
        if !ran.load(Ordering::SeqCst) {
            lock(&self.tails).push((s.id(), s.submitted_count()));
        }
        c.finish(&self.marks)?;
        Ok(true)
    }
}

/// One one-call collective, as a host task of the communication stream.
struct Job {
    ran: Arc<AtomicBool>,
    caller: std::thread::ThreadId,
    stats: Arc<[AtomicU64; 3]>,
    x: Arc<Mutex<Exchange>>,
    fast: Arc<AtomicBool>,
    notice: Arc<AtomicUsize>,
    timeout_ns: u64,
    call: Call,
    src: Region,
    recv: Region,
    handler: Arc<Py<PyAny>>,
    arrays: (Py<PyAny>, Option<Py<PyAny>>),
}

impl Job {
    fn run(self) -> Result<(), TaskError> {
        self.ran.store(true, Ordering::SeqCst);
        let timeout = (self.timeout_ns != u64::MAX).then(|| Duration::from_nanos(self.timeout_ns));
        let start = Instant::now();
        let end = timeout.map_or_else(|| deadline(f64::INFINITY), |t| start + t);
        // 5: not started (the group failed or a rank left since: Python decides)
        let (st, info) = if self.fast.load(Ordering::SeqCst) {
            let mut x = lock(&self.x);
            let notice = self.notice.load(Ordering::SeqCst);
            let (send, recv) = (self.src.clone(), self.recv.clone());
            let o = if self.call.eager {
                x.run(self.call, Some(&send), Some(recv), end, notice, &mut signal_pending)
            } else {
                x.run_two_phase(self.call, Some(send), Some(recv), end, notice, &mut signal_pending)
            };
            match o {
                Outcome::Done => {
                    let queued = std::thread::current().id() != self.caller;
                    self.stats[queued as usize].fetch_add(1, Ordering::SeqCst);
                    if !self.call.eager {
                        self.stats[2].fetch_add(1, Ordering::SeqCst);
                    }
                    return Ok(());
                }
                Outcome::Timeout(m) => (1, Info::Ranks(m)),
                Outcome::Desync => (2, Info::Bytes(x.headers())),
                Outcome::Notice => (3, Info::None),
                Outcome::Mpi(code) => (4, Info::Code(code)),
                Outcome::Interrupted => (6, Info::None),
            }
        } else {
            (5, Info::None)
        };
        let c = self.call;
        let timeout_s = timeout.map_or(f64::INFINITY, |t| t.as_secs_f64());
        let left_s = end.saturating_duration_since(Instant::now()).as_secs_f64();
        Python::attach(|py| {
            let r = (|| -> PyResult<()> {
                let info: Py<PyAny> = match info {
                    Info::None => py.None(),
                    Info::Ranks(m) => m.into_pyobject(py)?.into_any().unbind(),
                    Info::Bytes(b) => PyBytes::new(py, &b).into_any().unbind(),
                    Info::Code(code) => code.into_pyobject(py)?.into_any().unbind(),
                };
                let out = self.arrays.1.as_ref().map(|o| o.clone_ref(py));
                let args = (
                    c.kind as u32,
                    c.seq,
                    c.dtype as u32,
                    c.count,
                    c.op as u32,
                    c.root,
                    timeout_s,
                    left_s,
                    st,
                    info,
                    self.arrays.0.clone_ref(py),
                    out,
                );
                self.handler.call1(py, args).map(drop)
            })();
            r.map_err(|e| {
                let tb = e.traceback(py).and_then(|t| t.format().ok()).unwrap_or_default();
                TaskError::HostCallback(format!("{}{}", tb, e))
            })
        })
    }
}

enum Info {
    None,
    Ranks(Vec<u32>),
    Bytes(Vec<u8>),
    Code(i32),
}
