//! `npurt._npurt._MpiExchange`: the `mpi` backend's first exchange in native code
//! (`npurt_core::collective::mpi`), for `python/npurt/distributed/_mpi_comm.py`. Argument
//! conversion only; the GIL is released while MPI runs.

use super::{coll_err, region, signal_pending};
use crate::errors::value_error;
use npurt_core::collective::mpi::{Call, Exchange, Handles, Kind, MpiLib, Outcome};
use npurt_core::collective::CollectiveError;
use npurt_core::collective::{HcclDataType, ReduceOp};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// An internal collective error (`npurt.CollectiveError`'s internal class) naming `what`.
fn runtime_error(what: impl Into<String>) -> PyErr {
    coll_err(CollectiveError::internal("mpi", what))
}

/// The library, resolved once per process.
static LIB: OnceLock<Arc<MpiLib>> = OnceLock::new();

fn lib() -> PyResult<Arc<MpiLib>> {
    if let Some(l) = LIB.get() {
        return Ok(l.clone());
    }
    let l = Arc::new(MpiLib::open(None).map_err(runtime_error)?);
    Ok(LIB.get_or_init(|| l).clone())
}

fn deadline(timeout_s: f64) -> Instant {
    // (an infinite or huge timeout: a deadline far enough away)
    Instant::now() + Duration::from_secs_f64(timeout_s.clamp(0.0, 1e9))
}

/// One group's exchange object (see `Exchange`): created by `MpiComm` with mpi4py's handles.
#[pyclass(module = "npurt", name = "_MpiExchange", frozen)]
pub(crate) struct PyMpiExchange {
    x: Mutex<Exchange>,
}

/// `(status, info)`: 0 done (None), 1 timeout (the missing peers), 2 desync (every rank's
/// header, n × 64 bytes), 3 abort notice came (None; `resume` continues), 4 MPI error
/// (its code). A signal that interrupted the wait is raised.
fn result(py: Python<'_>, x: &Exchange, o: Outcome) -> PyResult<(u32, Py<PyAny>)> {
    Ok(match o {
        Outcome::Done => (0, py.None()),
        Outcome::Timeout(missing) => (1, missing.into_pyobject(py)?.into_any().unbind()),
        Outcome::Desync => (2, PyBytes::new(py, &x.headers()).into_any().unbind()),
        Outcome::Notice => (3, py.None()),
        Outcome::Mpi(code) => (4, code.into_pyobject(py)?.into_any().unbind()),
        Outcome::Interrupted => {
            return Err(PyErr::take(py).unwrap_or_else(|| runtime_error("interrupted")));
        }
    })
}

#[pymethods]
impl PyMpiExchange {
    /// `comm` / `byte`: `MPI._handleof` of the communicator and of `MPI.BYTE`;
    /// `request_size` / `status_size`: `MPI._sizeof(MPI.Request)` / `(MPI.Status)`;
    /// `undefined`: `MPI.UNDEFINED`; `row`: bytes of the largest message; `hot_s`: polls
    /// back to back this long.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        comm: usize,
        byte: usize,
        request_size: usize,
        status_size: usize,
        undefined: i32,
        rank: usize,
        size: usize,
        tag: i32,
        row: usize,
        hot_s: f64,
    ) -> PyResult<Self> {
        if size < 2 || rank >= size || row < 64 || request_size == 0 || status_size == 0 {
            return Err(value_error(format!("_MpiExchange: rank {rank} of {size}, row {row}")));
        }
        let h = Handles {
            comm,
            byte,
            request_size,
            status_size,
            undefined,
        };
        let hot = Duration::from_secs_f64(hot_s.clamp(0.0, 1.0));
        let x = Exchange::new(lib()?, h, rank, size, tag, row, hot)
            .map_err(|c| runtime_error(format!("MPI_Recv_init failed (MPI error {c})")))?;
        Ok(PyMpiExchange { x: Mutex::new(x) })
    }

    /// Starts a collective's exchange and waits for it (see `result`). `kind` / `dtype`:
    /// the header's codes; `send`: the input array (broadcast: the root's buffer), `recv`:
    /// the output, both native arrays or None; `timeout_s`: seconds left; `notice`: the
    /// abort-notice receive's handle (0: none).
    #[pyo3(signature = (kind, seq, dtype, count, op, root, eager, send, recv, timeout_s, notice))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        kind: u32,
        seq: u64,
        dtype: u32,
        count: u64,
        op: u32,
        root: u32,
        eager: bool,
        send: Option<&Bound<'_, PyAny>>,
        recv: Option<&Bound<'_, PyAny>>,
        timeout_s: f64,
        notice: usize,
    ) -> PyResult<(u32, Py<PyAny>)> {
        let call = Call {
            kind: Kind::from_code(kind).ok_or_else(|| value_error(format!("collective kind {kind}")))?,
            seq,
            dtype: HcclDataType::from_u32(dtype).ok_or_else(|| value_error(format!("dtype {dtype}")))?,
            count,
            op: ReduceOp::from_u32(op).unwrap_or(ReduceOp::Sum),
            root,
            eager,
        };
        let side = |o: Option<&Bound<'_, PyAny>>, what| o.filter(|o| !o.is_none()).map(|o| region(o, what)).transpose();
        let send = side(send, "send")?.map(|r| r.0);
        let recv = side(recv, "recv")?.map(|r| r.0);
        let mut x = self.lock()?;
        let end = deadline(timeout_s);
        let xr: &mut Exchange = &mut x;
        let o = py.detach(|| xr.run(call, send.as_ref(), recv, end, notice, &mut signal_pending));
        result(py, &x, o)
    }

    /// Continues the pending exchange after an abort notice that did not end it.
    fn resume(&self, py: Python<'_>, timeout_s: f64, notice: usize) -> PyResult<(u32, Py<PyAny>)> {
        let mut x = self.lock()?;
        if !x.pending() {
            return Err(runtime_error("_MpiExchange.resume: no exchange is pending"));
        }
        let end = deadline(timeout_s);
        let xr: &mut Exchange = &mut x;
        let o = py.detach(|| xr.resume(end, notice, &mut signal_pending));
        result(py, &x, o)
    }

    /// Whether an exchange is pending (MPI owns the buffers).
    #[getter]
    fn pending(&self) -> PyResult<bool> {
        Ok(self.lock()?.pending())
    }

    /// Frees the persistent receives (when nothing is pending).
    fn close(&self) -> PyResult<()> {
        self.lock()?
            .close()
            .map_err(|c| runtime_error(format!("MPI_Request_free failed (MPI error {c})")))
    }
}

impl PyMpiExchange {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Exchange>> {
        self.x
            .try_lock()
            .map_err(|_| runtime_error("_MpiExchange is in use by another thread"))
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMpiExchange>()
}
