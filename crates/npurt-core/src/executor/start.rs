//! Starting a stream without a worker, and the tasks any owner of a stream may run.
//!
//! The thread that comes to own a stream — the pusher that scheduled an idle stream, the
//! engine that finished its head task, whoever completed the target of its wait (or the
//! timer, on a timeout) — runs the stream's non-kernel head tasks itself: a copy or a host
//! callback goes straight to its engine, a record or a satisfied wait completes at once, an
//! unsatisfied wait parks the stream on the other stream's timeline. Only a kernel puts the
//! stream on the ready list for an AI-core worker. So copies and callbacks never wait for a
//! core (with one worker, or every worker in a long kernel, a callback on an idle stream
//! used to run only after that kernel), and a copy → copy or copy → record hop costs no
//! worker wake-up. Ownership is unchanged: only the owner pops, and it hands the stream on
//! exactly as a worker does (to an engine, a timeline, the ready list, or idle).
//!
//! One exception to "a host callback goes to its engine": a pusher that found the stream
//! idle and asked to run its own host task ([`start_pushed`], issue 18's host-synchronous
//! collectives) runs that task on its own thread when it reaches it, as the host engine
//! would, and then carries on as the stream's owner.

use super::engine::EngineJob;
use super::worker::record;
use crate::error::TaskError;
use crate::profiler::TaskKind;
use crate::stream::task::{Engine, Op, Task};
use crate::stream::timeline::{Registered, Wake};
use crate::stream::StreamInner;
use std::cell::Cell;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{AcqRel, Release};
use std::sync::Arc;
use std::time::Instant;

/// Non-kernel tasks one `start` runs before handing the stream to a worker (a producer
/// feeding the stream records as fast as they complete must not hold this thread).
const BUDGET: u32 = 64;
/// Nested starts on one thread (a record completing here resumes a stream waiting for it,
/// whose start runs inside this one): deeper ones go to the ready list instead.
const MAX_NESTING: u32 = 4;

