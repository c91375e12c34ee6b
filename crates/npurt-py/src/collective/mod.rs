//! `npurt._npurt._Comm` and the communicator constructors behind `npurt.distributed` and
//! `npurt.hccl`: argument conversion only (the engine is `npurt_core::collective`).
//! Buffers are DeviceArrays (contiguous), DeviceBuffers or `_BufferView`s (acl pointers).

mod funcs;
mod mpi;
mod mpi_sync;
mod sync;

use crate::args::{int_arg, timeout_arg, type_name};
use crate::array::PyArray;
use crate::errors::{to_py, type_error, value_error, IntoPy};
use crate::memory::as_native;
use crate::stream::{stream_or_current, submit};
use crate::view::PyBufferView;
use npurt_core::collective::{
    self as coll, CollKind, CollectiveError, Communicator, HcclDataType, OpDesc, ReduceOp, Region,
};
use npurt_core::memory::{AnyBuffer, Buffer};
use npurt_core::{Error, Stream};
use npurt_kernels::DeviceArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::time::Duration;

/// One rank's communicator.
#[pyclass(module = "npurt", name = "_Comm", frozen)]
pub(crate) struct PyComm {
    c: Communicator,
    /// Per communication stream, where the current stream was when `run_sync` last left it.
    marks: sync::Marks,
}

fn coll_err(e: CollectiveError) -> PyErr {
    to_py(Error::Collective(e))
}

fn group_timeout(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Duration> {
    Ok(timeout_arg(obj)?.unwrap_or_else(coll::default_timeout))
}

/// A buffer argument: the region and, for arrays, the array (stream ordering).
fn region(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<(Region, Option<DeviceArray>)> {
    // The native array itself (the Python front passes `t._a`), else its wrapper's `_a`
    // (looked up only then: a failed lookup builds an AttributeError).
    let native = match obj.cast::<PyArray>() {
        Ok(_) => obj.clone(),
        Err(_) => obj.getattr("_a").ok().unwrap_or_else(|| obj.clone()),
    };
    if let Ok(a) = native.cast::<PyArray>() {
        let a = &a.get().a;
        if !a.tensor().is_contiguous() {
            return Err(value_error(format!(
                "{what} must be a contiguous DeviceArray (use npurt.ascontiguousarray)"
            )));
        }
        let r = Region::of(a.buffer(), a.offset(), a.tensor().nbytes());
        return Ok((r, Some(a.clone())));
    }
    if let Ok(v) = native.cast::<PyBufferView>() {
        let v = v.get().view();
        if let AnyBuffer::Device(b) = v.buffer() {
            return Ok((Region::of(b, v.offset(), v.nbytes()), None));
        }
    }
    match as_native(&native)? {
        Some(AnyBuffer::Device(b)) => Ok((Region::of(&b, 0, b.nbytes()), None)),
        _ => Err(type_error(format!(
            "{what} must be an npurt.DeviceArray, DeviceBuffer or device pointer view, not {}",
            type_name(obj)
        ))),
    }
}

fn dtype_of(obj: &Bound<'_, PyAny>) -> PyResult<HcclDataType> {
    if let Ok(name) = obj.extract::<String>() {
        return HcclDataType::from_name(&name)
            .ok_or_else(|| type_error(format!("dtype {name:?} is not supported by collectives")));
    }
    let v = int_arg(obj, "dtype", 0, u32::MAX as i64)? as u32;
    HcclDataType::from_u32(v).ok_or_else(|| value_error(format!("HcclDataType {v} is not supported")))
}

#[pymethods]
impl PyComm {
    #[getter]
    fn rank(&self) -> u32 {
        self.c.rank()
    }
    #[getter]
    fn world(&self) -> u32 {
        self.c.world()
    }
    #[getter]
    fn transport(&self) -> &'static str {
        match self.c.transport() {
            coll::Transport::Local => "local",
            coll::Transport::Shm => "shm",
        }
    }
    /// Collectives called so far.
    #[getter]
    fn seq(&self) -> u64 {
        self.c.seq()
    }
    #[getter]
    fn timeout(&self) -> f64 {
        self.c.timeout().as_secs_f64()
    }
    fn set_timeout(&self, timeout: &Bound<'_, PyAny>) -> PyResult<()> {
        self.c.set_timeout(group_timeout(Some(timeout))?);
        Ok(())
    }
    #[getter]
    fn is_destroyed(&self) -> bool {
        self.c.is_destroyed()
    }
    #[getter]
    fn is_aborted(&self) -> bool {
        self.c.is_aborted()
    }
    /// Leaves the group (waiting peers get RankFailedError).
    fn destroy(&self) {
        self.c.destroy()
    }
    /// The progress board: `(rank, seq, collective, phase, state, pid, heartbeat_ms)` rows.
    fn board(&self) -> Vec<(u32, u64, String, u64, u32, u32, u64)> {
        self.c.board_rows()
    }

    /// Queues a collective on `stream` (None: the current stream); returns its sequence
    /// number and the stream's task count including it (the target of [`_wait_task`]).
    /// `count` is HCCL's (see `OpDesc`); `root` the root or peer rank. `run_here`: if
    /// `stream` is idle, run it on this thread without the GIL and return when it is done
    /// (`collective::enqueue_or_run`).
    #[pyo3(signature = (kind, send, recv, count, dtype, op=None, root=None, stream=None, timeout=None, run_here=false))]
    #[allow(clippy::too_many_arguments)]
    fn enqueue(
        &self,
        py: Python<'_>,
        kind: &str,
        send: Option<&Bound<'_, PyAny>>,
        recv: Option<&Bound<'_, PyAny>>,
        count: &Bound<'_, PyAny>,
        dtype: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        root: Option<&Bound<'_, PyAny>>,
        stream: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        run_here: bool,
    ) -> PyResult<(u64, u64)> {
        let kind = CollKind::from_name(kind).ok_or_else(|| value_error(format!("unknown collective {kind:?}")))?;
        let small = |o: Option<&Bound<'_, PyAny>>, what: &str| -> PyResult<u32> {
            match o {
                Some(o) if !o.is_none() => Ok(int_arg(o, what, 0, u32::MAX as i64)? as u32),
                _ => Ok(0),
            }
        };
        let opv = small(op, "op")?;
        let desc = OpDesc {
            kind,
            dtype: dtype_of(dtype)?,
            op: ReduceOp::from_u32(opv).ok_or_else(|| value_error(format!("unknown reduce op {opv}")))?,
            count: int_arg(count, "count", 0, i64::MAX)? as u64,
            root: small(root, "root")?,
        };
        let timeout = timeout_arg(timeout)?;
        let s = stream_or_current(stream)?;
        let side = |o: Option<&Bound<'_, PyAny>>, what| o.filter(|o| !o.is_none()).map(|o| region(o, what)).transpose();
        let (send, recv) = (side(send, "send")?, side(recv, "recv")?);
        for (_, a) in send.iter().chain(recv.iter()) {
            if let Some(a) = a {
                a.prepare_on(&s).py_err()?;
            }
        }
        let out = recv.as_ref().and_then(|r| r.1.clone());
        let seq = self.launch(py, &s, desc, send.map(|r| r.0), recv.map(|r| r.0), timeout, run_here)?;
        if let Some(a) = out {
            a.mark_written(&s);
        }
        Ok((seq, s.submitted_count()))
    }

    /// `npurt.distributed`'s blocking collective (in place: `all_reduce`, `broadcast`,
    /// `reduce`; with `output`: `all_gather`, `reduce_scatter`, `all_to_all`; with
    /// `async_op=False` and no per-call timeout) in one call: see
    /// [`sync::run`]. False when the caller must take the general path.
    #[pyo3(signature = (kind, array, op, root, streams, run_here=true, output=None))]
    #[allow(clippy::too_many_arguments)]
    fn run_sync(
        &self,
        py: Python<'_>,
        kind: &str,
        array: &Bound<'_, PyAny>,
        op: &Bound<'_, PyAny>,
        root: u32,
        streams: &Bound<'_, PyDict>,
        run_here: bool,
        output: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        sync::run(
            self,
            py,
            kind,
            array,
            op,
            root,
            streams,
            run_here,
            output.filter(|o| !o.is_none()),
        )
    }
}

