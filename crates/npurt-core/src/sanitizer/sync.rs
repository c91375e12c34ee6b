//! synccheck: misuse of streams and events that npurt tolerates and the card does not.
//!
//! * a stream waits on an event that was never recorded (the wait does nothing);
//! * an event is destroyed, or a stream force-destroyed, while another stream still waits
//!   on it (undefined on the card: the waiter may hang or run early);
//! * a host callback makes a blocking runtime call (it would wait on itself);
//! * two host threads submit to one pyACL stream (ACL streams are not thread-safe: npurt's
//!   lock-free ring makes it work here, the card does not promise it) — a portability error.

use super::report::{self, Finding};
use super::tool::Tool;
use crate::stream::StreamInner;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Waits remembered for the destroy checks (older ones that have passed are dropped).
const MAX_WAITS: usize = 4096;

struct Waiting {
    /// The event waited on (its address), if the wait was an event's.
    event: Option<usize>,
    /// The stream waited on (also as a handle for event waits) and the task count waited for.
    on: u64,
    on_stream: Option<Weak<StreamInner>>,
    target: u64,
    waiter: Weak<StreamInner>,
    /// The waiter's tasks before the wait: it has passed once it completed more.
    before: u64,
    site: u32,
}

impl Waiting {
    /// The waiter, while it has not passed the wait and the work it waits for has not
    /// completed (a wait on completed work cannot be disturbed any more).
    fn pending(&self) -> Option<Arc<StreamInner>> {
        let done = self
            .on_stream
            .as_ref()
            .and_then(Weak::upgrade)
            .is_some_and(|on| on.timeline.completed() >= self.target);
        self.waiter
            .upgrade()
            .filter(|w| !done && w.timeline.completed() <= self.before)
    }
}

#[derive(Default)]
struct State {
    waits: Vec<Waiting>,
    /// pyACL streams: the host thread that last submitted and its launch site.
    acl: HashMap<u64, Option<(u64, u32)>>,
}

static STATE: Tool<State> = Tool::new(super::SYNCCHECK);

pub(super) fn start() {
    STATE.start(State::default, None);
}

pub(super) fn stop() {
    STATE.stop();
}

/// Stream `waiter` waits on `event` (`None`: never recorded) pointing at `on`'s first
/// `target` tasks.
pub(super) fn event_wait(waiter: &Arc<StreamInner>, event: usize, point: Option<&(Arc<StreamInner>, u64)>) {
    let site = crate::profiler::site::capture(false, false);
    let f = STATE.with(|st| match point {
        None => Some(
            Finding::new(
                "synccheck",
                "unrecorded-event",
                format!(
                    "Wait on an event that was never recorded: stream {} waits for nothing (record the event first)",
                    waiter.id
                ),
            )
            .site("waited at", site),
        ),
        Some((on, target)) => {
            st.remember(Waiting {
                event: Some(event),
                on: on.id,
                on_stream: Some(Arc::downgrade(on)),
                target: *target,
                waiter: Arc::downgrade(waiter),
                before: waiter.queue.tail(),
                site,
            });
            None
        }
    });
    if let Some(Some(f)) = f {
        report::push(f);
    }
}

/// Stream `waiter` waits on `on`'s first `target` tasks (a stream wait).
pub(super) fn stream_wait(waiter: &Arc<StreamInner>, on: u64, target: u64) {
    let site = crate::profiler::site::capture(false, false);
    STATE.with(|st| {
        st.remember(Waiting {
            event: None,
            on,
            on_stream: None,
            target,
            waiter: Arc::downgrade(waiter),
            before: waiter.queue.tail(),
            site,
        })
    });
}

impl State {
    fn remember(&mut self, w: Waiting) {
        if self.waits.len() >= MAX_WAITS {
            self.waits.retain(|w| w.pending().is_some());
            if self.waits.len() >= MAX_WAITS {
                self.waits.remove(0);
            }
        }
        self.waits.push(w);
    }

    fn waiters(&mut self, hit: impl Fn(&Waiting) -> bool) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        self.waits.retain(|w| {
            if !hit(w) {
                return true;
            }
            if let Some(s) = w.pending() {
                out.push((s.id, w.site));
            }
            false
        });
        out
    }
}

fn destroyed(what: String, waiters: Vec<(u64, u32)>) {
    if waiters.is_empty() {
        return;
    }
    let site = crate::profiler::site::capture(false, false);
    for (stream, wait_site) in waiters {
        report::push(
            Finding::new(
                "synccheck",
                "destroyed-while-waited",
                format!("{what} while stream {stream} still waits on it (undefined on the card)"),
            )
            .site("destroyed at", site)
            .site("waited at", wait_site),
        );
    }
}

/// An event (its address) is destroyed explicitly.
pub fn event_destroyed(event: usize) {
    if let Some(w) = STATE.with(|st| st.waiters(|w| w.event == Some(event))) {
        destroyed("Event destroyed".to_string(), w);
    }
}

/// Stream `id` is destroyed dropping its queued work.
pub(super) fn stream_destroyed(id: u64, completed: u64) {
    if let Some(w) = STATE.with(|st| st.waiters(|w| w.on == id && w.target > completed)) {
        destroyed(
            format!("Stream {id} force-destroyed with work another stream waits for"),
            w,
        );
    }
}

/// Stream `id` belongs to pyACL code (`acl.rt.create_stream`): one host thread may feed it.
pub fn mark_acl_stream(id: u64) {
    STATE.with(|st| st.acl.insert(id, None));
}

/// A host thread queued a task on stream `id` at `site` (pyACL streams only).
pub(super) fn submitted(id: u64, site: u32) {
    if crate::thread_role::is_runtime_thread() {
        return;
    }
    let tid = crate::profiler::thread_id();
    let f = STATE.with(|st| {
        let slot = st.acl.get_mut(&id)?;
        match *slot {
            Some((t, first)) if t != tid => {
                *slot = Some((tid, site));
                Some(
                    Finding::new(
                        "synccheck",
                        "shared-stream",
                        format!(
                            "Stream {id} is fed by two host threads ({t}, then {tid}): ACL streams are not thread-safe \
                             (portability error: npurt accepts it, the card does not promise it)"
                        ),
                    )
                    .site("first thread launched at", first)
                    .site("second thread launched at", site),
                )
            }
            _ => {
                *slot = Some((tid, site));
                None
            }
        }
    });
    if let Some(Some(f)) = f {
        report::push(f);
    }
}

/// A host callback (of task `pos` on `stream`) made the blocking call `what`.
pub(super) fn blocked_in_callback(what: &str, stream: u64, pos: u64) {
    let site = crate::profiler::site::capture(false, false);
    let f = STATE.with(|_| {
        Finding::new(
            "synccheck",
            "callback-blocks",
            format!(
                "Host callback (stream {stream}, task {pos}) blocks on the runtime: {what} from a callback waits on \
                 the stream running it"
            ),
        )
        .site("called at", site)
    });
    if let Some(f) = f {
        report::push(f);
    }
}
