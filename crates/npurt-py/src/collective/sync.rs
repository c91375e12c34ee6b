//! `_Comm.run_sync`: `npurt.distributed`'s blocking in-place collective in one native call.
//!
//! `dist.all_reduce(t)` (also `broadcast`, `reduce`; and with an `output` array,
//! `all_gather_into_tensor`, `reduce_scatter_tensor`, `all_to_all_single`) with
//! `async_op=False` and no per-call timeout does what `ProcessGroup.run` does for it,
//! without the Python in between: the arrays' checks, HCCL's count and dtype, the current
//! stream, ordering the group's communication stream after it, the collective (on this
//! thread when that stream is idle: `enqueue_or_run`), and ordering the current stream
//! after it. Every rule is the general path's; whenever the general path would do
//! something else (no communication stream for the array's device yet, a stream with an
//! error, the array on another device than the current context, an output on another
//! device or of another dtype than the input, a non-contiguous array or a dtype
//! collectives do not take) this returns False before doing anything, and
//! `ProcessGroup.run` handles the call.

use super::PyComm;
use crate::array::PyArray;
use crate::errors::IntoPy;
use crate::stream::PyStream;
use npurt_core::collective::{CollKind, HcclDataType, OpDesc, ReduceOp, Region};
use npurt_core::{current, Stream};
use npurt_kernels::DeviceArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;

/// `(communication stream id, current stream id, the current stream's submitted count)`
/// when a `run_sync` last left them: the communication stream is then ordered after every
/// task of the current stream up to that count (except the current stream's waits for it),
/// so if nothing was submitted since, it need not wait again (`ProcessGroup._marks`' rule:
/// back-to-back collectives would otherwise hop through the current stream each time).
#[derive(Default)]
pub(super) struct Marks(Mutex<Vec<(u64, u64, u64)>>);

impl Marks {
    fn get(&self, cs: u64) -> Option<(u64, u64)> {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.iter().find(|m| m.0 == cs).map(|m| (m.1, m.2))
    }

    fn set(&self, cs: u64, cur: u64, submitted: u64) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match m.iter_mut().find(|m| m.0 == cs) {
            Some(e) => *e = (cs, cur, submitted),
            None => m.push((cs, cur, submitted)),
        }
    }
}

/// A blocking collective's arguments, checked, with its streams (see [`check`]); the
/// arrays borrowed from their Python objects (no clone of their views on the hot path).
pub(super) struct Checked<'a> {
    pub kind: CollKind,
    pub a: &'a DeviceArray,
    pub out: Option<&'a DeviceArray>,
    pub dtype: HcclDataType,
    pub op: ReduceOp,
    pub cs: Stream,
    pub cur: Stream,
}

/// The general path's rules for a one-call collective (`array`: the native array, `t._a`;
/// `output`: the native output of the two-buffer collectives): None when the general path
/// must take the call (nothing done).
pub(super) fn check<'a>(
    kind: &str,
    array: &'a Bound<'_, PyAny>,
    op: &Bound<'_, PyAny>,
    streams: &Bound<'_, PyDict>,
    output: Option<&'a Bound<'_, PyAny>>,
) -> PyResult<Option<Checked<'a>>> {
    let kind = match (CollKind::from_name(kind), output.is_some()) {
        (Some(k @ (CollKind::AllReduce | CollKind::Broadcast | CollKind::Reduce)), false) => k,
        (Some(k @ (CollKind::AllGather | CollKind::ReduceScatter | CollKind::AllToAll)), true) => k,
        _ => return Ok(None),
    };
    let Ok(arr) = array.cast::<PyArray>() else {
        return Ok(None);
    };
    let a = &arr.get().a;
    let t = a.tensor();
    // The output of a two-buffer collective: same device and dtype as the input, contiguous.
    let out = match output.map(|o| o.cast::<PyArray>()) {
        None => None,
        Some(Ok(o)) => Some(&o.get().a),
        Some(Err(_)) => return Ok(None),
    };
    if let Some(o) = &out {
        let ot = o.tensor();
        if o.buffer().device() != a.buffer().device() || ot.dtype() != t.dtype() || !ot.is_contiguous() {
            return Ok(None);
        }
    }
    let op = op.extract::<u32>().ok().and_then(ReduceOp::from_u32);
    let (Some(dtype), Some(op)) = (HcclDataType::from_name(t.dtype().name()), op) else {
        return Ok(None);
    };
    if !t.is_contiguous() {
        return Ok(None);
    }
    let dev = a.buffer().device();
    let Some(cs) = streams.get_item(dev)? else {
        return Ok(None);
    };
    let Ok(cs) = cs.cast::<PyStream>() else {
        return Ok(None);
    };
    let cs = cs.get().s.clone();
    let cur = current::current_stream().py_err()?;
    // (The communication stream made current: the general path gives the group a fresh one.)
    if cur.device() != dev || !cs.is_usable() || !cur.is_usable() || cur == cs {
        return Ok(None);
    }
    Ok(Some(Checked {
        kind,
        a,
        out,
        dtype,
        op,
        cs,
        cur,
    }))
}

