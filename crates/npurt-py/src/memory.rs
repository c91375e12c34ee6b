//! `npurt.DeviceBuffer`, `npurt.HostBuffer`, `npurt.malloc`, `npurt.malloc_host`. The Python objects hold npurt-core handles; `free()` (or leaving a
//! `with` block, or dropping the object) drops the object's reference, and the memory goes
//! back to its pool once queued copies that use it are done.

use crate::args::{int_arg, size_arg};
use crate::copy::{py_read, py_write};
use crate::device::device_id;
use crate::errors::{to_py, value_error, IntoPy};
use crate::gil::{detach_above, GIL_FREE_ALLOC};
use crate::host::PyHostBuffer;
use npurt_core::alloc;
use npurt_core::memory::{AnyBuffer, DeviceBuffer, DeviceMemory, PagePolicy};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::{Arc, Mutex, MutexGuard};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Device memory from `npurt.malloc` (AscendCL `aclrtMalloc`). `with` frees it on exit
/// (also on an exception); so does `free()` and dropping the last reference. Freeing is
/// stream-ordered: copies already queued still see the memory.
#[pyclass(module = "npurt", name = "DeviceBuffer", frozen)]
pub(crate) struct PyDeviceBuffer {
    buf: Mutex<Option<DeviceBuffer>>,
    addr: usize,
    nbytes: usize,
    device: u32,
}

impl PyDeviceBuffer {
    pub(crate) fn wrap(b: DeviceBuffer) -> Self {
        Self {
            addr: b.addr(),
            nbytes: b.nbytes(),
            device: b.device(),
            buf: Mutex::new(Some(b)),
        }
    }

    /// The core handle, or the use-after-free error.
    #[inline]
    pub(crate) fn handle(&self) -> PyResult<DeviceBuffer> {
        lock(&self.buf).clone().ok_or_else(|| freed("device buffer", self.addr))
    }
}

pub(crate) fn freed(what: &'static str, addr: usize) -> PyErr {
    to_py(npurt_core::error::BufferError::Freed { what, addr }.into())
}

pub(crate) fn double_free(addr: usize) -> PyErr {
    to_py(npurt_mem::MemError::DoubleFree { addr }.into())
}

/// `free()` of a buffer object: frees its handle once; a second call is a double free.
pub(crate) fn free_slot<B>(
    slot: &Mutex<Option<B>>,
    addr: usize,
    free: impl FnOnce(B) -> npurt_core::Result<()>,
) -> PyResult<()> {
    match lock(slot).take() {
        Some(b) => free(b).py_err(),
        None => Err(double_free(addr)),
    }
}

/// Leaving a buffer's `with` block: frees it unless that already happened (through
/// `free()` or another handle), which is not an error here.
pub(crate) fn release_slot<B>(slot: &Mutex<Option<B>>, free: impl FnOnce(B) -> npurt_core::Result<()>) {
    if let Some(b) = lock(slot).take() {
        let _ = free(b);
    }
}

#[pymethods]
impl PyDeviceBuffer {
    /// Device address of the first byte.
    #[getter]
    fn ptr(&self) -> usize {
        self.addr
    }
    /// Bytes requested.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }
    /// The device id.
    #[getter]
    fn device(&self) -> u32 {
        self.device
    }
    /// True once freed.
    #[getter]
    fn freed(&self) -> bool {
        lock(&self.buf).as_ref().is_none_or(|b| b.is_freed())
    }
    /// "hugetlb", "thp" or "normal" (None once freed).
    #[getter]
    fn page_kind(&self) -> Option<&'static str> {
        lock(&self.buf).as_ref().and_then(|b| b.page_kind()).map(|k| k.as_str())
    }
    /// Id of the MemPool the buffer came from, or None.
    #[getter]
    fn pool_id(&self) -> Option<u64> {
        lock(&self.buf).as_ref().and_then(|b| b.pool_id())
    }

    /// True if the memory can be exported to another process (shareable pool, shareable
    /// MemPool, or imported memory).
    #[getter]
    fn shareable(&self) -> bool {
        lock(&self.buf).as_ref().is_some_and(|b| b.is_shareable())
    }
    /// True for memory imported from another process (npurt.ipc_import).
    #[getter]
    fn imported(&self) -> bool {
        lock(&self.buf).as_ref().is_some_and(|b| b.is_imported())
    }
    /// For imported memory: whether the exporting process still runs (None otherwise).
    /// The memory stays valid either way.
    #[getter]
    fn exporter_alive(&self) -> Option<bool> {
        lock(&self.buf).as_ref().and_then(npurt_core::ipc::exporter_alive)
    }

    /// A key (a str of 63 characters) another process passes to npurt.ipc_import to map
    /// this memory (`offset`/`nbytes`: a part of it). Only the processes in `pids` may
    /// import it (more can be added with npurt.ipc_set_import_pid); `open=True` lets anyone
    /// who has the key import it. npurt.IpcNotShareableError unless the memory is shareable.
    #[pyo3(signature = (pids=None, *, open=None, offset=None, nbytes=None))]
    fn ipc_export(
        &self,
        pids: Option<&Bound<'_, PyAny>>,
        open: Option<&Bound<'_, PyAny>>,
        offset: Option<&Bound<'_, PyAny>>,
        nbytes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        let access = crate::ipc::access_arg(pids, open, false)?;
        let offset = crate::args::opt_size_arg(offset, "offset")?.unwrap_or(0);
        let nbytes = crate::args::opt_size_arg(nbytes, "nbytes")?;
        if nbytes == Some(0) {
            return Err(crate::errors::value_error("ipc_export: nbytes must be > 0"));
        }
        crate::ipc::export_buffer(&self.handle()?, offset, nbytes.unwrap_or(0), access)
    }

    /// The key pickling uses (any process of this user may import it; reused for the same
    /// buffer while it is live).
    fn _ipc_share_key(&self) -> PyResult<String> {
        crate::ipc::export_buffer(&self.handle()?, 0, 0, npurt_core::ipc::Access::SameUser)
    }

    /// Frees the buffer (stream-ordered). A second free raises npurt.MemoryFreeError (207002).
    fn free(&self) -> PyResult<()> {
        free_slot(&self.buf, self.addr, |b| b.free())
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        release_slot(&self.buf, |b| b.free());
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.freed() { " freed" } else { "" };
        format!(
            "<npurt.DeviceBuffer device={} nbytes={} ptr={:#x}{state}>",
            self.device, self.nbytes, self.addr
        )
    }

    /// Copies `src` (a numpy array or any buffer, a HostBuffer, a DeviceBuffer) into this
    /// buffer: synchronously, or on `stream` (ACL semantics for pageable memory).
    #[pyo3(signature = (src, stream=None, nbytes=None))]
    fn copy_from_host(
        slf: &Bound<'_, Self>,
        src: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
        nbytes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        py_write(slf.as_any(), src, stream, nbytes)
    }

    /// Copies this buffer into `dst` (a writable buffer; by default a new uint8 numpy
    /// array of `nbytes` bytes, which is returned). With `stream`, runs after the work
    /// queued on it (completes before returning, as ACL does for pageable memory).
    #[pyo3(signature = (dst=None, stream=None, nbytes=None))]
    fn copy_to_host<'py>(
        slf: &Bound<'py, Self>,
        dst: Option<&Bound<'py, PyAny>>,
        stream: Option<&Bound<'py, PyAny>>,
        nbytes: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        py_read(slf.as_any(), slf.get().nbytes, dst, stream, nbytes)
    }
}

