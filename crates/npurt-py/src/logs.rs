//! Runtime logs to Python (`npurt-core`'s `logging` decides levels, modules, the
//! environment and the line format; this file only forwards). `python/npurt/logs.py` runs
//! the one forwarder thread: it waits in `_log_wait` without the GIL and hands what
//! `_log_take` returns to Python's `logging`. Records are never delivered to Python on the
//! thread that logs them, so logging cannot deadlock a host callback or a waiter that
//! holds the GIL.

use crate::args::type_name;
use crate::errors::{type_error, value_error};
use npurt_core::logging::{self, Level, Module};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};
use std::time::Duration;

/// A level argument: a name (`"debug"` … `"off"`, also `"null"`/`"warn"`), CANN's 0–4, or
/// Python `logging`'s 10/20/30/40/50.
fn level_arg(obj: &Bound<'_, PyAny>) -> PyResult<Level> {
    if let Ok(s) = obj.cast::<PyString>() {
        let s = s.to_str()?;
        return Level::parse(s).ok_or_else(|| {
            value_error(format!(
                "log level {s:?} is not one of debug, info, warning, error, off (or 0-4)"
            ))
        });
    }
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        let n: i64 = obj.extract().unwrap_or(-1);
        return Level::from_number(n)
            .ok_or_else(|| value_error(format!("log level {obj} is not 0-4 (CANN) or 10/20/30/40/50 (logging)")));
    }
    Err(type_error(format!(
        "log level must be a str or an int, not {}",
        type_name(obj)
    )))
}

fn module_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Module>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let s: String = obj
        .extract()
        .map_err(|_| type_error(format!("module must be a str, not {}", type_name(obj))))?;
    let names: Vec<&str> = Module::ALL.iter().map(|m| m.name()).collect();
    Module::parse(&s)
        .map(Some)
        .ok_or_else(|| value_error(format!("unknown log module {s:?} (modules: {})", names.join(", "))))
}

/// Installs the runtime's logger (reading the environment) and starts queueing records
/// for the forwarder; true if npurt's logger is the process's.
#[pyfunction]
fn _log_init() -> bool {
    let ok = logging::init();
    logging::set_forwarding(true);
    ok
}

/// Starts or stops queueing records for Python (stopped at exit, after the last flush).
#[pyfunction]
fn _log_forward(on: bool) {
    logging::set_forwarding(on);
}

/// Waits up to `timeout` seconds (GIL released) for a queued record; true if one is.
#[pyfunction]
fn _log_wait(py: Python<'_>, timeout: f64) -> bool {
    let t = Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
    py.detach(|| logging::wait(t))
}

/// Ends a `_log_wait` in progress.
#[pyfunction]
fn _log_wake(py: Python<'_>) {
    py.detach(logging::wake);
}

type Row = (u8, &'static str, String, String, u32, f64, u64, Option<String>);

/// Up to `max` queued records, oldest first: (level 0-3, module, message, file, line,
/// unix time in seconds, OS thread id, thread name).
#[pyfunction]
#[pyo3(signature = (max = 512))]
fn _log_take(max: usize) -> Vec<Row> {
    logging::take(max)
        .into_iter()
        .map(|r| {
            let t = r.unix_ns as f64 / 1e9;
            (
                r.level as u8,
                r.module.name(),
                r.message,
                r.file.into_owned(),
                r.line,
                t,
                r.thread,
                r.thread_name,
            )
        })
        .collect()
}

/// Records dropped because the forwarder's queue was full.
#[pyfunction]
fn _log_dropped() -> u64 {
    logging::dropped()
}

/// Sets the level of every module, or of one (`module="MEM"`).
#[pyfunction]
#[pyo3(signature = (level, module = None))]
fn _set_log_level(level: &Bound<'_, PyAny>, module: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let (l, m) = (level_arg(level)?, module_arg(module)?);
    logging::set_level(m, l);
    Ok(())
}

/// The level name of every module (the level last set for all), or of one module.
#[pyfunction]
#[pyo3(signature = (module = None))]
fn _get_log_level(module: Option<&Bound<'_, PyAny>>) -> PyResult<&'static str> {
    Ok(match module_arg(module)? {
        Some(m) => logging::level(m).name(),
        None => logging::global_level().name(),
    })
}

/// `{module: level name}` for every module.
#[pyfunction]
fn _log_levels() -> Vec<(&'static str, &'static str)> {
    Module::ALL
        .iter()
        .map(|&m| (m.name(), logging::level(m).name()))
        .collect()
}

/// Logs `message` from Python (`acl.app_log`: module `APP`) as if from `file:line`.
#[pyfunction]
#[pyo3(signature = (module, level, message, file = "<python>", line = 0))]
fn _log_record(
    module: &Bound<'_, PyAny>,
    level: &Bound<'_, PyAny>,
    message: &str,
    file: &str,
    line: u32,
) -> PyResult<()> {
    let m = module_arg(Some(module))?.unwrap_or(Module::App);
    let l = level_arg(level)?;
    logging::log_from(m, l, message, file, line);
    Ok(())
}

/// Test hook: `threads` runtime-side threads each log `n` records (module RUNTIME at
/// `level`) while this call holds the GIL and joins them. Returns when they are done —
/// it would deadlock if logging took the GIL on the logging thread.
#[pyfunction]
#[pyo3(signature = (n, threads = 1, level = "debug"))]
fn _log_burst(n: usize, threads: usize, level: &str) -> PyResult<()> {
    let l = Level::parse(level).ok_or_else(|| value_error(format!("bad level {level:?}")))?;
    let handles: Vec<_> = (0..threads.clamp(1, 64))
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("npurt-logtest-{t}"))
                .spawn(move || {
                    for i in 0..n {
                        logging::log_from(Module::Runtime, l, &format!("burst {t}:{i}"), file!(), line!());
                    }
                })
        })
        .collect::<Result<_, _>>()
        .map_err(|e| value_error(format!("cannot start a thread: {e}")))?;
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_log_init, m)?)?;
    m.add_function(wrap_pyfunction!(_log_forward, m)?)?;
    m.add_function(wrap_pyfunction!(_log_wait, m)?)?;
    m.add_function(wrap_pyfunction!(_log_wake, m)?)?;
    m.add_function(wrap_pyfunction!(_log_take, m)?)?;
    m.add_function(wrap_pyfunction!(_log_dropped, m)?)?;
    m.add_function(wrap_pyfunction!(_set_log_level, m)?)?;
    m.add_function(wrap_pyfunction!(_get_log_level, m)?)?;
    m.add_function(wrap_pyfunction!(_log_levels, m)?)?;
    m.add_function(wrap_pyfunction!(_log_record, m)?)?;
    m.add_function(wrap_pyfunction!(_log_burst, m)?)?;
    Ok(())
}