impl Checked<'_> {
    /// Whether the call may take the direct path (`collective::direct_ok` for the
    /// communication stream, and nothing pending on the current stream or on the arrays
    /// that the call must wait for): then no ordering is needed, the call returns when
    /// the collective is done. The arrays' checks are [`order`](Self::order)'s.
    /// A stream whose last task just completed on a preempted thread counts as idle
    /// (`Stream::settle`, GIL released), as for the run-here task.
    pub(super) fn direct(&self, py: Python<'_>) -> PyResult<bool> {
        let idle = self.cs.is_idle() || py.detach(|| self.cs.settle(super::SETTLE));
        Ok(idle
            && npurt_core::collective::direct_ok(&self.cs)
            && !self.cur.has_pending_work()
            && self.a.ready_on(&self.cs).py_err()?
            && match self.out {
                Some(o) => o.ready_on(&self.cs).py_err()?,
                None => true,
            })
    }

    /// Orders the communication stream after the current one (unless `marks` says nothing
    /// came since) and after the arrays' writers.
    pub(super) fn order(&self, marks: &Marks) -> PyResult<()> {
        let (cs, cur) = (&self.cs, &self.cur);
        if marks.get(cs.id()) != Some((cur.id(), cur.submitted_count())) {
            cs.wait_stream(cur).py_err()?;
        }
        self.a.prepare_on(cs).py_err()?;
        if let Some(o) = &self.out {
            o.prepare_on(cs).py_err()?;
        }
        Ok(())
    }

    /// After the launch: the output's last writer is the communication stream, the current
    /// stream waits for it. As `ProcessGroup.run`: a failed collective left its error on
    /// the communication stream (raised where the result is read), not here.
    pub(super) fn finish(&self, marks: &Marks) -> PyResult<()> {
        let (cs, cur) = (&self.cs, &self.cur);
        self.out.unwrap_or(self.a).mark_written(cs);
        if let Err(e) = cur.wait_stream(cs) {
            if cs.is_usable() || !cur.is_usable() {
                return Err(e).py_err();
            }
        }
        marks.set(cs.id(), cur.id(), cur.submitted_count());
        Ok(())
    }
}

/// [`PyComm::run_sync`]: `array` is the native array (`t._a`; the input of the
/// two-buffer collectives), `output` the native output array of those (None for the
/// in-place ones), `op` a `ReduceOp` value, `root` the group rank of the root, `streams` the group's
/// communication streams by device (`ProcessGroup._streams`), `run_here` the backend's
/// host-synchronous switch. True when the collective ran (or was queued) and the current
/// stream is ordered after it; False (nothing done) when the general path must take it.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    comm: &PyComm,
    py: Python<'_>,
    kind: &str,
    array: &Bound<'_, PyAny>,
    op: &Bound<'_, PyAny>,
    root: u32,
    streams: &Bound<'_, PyDict>,
    run_here: bool,
    output: Option<&Bound<'_, PyAny>>,
) -> PyResult<bool> {
    let Some(c) = check(kind, array, op, streams, output)? else {
        return Ok(false);
    };
    let direct = run_here && c.direct(py)?;
    if !direct {
        c.order(&comm.marks)?;
    }
    let (a, t) = (&c.a, c.a.tensor());
    // HCCL's count, as `hccl_count`: the send count for all_gather, the receive count for
    // reduce_scatter, elements per peer for all_to_all, else the buffer's.
    let count = match (c.kind, &c.out) {
        (CollKind::ReduceScatter, Some(o)) => o.tensor().numel() as u64,
        (CollKind::AllToAll, _) => (t.numel() / comm.c.world().max(1) as usize) as u64,
        _ => t.numel() as u64,
    };
    let desc = OpDesc {
        kind: c.kind,
        dtype: c.dtype,
        op: c.op,
        count,
        root,
    };
    let send = Region::of(a.buffer(), a.offset(), t.nbytes());
    let recv = match &c.out {
        Some(o) => Region::of(o.buffer(), o.offset(), o.tensor().nbytes()),
        // In place: the send side's handle keeps the buffer alive for both.
        None => Region { keep: None, ..send },
    };
    if direct {
        let r = py.detach(|| {
            npurt_core::collective::with_interrupt(super::signal_pending, || {
                npurt_core::collective::run_now(&comm.c, &c.cs, desc, Some(send), Some(recv), None)
            })
        });
        if let Some(e) = PyErr::take(py) {
            return Err(e); // a signal (KeyboardInterrupt) ended the collective
        }
        match r.py_err()?.1 {
            None => return Ok(true),
            // failed: its error is the communication stream's, the current one waits for it
            Some(failed) => crate::stream::submit(py, &c.cs, Ok(failed))?,
        }
    } else {
        comm.launch(py, &c.cs, desc, Some(send), Some(recv), None, run_here)?;
    }
    c.finish(&comm.marks)?;
    Ok(true)
}
