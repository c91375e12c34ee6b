//! Glue of the profiler (`npurt.profiler`): a collector observing devices, the flight
//! recorder of `NPURT_DUMP_ON_ERROR`, records as tuples, and the call-site source that
//! names the Python line of each launch.
//!
//! The call site is the innermost Python frame outside npurt's own package: one
//! `sys._getframe()`, its code object (cached by identity: the cache holds the code object,
//! so its address stays unique) and line; interned once per (code, line, shapes).

use crate::errors::IntoPy;
use npurt_core::profiler::{self, site, Collector, LaunchNote, Ring, TaskObserver, TaskRecord};
use npurt_core::{current, registry, Device, Error, ErrorKind};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyTuple};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

/// A code object seen at a launch: its file and whether it is npurt's own.
struct CodeInfo {
    _code: Py<PyAny>,
    file: Arc<str>,
    internal: bool,
}

#[derive(Default)]
struct SiteCache {
    codes: HashMap<usize, CodeInfo>,
    ids: HashMap<(usize, u32, Option<Arc<str>>), u32>,
}

static CACHE: OnceLock<Mutex<SiteCache>> = OnceLock::new();
static GETFRAME: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static PACKAGE_DIR: PyOnceLock<String> = PyOnceLock::new();
/// `NPURT_DUMP_ON_ERROR` is armed: errors raised to Python dump the ring.
static DUMP_ARMED: AtomicBool = AtomicBool::new(false);
static RING: OnceLock<Arc<Ring>> = OnceLock::new();

