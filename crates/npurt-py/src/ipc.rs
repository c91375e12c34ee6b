//! Cross-process sharing (`npurt_core::ipc`): export keys of buffers and arrays, import
//! them, whitelists, the process-wide shareable switch. Argument conversion only; the
//! waits for an exporter's answer run without the GIL (each bounded by a timeout).

use crate::args::{bool_arg, int_arg, seconds_arg, str_arg, type_name};
use crate::array::{dtype_arg, PyArray};
use crate::errors::{array_err, type_error, IntoPy};
use crate::memory::{memory_for, PyDeviceBuffer};
use npurt_core::ipc::{self, Access, ArrayMeta};
use npurt_core::memory::{self, DeviceBuffer};
use npurt_kernels::array::DeviceArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `pids=None` / `open=` / `same_user=` → who may import.
pub(crate) fn access_arg(
    pids: Option<&Bound<'_, PyAny>>,
    open: Option<&Bound<'_, PyAny>>,
    same_user: bool,
) -> PyResult<Access> {
    if open.map(|o| bool_arg(o, "open")).transpose()?.unwrap_or(false) {
        return Ok(Access::Open);
    }
    if same_user {
        return Ok(Access::SameUser);
    }
    let list = match pids.filter(|p| !p.is_none()) {
        None => Vec::new(),
        Some(p) => pids_arg(p)?,
    };
    Access::pids(&list).py_err()
}

/// An int or an iterable of ints (typed errors otherwise; range checked by core).
fn pids_arg(p: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let one = |x: &Bound<'_, PyAny>| int_arg(x, "pids", i64::MIN, i64::MAX);
    if p.is_instance_of::<pyo3::types::PyInt>() || (p.hasattr("__index__")? && !p.hasattr("__iter__")?) {
        return Ok(vec![one(p)?]);
    }
    if p.is_instance_of::<pyo3::types::PyString>() || p.is_instance_of::<pyo3::types::PyBytes>() {
        return Err(type_error(format!(
            "pids must be an int or a list of ints, not {}",
            type_name(p)
        )));
    }
    let it = p
        .try_iter()
        .map_err(|_| type_error(format!("pids must be an int or a list of ints, not {}", type_name(p))))?;
    it.map(|x| one(&x?)).collect()
}

/// Exports `[offset, offset + nbytes)` of a buffer (nbytes 0: to the end).
pub(crate) fn export_buffer(b: &DeviceBuffer, offset: usize, nbytes: usize, access: Access) -> PyResult<String> {
    ipc::export(b, offset, nbytes, access).py_err()
}

/// The key of an array: its buffer's key and the view. Waits for the array's queued
/// writes first, so the importer sees them.
#[pyfunction]
#[pyo3(signature = (arr, pids=None, open=None, same_user=false))]
fn _ipc_export_array(
    py: Python<'_>,
    arr: &Bound<'_, PyArray>,
    pids: Option<&Bound<'_, PyAny>>,
    open: Option<&Bound<'_, PyAny>>,
    same_user: bool,
) -> PyResult<String> {
    let access = access_arg(pids, open, same_user)?;
    let a = &arr.get().a;
    crate::wait::sliced(py, None, |slice| a.wait_writes(Some(slice)))?;
    let key = export_buffer(a.buffer(), 0, 0, access)?;
    let t = a.tensor();
    let meta = ArrayMeta {
        dtype: t.dtype().name().to_string(),
        shape: t.shape().to_vec(),
        strides: t.strides().to_vec(),
        offset: a.offset(),
    };
    Ok(ipc::array_key(&key, &meta))
}

fn import_on(
    py: Python<'_>,
    key: &str,
    device: Option<&Bound<'_, PyAny>>,
    timeout: Option<&Bound<'_, PyAny>>,
) -> PyResult<DeviceBuffer> {
    let t = match timeout.filter(|t| !t.is_none()) {
        Some(t) => seconds_arg(t, "timeout")?,
        None => ipc::DEFAULT_TIMEOUT,
    };
    let mem = memory_for(py, device)?;
    py.detach(|| ipc::import(key, &mem, t)).py_err()
}

