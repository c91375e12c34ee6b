//! `npurt._npurt._MpiExchange`: the `mpi` backend's first exchange in native code
//! (`npurt_core::collective::mpi`), for `python/npurt/distributed/_mpi_comm.py`. Argument
//! conversion only; the GIL is released while MPI runs. The one-call path (`run_sync`) is
//! `mpi_sync.rs`.

use super::sync::Marks;
use super::{coll_err, region, signal_pending};
use crate::errors::value_error;
use npurt_core::collective::mpi::{Call, DataHandles, Exchange, Handles, MpiLib, Outcome};
use npurt_core::collective::{CollKind, CollectiveError, HcclDataType, ReduceOp};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// An internal collective error (`npurt.CollectiveError`'s internal class) naming `what`.
fn runtime_error(what: impl Into<String>) -> PyErr {
    coll_err(CollectiveError::internal("mpi", what))
}

/// The library, resolved once per process.
static LIB: OnceLock<Arc<MpiLib>> = OnceLock::new();

fn lib(path: Option<&str>) -> PyResult<Arc<MpiLib>> {
    if let Some(l) = LIB.get() {
        return Ok(l.clone());
    }
    let l = Arc::new(MpiLib::open(path).map_err(runtime_error)?);
    Ok(LIB.get_or_init(|| l).clone())
}

pub(super) fn deadline(timeout_s: f64) -> Instant {
    // (an infinite or huge timeout: a deadline far enough away)
    Instant::now() + Duration::from_secs_f64(timeout_s.clamp(0.0, 1e9))
}

/// What a one-call collective's host task shares with its group (one `Arc` a call).
pub(super) struct Shared {
    pub(super) x: Mutex<Exchange>,
    /// The one-call path is on (off once the group failed, a rank left or it closed).
    pub(super) fast: AtomicBool,
    /// The abort-notice receive's handle (Python re-posts it: `MpiComm._post_notice`).
    pub(super) notice: AtomicUsize,
    /// One-call collectives the native exchange completed: on a thread of the caller's
    /// (directly or as a task run there), queued (run by a runtime thread), and of those
    /// the two-phase ones.
    pub(super) stats: [AtomicU64; 3],
}

/// One group's exchange object (see `Exchange`): created by `MpiComm` with mpi4py's handles.
#[pyclass(module = "npurt", name = "_MpiExchange", frozen)]
pub(crate) struct PyMpiExchange {
    pub(super) sh: Arc<Shared>,
    pub(super) n: usize,
    /// The group's collective numbering (`MpiBackend`'s: claimed at enqueue).
    pub(super) seq: AtomicU64,
    /// The group's deadline in ns (u64::MAX: none) and the one-phase limit, bytes per peer.
    pub(super) timeout_ns: AtomicU64,
    pub(super) limit: AtomicUsize,
    /// Every rank of the group has a core (the one-phase rule's `spread`).
    pub(super) spread: AtomicBool,
    /// `f(kind, seq, dtype, count, op, root, timeout_s, left_s, status, info, send, recv)`:
    /// the one-call path's collective when the exchange did not simply complete it.
    pub(super) handler: Mutex<Option<Arc<Py<PyAny>>>>,
    pub(super) marks: Marks,
    /// Per communication stream, its task count after a one-call collective that was
    /// queued (`MpiBackend.run`'s `_tail`: the next call waits for it, else a burst stays queued).
    pub(super) tails: Mutex<Vec<(u64, u64)>>,
}

