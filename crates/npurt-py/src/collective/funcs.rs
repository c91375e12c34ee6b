//! The module functions of `npurt._npurt`'s collectives: communicator constructors
//! (`local`, `shm`, `HcclCommInitAll`), the error factory, HCCL's codes, task waits and the
//! `mpi` backend's task launch.

use super::{coll_err, group_timeout, PyComm, SETTLE};
use crate::args::{int_arg, str_arg, timeout_arg};
use crate::device::device_id;
use crate::errors::{type_error, value_error, IntoPy};
use crate::stream::{host_op, stream_or_current, submit};
use npurt_core::collective::{self as coll, CollKind, CollectiveError, HcclResult};
use npurt_core::profiler::TaskKind;
use npurt_core::{alloc, Engine, EngineDesc};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// Rank `rank` of the process-local group `name` (`init_process_group("local")`).
#[pyfunction]
#[pyo3(signature = (name, rank, world, timeout=None))]
fn _comm_local(
    name: &str,
    rank: &Bound<'_, PyAny>,
    world: &Bound<'_, PyAny>,
    timeout: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyComm> {
    let rank = int_arg(rank, "rank", 0, u32::MAX as i64)? as u32;
    let world = int_arg(world, "world_size", 1, u32::MAX as i64)? as u32;
    let c = coll::local::join(name, rank, world, group_timeout(timeout)?).map_err(coll_err)?;
    Ok(PyComm::new(c))
}

/// Forgets a local group name whose ranks never all joined.
#[pyfunction]
fn _comm_local_forget(name: &str) {
    coll::local::forget(name)
}

/// Every rank of a new local group (`HcclCommInitAll`).
#[pyfunction]
#[pyo3(signature = (world, timeout=None))]
fn _comm_init_all(world: &Bound<'_, PyAny>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<PyComm>> {
    let world = int_arg(world, "ndev", 1, u32::MAX as i64)? as u32;
    let cs = coll::local::init_all(world, group_timeout(timeout)?).map_err(coll_err)?;
    Ok(cs.into_iter().map(PyComm::new).collect())
}

fn memory_of(device: Option<&Bound<'_, PyAny>>) -> PyResult<std::sync::Arc<npurt_core::memory::DeviceMemory>> {
    match device {
        Some(d) if !d.is_none() => alloc::device_memory(device_id(d)?).py_err(),
        _ => alloc::current_memory().py_err(),
    }
}

/// Rank 0 of a new `shm` group: `(comm, key)`; `pids` is the import whitelist (None: this user).
#[pyfunction]
#[pyo3(signature = (world, device=None, slot_bytes=None, pids=None, timeout=None))]
fn _comm_shm_create(
    py: Python<'_>,
    world: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    slot_bytes: Option<usize>,
    pids: Option<Vec<i64>>,
    timeout: Option<&Bound<'_, PyAny>>,
) -> PyResult<(PyComm, String)> {
    let world = int_arg(world, "world_size", 1, u32::MAX as i64)? as u32;
    let (mem, t) = (memory_of(device)?, group_timeout(timeout)?);
    let (c, key) = py
        .detach(|| coll::shm::create(&mem, world, slot_bytes, pids.as_deref(), t))
        .py_err()?;
    Ok((PyComm::new(c), key))
}

/// Rank `rank` of the `shm` group whose segment is `key`.
#[pyfunction]
#[pyo3(signature = (key, rank, world, device=None, timeout=None))]
fn _comm_shm_join(
    py: Python<'_>,
    key: &Bound<'_, PyAny>,
    rank: &Bound<'_, PyAny>,
    world: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    timeout: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyComm> {
    let key = str_arg(key, "key")?;
    let rank = int_arg(rank, "rank", 0, u32::MAX as i64)? as u32;
    let world = int_arg(world, "world_size", 1, u32::MAX as i64)? as u32;
    let (mem, t) = (memory_of(device)?, group_timeout(timeout)?);
    let c = py.detach(|| coll::shm::join(&key, &mem, rank, world, t)).py_err()?;
    Ok(PyComm::new(c))
}

/// The exception for a collective failure, with the engine's wording: `kind` is
/// `timeout`, `desync`, `rank_failed`, `param` or `internal`; `ranks` the missing ranks
/// (timeout) or the failed rank; `detail` the timeout in seconds (timeout) or the text;
/// `world` (0: unknown) lets a timeout name the ranks that arrived.
#[pyfunction]
#[pyo3(signature = (kind, op, seq, ranks, detail="", rank=0, world=0))]
#[allow(clippy::too_many_arguments)]
fn _collective_error(
    kind: &str,
    op: &str,
    seq: u64,
    ranks: Vec<u32>,
    detail: &str,
    rank: u32,
    world: u32,
) -> PyResult<Py<PyAny>> {
    let e = CollectiveError::from_parts(kind, op, seq, rank, &ranks, detail, world)
        .ok_or_else(|| value_error(format!("unknown collective error kind {kind:?}")))?;
    Python::attach(|py| Ok(coll_err(e).into_value(py).into_any()))
}

/// `{name: code}` of HCCL's result codes.
#[pyfunction]
fn _hccl_result_codes(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for c in HcclResult::ALL {
        d.set_item(c.name, c.code)?;
    }
    Ok(d)
}

/// Waits (without the GIL) until `stream` completed `target` tasks or `timeout` passes;
/// raises the stream's sticky error (a failed collective's). True when done.
#[pyfunction]
#[pyo3(signature = (stream, target, timeout=None))]
fn _wait_task(
    py: Python<'_>,
    stream: &Bound<'_, PyAny>,
    target: u64,
    timeout: Option<&Bound<'_, PyAny>>,
) -> PyResult<bool> {
    let s = stream_or_current(Some(stream))?;
    let t = timeout_arg(timeout)?;
    py.detach(|| s.wait_completed(target, t)).py_err()
}

/// Queues `func()` on `stream`'s host engine as collective `kind` (torch's name:
/// `all_reduce`...) moving `nbytes`: profiles show it as HCCL's call (`HcclAllReduce`), not
/// as a host callback. The `mpi` backend's tasks go through here. `run_here`: if `stream`
/// is idle (or settles within `SETTLE`), this thread runs `func` itself before returning
/// (host-synchronous, as `_Comm.run_sync`); its failure is still the stream's error.
#[pyfunction]
#[pyo3(signature = (stream, func, kind, nbytes, run_here=false))]
fn _launch_collective(
    py: Python<'_>,
    stream: &Bound<'_, PyAny>,
    func: Py<PyAny>,
    kind: &str,
    nbytes: u64,
    run_here: bool,
) -> PyResult<()> {
    let s = stream_or_current(Some(stream))?;
    let k = CollKind::from_name(kind).ok_or_else(|| value_error(format!("unknown collective {kind:?}")))?;
    if !func.bind(py).is_callable() {
        return Err(type_error("_launch_collective needs a callable".to_string()));
    }
    let desc = EngineDesc {
        name: Some(k.hccl_name()),
        ..EngineDesc::new(TaskKind::HostFunc, nbytes)
    };
    let op = host_op(func, PyTuple::empty(py).unbind());
    let here = run_here && (s.is_idle() || py.detach(|| s.settle(SETTLE)));
    let r = if here {
        // The op takes the interpreter lock back to call `func` on this thread.
        py.detach(|| s.try_launch_host_here(op, desc))
    } else {
        s.try_launch_described(Engine::Host, op, desc)
    };
    submit(py, &s, r)
}

/// Whether process `pid` is gone (or a zombie).
#[pyfunction]
fn _pid_dead(pid: u32) -> bool {
    coll::pid_dead(pid)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_comm_local, m)?)?;
    m.add_function(wrap_pyfunction!(_comm_local_forget, m)?)?;
    m.add_function(wrap_pyfunction!(_comm_init_all, m)?)?;
    m.add_function(wrap_pyfunction!(_comm_shm_create, m)?)?;
    m.add_function(wrap_pyfunction!(_comm_shm_join, m)?)?;
    m.add_function(wrap_pyfunction!(_collective_error, m)?)?;
    m.add_function(wrap_pyfunction!(_launch_collective, m)?)?;
    m.add_function(wrap_pyfunction!(_hccl_result_codes, m)?)?;
    m.add_function(wrap_pyfunction!(_pid_dead, m)?)?;
    m.add_function(wrap_pyfunction!(_wait_task, m)?)?;
    // Send bytes per rank up to which a collective takes the one-barrier eager path.
    m.add("COLLECTIVE_EAGER_BYTES", coll::EAGER_BYTES)?;
    // Collectives an eager broadcast's root may run ahead of the slowest rank, plus one.
    m.add("COLLECTIVE_EAGER_DEPTH", coll::EAGER_DEPTH)?;
    Ok(())
}
