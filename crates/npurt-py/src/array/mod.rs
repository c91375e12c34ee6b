//! `npurt._Array` (the native half of `npurt.DeviceArray`) and, in `ops.rs`, the
//! kernel launch functions behind `npurt.add`, `npurt.matmul`... (`random.rs`: the random
//! kernels and the per-device generators' state). Argument conversion only:
//! views, checks and stream bookkeeping live in `npurt_kernels::array`, the kernels in
//! `npurt_kernels`. [`register`] adds all of them to the module (one table).

mod index;
mod nn;
mod ops;
mod random;
mod shapes;

use crate::args::cast_arg;
use crate::device::device_id;
use crate::errors::{array_err, kernel_arg, type_error, value_error, IntoPy};
use crate::gil::{detach_above, GIL_FREE_ALLOC};
use crate::pybuf::{native_array, read_only_array};
use crate::stream::stream_or_current;
use npurt_core::memory::AnyBuffer;
use npurt_kernels::array::{self as karray, DeviceArray};
use npurt_kernels::{DType, KernelArgError, Launch, Scalar};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple};

/// A device buffer (or a view into one) with dtype, shape and strides (in elements).
#[pyclass(module = "npurt", name = "_Array", frozen)]
pub(crate) struct PyArray {
    pub(crate) a: DeviceArray,
}

pub(crate) fn dtype_arg(name: &str) -> PyResult<DType> {
    DType::from_name(name).ok_or_else(|| type_error(format!("unsupported dtype {name:?}")))
}

fn arr<'a, 'py>(obj: &'a Bound<'py, PyAny>, what: &str) -> PyResult<&'a Bound<'py, PyArray>> {
    cast_arg(obj, what, "an npurt.DeviceArray")
}

fn scalar(obj: &Bound<'_, PyAny>) -> PyResult<Option<Scalar>> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(Some(Scalar::Bool(obj.extract()?)));
    }
    if obj.is_instance_of::<PyInt>() {
        let v: i64 = obj
            .extract()
            .map_err(|_| value_error(format!("scalar {obj} is out of range")))?;
        return Ok(Some(Scalar::Int(v)));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Some(Scalar::Float(obj.extract()?)));
    }
    Ok(None)
}

fn run(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    inputs: &[&DeviceArray],
    out: &DeviceArray,
    build: impl FnOnce(u32) -> Result<Launch, KernelArgError>,
) -> PyResult<()> {
    run_outs(py, stream, inputs, out, &[], build)
}

/// [`run`] for a kernel with more outputs than `out`: the `extra` ones are ordered after
/// their last writers like inputs and marked written by the stream.
fn run_outs(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    inputs: &[&DeviceArray],
    out: &DeviceArray,
    extra: &[&DeviceArray],
    build: impl FnOnce(u32) -> Result<Launch, KernelArgError>,
) -> PyResult<()> {
    let s = stream_or_current(stream)?;
    let all: Vec<&DeviceArray>;
    let inputs = if extra.is_empty() {
        inputs
    } else {
        all = inputs.iter().chain(extra).copied().collect();
        &all
    };
    if npurt_core::profiler::active() {
        let shapes: Vec<&[usize]> = inputs.iter().chain([&out]).map(|a| a.tensor().shape()).collect();
        crate::profiler::note_shapes(&shapes);
    }
    let pending = karray::launch(&s, inputs, out, build).map_err(array_err)?;
    for e in extra {
        e.mark_written(&s);
    }
    if let Some(p) = pending {
        py.detach(|| karray::finish_launch(&s, p)).py_err()?;
    }
    crate::wait::if_blocking(py, &s)
}

