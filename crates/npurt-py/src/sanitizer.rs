//! `npurt.sanitizer`'s calls into the engine (`npurt_core::sanitizer`): switches, the
//! hooks of the Python fronts (acl's explicit-free allocations), and the reports.

use crate::errors::IntoPy;
use crate::memory::as_native;
use npurt_core::sanitizer::{self, memcheck, report};
use pyo3::prelude::*;

/// Enables the tools named in `spec` (`"memcheck,racecheck"`, `"all"`, `""` for none);
/// returns the tool bits. `print`: each error's block goes to stderr when found.
#[pyfunction]
#[pyo3(signature = (spec, print=true))]
fn _sanitizer_enable(spec: &str, print: bool) -> PyResult<u8> {
    let bits = sanitizer::parse(spec).map_err(npurt_core::Error::from).py_err()?;
    report::set_print(print);
    sanitizer::enable(bits);
    Ok(bits)
}

/// The enabled tool bits (memcheck 1, racecheck 2, synccheck 4).
#[pyfunction]
fn _sanitizer_tools() -> u8 {
    sanitizer::tools()
}

/// An explicit-free allocation (`acl.rt.malloc` / `malloc_host`) of `size` bytes (default:
/// all of `buf`; the rest of `buf` is its redzone) was handed out.
#[pyfunction]
#[pyo3(signature = (buf, size=None))]
fn _sanitizer_raw_alloc(buf: &Bound<'_, PyAny>, size: Option<usize>) -> PyResult<()> {
    use npurt_core::memory::Buffer;
    if let Some(b) = as_native(buf)? {
        memcheck::raw_alloc_sized(&b, size.unwrap_or(b.nbytes()));
    }
    Ok(())
}

/// Bytes of redzone behind each padded allocation (`padding`).
#[pyfunction]
fn _sanitizer_pad_bytes() -> usize {
    sanitizer::PAD_BYTES
}

/// An explicit-free allocation is about to be freed (it goes to the quarantine).
#[pyfunction]
fn _sanitizer_raw_free(buf: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Some(b) = as_native(buf)? {
        memcheck::raw_free(&b);
    }
    Ok(())
}

/// A free of `addr` matched no live allocation (`api` names the call): reported as a
/// double or invalid free; true when reported.
#[pyfunction]
fn _sanitizer_bad_free(addr: usize, api: &str) -> bool {
    memcheck::bad_free(addr, api)
}

/// `api` was given `n` bytes at `addr` that are not live memory: true (reported) when
/// they are in a freed, quarantined block.
#[pyfunction]
fn _sanitizer_check_freed(addr: usize, n: usize, api: &str) -> bool {
    memcheck::check_freed(addr, n, api)
}

/// The host (this thread) reads or writes `n` bytes at `addr` itself (pyACL's copies
/// through pageable memory, `acl.util.ptr_to_bytes`): racecheck and initcheck see it.
#[pyfunction]
fn _sanitizer_host_access(addr: usize, n: usize, write: bool, what: &str) {
    sanitizer::race::host_access(addr, n, write, what);
}

/// The callback task `(stream, position)` this thread runs, if any (a host callback).
#[pyfunction]
fn _sanitizer_task() -> Option<(u64, u64)> {
    sanitizer::race::in_callback()
}

/// This thread runs callbacks on behalf of `task` (or, `None`, no longer); the previous.
#[pyfunction]
#[pyo3(signature = (task=None))]
fn _sanitizer_run_as(task: Option<(u64, u64)>) -> Option<(u64, u64)> {
    sanitizer::race::run_as(task)
}

/// A stream of pyACL code (`acl.rt.create_stream`): synccheck reports a second host
/// thread feeding it.
#[pyfunction]
fn _sanitizer_acl_stream(s: &Bound<'_, crate::stream::PyStream>) {
    sanitizer::sync::mark_acl_stream(s.get().s.id());
}

/// An event destroyed explicitly (`acl.rt.destroy_event`): synccheck reports streams
/// still waiting on it.
#[pyfunction]
fn _sanitizer_event_destroyed(e: &Bound<'_, crate::event::PyEvent>) {
    sanitizer::sync::event_destroyed(e.get().e.key());
}

/// A `check` block starts: `(index of its first finding, number of its first
/// explicit-free allocation)`.
#[pyfunction]
fn _sanitizer_begin() -> (usize, u64) {
    (report::begin_block(), memcheck::mark())
}

/// A `check` block that started at `mark` ends: its allocations still live are leaks.
#[pyfunction]
fn _sanitizer_leaks_since(mark: u64) {
    memcheck::leaks_since(mark);
}

/// The program ends: explicit-free allocations still live are leaks.
#[pyfunction]
fn _sanitizer_at_exit() {
    memcheck::at_exit();
}

/// The report of the findings from the `since`-th on: `(errors, text, json)`; `take`
/// removes them; `leaks` adds the `LEAK SUMMARY` line.
#[pyfunction]
#[pyo3(signature = (take=false, leaks=true, since=0))]
fn _sanitizer_report(take: bool, leaks: bool, since: usize) -> (usize, String, String) {
    let f = if take {
        report::take_from(since)
    } else {
        report::snapshot_from(since)
    };
    (f.len(), report::text(&f, leaks), report::json(&f))
}

/// Adds this file's functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_sanitizer_enable, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_tools, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_raw_alloc, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_raw_free, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_bad_free, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_check_freed, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_host_access, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_task, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_pad_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_run_as, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_at_exit, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_begin, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_leaks_since, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_acl_stream, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_event_destroyed, m)?)?;
    m.add_function(wrap_pyfunction!(_sanitizer_report, m)?)?;
    Ok(())
}
