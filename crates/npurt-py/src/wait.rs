//! Blocking waits from Python. Every wait releases the GIL, parks in slices of at most
//! [`SLICE`], and checks for signals between slices, so Ctrl-C (SIGINT) raises
//! KeyboardInterrupt within about a slice even when the awaited work never finishes.

use crate::errors::IntoPy;
use npurt_core::{ErrorKind, Event, Stream};
use pyo3::prelude::*;
use std::time::{Duration, Instant};

/// Longest time a wait stays in Rust without checking for signals.
const SLICE: Duration = Duration::from_millis(50);

/// Calls `step(slice)` (without the GIL) until it reports done or `timeout` passes,
/// checking for signals in between. Returns false on timeout.
pub(crate) fn sliced<F>(py: Python<'_>, timeout: Option<Duration>, step: F) -> PyResult<bool>
where
    F: Fn(Duration) -> npurt_core::Result<bool> + Sync,
{
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let slice = deadline.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()).min(SLICE));
        if py.detach(|| step(slice)).py_err()? {
            return Ok(true);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        py.check_signals()?;
    }
}

/// Like [`sliced`] for a call that reports its timeout as a `Timeout`-kind error
/// (context and device synchronize): a slice that times out is "not done yet".
pub(crate) fn sliced_sync<F>(py: Python<'_>, timeout: Option<Duration>, sync: F) -> PyResult<()>
where
    F: Fn(Option<Duration>) -> npurt_core::Result<()> + Sync,
{
    let done = sliced(py, timeout, |slice| match sync(Some(slice)) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::Timeout => Ok(false),
        Err(e) => Err(e),
    })?;
    if done {
        Ok(())
    } else {
        py.detach(|| sync(Some(Duration::ZERO))).py_err() // the call's own timeout error
    }
}

/// `Stream.synchronize`: waits for everything submitted so far; raises the sticky error.
pub(crate) fn stream(py: Python<'_>, s: &Stream, timeout: Option<Duration>) -> PyResult<()> {
    s.check().py_err()?;
    let target = s.submitted_count();
    if !sliced(py, timeout, |slice| s.wait_completed(target, Some(slice)))? {
        return Err(s.timeout_error(timeout.unwrap_or_default())).py_err();
    }
    s.check().py_err()
}

/// Launch-blocking mode (`npurt_core::config::launch_blocking`): after a launch, copy or
/// record, waits for the stream and raises its error at the call; otherwise one load.
#[inline]
pub(crate) fn if_blocking(py: Python<'_>, s: &Stream) -> PyResult<()> {
    if npurt_core::config::launch_blocking() {
        stream(py, s, None)
    } else {
        Ok(())
    }
}

/// Waits for everything submitted to `s` so far, ignoring its errors (before a destroy).
pub(crate) fn drain(py: Python<'_>, s: &Stream) -> PyResult<()> {
    let target = s.submitted_count();
    sliced(py, None, |slice| {
        Ok(s.wait_completed(target, Some(slice)).unwrap_or(true))
    })
    .map(drop)
}

/// `Event.synchronize`.
pub(crate) fn event(py: Python<'_>, e: &Event, timeout: Option<Duration>) -> PyResult<()> {
    if !sliced(py, timeout, |slice| e.wait(Some(slice)))? {
        return Err(Event::timeout_error(timeout.unwrap_or_default())).py_err();
    }
    Ok(())
}

/// `copies::host_access` in slices: waits for `s` (if given) and then for the array's
/// last writer before the host touches `a`.
pub(crate) fn host_access(py: Python<'_>, a: &npurt_kernels::DeviceArray, s: Option<&Stream>) -> PyResult<()> {
    if let Some(s) = s {
        stream(py, s, None)?;
    }
    sliced(py, None, |slice| a.wait_writes(Some(slice))).map(drop)
}

/// Before a non-forced `reset_device` that drops the last reference: waits (in slices) for
/// the device's queued work, which the teardown would otherwise wait for without checking
/// for signals. Sticky stream errors do not stop the wait (the teardown ignores them).
pub(crate) fn before_teardown(py: Python<'_>, dev: &npurt_core::Device) -> PyResult<()> {
    sliced(py, None, |slice| Ok(dev.wait_idle(Some(slice)))).map(drop)
}