#[pymethods]
impl PyArray {
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.a.tensor().shape())
    }
    /// Strides in elements.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.a.tensor().strides())
    }
    #[getter]
    fn dtype(&self) -> &'static str {
        self.a.tensor().dtype().name()
    }
    /// Byte offset of element 0 in the buffer.
    #[getter]
    fn offset(&self) -> usize {
        self.a.offset()
    }
    #[getter]
    fn device(&self) -> u32 {
        self.a.device()
    }
    #[getter]
    fn nbytes(&self) -> usize {
        self.a.tensor().nbytes()
    }
    #[getter]
    fn buffer_nbytes(&self) -> usize {
        self.a.buffer().nbytes()
    }
    /// True for float32, float16 and bfloat16 (no string made: the launch fast path).
    #[getter]
    fn is_float(&self) -> bool {
        self.a.tensor().dtype().is_float()
    }
    #[getter]
    fn is_contiguous(&self) -> bool {
        self.a.tensor().is_contiguous()
    }
    /// True if `other` views the same buffer.
    fn shares_buffer(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.a.shares_buffer(&arr(other, "other")?.get().a))
    }
    /// Another view of the same buffer (checked to lie inside it).
    fn view(&self, offset: usize, dtype: &str, shape: Vec<usize>, strides: Vec<isize>) -> PyResult<PyArray> {
        let a = self
            .a
            .view_as(offset, dtype_arg(dtype)?, shape, strides)
            .map_err(array_err)?;
        Ok(PyArray { a })
    }
    /// numpy's no-copy reshape: a view of the same elements, or a ValueError when the
    /// strides cannot express the new shape (copy first).
    fn reshape(&self, shape: Vec<usize>) -> PyResult<PyArray> {
        let t = self.a.tensor().reshape(&shape).map_err(kernel_arg)?;
        let a = self
            .a
            .view_as(self.a.offset(), t.dtype(), t.shape().to_vec(), t.strides().to_vec())
            .map_err(array_err)?;
        Ok(PyArray { a })
    }
    /// Waits for the writes queued on the buffer (its last-writer stream).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        crate::wait::sliced(py, None, |slice| self.a.wait_writes(Some(slice))).map(drop)
    }
    /// A uint8 numpy view of the whole buffer (the caller synchronizes first).
    fn _host_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let b = self.a.buffer();
        native_array(py, &AnyBuffer::Device(b.clone()), b.nbytes())
    }
    /// A read-only uint8 numpy view of the array's byte span (its first to its last
    /// element's bytes): `to_host`'s, which has synchronized the writers first. racecheck
    /// counts it as a host read of exactly those bytes, not a write of the buffer.
    fn _host_read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (start, len) = self.a.tensor().byte_span();
        read_only_array(py, &AnyBuffer::Device(self.a.buffer().clone()), start, len, "to_host")
    }
    /// Orders `stream` after the buffer's last writer when that is another stream (a
    /// device-side wait, as a kernel's launch does): the `mpi` backend's collectives.
    fn _prepare_on(&self, stream: &Bound<'_, PyAny>) -> PyResult<()> {
        self.a.prepare_on(&*stream_or_current(Some(stream))?).py_err()
    }
    /// Records `stream` (or the current stream) as the buffer's last writer.
    #[pyo3(signature = (stream=None))]
    fn _mark_written(&self, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.a.mark_written(&*stream_or_current(stream)?);
        Ok(())
    }
}

/// A new contiguous array (contents unspecified) from the device's caching pool.
#[pyfunction]
#[pyo3(signature = (shape, dtype, device=None, shareable=None))]
pub(crate) fn _empty(
    py: Python<'_>,
    shape: Vec<usize>,
    dtype: &str,
    device: Option<&Bound<'_, PyAny>>,
    shareable: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyArray> {
    let dt = dtype_arg(dtype)?;
    let dev = device.filter(|d| !d.is_none()).map(device_id).transpose()?;
    let shareable = crate::args::opt_bool_arg(shareable, "shareable")?;
    // As `malloc`: which context `device=` means is `alloc::malloc_for`'s rule; a large
    // request may map segments and another device may have to start, so those run
    // without the GIL.
    let nbytes = shape.iter().fold(dt.itemsize(), |n, &d| n.saturating_mul(d));
    let hint = if dev.is_some() { usize::MAX } else { nbytes };
    let a = detach_above(py, hint, GIL_FREE_ALLOC, || {
        DeviceArray::empty_for_ex(dev, dt, shape, shareable)
    })
    .map_err(array_err)?;
    Ok(PyArray { a })
}

/// Adds `_Array` and every array function to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyArray>()?;
    m.add_function(wrap_pyfunction!(_empty, m)?)?;
    shapes::register(m)?;
    random::register(m)?;
    nn::register(m)?;
    index::register(m)?;
    ops::register(m)
}