thread_local! {
    /// Shapes of the next kernel launched by this thread (`record_shapes`).
    static SHAPES: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Notes the operand shapes of the kernel about to be launched (profiling with shapes only).
pub(crate) fn note_shapes(shapes: &[&[usize]]) {
    if !profiler::active() || site::options() & site::WANT_SHAPES == 0 {
        return;
    }
    let s = format!("{shapes:?}");
    SHAPES.with(|c| *c.borrow_mut() = Some(s.into()));
}

fn site_source(want: u8) -> u32 {
    Python::try_attach(|py| capture(py, want).unwrap_or(0)).unwrap_or(0)
}

fn code_info<'a>(cache: &'a mut SiteCache, code: &Bound<'_, PyAny>, pkg: &str) -> PyResult<&'a CodeInfo> {
    use std::collections::hash_map::Entry;
    match cache.codes.entry(code.as_ptr() as usize) {
        Entry::Occupied(e) => Ok(e.into_mut()),
        Entry::Vacant(v) => {
            let file: String = code.getattr("co_filename")?.extract()?;
            let internal = file.starts_with(pkg);
            Ok(v.insert(CodeInfo {
                _code: code.clone().unbind(),
                file: file.into(),
                internal,
            }))
        }
    }
}

/// The call-site cache, locked without blocking while this thread holds the GIL: its
/// holder may be waiting for the GIL (a getattr on a frame can run the garbage collector,
/// whose finalizers may release the GIL), so a thread that blocked here with the GIL held
/// would deadlock both (seen in CI). Between tries the GIL is released.
fn lock_cache(py: Python<'_>) -> std::sync::MutexGuard<'static, SiteCache> {
    use std::sync::TryLockError;
    let m = CACHE.get_or_init(Default::default);
    loop {
        match m.try_lock() {
            Ok(g) => return g,
            Err(TryLockError::Poisoned(p)) => return p.into_inner(),
            Err(TryLockError::WouldBlock) => py.detach(std::thread::yield_now),
        }
    }
}

fn capture(py: Python<'_>, want: u8) -> PyResult<u32> {
    let getframe = GETFRAME.get_or_try_init(py, || py.import("sys")?.getattr("_getframe").map(Bound::unbind))?;
    let pkg = PACKAGE_DIR.get_or_try_init(py, || -> PyResult<String> {
        let f: String = py.import("npurt")?.getattr("__file__")?.extract()?;
        Ok(std::path::Path::new(&f)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default())
    })?;
    let shapes = if want & site::WANT_SHAPES != 0 {
        SHAPES.with(|c| c.borrow_mut().take())
    } else {
        None
    };
    let mut frame = getframe.bind(py).call0()?;
    let mut cache = lock_cache(py);
    // The innermost frame outside npurt's package (its Python wrappers are not the site).
    // Attribute names interned once (no string built per launch); `f_back` only read for
    // npurt's own frames.
    let code_key = loop {
        let code = frame.getattr(pyo3::intern!(py, "f_code"))?;
        if !code_info(&mut cache, &code, pkg)?.internal {
            break code.as_ptr() as usize;
        }
        let back = frame.getattr(pyo3::intern!(py, "f_back"))?;
        if back.is_none() {
            break code.as_ptr() as usize;
        }
        frame = back;
    };
    let line: u32 = frame.getattr(pyo3::intern!(py, "f_lineno"))?.extract().unwrap_or(0);
    if want & site::WANT_STACK == 0 {
        if let Some(id) = cache.ids.get(&(code_key, line, shapes.clone())) {
            return Ok(*id);
        }
    }
    let file = cache.codes[&code_key].file.clone();
    let stack = if want & site::WANT_STACK != 0 {
        Some(stack_of(&frame)?)
    } else {
        None
    };
    let has_stack = stack.is_some();
    let id = site::intern(site::LaunchMeta {
        site: format!("{file}:{line}").into(),
        stack,
        shapes: shapes.clone(),
    });
    if !has_stack && id != 0 {
        cache.ids.insert((code_key, line, shapes), id);
    }
    Ok(id)
}

/// `file:line(function)` lines from the outermost frame to `frame`.
fn stack_of(frame: &Bound<'_, PyAny>) -> PyResult<Arc<str>> {
    let mut lines = Vec::new();
    let mut f = frame.clone();
    while !f.is_none() && lines.len() < 128 {
        let code = f.getattr("f_code")?;
        let file: String = code.getattr("co_filename")?.extract()?;
        let name: String = code.getattr("co_name")?.extract()?;
        let line: u32 = f.getattr("f_lineno")?.extract().unwrap_or(0);
        lines.push(format!("{file}:{line}({name})"));
        f = f.getattr("f_back")?;
    }
    lines.reverse();
    Ok(lines.join("\n").into())
}

/// Registers the call-site source (once, at import).
pub(crate) fn install() {
    site::set_source(site_source);
}

/// An error is about to be raised: with `NPURT_DUMP_ON_ERROR` armed, a failed task or a
/// timeout dumps the flight recorder (`npurt.profiler._dump_on_error`).
pub(crate) fn on_error(py: Python<'_>, e: &Error) {
    if DUMP_ARMED.load(Relaxed) && matches!(e.kind(), ErrorKind::TaskFailed | ErrorKind::Timeout) {
        let r = py
            .import("npurt.profiler")
            .and_then(|m| m.getattr("_dump_on_error"))
            .and_then(|f| f.call1((e.to_string(),)));
        if let Err(err) = r {
            err.write_unraisable(py, None);
        }
    }
}

fn kind_name(k: profiler::TaskKind) -> &'static str {
    use profiler::TaskKind::*;
    match k {
        Kernel => "kernel",
        CopyH2D => "h2d",
        CopyD2H => "d2h",
        CopyD2D => "d2d",
        CopyH2H => "h2h",
        Memset => "memset",
        Record => "record",
        Wait => "wait",
        HostFunc => "host_func",
        Copy => "copy",
    }
}

/// A record as a tuple: (device, context, stream, seq, kind, name, blocks, bytes, core,
/// spans [(core, blocks, start, end)], submit, start, end, site id, wait_on (stream,
/// target) or None, failed).
fn record_tuple<'py>(py: Python<'py>, r: &TaskRecord) -> PyResult<Bound<'py, PyTuple>> {
    let spans = PyList::empty(py);
    for c in &r.spans {
        spans.append((c.core, c.blocks, c.start_ns, c.end_ns))?;
    }
    let core = (r.core != profiler::NO_CORE).then_some(r.core);
    let items: [Bound<'py, PyAny>; 16] = [
        r.device.into_pyobject(py)?.into_any(),
        r.context.into_pyobject(py)?.into_any(),
        r.stream.into_pyobject(py)?.into_any(),
        r.seq.into_pyobject(py)?.into_any(),
        kind_name(r.kind).into_pyobject(py)?.into_any(),
        (*r.name).into_pyobject(py)?.into_any(),
        r.blocks.into_pyobject(py)?.into_any(),
        r.bytes.into_pyobject(py)?.into_any(),
        core.into_pyobject(py)?.into_any(),
        spans.into_any(),
        r.submit_ns.into_pyobject(py)?.into_any(),
        r.start_ns.into_pyobject(py)?.into_any(),
        r.end_ns.into_pyobject(py)?.into_any(),
        r.meta.into_pyobject(py)?.into_any(),
        r.wait_on.into_pyobject(py)?.into_any(),
        pyo3::types::PyBool::new(py, r.failed).to_owned().into_any(),
    ];
    PyTuple::new(py, items)
}

/// A launch note as a tuple: (device, stream, seq, thread, submit, queued, site id).
fn note_tuple<'py>(py: Python<'py>, n: &LaunchNote) -> PyResult<Bound<'py, PyTuple>> {
    (n.device, n.stream, n.seq, n.thread, n.submit_ns, n.queued_ns, n.meta).into_pyobject(py)
}

