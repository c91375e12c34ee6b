//! Memory history in torch.cuda's snapshot format (`npurt.memory.record_history`,
//! `_snapshot`, `dump_snapshot`): a subscriber of the memory event hook
//! (`npurt_core::memory::events`) keeps the last `max_entries` events per process and the
//! Python stack of every live block's allocation.
//!
//! Stacks: the hook calls the recorder on the allocating thread with no runtime lock held;
//! the recorder takes the GIL there (a thread that released it for a big allocation waits
//! for it, holding nothing) and reads `sys._getframe()`. Runtime threads (workers, engines)
//! never take the GIL: their events have no frames. Frees and segment events (the latter
//! come with the pool lock held) never take it.

use crate::errors::IntoPy;
use npurt_core::memory::events::{self, MemAction, MemEvent, MemObserver, MemPoolKind, MemSubscription};
use npurt_core::memory::{BlockStatus, PageKind};
use npurt_core::{alloc, registry, thread_role};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Frames kept per stack (innermost first, as torch).
const MAX_FRAMES: usize = 64;

#[derive(Clone)]
struct Frame {
    filename: String,
    line: u32,
    name: String,
}

type Frames = Arc<[Frame]>;

struct Entry {
    action: MemAction,
    device: u32,
    addr: usize,
    size: usize,
    stream: Option<u64>,
    t_ns: u64,
    frames: Option<Frames>,
}

#[derive(Default)]
struct RecState {
    ring: VecDeque<Entry>,
    live: HashMap<(u32, usize), Frames>,
    requested: HashSet<(u32, usize)>,
}

struct Recorder {
    max: usize,
    stacks: bool,
    state: Mutex<RecState>,
}

fn capture(py: Python<'_>) -> Option<Frames> {
    let mut out = Vec::new();
    let mut f = py.import("sys").ok()?.call_method1("_getframe", (0,)).ok();
    while let Some(fr) = f {
        if out.len() == MAX_FRAMES {
            break;
        }
        let code = fr.getattr("f_code").ok()?;
        out.push(Frame {
            filename: code
                .getattr("co_filename")
                .and_then(|x| x.extract())
                .unwrap_or_default(),
            line: fr.getattr("f_lineno").and_then(|x| x.extract()).unwrap_or(0),
            name: code.getattr("co_name").and_then(|x| x.extract()).unwrap_or_default(),
        });
        f = fr.getattr("f_back").ok().filter(|b| !b.is_none());
    }
    Some(out.into())
}

impl MemObserver for Recorder {
    fn on_mem_event(&self, e: &MemEvent) {
        let frames = if self.stacks && e.action == MemAction::Alloc && !thread_role::is_runtime_thread() {
            Python::try_attach(capture).flatten()
        } else {
            None
        };
        let key = (e.device, e.addr);
        let mut st = lock(&self.state);
        let entry = |action, frames| Entry {
            action,
            device: e.device,
            addr: e.addr,
            size: e.block_size,
            stream: e.stream,
            t_ns: e.t_ns,
            frames,
        };
        match e.action {
            MemAction::Alloc => {
                if let Some(f) = &frames {
                    st.live.insert(key, f.clone());
                }
            }
            MemAction::FreeRequested => {
                st.requested.insert(key);
            }
            MemAction::Free => {
                st.live.remove(&key);
                if !st.requested.remove(&key) {
                    // Dropped without free(): torch's traces always pair the two.
                    let r = entry(MemAction::FreeRequested, None);
                    push(&mut st.ring, r, self.max);
                }
            }
            _ => {}
        }
        push(&mut st.ring, entry(e.action, frames), self.max);
    }
}

fn push(ring: &mut VecDeque<Entry>, e: Entry, max: usize) {
    if ring.len() >= max {
        ring.pop_front();
    }
    ring.push_back(e);
}

/// The recorder (kept after recording stops, so a snapshot still has its trace) and its
/// subscription while recording.
static HISTORY: Mutex<Option<(Arc<Recorder>, Option<MemSubscription>)>> = Mutex::new(None);

/// Starts (enabled="all"/"state"/True) or stops (None/False) recording memory history,
/// keeping at most max_entries events; stacks="python"/"all" records the Python stack of
/// each allocation, None none.
#[pyfunction]
#[pyo3(signature = (enabled=Some("all".to_string()), stacks=Some("python".to_string()), max_entries=1_000_000))]
pub(crate) fn _record_memory_history(
    enabled: Option<String>,
    stacks: Option<String>,
    max_entries: usize,
) -> PyResult<()> {
    let on = match enabled.as_deref() {
        None | Some("False") | Some("false") | Some("") => false,
        Some("all" | "state" | "True" | "true") => true,
        Some(other) => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "enabled must be 'all', 'state' or None, not {other:?}"
            )))
        }
    };
    let stacks = match stacks.as_deref() {
        None => false,
        Some("python" | "all") => true,
        Some(other) => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "stacks must be 'python', 'all' or None, not {other:?}"
            )))
        }
    };
    let mut h = lock(&HISTORY);
    if !on {
        if let Some((_, sub)) = h.as_mut() {
            sub.take();
        }
        return Ok(());
    }
    if max_entries == 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "max_entries must be at least 1",
        ));
    }
    let rec = Arc::new(Recorder {
        max: max_entries,
        stacks,
        state: Mutex::new(RecState::default()),
    });
    *h = None; // the old subscription first
    let sub = events::subscribe(rec.clone());
    *h = Some((rec, Some(sub)));
    Ok(())
}

