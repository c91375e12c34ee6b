//! `npurt.MemPool` (an explicit preallocated pool; `with pool:` routes this thread's
//! allocations into it), `_SubRange` (blocks carved from a registered range of one
//! allocation: the acl dialect's register_mem / malloc_from_mem) and `_resolve` (raw device
//! pointer validation).

use crate::args::{int_arg, size_arg};
use crate::device::device_id;
use crate::errors::{resource_warning, to_py, IntoPy};
use crate::memory::{lock, memory_for, PyDeviceBuffer};
use npurt_core::alloc;
use npurt_core::memory::{self, MemPool, SubRange};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::Mutex;

/// A preallocated memory pool on one device (torch's MemPool). `with pool:` routes this
/// thread's allocations on that device into it; `destroy()` (or dropping every reference)
/// releases its memory once no buffer from it is left. Buffers keep their pool alive.
#[pyclass(module = "npurt", name = "MemPool", frozen)]
pub(crate) struct PyMemPool {
    pool: Mutex<Option<MemPool>>,
    id: u64,
    device: u32,
    size: usize,
}

impl PyMemPool {
    fn handle(&self) -> PyResult<MemPool> {
        lock(&self.pool).clone().ok_or_else(|| self.destroyed_err())
    }
    fn destroyed_err(&self) -> PyErr {
        to_py(npurt_core::error::BufferError::PoolDestroyed { id: self.id }.into())
    }
}

#[pymethods]
impl PyMemPool {
    #[new]
    #[pyo3(signature = (size, device=None, shareable=None))]
    fn new(
        py: Python<'_>,
        size: &Bound<'_, PyAny>,
        device: Option<&Bound<'_, PyAny>>,
        shareable: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let n = size_arg(size, "size")?;
        let shareable = crate::args::opt_bool_arg(shareable, "shareable")?.unwrap_or(false);
        let mem = memory_for(py, device)?;
        let p = py.detach(|| MemPool::new_ex(&mem, n, shareable)).py_err()?;
        Ok(Self {
            id: p.id(),
            device: p.device(),
            size: p.size(),
            pool: Mutex::new(Some(p)),
        })
    }

    #[getter]
    fn id(&self) -> u64 {
        self.id
    }
    #[getter]
    fn device(&self) -> u32 {
        self.device
    }
    /// Bytes the pool holds (rounded down to 512).
    #[getter]
    fn size(&self) -> usize {
        self.size
    }
    #[getter]
    fn destroyed(&self) -> bool {
        lock(&self.pool).is_none()
    }

    /// Bytes allocated from the pool.
    fn memory_allocated(&self) -> PyResult<usize> {
        crate::memstats::settled();
        Ok(self.handle()?.allocated())
    }

    /// The pool's statistics (torch's memory_stats keys).
    fn memory_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::memstats::settled();
        crate::memstats::stats_dict(py, &self.handle()?.stats())
    }

    /// Allocates from this pool directly.
    fn malloc(&self, nbytes: &Bound<'_, PyAny>) -> PyResult<PyDeviceBuffer> {
        let n = size_arg(nbytes, "nbytes")?;
        Ok(PyDeviceBuffer::wrap(self.handle()?.alloc(n).py_err()?))
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().handle()?.enter().py_err()?;
        Ok(slf)
    }
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        memory::exit_pool(self.id);
        false
    }

    /// Destroys the pool: no more allocations from it; its memory is released now, or when
    /// the last buffer from it is freed (a ResourceWarning says how many were still live).
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        crate::memstats::settled();
        let p = lock(&self.pool).take().ok_or_else(|| self.destroyed_err())?;
        let live = p.destroy().py_err()?;
        if live > 0 {
            let msg = format!(
                "MemPool {} destroyed with {live} live allocation(s); released when they are freed",
                self.id
            );
            resource_warning(py, msg)?;
        }
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "<npurt.MemPool id={} device={} size={}>",
            self.id, self.device, self.size
        )
    }
}

/// A sub-allocator over `[addr, addr + size)` of the live allocation `buffer`
/// (`npurt_core::memory::SubRange`): `malloc(n)` carves a block with `aclrtMalloc`'s size
/// rule; a block's bytes come back when it is freed and its queued work has run.
#[pyclass(module = "npurt", name = "_SubRange", frozen)]
pub(crate) struct PySubRange(SubRange);

#[pymethods]
impl PySubRange {
    #[new]
    fn new(buffer: PyRef<'_, PyDeviceBuffer>, addr: &Bound<'_, PyAny>, size: &Bound<'_, PyAny>) -> PyResult<Self> {
        let addr = int_arg(addr, "addr", 0, i64::MAX)? as usize;
        let n = size_arg(size, "size")?;
        Ok(Self(SubRange::register(&buffer.handle()?, addr, n).py_err()?))
    }

    fn malloc(&self, nbytes: &Bound<'_, PyAny>) -> PyResult<PyDeviceBuffer> {
        let n = size_arg(nbytes, "nbytes")?;
        Ok(PyDeviceBuffer::wrap(self.0.alloc(n).py_err()?))
    }

    /// First usable address (the registered start rounded up to 32 bytes).
    #[getter]
    fn base(&self) -> usize {
        self.0.base()
    }
    /// Usable bytes.
    #[getter]
    fn size(&self) -> usize {
        self.0.len()
    }
    /// Bytes no block holds.
    #[getter]
    fn available(&self) -> usize {
        self.0.available()
    }
    /// Blocks alive.
    #[getter]
    fn live_blocks(&self) -> usize {
        self.0.live_blocks()
    }
    /// Base address of the allocation the range carves from.
    #[getter]
    fn parent(&self) -> usize {
        self.0.parent().addr()
    }

    fn __repr__(&self) -> String {
        format!(
            "<npurt._SubRange base={:#x} size={} live_blocks={}>",
            self.0.base(),
            self.0.len(),
            self.0.live_blocks()
        )
    }
}

/// Validates a raw device pointer range (for tests and the future `npurt.acl`): returns
/// a dict with base, offset, size, page_kind, pool.
#[pyfunction]
pub(crate) fn _resolve<'py>(
    py: Python<'py>,
    device: &Bound<'py, PyAny>,
    ptr: &Bound<'py, PyAny>,
    nbytes: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let id = device_id(device)?;
    let addr = int_arg(ptr, "ptr", 0, i64::MAX)? as usize;
    let r = alloc::resolve(id, addr, size_arg(nbytes, "nbytes")?).py_err()?;
    let d = PyDict::new(py);
    d.set_item("base", r.base)?;
    d.set_item("offset", r.offset)?;
    d.set_item("size", r.size)?;
    d.set_item("page_kind", r.page_kind.as_str())?;
    d.set_item("pool", r.pool)?;
    Ok(d)
}

/// True if `ptr` lies in memory a running device holds, live or freed-but-cached (the acl
/// layer refuses to take such a pointer for pageable host memory).
#[pyfunction]
pub(crate) fn _owns_device_address(py: Python<'_>, ptr: &Bound<'_, PyAny>) -> PyResult<bool> {
    let addr = int_arg(ptr, "ptr", 0, i64::MAX)? as usize;
    Ok(py.detach(|| npurt_core::alloc::owns_address(addr)))
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMemPool>()?;
    m.add_class::<PySubRange>()?;
    m.add_function(wrap_pyfunction!(_resolve, m)?)?;
    m.add_function(wrap_pyfunction!(_owns_device_address, m)?)?;
    Ok(())
}