fn policy_arg(policy: Option<&Bound<'_, PyAny>>) -> PyResult<PagePolicy> {
    let Some(p) = policy.filter(|p| !p.is_none()) else {
        return Ok(PagePolicy::HugeFirst);
    };
    if let Ok(s) = p.extract::<String>() {
        return match s.to_ascii_lowercase().as_str() {
            "huge_first" => Ok(PagePolicy::HugeFirst),
            "huge_only" => Ok(PagePolicy::HugeOnly),
            "normal_only" => Ok(PagePolicy::NormalOnly),
            _ => Err(value_error(format!(
                "policy must be 'huge_first', 'huge_only' or 'normal_only', not {s:?}"
            ))),
        };
    }
    // ACL's aclrtMemMallocPolicy values 0..2 (npurt-mem owns the table).
    Ok(npurt_mem::acl_policy(int_arg(p, "policy", 0, 2)? as u32).0)
}

/// The memory of `device` (None: the current device), starting the device if needed.
pub(crate) fn memory_for(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Arc<DeviceMemory>> {
    match device.filter(|d| !d.is_none()) {
        None => alloc::current_memory().py_err(),
        Some(d) => {
            let id = device_id(d)?;
            py.detach(|| alloc::device_memory(id)).py_err()
        }
    }
}

/// Allocates `nbytes` of device memory (ACL `aclrtMalloc`: contents unspecified). `policy`:
/// "huge_first" (default), "huge_only" (OutOfMemoryError 207001 when no huge pages can be
/// had) or "normal_only". `device`: an id or Device (default: the current device). Inside
/// `with pool:` (an npurt.MemPool of that device) the memory comes from the pool.
/// `shareable=True`: from the device's shareable pool (memfd pages other processes can
/// map: DeviceBuffer.ipc_export); None: the process default (npurt.set_ipc_shareable,
/// NPURT_IPC_SHAREABLE).
#[pyfunction]
#[pyo3(signature = (nbytes, policy=None, device=None, shareable=None), text_signature = "(nbytes, policy=\"huge_first\", device=None, shareable=None)")]
pub(crate) fn malloc(
    py: Python<'_>,
    nbytes: &Bound<'_, PyAny>,
    policy: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    shareable: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyDeviceBuffer> {
    let n = size_arg(nbytes, "nbytes")?;
    let policy = policy_arg(policy)?;
    let dev = device.filter(|d| !d.is_none()).map(device_id).transpose()?;
    let shareable = crate::args::opt_bool_arg(shareable, "shareable")?;
    // Which context `device=` means (and so whether its memory limit applies) is core's
    // rule: `alloc::malloc_for`.
    let alloc = || alloc::malloc_for_ex(dev, n, policy, shareable);
    // Small blocks come from the pool's caches in tens of nanoseconds; a large request may
    // map or unmap segments (or fault huge pages in), and another device may have to start,
    // so those run without the GIL.
    let b = detach_above(py, if dev.is_some() { usize::MAX } else { n }, GIL_FREE_ALLOC, alloc);
    Ok(PyDeviceBuffer::wrap(b.py_err()?))
}

/// The npurt buffer behind a Python object, if it is one.
pub(crate) fn as_native(obj: &Bound<'_, PyAny>) -> PyResult<Option<AnyBuffer>> {
    if let Ok(b) = obj.cast::<PyDeviceBuffer>() {
        return Ok(Some(AnyBuffer::Device(b.get().handle()?)));
    }
    if let Ok(b) = obj.cast::<PyHostBuffer>() {
        return Ok(Some(AnyBuffer::Host(b.get().handle()?)));
    }
    Ok(None)
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceBuffer>()?;
    m.add_function(wrap_pyfunction!(malloc, m)?)?;
    Ok(())
}