/// Maps the memory behind `key` (from `DeviceBuffer.ipc_export` in another process) as a
/// DeviceBuffer of `device` (default: the current one). Waits at most `timeout` seconds
/// (default 10) for the exporter; errors are npurt.IpcError subclasses (507022).
#[pyfunction]
#[pyo3(signature = (key, device=None, timeout=None))]
pub(crate) fn ipc_import(
    py: Python<'_>,
    key: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    timeout: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyDeviceBuffer> {
    let key = str_arg(key, "key")?;
    Ok(PyDeviceBuffer::wrap(import_on(py, &key, device, timeout)?))
}

/// Imports an array key (`DeviceArray.ipc_export`): the native array with its shape,
/// dtype, strides and offset over the imported buffer.
#[pyfunction]
#[pyo3(signature = (key, device=None, timeout=None))]
fn _ipc_import_array(
    py: Python<'_>,
    key: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    timeout: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyArray> {
    let key = str_arg(key, "key")?;
    let (buf_key, meta) = ipc::parse_array_key(&key).map_err(|e| crate::errors::to_py(e.into()))?;
    let dt = dtype_arg(&meta.dtype)?;
    let buf = import_on(py, &buf_key, device, timeout)?;
    let a = DeviceArray::from_buffer(buf, meta.offset, dt, meta.shape, meta.strides).map_err(array_err)?;
    Ok(PyArray { a })
}

/// Adds pids to the whitelist of a key this process exported (aclrtIpcMemSetImportPid).
#[pyfunction]
fn _ipc_set_import_pids(key: &Bound<'_, PyAny>, pids: &Bound<'_, PyAny>) -> PyResult<()> {
    let pids = pids_arg(pids)?;
    ipc::set_import_pids(&str_arg(key, "key")?, &pids).py_err()
}

/// The exporter's close: the key can no longer be imported (open imports keep the memory).
#[pyfunction]
fn _ipc_close(key: &Bound<'_, PyAny>) -> PyResult<()> {
    ipc::close(&str_arg(key, "key")?).py_err()
}

/// True if this process exported `key`.
#[pyfunction]
fn _ipc_is_own_key(key: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(ipc::is_own_key(&str_arg(key, "key")?))
}

/// {"keys", "leases", "held"}: this process's exports, the imports open in other
/// processes, and the buffers kept alive for them.
#[pyfunction]
fn ipc_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let s = ipc::stats();
    let d = PyDict::new(py);
    d.set_item("keys", s.keys)?;
    d.set_item("leases", s.leases)?;
    d.set_item("held", s.held)?;
    Ok(d)
}

/// This process's host pid (aclrtDeviceGetBareTgid).
#[pyfunction]
fn _ipc_bare_tgid() -> u32 {
    ipc::bare_tgid()
}

/// Makes later allocations that do not say `shareable=` shareable (True) or not (False);
/// the default comes from NPURT_IPC_SHAREABLE (off).
#[pyfunction]
fn set_ipc_shareable(on: &Bound<'_, PyAny>) -> PyResult<()> {
    memory::set_shareable_default(bool_arg(on, "on")?);
    Ok(())
}

/// Whether allocations that do not say are shareable (see set_ipc_shareable).
#[pyfunction]
fn get_ipc_shareable() -> bool {
    memory::shareable_default()
}

/// Adds this file's functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_ipc_export_array, m)?)?;
    m.add_function(wrap_pyfunction!(ipc_import, m)?)?;
    m.add_function(wrap_pyfunction!(_ipc_import_array, m)?)?;
    m.add_function(wrap_pyfunction!(_ipc_set_import_pids, m)?)?;
    m.add_function(wrap_pyfunction!(_ipc_close, m)?)?;
    m.add_function(wrap_pyfunction!(_ipc_is_own_key, m)?)?;
    m.add_function(wrap_pyfunction!(ipc_stats, m)?)?;
    m.add_function(wrap_pyfunction!(_ipc_bare_tgid, m)?)?;
    m.add_function(wrap_pyfunction!(set_ipc_shareable, m)?)?;
    m.add_function(wrap_pyfunction!(get_ipc_shareable, m)?)?;
    Ok(())
}