/// `(status, info)`: 0 done (None), 1 timeout (the missing peers), 2 desync (every rank's
/// header, n × 64 bytes), 3 abort notice came (None; `resume` continues), 4 MPI error
/// (its code). A signal that interrupted the wait is raised.
fn result(py: Python<'_>, o: Outcome, heads: Vec<u8>) -> PyResult<(u32, Py<PyAny>)> {
    Ok(match o {
        Outcome::Done => (0, py.None()),
        Outcome::Timeout(missing) => (1, missing.into_pyobject(py)?.into_any().unbind()),
        Outcome::Desync => (2, PyBytes::new(py, &heads).into_any().unbind()),
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
    /// back to back this long; `lib`: a loaded library through which MPI's functions are
    /// found (mpi4py's `MPI.__file__`; None: the `libmpi` mapped in this process).
    #[new]
    #[pyo3(signature = (comm, byte, request_size, status_size, undefined, rank, size, tag, row, hot_s, lib=None))]
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
        lib: Option<&str>,
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
        let x = Exchange::new(self::lib(lib)?, h, rank, size, tag, row, hot)
            .map_err(|c| runtime_error(format!("MPI_Recv_init failed (MPI error {c})")))?;
        Ok(PyMpiExchange {
            sh: Arc::new(Shared {
                x: Mutex::new(x),
                fast: AtomicBool::new(false),
                notice: AtomicUsize::new(0),
                stats: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            }),
            n: size,
            seq: AtomicU64::new(0),
            timeout_ns: AtomicU64::new(u64::MAX),
            limit: AtomicUsize::new(0),
            spread: AtomicBool::new(false),
            handler: Mutex::new(None),
            marks: Marks::default(),
            tails: Mutex::new(Vec::new()),
        })
    }

    /// Lets two-phase calls run their data phase natively (`Exchange::set_data`): the data
    /// communicator's handle, `int(MPI.IN_PLACE)`, the MPI datatype handle of each HCCL
    /// data type code (0: none), the handles of sum, prod, max, min, and the largest group
    /// whose all_gather is point to point.
    fn set_data(
        &self,
        py: Python<'_>,
        comm: usize,
        in_place: usize,
        dtypes: Vec<usize>,
        ops: Vec<usize>,
        p2p_gather_max: usize,
    ) -> PyResult<()> {
        let dtypes: [usize; 12] = dtypes
            .try_into()
            .map_err(|_| value_error("set_data: 12 datatype handles (one per HCCL data type code)"))?;
        let ops: [usize; 4] = ops
            .try_into()
            .map_err(|_| value_error("set_data: 4 op handles (sum, prod, max, min)"))?;
        let dh = DataHandles {
            comm,
            in_place,
            dtypes,
            ops,
            p2p_gather_max,
        };
        py.detach(|| lock(&self.sh.x).set_data(dh));
        Ok(())
    }

    /// Starts a collective's exchange and waits for it (see `result`). `kind` / `dtype`:
    /// the header's codes; `send`: the input array (broadcast: the root's buffer), `recv`:
    /// the output, both native arrays or None; `timeout_s`: seconds left; `notice`: the
    /// abort-notice receive's handle (0: none). `data`: a two-phase call whose data phase
    /// runs here too (`_mpi_native_data`; `send` the input, `recv` the output).
    #[pyo3(signature = (kind, seq, dtype, count, op, root, eager, send, recv, timeout_s, notice, data=false))]
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
        data: bool,
    ) -> PyResult<(u32, Py<PyAny>)> {
        let call = Call {
            kind: CollKind::from_u32(kind)
                .filter(|k| !matches!(k, CollKind::Send | CollKind::Recv))
                .ok_or_else(|| value_error(format!("collective kind {kind} (send / recv are not exchanged here)")))?,
            seq,
            dtype: HcclDataType::from_u32(dtype).ok_or_else(|| value_error(format!("dtype {dtype}")))?,
            count,
            op: ReduceOp::from_u32(op).ok_or_else(|| value_error(format!("reduce op {op}")))?,
            root,
            eager,
        };
        let side = |o: Option<&Bound<'_, PyAny>>, what| o.filter(|o| !o.is_none()).map(|o| region(o, what)).transpose();
        let send = side(send, "send")?.map(|r| r.0);
        let recv = side(recv, "recv")?.map(|r| r.0);
        let end = deadline(timeout_s);
        let x = &self.sh.x;
        let (o, heads) = py.detach(|| {
            let mut x = lock(x);
            let o = if data {
                x.run_two_phase(call, send, recv, end, notice, &mut signal_pending)
            } else {
                x.run(call, send.as_ref(), recv, end, notice, &mut signal_pending)
            };
            let heads = x.headers();
            (o, heads)
        });
        result(py, o, heads)
    }

    /// Continues the pending exchange after an abort notice that did not end it.
    fn resume(&self, py: Python<'_>, timeout_s: f64, notice: usize) -> PyResult<(u32, Py<PyAny>)> {
        let end = deadline(timeout_s);
        let x = &self.sh.x;
        let (o, heads) = py.detach(|| {
            let mut x = lock(x);
            if !x.pending() {
                return (None, Vec::new());
            }
            let o = x.resume(end, notice, &mut signal_pending);
            let heads = x.headers();
            (Some(o), heads)
        });
        let o = o.ok_or_else(|| runtime_error("_MpiExchange.resume: no exchange is pending"))?;
        result(py, o, heads)
    }

    /// Whether an exchange is pending (MPI owns the buffers).
    #[getter]
    fn pending(&self, py: Python<'_>) -> bool {
        py.detach(|| lock(&self.sh.x).pending())
    }

    /// Frees the persistent receives (when nothing is pending); the one-call path is off.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.sh.fast.store(false, Ordering::SeqCst);
        py.detach(|| lock(&self.sh.x).close())
            .map_err(|c| runtime_error(format!("MPI_Request_free failed (MPI error {c})")))
    }

    /// Claims the next collective number (1, 2, ...).
    pub(super) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The last collective number claimed.
    #[getter]
    fn seq(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    #[setter]
    fn set_notice(&self, handle: usize) {
        self.sh.notice.store(handle, Ordering::SeqCst);
    }

    /// Turns the one-call path on (`handler`, the group's deadline in seconds: inf for
    /// none, the one-phase limit in bytes per peer, whether every rank has a core: the
    /// one-phase rule's `spread`) or off (`handler` None).
    #[pyo3(signature = (handler, timeout_s=f64::INFINITY, limit=0, spread=false))]
    fn set_fast(&self, handler: Option<Py<PyAny>>, timeout_s: f64, limit: usize, spread: bool) {
        let on = handler.is_some();
        *lock(&self.handler) = handler.map(Arc::new);
        self.set_timeout(timeout_s);
        self.limit.store(limit, Ordering::SeqCst);
        self.spread.store(spread, Ordering::SeqCst);
        self.sh.fast.store(on, Ordering::SeqCst);
    }

    fn set_timeout(&self, timeout_s: f64) {
        let ns = if timeout_s.is_finite() && timeout_s > 0.0 {
            (timeout_s * 1e9).min(u64::MAX as f64 - 1.0) as u64
        } else {
            u64::MAX
        };
        self.timeout_ns.store(ns, Ordering::SeqCst);
    }

    /// `(on a thread of the caller's, queued on a runtime thread)`: one-call collectives the
    /// native exchange completed.
    #[getter]
    fn stats(&self) -> (u64, u64) {
        (
            self.sh.stats[0].load(Ordering::SeqCst),
            self.sh.stats[1].load(Ordering::SeqCst),
        )
    }

    /// Of [`stats`](Self::stats), the two-phase ones (headers and data natively).
    #[getter]
    fn two_phase_done(&self) -> u64 {
        self.sh.stats[2].load(Ordering::SeqCst)
    }

    /// Whether the one-call path is on.
    #[getter]
    fn fast(&self) -> bool {
        self.sh.fast.load(Ordering::SeqCst)
    }

    /// `ProcessGroup.one_call` for the `mpi` backend: see [`PyMpiExchange::one_call`].
    #[pyo3(signature = (kind, array, op, root, streams, output=None))]
    #[allow(clippy::too_many_arguments)]
    fn run_sync(
        &self,
        py: Python<'_>,
        kind: &str,
        array: &Bound<'_, PyAny>,
        op: &Bound<'_, PyAny>,
        root: u32,
        streams: &Bound<'_, PyDict>,
        output: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.one_call(py, kind, array, op, root, streams, output.filter(|o| !o.is_none()))
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A header from its codes (`_mpi_small.KINDS`, the HCCL dtype and op codes); None for
/// an unknown code.
fn header_call(kind: u32, dtype: u32, count: u64, op: u32, root: u32, eager: bool) -> Option<Call> {
    Some(Call {
        kind: CollKind::from_u32(kind)?,
        seq: 0,
        dtype: HcclDataType::from_u32(dtype)?,
        count,
        op: ReduceOp::from_u32(op)?,
        root,
        eager,
    })
}

/// Whether a collective (header codes) takes the `mpi` backend's one-phase path in a group
/// of `n` with `limit` bytes per peer (`spread`: every rank has a core): the native rule
/// (`collective::mpi::one_phase`). Unknown codes: False (the two-phase path).
#[pyfunction]
fn _mpi_one_phase(kind: u32, dtype: u32, count: u64, op: u32, n: usize, limit: usize, spread: bool) -> bool {
    header_call(kind, dtype, count, op, 0, true)
        .is_some_and(|c| npurt_core::collective::mpi::one_phase(&c, n, limit, spread))
}

/// Whether a two-phase collective's data phase runs natively (`collective::mpi::
/// native_data`: header fields and the group size only). Unknown codes: False.
#[pyfunction]
fn _mpi_native_data(kind: u32, dtype: u32, count: u64, op: u32, root: u32, n: usize) -> bool {
    header_call(kind, dtype, count, op, root, false).is_some_and(|c| npurt_core::collective::mpi::native_data(&c, n))
}

/// Why a collective (`_mpi_small.KINDS` code) cannot run with these send and receive bytes
/// (`(address, length)`), or None: the one rule of every backend (`collective::overlap_error`).
#[pyfunction]
fn _coll_overlap(kind: u32, send: (usize, usize), recv: (usize, usize)) -> Option<&'static str> {
    CollKind::from_u32(kind).and_then(|k| npurt_core::collective::overlap_error(k, send, recv))
}

/// Bytes of each per-peer receive row of an `n`-rank group (`collective::mpi::inbox_bytes`).
#[pyfunction]
fn _mpi_inbox_bytes(n: usize) -> usize {
    npurt_core::collective::mpi::inbox_bytes(n)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMpiExchange>()?;
    m.add_function(wrap_pyfunction!(_mpi_one_phase, m)?)?;
    m.add("_MPI_MAX_EAGER", npurt_core::collective::mpi::MAX_EAGER)?;
    m.add("_MPI_EAGER_FIT", npurt_core::collective::mpi::EAGER_FIT)?;
    m.add("_MPI_MAX_RANKS", npurt_core::collective::mpi::MAX_RANKS)?;
    m.add_function(wrap_pyfunction!(_mpi_inbox_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(_mpi_native_data, m)?)?;
    m.add_function(wrap_pyfunction!(_coll_overlap, m)?)?;
    m.add("_MPI_P2P_GATHER_MAX", npurt_core::collective::mpi::P2P_GATHER_MAX)?;
    Ok(())
}
