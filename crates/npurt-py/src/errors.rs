//! The one place where npurt's Rust errors become Python exceptions.
//!
//! The exception classes live in `npurt/exceptions.py` (a tree under `npurt.Error`, each
//! class also deriving from the matching builtin); this module picks the class for an
//! [`ErrorKind`] and raises it with the message, the ACL code and the ACL name.

use npurt_core::collective::CollectiveError;
use npurt_core::error::{DeviceError, IpcError, StreamError, TaskError};
use npurt_core::{AclCode, Error, ErrorKind};
use pyo3::exceptions::PyResourceWarning;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyModule, PyType};

fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidValue => "InvalidValueError",
        ErrorKind::InvalidDevice => "InvalidDeviceError",
        ErrorKind::NoContext => "NoContextError",
        ErrorKind::WrongContext => "WrongContextError",
        ErrorKind::InvalidHandle => "InvalidHandleError",
        ErrorKind::Timeout => "WaitTimeoutError",
        ErrorKind::OutOfMemory => "OutOfMemoryError",
        ErrorKind::MemoryFree => "MemoryFreeError",
        ErrorKind::TaskFailed => "TaskFailedError",
        ErrorKind::Aborted => "StreamAbortedError",
        ErrorKind::NotSupported => "NotSupportedError",
        ErrorKind::Internal => "InternalError",
        ErrorKind::Unavailable => "UnavailableError",
        ErrorKind::EventState => "EventStateError",
        ErrorKind::Ipc => "IpcError",
        ErrorKind::Collective => "CollectiveError",
    }
}

/// `npurt.exceptions`, imported once: an error raised while the interpreter shuts down
/// (a release in `__del__` at exit) still finds its class after `sys.modules` is cleared.
fn exceptions(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static EXC: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    EXC.get_or_try_init(py, || py.import("npurt.exceptions").map(Bound::unbind))
        .map(|m| m.bind(py))
}

fn raise(py: Python<'_>, class: &str, message: String, code: u32, name: &'static str) -> PyErr {
    let cls = exceptions(py)
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match cls {
        Ok(cls) => PyErr::from_type(cls, (message, code, name)),
        Err(e) => e,
    }
}

/// Converts a runtime error into the matching `npurt` exception.
pub(crate) fn to_py(e: Error) -> PyErr {
    if let Some(c) = collective_of(&e) {
        // HCCL's code and name (`HCCL_E_TIMEOUT`...), the engine's message.
        let (class, code) = (c.class_name(), c.code());
        let msg = c.to_string();
        return Python::attach(|py| {
            crate::profiler::on_error(py, &e);
            raise(py, class, msg, code.code, code.name)
        });
    }
    let acl = e.acl();
    let class = match &e {
        Error::Device(DeviceError::Forked) => "ForkedProcessError",
        Error::Device(DeviceError::ShutDown) => "ShutdownError",
        Error::Ipc(i) => ipc_class(i),
        _ => class_name(e.kind()),
    };
    Python::attach(|py| {
        crate::profiler::on_error(py, &e);
        raise(py, class, e.to_string(), acl.code, acl.name)
    })
}

/// The collective failure inside `e`: a direct one, or the sticky error of the stream
/// the collective ran on.
fn collective_of(e: &Error) -> Option<&CollectiveError> {
    match e {
        Error::Collective(c) => Some(c),
        Error::Stream(StreamError::TaskFailed {
            source: TaskError::Collective(c),
            ..
        }) => Some(c),
        _ => None,
    }
}

fn ipc_class(e: &IpcError) -> &'static str {
    match e {
        IpcError::NotShareable { .. } => "IpcNotShareableError",
        IpcError::MalformedKey { .. } | IpcError::UnknownKey { .. } => "IpcInvalidKeyError",
        IpcError::NotPermitted { .. } => "IpcPermissionError",
        IpcError::Stale { .. } => "IpcStaleKeyError",
        IpcError::Closed { .. } => "IpcClosedKeyError",
        IpcError::Timeout { .. } => "WaitTimeoutError",
        _ => "IpcError",
    }
}

/// An argument of the wrong type: `npurt.InvalidTypeError` (also a `TypeError`), code 107000.
pub(crate) fn type_error(message: String) -> PyErr {
    let acl = AclCode::PARAM_INVALID;
    Python::attach(|py| raise(py, "InvalidTypeError", message, acl.code, acl.name))
}

/// An argument with a bad value: `npurt.InvalidValueError`, code 107000.
pub(crate) fn value_error(message: impl Into<String>) -> PyErr {
    to_py(Error::invalid(message))
}

/// `{name: code}` of every ACL runtime error code ([`AclCode::ALL`]): the table that
/// `npurt.exceptions` and `npurt.acl.constants` read instead of writing the numbers again.
#[pyfunction]
pub(crate) fn _acl_error_codes(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    for c in AclCode::ALL {
        d.set_item(c.name, c.code)?;
    }
    Ok(d)
}

/// Emits a ResourceWarning (resources a teardown found still alive).
pub(crate) fn resource_warning(py: Python<'_>, message: String) -> PyResult<()> {
    let cmsg = std::ffi::CString::new(message).unwrap_or_default();
    PyErr::warn(py, &py.get_type::<PyResourceWarning>(), &cmsg, 1)
}

/// `Result<T, npurt_core::Error>` → `PyResult<T>`.
pub(crate) trait IntoPy<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, Error> {
    #[inline]
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// A builtin TypeError / ValueError / OverflowError / IndexError raised by Python code the
/// glue calls on the user's behalf (numpy's `view`/`astype` with a bad dtype...) as the
/// matching `npurt` class (`InvalidTypeError`, `InvalidValueError`, `InvalidIndexError`);
/// anything else unchanged.
pub(crate) fn typed(e: PyErr) -> PyErr {
    Python::attach(|py| {
        let class = if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) {
            "InvalidTypeError"
        } else if e.is_instance_of::<pyo3::exceptions::PyIndexError>(py) {
            "InvalidIndexError"
        } else if e.is_instance_of::<pyo3::exceptions::PyValueError>(py)
            || e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py)
        {
            "InvalidValueError"
        } else {
            return e;
        };
        let npurt_error = exceptions(py)
            .and_then(|m| m.getattr("Error"))
            .is_ok_and(|c| e.get_type(py).is_subclass(&c).unwrap_or(false));
        if npurt_error {
            return e;
        }
        let acl = AclCode::PARAM_INVALID;
        let typed = raise(py, class, e.value(py).to_string(), acl.code, acl.name);
        typed.set_cause(py, Some(e));
        typed
    })
}

/// A kernel argument error: dtype problems are `npurt.InvalidTypeError`, everything else
/// `npurt.InvalidValueError`; both ACL 107000.
pub(crate) fn kernel_arg(e: npurt_kernels::KernelArgError) -> PyErr {
    use npurt_kernels::KernelArgError as K;
    match e {
        K::DTypeMismatch { .. } | K::UnsupportedDType { .. } => type_error(e.to_string()),
        other => value_error(other.to_string()),
    }
}

/// An array operation error (runtime or kernel argument).
pub(crate) fn array_err(e: npurt_kernels::ArrayError) -> PyErr {
    match e {
        npurt_kernels::ArrayError::Core(e) => to_py(e),
        npurt_kernels::ArrayError::Arg(e) => kernel_arg(e),
    }
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_acl_error_codes, m)?)?;
    Ok(())
}
