//! Argument checking shared by the bindings: every number and timeout a user passes goes
//! through here, so wrong types and absurd values give typed npurt errors, never a crash.

use crate::errors::{type_error, value_error};
use pyo3::prelude::*;
use pyo3::type_object::PyTypeCheck;
use pyo3::types::{PyBool, PyFloat, PyInt};
use std::time::Duration;

/// An integer argument (bools refused), range-checked.
pub(crate) fn int_arg(obj: &Bound<'_, PyAny>, name: &str, min: i64, max: i64) -> PyResult<i64> {
    // Fast path: a plain int in range.
    if let Ok(Ok(v)) = obj.cast_exact::<PyInt>().map(|i| i.extract::<i64>()) {
        if (min..=max).contains(&v) {
            return Ok(v);
        }
    }
    // ints and objects with __index__ (numpy integers); never bools or floats
    if obj.is_instance_of::<PyBool>() || !(obj.is_instance_of::<PyInt>() || obj.hasattr("__index__")?) {
        return Err(type_error(format!("{name} must be an int, not {}", type_name(obj))));
    }
    let v: i64 = match obj.call_method0("__index__").and_then(|i| i.extract::<i64>()) {
        Ok(v) => v,
        Err(_) => return Err(value_error(format!("{name}={obj} is out of range {min}..={max}"))),
    };
    if v < min || v > max {
        return Err(value_error(format!("{name}={v} is out of range {min}..={max}")));
    }
    Ok(v)
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

/// A byte value for memset: 0..=255.
pub(crate) fn value_arg(value: &Bound<'_, PyAny>) -> PyResult<u8> {
    Ok(int_arg(value, "value", 0, 255)? as u8)
}

/// `blocks=None` or a kernel block count, 1..=MAX_BLOCKS.
pub(crate) fn blocks_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    match obj {
        Some(b) if !b.is_none() => Ok(Some(int_arg(b, "blocks", 1, npurt_core::MAX_BLOCKS as i64)? as u32)),
        _ => Ok(None),
    }
}

/// A timeout in seconds: `None` waits forever; must be a non-negative number.
pub(crate) fn timeout_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    let secs = number_arg(obj, "timeout", "a number of seconds or None")?;
    if secs.is_nan() || secs < 0.0 {
        return Err(value_error(format!("timeout must be >= 0 seconds, got {secs}")));
    }
    if secs.is_infinite() || secs > 1e9 {
        return Ok(None);
    }
    Ok(Some(Duration::from_secs_f64(secs)))
}

/// A duration in seconds for a kernel: finite, 0..=3600.
pub(crate) fn seconds_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Duration> {
    let secs = number_arg(obj, name, "a number of seconds")?;
    if !secs.is_finite() || !(0.0..=3600.0).contains(&secs) {
        return Err(value_error(format!(
            "{name} must be between 0 and 3600 seconds, got {secs}"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A real number: an int or a float, never a bool (TypeError "`name` must be `expected`");
/// an int too large for a float is a ValueError.
pub(crate) fn number_arg(obj: &Bound<'_, PyAny>, name: &str, expected: &str) -> PyResult<f64> {
    if obj.is_instance_of::<PyBool>() || !(obj.is_instance_of::<PyFloat>() || obj.is_instance_of::<PyInt>()) {
        return Err(type_error(format!("{name} must be {expected}, not {}", type_name(obj))));
    }
    obj.extract()
        .map_err(|_| value_error(format!("{name}={obj} is out of range")))
}

/// A flag: a bool (numpy's bool too); anything else is an InvalidTypeError naming `name`.
pub(crate) fn bool_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    obj.extract::<bool>()
        .map_err(|_| type_error(format!("{name} must be a bool, not {}", type_name(obj))))
}

/// An optional flag: `None` (or absent) is `None`.
pub(crate) fn opt_bool_arg(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<bool>> {
    match obj {
        Some(o) if !o.is_none() => bool_arg(o, name).map(Some),
        _ => Ok(None),
    }
}

/// A str argument; anything else is an InvalidTypeError naming `name`.
pub(crate) fn str_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    obj.extract::<String>()
        .map_err(|_| type_error(format!("{name} must be a str, not {}", type_name(obj))))
}

/// `obj` as the pyclass `T`, or a TypeError "`name` must be `expected`, not <type>".
#[inline]
pub(crate) fn cast_arg<'a, 'py, T: PyTypeCheck>(
    obj: &'a Bound<'py, PyAny>,
    name: &str,
    expected: &str,
) -> PyResult<&'a Bound<'py, T>> {
    obj.cast::<T>()
        .map_err(|_| type_error(format!("{name} must be {expected}, not {}", type_name(obj))))
}

pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}