fn frames_list<'py>(py: Python<'py>, f: Option<&Frames>) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for fr in f.map(|f| &f[..]).unwrap_or(&[]) {
        let d = PyDict::new(py);
        d.set_item("filename", &fr.filename)?;
        d.set_item("line", fr.line)?;
        d.set_item("name", &fr.name)?;
        l.append(d)?;
    }
    Ok(l)
}

fn pool_name(p: MemPoolKind) -> String {
    match p {
        MemPoolKind::Device => "device".into(),
        MemPoolKind::Pool(id) => format!("mempool {id}"),
        MemPoolKind::Dedicated => "dedicated".into(),
        MemPoolKind::Shareable => "shareable".into(),
        MemPoolKind::Imported => "imported".into(),
    }
}

fn kind_name(k: PageKind) -> &'static str {
    match k {
        PageKind::HugeTlb => "hugetlb",
        PageKind::Thp => "thp",
        PageKind::Normal => "normal",
    }
}

/// torch.cuda.memory._snapshot(): {"segments": [...], "device_traces": [[...] per device]}.
#[pyfunction]
pub(crate) fn _memory_snapshot(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let rec = lock(&HISTORY).as_ref().map(|(r, _)| r.clone());
    let n = registry::device_count().py_err()? as usize;
    let mut mems = Vec::new();
    for id in 0..n {
        if let Some(m) = py.detach(|| alloc::active_memory(id as i64)).py_err()? {
            mems.push((id as u32, py.detach(|| m.segments())));
        }
    }
    let guard = rec.as_ref().map(|r| lock(&r.state));
    let segments = PyList::empty(py);
    for (dev, segs) in &mems {
        for (pool, seg) in segs {
            let blocks = PyList::empty(py);
            let (mut allocated, mut requested) = (0usize, 0usize);
            for b in &seg.blocks {
                // Allocated and free() already called: queued work still holds it.
                let pending = || guard.as_ref().is_some_and(|g| g.requested.contains(&(*dev, b.addr)));
                let state = match b.status {
                    BlockStatus::Allocated if pending() => "active_pending_free",
                    BlockStatus::Allocated => "active_allocated",
                    BlockStatus::Free => "inactive",
                };
                if b.status != BlockStatus::Free {
                    allocated += b.size;
                    requested += b.requested;
                }
                let d = PyDict::new(py);
                d.set_item("address", b.addr)?;
                d.set_item("size", b.size)?;
                d.set_item("requested_size", b.requested)?;
                d.set_item("state", state)?;
                let f = guard.as_ref().and_then(|g| g.live.get(&(*dev, b.addr)));
                d.set_item("frames", frames_list(py, f)?)?;
                blocks.append(d)?;
            }
            let d = PyDict::new(py);
            d.set_item("device", dev)?;
            d.set_item("address", seg.base)?;
            d.set_item("total_size", seg.size)?;
            d.set_item("allocated_size", allocated)?;
            d.set_item("active_size", allocated)?;
            d.set_item("requested_size", requested)?;
            d.set_item("stream", 0)?;
            d.set_item("segment_type", if seg.large { "large" } else { "small" })?;
            d.set_item("segment_pool_id", (0, 0))?;
            d.set_item("is_expandable", false)?;
            d.set_item("frames", PyList::empty(py))?;
            d.set_item("blocks", blocks)?;
            d.set_item("pool", pool_name(*pool))?;
            d.set_item("page_kind", kind_name(seg.page_kind))?;
            segments.append(d)?;
        }
    }
    let traces: Vec<Bound<'_, PyList>> = (0..n).map(|_| PyList::empty(py)).collect();
    if let Some(g) = &guard {
        for e in &g.ring {
            let d = PyDict::new(py);
            d.set_item("action", e.action.torch_name())?;
            d.set_item("addr", e.addr)?;
            d.set_item("size", e.size)?;
            d.set_item("stream", e.stream.unwrap_or(0))?;
            d.set_item("time_us", e.t_ns / 1000)?;
            d.set_item("frames", frames_list(py, e.frames.as_ref())?)?;
            if e.action == MemAction::Oom {
                let free = alloc::active_memory(e.device as i64)
                    .ok()
                    .flatten()
                    .map_or(0, |m| m.mem_info().0);
                d.set_item("device_free", free)?;
            }
            if let Some(t) = traces.get(e.device as usize) {
                t.append(d)?;
            }
        }
    }
    let out = PyDict::new(py);
    out.set_item("segments", segments)?;
    out.set_item("device_traces", PyList::new(py, traces)?)?;
    Ok(out)
}

/// Adds this file's functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_record_memory_history, m)?)?;
    m.add_function(wrap_pyfunction!(_memory_snapshot, m)?)?;
    Ok(())
}
