//! `npurt._Array` (the native half of `npurt.DeviceArray`) and the kernel launch functions
//! behind `npurt.add`, `npurt.matmul`... Argument conversion only: views, checks and
//! stream bookkeeping live in `npurt_kernels::device`, the kernels in `npurt_kernels`.

use crate::args::type_name;
use crate::errors::{array_err, kernel_arg, type_error, value_error, IntoPy};
use crate::memory::{memory_for, native_array};
use crate::stream::stream_or_current;
use npurt_core::memory::AnyBuffer;
use npurt_kernels::device::{self, DeviceArray};
use npurt_kernels::{BinaryOp, DType, KernelArgError, Launch, Operand, ReduceOp, Scalar, UnaryOp};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple};

/// A device buffer (or a view into one) with dtype, shape and strides (in elements).
#[pyclass(module = "npurt", name = "_Array", frozen)]
pub(crate) struct PyArray {
    pub(crate) a: DeviceArray,
}

fn dtype_arg(name: &str) -> PyResult<DType> {
    DType::from_name(name).ok_or_else(|| type_error(format!("unsupported dtype {name:?}")))
}

fn arr<'a, 'py>(obj: &'a Bound<'py, PyAny>, what: &str) -> PyResult<&'a Bound<'py, PyArray>> {
    obj.cast::<PyArray>()
        .map_err(|_| type_error(format!("{what} must be an npurt.DeviceArray, not {}", type_name(obj))))
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
    let s = stream_or_current(stream)?;
    match device::launch(&s, inputs, out, build).map_err(array_err)? {
        None => Ok(()),
        Some(p) => py.detach(|| device::finish_launch(&s, p)).py_err(),
    }
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
    /// Waits for the writes queued on the buffer (its last-writer stream).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.a.synchronize()).py_err()
    }
    /// A uint8 numpy view of the whole buffer (the caller synchronizes first).
    fn _host_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let b = self.a.buffer();
        native_array(py, &AnyBuffer::Device(b.clone()), b.nbytes())
    }
    /// Records `stream` (or the current stream) as the buffer's last writer.
    #[pyo3(signature = (stream=None))]
    fn _mark_written(&self, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.a.mark_written(&stream_or_current(stream)?);
        Ok(())
    }
}

