//! Launch call sites: where in the user's program each task was launched (file:line, and
//! the stack or the operands' shapes when a profiler asks for them).
//!
//! The runtime cannot see the caller's language, so the bindings register a [`SiteSource`]
//! that looks at the caller (the Python frame) and returns an id from [`intern`]; a task
//! keeps the id (a `u32`), a record and a failing task's error name it. Capture happens on
//! the launching thread while a task is created, only when a device is observed or
//! [`set_always`] asked for sites without a profiler (for errors that name the launch).

use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

/// Where one launch came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LaunchMeta {
    /// `file:line` of the launching call.
    pub site: Arc<str>,
    /// The whole stack, innermost last, one `file:line(function)` per line (`with_stack`).
    pub stack: Option<Arc<str>>,
    /// The operands' shapes, e.g. `[[32, 64], [64, 128]]` (`record_shapes`).
    pub shapes: Option<Arc<str>>,
}

/// What a [`SiteSource`] is asked for (bits of [`options`]).
pub const WANT_STACK: u8 = 1;
pub const WANT_SHAPES: u8 = 2;

/// Returns the id ([`intern`]) of the current launch's call site, or 0; `want` holds
/// [`WANT_STACK`] / [`WANT_SHAPES`]. Called on the launching thread.
pub type SiteSource = fn(want: u8) -> u32;

static SOURCE: OnceLock<SiteSource> = OnceLock::new();
static ALWAYS: AtomicBool = AtomicBool::new(false);
static WANT: AtomicU8 = AtomicU8::new(0);
/// Interned sites; id `i` is `TABLE[i - 1]`.
static TABLE: RwLock<Vec<Arc<LaunchMeta>>> = RwLock::new(Vec::new());
/// Most sites kept (a program has few distinct launch sites; stacks and shapes add more).
const MAX_SITES: usize = 1 << 20;

/// Registers the bindings' site source (the first registration wins).
pub fn set_source(f: SiteSource) {
    let _ = SOURCE.set(f);
}

/// Captures call sites on every launch even without an observer (for errors that name
/// the launch line); costs the source's time per launch.
pub fn set_always(on: bool) {
    ALWAYS.store(on, Relaxed);
}

/// True when sites are captured without an observer.
#[inline]
pub fn capturing() -> bool {
    ALWAYS.load(Relaxed)
}

/// What observed launches capture beside file:line ([`WANT_STACK`] | [`WANT_SHAPES`]).
pub fn set_options(want: u8) {
    WANT.store(want, Relaxed);
}

/// The options of [`set_options`].
pub fn options() -> u8 {
    WANT.load(Relaxed)
}

/// The current launch's site id (0: no source, or none found). `observed`: a profiler
/// watches the device (stacks and shapes only then); shapes only for kernels (the waits a
/// launch queues before its kernel leave them to the kernel).
#[cold]
pub(crate) fn capture(observed: bool, kernel: bool) -> u32 {
    let mut want = if observed { WANT.load(Relaxed) } else { 0 };
    if !kernel {
        want &= !WANT_SHAPES;
    }
    match SOURCE.get() {
        Some(f) => f(want),
        None => 0,
    }
}

/// The id of the current call site with the whole stack (the sanitizer's allocation and
/// access stacks); 0 without a source. Called on a host thread.
#[cold]
pub(crate) fn capture_stack() -> u32 {
    match SOURCE.get() {
        Some(f) => f(WANT_STACK),
        None => 0,
    }
}

/// Sites with a stack already stored, by content (a loop captures the same stack again
/// and again: the table keeps one copy).
static WITH_STACK: parking_lot::Mutex<Option<std::collections::HashMap<Arc<LaunchMeta>, u32>>> =
    parking_lot::Mutex::new(None);

/// Stores a site; returns its id (never 0), or 0 once the table is full. A site with a
/// stack that is already stored gets its id back.
pub fn intern(meta: LaunchMeta) -> u32 {
    let meta = Arc::new(meta);
    let mut seen = if meta.stack.is_some() {
        let mut g = WITH_STACK.lock();
        if let Some(id) = g.get_or_insert_with(Default::default).get(&meta) {
            return *id;
        }
        Some(g)
    } else {
        None
    };
    let mut t = TABLE.write();
    if t.len() >= MAX_SITES {
        return 0;
    }
    t.push(meta.clone());
    let id = t.len() as u32;
    if let Some(map) = seen.as_mut().and_then(|g| g.as_mut()) {
        map.insert(meta, id);
    }
    id
}

/// The site of id `id`.
pub fn meta(id: u32) -> Option<Arc<LaunchMeta>> {
    if id == 0 {
        return None;
    }
    TABLE.read().get(id as usize - 1).cloned()
}

/// `file:line` of id `id`.
pub fn describe(id: u32) -> Option<Arc<str>> {
    meta(id).map(|m| m.site.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_sites_come_back_by_id() {
        let id = intern(LaunchMeta {
            site: "train.py:12".into(),
            stack: None,
            shapes: Some("[[2, 3]]".into()),
        });
        assert_ne!(id, 0);
        assert_eq!(describe(id).as_deref(), Some("train.py:12"));
        assert_eq!(meta(id).unwrap().shapes.as_deref(), Some("[[2, 3]]"));
        assert!(meta(0).is_none());
        let stacked = || LaunchMeta {
            site: "train.py:12".into(),
            stack: Some("train.py:12(main)".into()),
            shapes: None,
        };
        let (a, b) = (intern(stacked()), intern(stacked()));
        assert!(a != 0 && a == b && a != id, "one copy of a repeated stack");
        assert!(meta(u32::MAX).is_none());
    }
}