impl PyComm {
    pub(super) fn new(c: Communicator) -> Self {
        PyComm {
            c,
            marks: sync::Marks::default(),
        }
    }

    /// Queues (or, `run_here` and `s` idle, runs on this thread) a collective whose buffers
    /// were checked and ordered on `s`; returns its sequence number.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
        s: &Stream,
        desc: OpDesc,
        send: Option<Region>,
        recv: Option<Region>,
        timeout: Option<Duration>,
        run_here: bool,
    ) -> PyResult<u64> {
        // A stream whose last task just completed on a preempted thread is as good as idle.
        let here = run_here && (s.is_idle() || py.detach(|| s.settle(SETTLE)));
        let (seq, r) = if here {
            let r = py.detach(|| {
                coll::with_interrupt(signal_pending, || {
                    coll::enqueue_or_run(&self.c, s, desc, send, recv, timeout)
                })
            });
            if let Some(e) = PyErr::take(py) {
                return Err(e); // a signal (KeyboardInterrupt) ended the collective
            }
            r
        } else {
            coll::enqueue(&self.c, s, desc, send, recv, timeout)
        }
        .py_err()?;
        submit(py, s, Ok(r))?;
        Ok(seq)
    }
}

/// How long `enqueue(run_here=True)` waits for the owner of a stream with nothing pending
/// to let go of it (`Stream::settle`): else the call is queued, and so are the calls after
/// it while it runs (each finds the stream busy), for a whole burst of collectives.
pub(super) const SETTLE: Duration = Duration::from_micros(200);

/// The interrupt check of a collective run on a Python thread (`collective::with_interrupt`):
/// runs the signal handlers; an exception they raise (KeyboardInterrupt) stays set for the
/// caller to raise.
pub(super) fn signal_pending() -> bool {
    Python::attach(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            e.restore(py);
            true
        }
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyComm>()?;
    mpi::register(m)?;
    funcs::register(m)
}
