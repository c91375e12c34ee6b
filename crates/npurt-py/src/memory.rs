//! `npurt.DeviceBuffer`, `npurt.HostBuffer`, `npurt.malloc`, `npurt.malloc_host`. The Python objects hold npurt-core handles; `free()` (or leaving a
//! `with` block, or dropping the object) drops the object's reference, and the memory goes
//! back to its pool once queued copies that use it are done.

use crate::args::int_arg;
use crate::copy::{py_read, py_write};
use crate::device::device_id;
use crate::errors::{to_py, value_error, IntoPy};
use crate::host::PyHostBuffer;
use npurt_core::alloc;
use npurt_core::memory::{AnyBuffer, BufferView, DeviceBuffer, DeviceMemory, PagePolicy};
use npurt_core::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyInt, PyModule, PyTuple};
use std::sync::{Arc, Mutex, MutexGuard};

/// Copies of more than this many bytes release the GIL.
pub(crate) const GIL_FREE_COPY: usize = 16 << 10;
/// Allocations of more than this many bytes release the GIL (the small pool's limit).
pub(crate) const GIL_FREE_ALLOC: usize = 1 << 20;

/// Runs `f` without the GIL when `bytes > limit`; short calls keep it (releasing and
/// taking it back costs more than they take).
#[inline]
pub(crate) fn detach_above<R: Send>(py: Python<'_>, bytes: usize, limit: usize, f: impl FnOnce() -> R + Send) -> R {
    if bytes > limit {
        py.detach(f)
    } else {
        f()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A byte count: a non-negative int (exact ints take the fast path).
pub(crate) fn size_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<usize> {
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        if let Ok(v) = i.extract::<u64>() {
            if v <= i64::MAX as u64 {
                return Ok(v as usize);
            }
        }
    }
    Ok(int_arg(obj, name, 0, i64::MAX)? as usize)
}

/// `nbytes=None` or a byte count.
pub(crate) fn opt_size_arg(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<usize>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(size_arg(o, name)?)),
        _ => Ok(None),
    }
}

/// numpy, imported once (only the Python-buffer paths need it).
pub(crate) fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NP: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NP.get_or_try_init(py, || py.import("numpy").map(Bound::unbind))
        .map(|m| m.bind(py))
        .map_err(|_| {
            to_py(Error::invalid(
                "copies to or from Python buffers (numpy arrays, bytes...) need numpy installed",
            ))
        })
}

/// `nbytes` bytes of npurt memory as a Python object with `__array_interface__`; numpy
/// arrays made from it keep the buffer alive (their `.base` is this object).
#[pyclass(module = "npurt", name = "_MemoryView", frozen)]
pub(crate) struct PyMemView {
    _buf: AnyBuffer,
    addr: usize,
    nbytes: usize,
}

#[pymethods]
impl PyMemView {
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", (self.nbytes,))?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (self.addr, false))?;
        Ok(d)
    }
}

impl PyMemView {
    /// The allocation viewed and the address of the view's first byte.
    pub(crate) fn memory(&self) -> (&AnyBuffer, usize) {
        (&self._buf, self.addr)
    }
}

/// A 1-D uint8 numpy array over the first `n` bytes of `buf` (checked usable, `n` ≤ size).
pub(crate) fn native_array<'py>(py: Python<'py>, buf: &AnyBuffer, n: usize) -> PyResult<Bound<'py, PyAny>> {
    use npurt_core::memory::Buffer;
    buf.check().py_err()?;
    mem_view_array(py, buf.clone(), buf.addr(), n.min(buf.nbytes()))
}

/// A 1-D uint8 numpy array over the first `n` bytes of `view` (checked usable, `n` ≤ size).
pub(crate) fn view_array<'py>(py: Python<'py>, view: &BufferView, n: usize) -> PyResult<Bound<'py, PyAny>> {
    use npurt_core::memory::Buffer;
    view.check().py_err()?;
    mem_view_array(py, view.buffer().clone(), view.addr(), n.min(view.nbytes()))
}

/// `addr..addr+nbytes` must lie inside `buf` (the callers take it from a buffer or view).
fn mem_view_array<'py>(py: Python<'py>, buf: AnyBuffer, addr: usize, nbytes: usize) -> PyResult<Bound<'py, PyAny>> {
    let view = PyMemView {
        _buf: buf,
        addr,
        nbytes,
    };
    numpy(py)?.getattr("asarray")?.call1((Bound::new(py, view)?,))
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
#[pyfunction]
#[pyo3(signature = (nbytes, policy=None, device=None), text_signature = "(nbytes, policy=\"huge_first\", device=None)")]
pub(crate) fn malloc(
    py: Python<'_>,
    nbytes: &Bound<'_, PyAny>,
    policy: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyDeviceBuffer> {
    let n = size_arg(nbytes, "nbytes")?;
    let policy = policy_arg(policy)?;
    let dev = device.filter(|d| !d.is_none()).map(device_id).transpose()?;
    // Which context `device=` means (and so whether its memory limit applies) is core's
    // rule: `alloc::malloc_for`.
    let alloc = || alloc::malloc_for(dev, n, policy);
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
