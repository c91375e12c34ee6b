//! Streams parked on a condition outside this process (an interprocess event recorded by
//! another process): one process-wide thread polls them, so no AI-core worker blocks.
//!
//! With one parked stream the thread sleeps on the condition's futex word (woken by the
//! producer's completion, at once); with several it polls every 200 µs. Every sleep is at
//! most 1 ms, which bounds how late a newly parked stream, a deadline or an abort is seen;
//! the slow checks (is the producer alive?) run every 10 ms per stream. A stream resumes
//! when its condition holds, fails (sticky error) when it never will or its timeout
//! passed, and is handed back at once when it was aborted.

use crate::error::TaskError;
use crate::stream::task::ExternalCond;
use crate::stream::StreamInner;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::Ordering::Acquire;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

struct Entry {
    stream: Arc<StreamInner>,
    cond: Arc<dyn ExternalCond>,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    next_check: Instant,
    meta: u32,
}

struct Waiter {
    entries: Mutex<Vec<Entry>>,
    cv: Condvar,
}

static WAITER: OnceLock<&'static Waiter> = OnceLock::new();

fn waiter() -> &'static Waiter {
    WAITER.get_or_init(|| {
        let w: &'static Waiter = Box::leak(Box::new(Waiter {
            entries: Mutex::new(Vec::new()),
            cv: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("npurt-extwait".into())
            .spawn(move || run(w))
            .expect("failed to start the npurt external-wait thread");
        w
    })
}

/// Parks `stream` (whose head task is this wait) until `cond` holds, fails or `timeout`
/// passes; the stream is then resumed by the external-wait thread.
pub(crate) fn park(stream: Arc<StreamInner>, cond: Arc<dyn ExternalCond>, timeout: Option<Duration>, meta: u32) {
    let now = Instant::now();
    let w = waiter();
    w.entries.lock().push(Entry {
        stream,
        cond,
        timeout,
        deadline: timeout.map(|t| now + t),
        next_check: now,
        meta,
    });
    w.cv.notify_one();
}

/// Streams parked here now (diagnostics and leak tests).
pub(crate) fn pending() -> usize {
    WAITER.get().map_or(0, |w| w.entries.lock().len())
}

/// What happens to a parked stream now: `None` keeps it parked.
fn step(e: &mut Entry, now: Instant) -> Option<Option<TaskError>> {
    if e.stream.aborted() || e.stream.dev.shutdown.load(Acquire) {
        return Some(None); // the worker drops the rest of its work
    }
    let thorough = now >= e.next_check;
    if thorough {
        e.next_check = now + Duration::from_millis(10);
    }
    match e.cond.poll(thorough) {
        Ok(true) => Some(None),
        Err(err) => Some(Some(err)),
        Ok(false) => match (e.deadline, e.timeout) {
            (Some(d), Some(t)) if now >= d => Some(Some(TaskError::WaitTimeout { secs: t.as_secs_f64() })),
            _ => None,
        },
    }
}

fn run(w: &'static Waiter) {
    crate::thread_role::mark_runtime_thread();
    let mut parked: Vec<Entry> = Vec::new();
    loop {
        {
            let mut g = w.entries.lock();
            if parked.is_empty() && g.is_empty() {
                w.cv.wait(&mut g);
            }
            parked.append(&mut g);
        }
        let seen: Vec<u32> = parked.iter().map(|e| e.cond.seq()).collect();
        let now = Instant::now();
        let mut kept = Vec::with_capacity(parked.len());
        let mut kept_seen = 0;
        for (mut e, s) in parked.drain(..).zip(seen) {
            match step(&mut e, now) {
                None => {
                    kept_seen = s;
                    kept.push(e);
                }
                Some(err) => {
                    if let Some(err) = err {
                        e.stream.set_error_at(err, e.meta);
                    }
                    super::start::resume(e.stream);
                }
            }
        }
        parked = kept;
        match parked.as_slice() {
            [] => {}
            [one] => {
                let mut slice = Duration::from_millis(1);
                if let Some(d) = one.deadline {
                    slice = slice.min(d.saturating_duration_since(Instant::now()));
                }
                one.cond.sleep(kept_seen, slice);
            }
            _ => std::thread::sleep(Duration::from_micros(200)),
        }
    }
}