/// A new contiguous array (contents unspecified) from the device's caching pool.
#[pyfunction]
#[pyo3(signature = (shape, dtype, device=None))]
pub(crate) fn _empty(
    py: Python<'_>,
    shape: Vec<usize>,
    dtype: &str,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyArray> {
    let dt = dtype_arg(dtype)?;
    let mem = match device.filter(|d| !d.is_none()) {
        None => None,
        Some(_) => Some(memory_for(py, device)?),
    };
    let a = DeviceArray::empty(mem.as_ref(), dt, shape).map_err(array_err)?;
    Ok(PyArray { a })
}

#[pyfunction]
#[pyo3(signature = (op, x, out, stream=None))]
pub(crate) fn _unary(
    py: Python<'_>,
    op: &str,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = UnaryOp::ALL
        .into_iter()
        .find(|o| o.name() == op)
        .ok_or_else(|| value_error(format!("unknown unary op {op:?}")))?;
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        npurt_kernels::unary(op, x.tensor(), out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (op, a, b, out, stream=None))]
pub(crate) fn _binary(
    py: Python<'_>,
    op: &str,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = BinaryOp::ALL
        .into_iter()
        .find(|o| o.name() == op)
        .ok_or_else(|| value_error(format!("unknown binary op {op:?}")))?;
    let out = &arr(out, "out")?.get().a;
    let mut inputs: Vec<&DeviceArray> = Vec::new();
    let operand = |o: &Bound<'_, PyAny>, what: &str| -> PyResult<Operand> {
        if let Some(s) = scalar(o)? {
            return Ok(Operand::Scalar(s));
        }
        let x = arr(o, what)?.get();
        Ok(Operand::Tensor(x.a.tensor().clone()))
    };
    let (oa, ob) = (operand(a, "x1")?, operand(b, "x2")?);
    for o in [a, b] {
        if let Ok(x) = o.cast::<PyArray>() {
            inputs.push(&x.get().a);
        }
    }
    run(py, stream, &inputs, out, |c| {
        npurt_kernels::binary(op, oa, ob, out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (x, out, stream=None))]
pub(crate) fn _cast(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        npurt_kernels::cast(x.tensor(), out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (x, out, stream=None))]
pub(crate) fn _copy(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        npurt_kernels::copy(x.tensor(), out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (out, value, stream=None))]
pub(crate) fn _fill(
    py: Python<'_>,
    out: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let out = &arr(out, "out")?.get().a;
    let v =
        scalar(value)?.ok_or_else(|| type_error(format!("fill value must be a number, not {}", type_name(value))))?;
    run(py, stream, &[], out, |c| npurt_kernels::fill(out.tensor(), v, c))
}

#[pyfunction]
#[pyo3(signature = (alpha, x, y, out, stream=None))]
pub(crate) fn _axpy(
    py: Python<'_>,
    alpha: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let al = scalar(alpha)?.ok_or_else(|| type_error(format!("alpha must be a number, not {}", type_name(alpha))))?;
    let (x, y, out) = (&arr(x, "x")?.get().a, &arr(y, "y")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x, y], out, |c| {
        npurt_kernels::axpy(al, x.tensor(), y.tensor(), out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (op, x, axes, out, stream=None))]
pub(crate) fn _reduce(
    py: Python<'_>,
    op: &str,
    x: &Bound<'_, PyAny>,
    axes: Option<Vec<isize>>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = ReduceOp::ALL
        .into_iter()
        .find(|o| o.name() == op)
        .ok_or_else(|| value_error(format!("unknown reduction {op:?}")))?;
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        npurt_kernels::reduce(op, x.tensor(), axes.as_deref(), out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (x, axis, out, log=false, stream=None))]
pub(crate) fn _softmax(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: isize,
    out: &Bound<'_, PyAny>,
    log: bool,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        if log {
            npurt_kernels::log_softmax(x.tensor(), axis, out.tensor(), c)
        } else {
            npurt_kernels::softmax(x.tensor(), axis, out.tensor(), c)
        }
    })
}

fn opt_arr<'a, 'py>(o: Option<&'a Bound<'py, PyAny>>, what: &str) -> PyResult<Option<&'a Bound<'py, PyArray>>> {
    match o.filter(|o| !o.is_none()) {
        None => Ok(None),
        Some(o) => arr(o, what).map(Some),
    }
}

#[pyfunction]
#[pyo3(signature = (x, weight, bias, eps, out, rms=false, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _norm(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, PyAny>>,
    bias: Option<&Bound<'_, PyAny>>,
    eps: f64,
    out: &Bound<'_, PyAny>,
    rms: bool,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    let w = opt_arr(weight, "weight")?.map(|w| &w.get().a);
    let b = opt_arr(bias, "bias")?.map(|b| &b.get().a);
    let mut inputs = vec![x];
    inputs.extend(w);
    inputs.extend(b);
    run(py, stream, &inputs, out, |c| {
        if rms {
            if b.is_some() {
                return Err(KernelArgError::Invalid {
                    op: "rms_norm",
                    detail: "rms_norm takes no bias".into(),
                });
            }
            npurt_kernels::rms_norm(x.tensor(), w.map(|w| w.tensor()), eps, out.tensor(), c)
        } else {
            npurt_kernels::layer_norm(
                x.tensor(),
                w.map(|w| w.tensor()),
                b.map(|b| b.tensor()),
                eps,
                out.tensor(),
                c,
            )
        }
    })
}

#[pyfunction]
#[pyo3(signature = (a, b, out, trans_a=false, trans_b=false, stream=None, blocks=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _matmul(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    trans_a: bool,
    trans_b: bool,
    stream: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (a, b, out) = (
        &arr(a, "x1")?.get().a,
        &arr(b, "x2")?.get().a,
        &arr(out, "out")?.get().a,
    );
    // An explicit block count keeps the tile grid; fewer blocks run more tiles each.
    let blocks = match blocks.filter(|b| !b.is_none()) {
        Some(b) => Some(crate::args::int_arg(b, "blocks", 1, npurt_core::stream::MAX_BLOCKS as i64)? as u32),
        None => None,
    };
    run(py, stream, &[a, b], out, |c| {
        let (k, suggested) = npurt_kernels::matmul(a.tensor(), b.tensor(), out.tensor(), trans_a, trans_b, c)?;
        Ok((k, blocks.unwrap_or(suggested)))
    })
}

/// The output shape of `matmul(a, b)` (2-D or 3-D), or a typed error.
#[pyfunction]
pub(crate) fn _matmul_shape(a: Vec<usize>, b: Vec<usize>) -> PyResult<Vec<usize>> {
    npurt_kernels::matmul_out_shape(&a, &b, false, false).map_err(kernel_arg)
}

#[pyfunction]
#[pyo3(signature = (xs, axis, out, stream=None))]
pub(crate) fn _concat(
    py: Python<'_>,
    xs: Vec<Bound<'_, PyAny>>,
    axis: isize,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let out = &arr(out, "out")?.get().a;
    let refs: Vec<&Bound<'_, PyArray>> = xs.iter().map(|x| arr(x, "arrays")).collect::<PyResult<_>>()?;
    let inputs: Vec<&DeviceArray> = refs.iter().map(|r| &r.get().a).collect();
    let views: Vec<_> = inputs.iter().map(|a| a.tensor().clone()).collect();
    run(py, stream, &inputs, out, |c| {
        npurt_kernels::concat(&views, axis, out.tensor(), c)
    })
}
