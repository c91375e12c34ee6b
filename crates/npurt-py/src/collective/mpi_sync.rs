//! `_MpiExchange.run_sync`: the `mpi` backend's blocking one-phase collective in one native
//! call (`ProcessGroup.one_call`), and the host task that runs it on the communication
//! stream. When nothing is pending that the call must wait for, and no profiler or
//! sanitizer watches the streams, the exchange runs at once on the calling thread, with no
//! task (the direct path); only an exchange that did not complete becomes a task then, so
//! its error lands on the communication stream as on the task path. No `unsafe`: MPI is
//! `npurt_core::collective::mpi`'s.

use super::mpi::{deadline, lock, PyMpiExchange, Shared};
use super::signal_pending;
use super::sync::check;
use super::SETTLE;
use crate::stream::submit;
use npurt_core::collective::mpi::{Call, Outcome};
use npurt_core::collective::{CollKind, Region};
use npurt_core::error::TaskError;
use npurt_core::profiler::TaskKind;
use npurt_core::{Engine, EngineDesc, EngineOp};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl PyMpiExchange {
    /// `dist.all_reduce(t)` and the other one-call collectives (`sync::check`'s) on the
    /// one-phase path with no Python in between: the checks and stream ordering of
    /// `_Comm.run_sync`, the collective number, then the exchange: at once on this thread,
    /// with no task, when `Checked::direct` holds (GIL released; a failure then becomes a
    /// task that runs the handler), else as a host task on the communication stream (this
    /// thread runs it when that stream is idle, GIL released).
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
        if !self.sh.fast.load(Ordering::Relaxed) {
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
        // ... and the buffers' overlap rule (`collective::overlap_error`, which it raises)
        let span = |x: &npurt_kernels::DeviceArray| (x.buffer().addr() + x.offset(), x.tensor().nbytes());
        let overlap = c
            .out
            .is_some_and(|o| npurt_core::collective::overlap_error(c.kind, span(c.a), span(o)).is_some());
        if !shapes_ok || overlap || (root as usize) >= n {
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
        let s = &c.cs;
        // The direct path (`Checked::direct`): the stream's ordering holds by the call
        // returning when the collective is done.
        let direct = c.direct(py)?;
        if !direct {
            c.order(&self.marks)?;
        }
        // (a queued call's count; direct: the stream is idle, nothing to wait for)
        let tail = (!direct).then(|| {
            let mut t = lock(&self.tails);
            t.iter().position(|e| e.0 == s.id()).map(|i| t.swap_remove(i).1)
        });
        if let Some(tail) = tail.flatten() {
            if s.submitted_count() == tail && s.has_pending_work() {
                // nothing came since this group's last (queued) call: wait for it (a failed
                // one: the launch below reports the stream's error)
                let _ = py.detach(|| s.wait_completed(tail, None));
            }
        }
        call.seq = self.next_seq();
        let a = &c.a;
        // The regions hold the buffers alive while the task is queued and, the receive
        // side, while an exchange an abort notice paused waits to be resumed. The input is
        // also the payload (one-phase broadcast: the root's buffer, which is in place).
        let src = Region::of(a.buffer(), a.offset(), a.tensor().nbytes());
        let recv = match c.out {
            Some(o) => Region::of(o.buffer(), o.offset(), o.tensor().nbytes()),
            None => src.clone(),
        };
        let timeout_ns = self.timeout_ns.load(Ordering::Relaxed);
        let work = if direct {
            let (sh, end) = (&*self.sh, end_of(timeout_ns));
            match py.detach(|| exchange(sh, call, src, recv, end)) {
                Ok(()) => {
                    count(sh, &call, false);
                    return Ok(true);
                }
                Err((st, info)) => Work::Settle(st, info, end),
            }
        } else {
            Work::Exchange(src, recv)
        };
        // The arrays, for the handler of a failure: the caller's clone of the `Arc` is
        // dropped last (with the GIL) when the task ran here, so no deferred decref.
        let arrays = Arc::new((array.clone().unbind(), output.map(|o| o.clone().unbind())));
        let keep = arrays.clone();
        RAN.with(|r| r.set(false));
        let job = Job {
            sh: self.sh.clone(),
            timeout_ns,
            call,
            work,
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
        // (not run by this thread: queued, or taken by another; the next call waits for it)
        if !RAN.with(|r| r.get()) {
            lock(&self.tails).push((s.id(), s.submitted_count()));
        }
        drop(keep);
        c.finish(&self.marks)?;
        Ok(true)
    }
}

thread_local! {
    /// Set by a [`Job`] when it starts, on the thread that runs it: the caller clears it
    /// before the launch and reads it after (false: queued, or run by another thread).
    static RAN: Cell<bool> = const { Cell::new(false) };
}

/// The deadline of a call that starts now, `timeout_ns` (u64::MAX: none) from now.
fn end_of(timeout_ns: u64) -> Instant {
    match timeout_ns {
        u64::MAX => deadline(f64::INFINITY),
        t => Instant::now() + Duration::from_nanos(t),
    }
}

/// Counts a call the native exchange completed (`queued`: on a runtime thread).
fn count(sh: &Shared, call: &Call, queued: bool) {
    sh.stats[queued as usize].fetch_add(1, Ordering::Relaxed);
    if !call.eager {
        sh.stats[2].fetch_add(1, Ordering::Relaxed);
    }
}

/// One call's exchange (the regions move into it: a pending exchange keeps them): Ok when
/// it completed the collective, else the status and its information for the handler
/// (5: not started, the group failed or a rank left since: Python decides).
fn exchange(sh: &Shared, call: Call, src: Region, recv: Region, end: Instant) -> Result<(), (u32, Info)> {
    if !sh.fast.load(Ordering::SeqCst) {
        return Err((5, Info::None));
    }
    let mut x = lock(&sh.x);
    let notice = sh.notice.load(Ordering::SeqCst);
    let o = if call.eager {
        x.run(call, Some(&src), Some(recv), end, notice, &mut signal_pending)
    } else {
        x.run_two_phase(call, Some(src), Some(recv), end, notice, &mut signal_pending)
    };
    Err(match o {
        Outcome::Done => return Ok(()),
        Outcome::Timeout(m) => (1, Info::Ranks(m)),
        Outcome::Desync => (2, Info::Bytes(x.headers())),
        Outcome::Notice => (3, Info::None),
        Outcome::Mpi(code) => (4, Info::Code(code)),
        Outcome::Interrupted => (6, Info::None),
    })
}

/// What a task does: the exchange (its regions), or, for a direct-path call that did not
/// complete, only the handler (status, information, the call's deadline).
enum Work {
    Exchange(Region, Region),
    Settle(u32, Info, Instant),
}

/// One one-call collective, as a host task of the communication stream.
struct Job {
    sh: Arc<Shared>,
    timeout_ns: u64,
    call: Call,
    work: Work,
    handler: Arc<Py<PyAny>>,
    arrays: Arc<(Py<PyAny>, Option<Py<PyAny>>)>,
}

impl Job {
    fn run(self) -> Result<(), TaskError> {
        RAN.with(|r| r.set(true));
        let (st, info, end) = match self.work {
            Work::Exchange(src, recv) => {
                let end = end_of(self.timeout_ns);
                match exchange(&self.sh, self.call, src, recv, end) {
                    Ok(()) => {
                        count(&self.sh, &self.call, npurt_core::thread_role::is_runtime_thread());
                        return Ok(());
                    }
                    Err((st, info)) => (st, info, end),
                }
            }
            Work::Settle(st, info, end) => (st, info, end),
        };
        let timeout = (self.timeout_ns != u64::MAX).then(|| Duration::from_nanos(self.timeout_ns));
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
