//! Thread roles: whether this thread is one of npurt's own (a worker, engine or timer
//! thread), and the check every blocking call makes first. Per-thread state, like the
//! current context in [`current`](crate::current); the executor only marks its threads.

use crate::error::{DeviceError, Result};
use std::cell::Cell;

thread_local! {
    static RUNTIME_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a runtime thread (called once by each thread npurt starts).
pub(crate) fn mark_runtime_thread() {
    RUNTIME_THREAD.with(|c| c.set(true));
}

/// True on npurt's own worker and engine threads.
pub fn is_runtime_thread() -> bool {
    RUNTIME_THREAD.with(|c| c.get())
}

/// Blocking calls from a runtime thread would wait on themselves: refuse them.
pub(crate) fn forbid_runtime_thread(what: &'static str) -> Result<()> {
    if is_runtime_thread() {
        if crate::sanitizer::on() {
            crate::sanitizer::on_refused(what);
        }
        return Err(DeviceError::RuntimeThread(what).into());
    }
    Ok(())
}