thread_local! {
    static NESTING: Cell<u32> = const { Cell::new(0) };
    /// `(stream id, position)` of the host task this thread pushed and may run itself.
    static RUN_HERE: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// Engine-thread index of a host task run by its pusher: none (profiles show no callback
/// thread for it).
pub(crate) const PUSHER_THREAD: u32 = crate::profiler::NO_CORE;

/// [`start`] by the pusher of the task at position `pos`, which found `s` idle: if that
/// task is a host-engine op and reaches the head while this thread still owns the stream
/// (nothing queued before it is left on another thread), it runs here, before this
/// returns. The caller must be a thread that may block (not a runtime thread) and must not
/// hold locks the task needs (bindings release their interpreter lock).
pub(crate) fn start_pushed(s: Arc<StreamInner>, pos: u64) {
    let prev = RUN_HERE.with(|h| h.replace(Some((s.id, pos))));
    start(s);
    RUN_HERE.with(|h| h.set(prev));
}

/// Whether the head task of `s` is the one this thread pushed to run itself (consumed).
fn run_here(s: &StreamInner) -> bool {
    RUN_HERE.with(|h| match h.get() {
        Some((id, pos)) if id == s.id && pos == s.timeline.completed() => {
            h.set(None);
            true
        }
        _ => false,
    })
}

/// Hands a stream whose head task finished on this thread (an engine task, or the wait it
/// was parked on) to its next owner: this thread, through [`start`].
pub(crate) fn resume(s: Arc<StreamInner>) {
    s.inflight.store(true, Release);
    start(s);
}

/// Runs the non-kernel head tasks of `s`, which this thread has just come to own, until the
/// stream is handed on: to a worker (a kernel is next, or the budget ran out), an engine, a
/// timeline (an unsatisfied wait), or back to idle (its queue is empty).
pub(crate) fn start(s: Arc<StreamInner>) {
    let depth = NESTING.with(|n| n.replace(n.get() + 1));
    let _nest = Nesting;
    if depth >= MAX_NESTING {
        s.dev.clone().make_ready(s); // the worker counts an in-flight head
        return;
    }
    s.complete_inflight();
    let mut budget = BUDGET;
    loop {
        let kernel_next = match s.queue.peek(|t| matches!(t.op, Op::Kernel { .. })) {
            Some(k) => k,
            None if s.sched.try_idle() => return,
            None => continue, // a push came in meanwhile
        };
        if (kernel_next && !s.skipping()) || budget == 0 {
            s.dev.clone().make_ready(s);
            return;
        }
        budget -= 1;
        let Some(task) = s.queue.pop() else {
            continue; // unreachable: only the owner pops, and the head was there
        };
        if s.skipping() {
            drop(task);
            s.timeline.advance(1);
            continue;
        }
        if !exec_other(&s, task) {
            return;
        }
    }
}

/// Restores the nesting count when a `start` returns.
struct Nesting;

impl Drop for Nesting {
    fn drop(&mut self) {
        NESTING.with(|n| n.set(n.get() - 1));
    }
}

/// Runs one task that is not a kernel, on whichever thread owns `s`. Returns false when the
/// stream was handed to someone else (an engine, or the timeline of the stream it waits
/// for); true when the task completed here.
pub(crate) fn exec_other(s: &Arc<StreamInner>, task: Task) -> bool {
    let Task { op, submit_ns, meta } = task;
    // A task created while its device was observed carries its submit time.
    let profiling = submit_ns != 0;
    let start_ns = if profiling { crate::clock::now_ns() } else { 0 };
    let kind = op.kind();
    let mut wait_on = None;
    match op {
        Op::Kernel { .. } => unreachable!("kernels run on AI-core workers"),
        Op::Record(stamp) => stamp.store(crate::clock::now_ns(), Release),
        Op::Wait { on, target, timeout } => {
            wait_on = Some((on.id, target));
            if on.timeline.completed() < target && !park_on(s, &on, target, timeout, submit_ns, start_ns, meta) {
                return false;
            }
        }
        Op::WaitExternal { cond, timeout } => match cond.poll(false) {
            Ok(true) => {}
            Err(e) => s.set_error_at(e, meta),
            Ok(false) => {
                super::extwait::park(s.clone(), cond, timeout, meta);
                return false;
            }
        },
        Op::Engine(engine, op, desc) => {
            let job = EngineJob {
                stream: s.clone(),
                op,
                submit_ns,
                meta,
                desc,
            };
            if engine == Engine::Host && run_here(s) {
                // Its pusher runs it (`start_pushed`); the stream passes on from there.
                super::engine::run_job(s.dev.ordinal, engine, job, PUSHER_THREAD);
            } else {
                s.dev.send_engine(engine, job);
            }
            return false;
        }
    }
    if profiling {
        let mut rec = record(s, kind, kind.label(), submit_ns, start_ns, meta);
        rec.wait_on = wait_on;
        s.dev.profiler.emit(rec);
    }
    s.timeline.advance(1);
    true
}

/// Parks `s` on `on`'s timeline until it completes `target` tasks (or, with a timeout, the
/// deadline passes: the stream then fails with a wait timeout). Whoever comes first resumes
/// the stream; reaching the target first cancels the timer entry. Returns true when the
/// target was reached meanwhile and the owner carries on.
fn park_on(
    s: &Arc<StreamInner>,
    on: &StreamInner,
    target: u64,
    timeout: Option<std::time::Duration>,
    submit_ns: u64,
    start_ns: u64,
    meta: u32,
) -> bool {
    let profiling = submit_ns != 0;
    let wait_on = Some((on.id, target));
    let wait_record = move |me: &StreamInner, failed: bool| {
        if profiling {
            let mut rec = record(me, TaskKind::Wait, TaskKind::Wait.label(), submit_ns, start_ns, meta);
            (rec.wait_on, rec.failed) = (wait_on, failed);
            me.dev.profiler.emit(rec);
        }
    };
    let once = Arc::new(AtomicBool::new(false));
    let key = timeout.map(|t| {
        let (me, first) = (Arc::downgrade(s), once.clone());
        super::timer::schedule(
            Instant::now() + t,
            Box::new(move || {
                if !first.swap(true, AcqRel) {
                    if let Some(me) = me.upgrade() {
                        me.set_error_at(TaskError::WaitTimeout { secs: t.as_secs_f64() }, meta);
                        wait_record(&me, true);
                        resume(me);
                    }
                }
            }),
        )
    });
    let (me, first) = (s.clone(), once.clone());
    let wake = Wake::Resume(Box::new(move || {
        if !first.swap(true, AcqRel) {
            if let Some(k) = key {
                super::timer::cancel(k);
            }
            wait_record(&me, false);
            resume(me);
        }
    }));
    if let Registered::Queued = on.timeline.register(target, wake) {
        return false;
    }
    // The target was reached meanwhile: carry on, unless the deadline won.
    if once.swap(true, AcqRel) {
        return false; // the timer already failed and resumed the stream
    }
    if let Some(k) = key {
        super::timer::cancel(k);
    }
    true
}
