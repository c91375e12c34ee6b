//! The sanitizer (issue 19): memcheck, racecheck and synccheck for npurt programs, with the
//! host as a participant. One engine owns every rule; the runtime's hook points call in
//! only when [`on`] (one relaxed load) says a tool is enabled.
//!
//! * [`memcheck`]: explicit-free allocations (ACL's `aclrtMalloc` / `aclrtMallocHost`
//!   pointers) still live at device reset or exit (leaks, with their allocation stacks),
//!   double and invalid frees, use of freed memory (freed blocks stay in a quarantine, their
//!   whole pages `PROT_NONE`), copies outside their allocation.
//! * [`race`]: CSAN's vector clocks per stream and per host thread over byte ranges; the
//!   host's own reads and writes (copies on the calling thread, buffer exports, `to_host`)
//!   count as accesses.
//! * [`sync`]: waits on events never recorded, destroying what another stream still waits
//!   on, host callbacks blocking on the runtime, one stream fed by two host threads.
//! * [`init`] (opt-in, not in `all`): reads of device memory never written since it was
//!   allocated.
//!
//! Findings go to [`report`], which renders compute-sanitizer's layout and JSON.

pub mod clock;
pub mod init;
pub mod memcheck;
pub mod quarantine;
pub mod race;
mod race_report;
#[cfg(test)]
mod race_tests;
mod redzone;
pub mod report;
pub mod sync;
#[cfg(test)]
mod tests;
mod tool;
mod trap;

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};

/// Tool bits of [`enable`].
pub const MEMCHECK: u8 = 1;
pub const RACECHECK: u8 = 2;
pub const SYNCCHECK: u8 = 4;
pub const ALL: u8 = MEMCHECK | RACECHECK | SYNCCHECK;
/// Opt-in tools, not part of `all` (compute-sanitizer's initcheck is a tool of its own).
pub const INITCHECK: u8 = 8;
/// memcheck's option `padding` (compute-sanitizer's `--padding`): the pyACL front hands
/// out explicit-free device memory with a redzone of [`PAD_BYTES`] behind it.
pub const PADDING: u8 = 16;
pub use redzone::PAD_BYTES;
/// Every tool bit.
const EVERY: u8 = ALL | INITCHECK | PADDING;

static TOOLS: AtomicU8 = AtomicU8::new(0);
/// Call sites were captured before the sanitizer asked for them (restored on disable).
static SITES_BEFORE: AtomicBool = AtomicBool::new(false);

/// Why a sanitizer call was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SanitizerError {
    #[error(
        "unknown sanitizer tool {0:?}: expected memcheck, racecheck, synccheck, all, initcheck or padding (comma-separated)"
    )]
    UnknownTool(String),
}

impl SanitizerError {
    /// ACL's code: a bad argument (107000).
    pub fn code(&self) -> crate::AclCode {
        crate::AclCode::PARAM_INVALID
    }
}

/// True when any tool is enabled: the one relaxed load a hook point pays when off.
#[inline(always)]
pub fn on() -> bool {
    TOOLS.load(Relaxed) != 0
}

/// True when `tool` (a bit) is enabled.
#[inline]
pub fn enabled(tool: u8) -> bool {
    TOOLS.load(Relaxed) & tool != 0
}

/// The enabled tool bits.
pub fn tools() -> u8 {
    TOOLS.load(Relaxed)
}

/// Parses `memcheck,racecheck,synccheck`, `all` (those three), `initcheck`, or an empty /
/// `0` / `none` / `off` string (no tool) into tool bits.
pub fn parse(spec: &str) -> Result<u8, SanitizerError> {
    let mut bits = 0;
    for word in spec.split([',', ' ', '+']).map(str::trim).filter(|w| !w.is_empty()) {
        bits |= match word.to_ascii_lowercase().as_str() {
            "memcheck" => MEMCHECK,
            "racecheck" => RACECHECK,
            "synccheck" => SYNCCHECK,
            "initcheck" => INITCHECK,
            "padding" => PADDING,
            "all" | "1" | "on" | "true" => ALL,
            "0" | "none" | "off" | "false" => 0,
            _ => return Err(SanitizerError::UnknownTool(word.to_string())),
        };
    }
    Ok(bits)
}