/// The devices to observe: `ids`, else every active device (the current one if none is).
fn devices(py: Python<'_>, ids: Option<Vec<i64>>) -> PyResult<Vec<Arc<Device>>> {
    py.detach(|| -> npurt_core::Result<Vec<Arc<Device>>> {
        let ids = match ids {
            Some(v) => v,
            None => (0..registry::device_count()? as i64).collect(),
        };
        let mut out = Vec::new();
        for id in &ids {
            if let Some(d) = registry::active_device(*id)? {
                out.push(d);
            }
        }
        if out.is_empty() {
            let cur = current::current_device()? as i64;
            out.push(registry::active_or_use(cur)?);
        }
        Ok(out)
    })
    .py_err()
}

/// The profiler's collector: observes devices from creation until `stop()`.
#[pyclass(module = "npurt._npurt", name = "_Collector", frozen)]
pub(crate) struct PyCollector {
    obs: Arc<Collector>,
    devices: Mutex<Vec<Arc<Device>>>,
}

impl PyCollector {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Device>>> {
        self.devices.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyCollector {
    #[new]
    #[pyo3(signature = (devices=None, record_shapes=false, with_stack=false))]
    fn new(py: Python<'_>, devices: Option<Vec<i64>>, record_shapes: bool, with_stack: bool) -> PyResult<Self> {
        let devs = self::devices(py, devices)?;
        let mut want = 0;
        if record_shapes {
            want |= site::WANT_SHAPES;
        }
        if with_stack {
            want |= site::WANT_STACK;
        }
        site::set_options(want);
        let obs = Arc::new(Collector::new());
        for d in &devs {
            d.add_observer(obs.clone());
        }
        Ok(Self {
            obs,
            devices: Mutex::new(devs),
        })
    }

    /// Device ordinals observed.
    #[getter]
    fn devices(&self) -> Vec<u32> {
        self.lock().iter().map(|d| d.ordinal()).collect()
    }

    /// Stops observing (records of tasks still running are not collected).
    fn stop(&self) {
        let handle: Arc<dyn TaskObserver> = self.obs.clone();
        for d in self.lock().drain(..) {
            d.remove_observer(&handle);
        }
        site::set_options(0);
    }

    /// (records, launches) collected so far, as tuples; forgets them.
    fn take<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        let (recs, notes) = self.obs.take();
        let r = PyList::empty(py);
        for x in &recs {
            r.append(record_tuple(py, x)?)?;
        }
        let n = PyList::empty(py);
        for x in &notes {
            n.append(note_tuple(py, x)?)?;
        }
        Ok((r, n))
    }
}

/// The site of id `id`: (file:line, stack or None, shapes or None), or None.
#[pyfunction]
pub(crate) fn _site(id: u32) -> Option<(String, Option<String>, Option<String>)> {
    site::meta(id).map(|m| {
        (
            m.site.to_string(),
            m.stack.as_deref().map(str::to_string),
            m.shapes.as_deref().map(str::to_string),
        )
    })
}

/// Captures launch call sites even without a profiler (errors then name the launch line).
#[pyfunction]
pub(crate) fn _call_sites(on: bool) {
    site::set_always(on);
}

/// Arms the flight recorder: the last `capacity` task records of every device (observing
/// devices started later too), with call sites; errors raised to Python dump it. False
/// if it was armed already.
#[pyfunction]
pub(crate) fn _flight_recorder(capacity: usize) -> bool {
    if RING.get().is_some() {
        return false;
    }
    let ring = RING.get_or_init(|| Arc::new(Ring::new(capacity)));
    profiler::set_flight_recorder(Some(ring.clone()));
    let n = registry::device_count().unwrap_or(0) as i64;
    for id in 0..n {
        if let Ok(Some(d)) = registry::active_device(id) {
            d.add_observer(ring.clone());
        }
    }
    site::set_always(true);
    DUMP_ARMED.store(true, Relaxed);
    true
}

/// The flight recorder's records (tuples, oldest first), or [] when it is not armed.
#[pyfunction]
pub(crate) fn _flight_records(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    if let Some(r) = RING.get() {
        for x in r.snapshot() {
            out.append(record_tuple(py, &x)?)?;
        }
    }
    Ok(out)
}

/// The profiler clock now (ns; the clock of every record).
#[pyfunction]
pub(crate) fn _clock_ns() -> u64 {
    npurt_core::clock::now_ns()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    install();
    m.add_class::<PyCollector>()?;
    m.add_function(wrap_pyfunction!(_site, m)?)?;
    m.add_function(wrap_pyfunction!(_call_sites, m)?)?;
    m.add_function(wrap_pyfunction!(_flight_recorder, m)?)?;
    m.add_function(wrap_pyfunction!(_flight_records, m)?)?;
    m.add_function(wrap_pyfunction!(_clock_ns, m)?)?;
    Ok(())
}