/// Enables exactly `tools` (0 disables). Launches then capture their call site (the
/// reports name the launch lines); disabling restores the previous capture setting and
/// forgets the tracked state (findings stay until [`report::take`]).
pub fn enable(tools: u8) {
    let tools = tools & EVERY;
    if tools & INITCHECK != 0 {
        init::start();
    }
    let before = TOOLS.swap(tools, Relaxed);
    if tools & INITCHECK == 0 {
        init::stop();
    }
    if before == 0 && tools != 0 {
        SITES_BEFORE.store(crate::profiler::site::capturing(), Relaxed);
        crate::profiler::site::set_always(true);
        memcheck::start();
        race::start();
        sync::start();
    } else if before != 0 && tools == 0 {
        crate::profiler::site::set_always(SITES_BEFORE.load(Relaxed));
        memcheck::stop();
        race::stop();
        sync::stop();
    }
}

// The hook points. The runtime calls each from one place, behind `if sanitizer::on()`.

/// Task `pos` was pushed on `s` (`stream::StreamInner::try_push`).
#[cold]
pub(crate) fn on_submit(s: &crate::stream::StreamInner, pos: u64, meta: u32, kind: crate::profiler::TaskKind) {
    use crate::profiler::TaskKind as K;
    let staged = !matches!(kind, K::Record | K::Wait | K::HostFunc);
    race::submitted(s.id, pos, meta, staged);
    sync::submitted(s.id, meta);
}

/// Stream `waiter` will wait for the first `target` tasks of `on` (`Stream::wait_point`,
/// `Stream::try_wait_writer`; also when the wait is elided because they completed).
#[cold]
pub(crate) fn on_wait(
    waiter: &std::sync::Arc<crate::stream::StreamInner>,
    on: &crate::stream::StreamInner,
    target: u64,
) {
    race::wait(waiter.id, waiter.queue.tail(), on.id, target);
    if on.timeline.completed() < target {
        sync::stream_wait(waiter, on.id, target);
    }
}

/// Stream `waiter` waits on the event at `event` (`point`: the stream and task count it
/// was recorded at, `None` if never recorded).
#[cold]
pub(crate) fn on_event_wait(
    waiter: &std::sync::Arc<crate::stream::StreamInner>,
    event: usize,
    point: Option<&(std::sync::Arc<crate::stream::StreamInner>, u64)>,
) {
    sync::event_wait(waiter, event, point);
}

/// This host thread saw the first `count` tasks of stream `stream` complete.
#[cold]
pub(crate) fn on_host_sync(stream: u64, count: u64) {
    race::host_sync(stream, count);
}

/// A host callback, task `pos` of stream `stream`, starts on this (engine) thread.
#[cold]
pub(crate) fn on_callback(stream: u64, pos: u64) {
    race::callback_enter(stream, pos);
}

/// A runtime thread was refused the blocking call `what` (`thread_role`).
#[cold]
pub(crate) fn on_refused(what: &str) {
    if let Some((stream, pos)) = race::in_callback() {
        sync::blocked_in_callback(what, stream, pos);
    }
}

/// Stream `s` is destroyed dropping its queued work (called before the drop).
#[cold]
pub(crate) fn on_force_destroy(s: &crate::stream::StreamInner) {
    let done = s.timeline.completed();
    sync::stream_destroyed(s.id, done);
    // Task `done` may be running and `done + 1` may start before the drop is seen; the
    // tasks after them never run.
    race::dropped(s.id, done + 2);
}

/// A copy or memset: queued on `stream`, or (`None`) done now by the host thread;
/// `dst` written, `src` read (`(addr, len)`), `what` its label.
#[cold]
pub(crate) fn on_copy(stream: Option<u64>, dst: (usize, usize), src: Option<(usize, usize)>, what: &str) {
    let acc = |(start, len): (usize, usize), write| race::Access { start, len, write };
    match stream {
        Some(id) => {
            let mut v = vec![acc(dst, true)];
            v.extend(src.map(|s| acc(s, false)));
            race::stage(id, what, v);
        }
        None => {
            if let Some(s) = src {
                race::host_access(s.0, s.1, false, what);
            }
            race::host_access(dst.0, dst.1, true, what);
        }
    }
}

/// The Python stack of the current host thread (innermost last), captured through the
/// bindings' site source; 0 when none is registered or this is a runtime thread.
pub(crate) fn stack_here() -> u32 {
    if crate::thread_role::is_runtime_thread() {
        return 0;
    }
    crate::profiler::site::capture_stack()
}
