//! One AI-core worker, held by a kernel that runs until the test opens its gate: copies,
//! host callbacks, records and waits on the other streams must not wait for that core (the
//! thread that comes to own a stream runs its non-kernel tasks itself), while every
//! stream's order still holds. Before `executor/start.rs`, each of these waited for the
//! gate (the worker was the only thread that handed a task to an engine).

mod common;

use common::FnKernel;
use npurt_core::memory::{self, PagePolicy};
use npurt_core::{registry, BlockCtx, Context, Engine, Kernel, KernelFault};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every test here holds the only worker: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());
/// What "promptly" means for work that needs no AI core (a loaded CI machine included).
const PROMPT: Duration = Duration::from_secs(10);

fn ctx() -> Context {
    common::configure_once(1, 1);
    registry::use_device(0).unwrap().default_context()
}

/// A kernel that says when it started and runs until its gate opens (or 30 s pass, so
/// that a failing test cannot hang the suite).
struct Gate {
    started: AtomicBool,
    open: AtomicBool,
}

impl Gate {
    fn new() -> Arc<Self> {
        Arc::new(Gate {
            started: AtomicBool::new(false),
            open: AtomicBool::new(false),
        })
    }

    /// Launches the gate on a stream of its own and waits until the worker runs it.
    fn hold_the_worker(self: &Arc<Self>, c: &Context) -> npurt_core::Stream {
        let s = c.create_stream(0).unwrap();
        s.launch(self.clone(), 1).unwrap();
        assert!(
            until(|| self.started.load(Ordering::Acquire)),
            "the gate kernel never started"
        );
        s
    }
}

impl Kernel for Gate {
    fn name(&self) -> &str {
        "gate"
    }
    fn run_block(&self, _b: BlockCtx) -> Result<(), KernelFault> {
        self.started.store(true, Ordering::Release);
        let t = Instant::now();
        while !self.open.load(Ordering::Acquire) && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }
}

/// Polls `cond` for up to [`PROMPT`].
fn until(cond: impl Fn() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < PROMPT {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    cond()
}

#[test]
fn a_callback_on_an_idle_stream_runs_while_the_only_worker_is_busy() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let c = ctx();
    let gate = Gate::new();
    let held = gate.hold_the_worker(&c);
    let s = c.create_stream(0).unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    s.launch_engine(
        Engine::Host,
        Box::new(move || {
            r.store(true, Ordering::Release);
            Ok(())
        }),
    )
    .unwrap();
    let prompt = until(|| ran.load(Ordering::Acquire));
    let still_held = !held.query().unwrap();
    gate.open.store(true, Ordering::Release);
    assert!(prompt, "the callback waited for the AI core");
    assert!(still_held, "the gate kernel ended early: the test proved nothing");
    s.synchronize(Some(PROMPT)).unwrap();
    held.synchronize(Some(PROMPT)).unwrap();
    s.destroy(false).unwrap();
    held.destroy(false).unwrap();
}

#[test]
fn copies_records_and_waits_complete_without_an_ai_core() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let c = ctx();
    let m = registry::use_device(0).unwrap().memory().clone();
    let n = 1 << 20;
    let h = memory::malloc_host(n).unwrap();
    memory::write(&h, 0, &vec![7u8; n]).unwrap();
    let d = memory::malloc_on(&m, n, PagePolicy::HugeFirst).unwrap();
    let back = memory::malloc_host(n).unwrap();
    let gate = Gate::new();
    let held = gate.hold_the_worker(&c);
    // a: H2D, record; b: wait for it, D2H. No kernel anywhere but the gate.
    let (a, b) = (c.create_stream(0).unwrap(), c.create_stream(0).unwrap());
    let ev = c.create_event(false).unwrap();
    memory::memcpy_async(&d, &h, None, &a).unwrap();
    ev.record(&a).unwrap();
    b.wait_event(&ev).unwrap();
    memory::memcpy_async(&back, &d, None, &b).unwrap();
    let done = b.synchronize(Some(PROMPT));
    let still_held = !held.query().unwrap();
    gate.open.store(true, Ordering::Release);
    done.expect("the copies and the wait waited for the AI core");
    assert!(still_held, "the gate kernel ended early: the test proved nothing");
    let mut out = vec![0u8; n];
    memory::read(&back, 0, &mut out).unwrap();
    assert!(out.iter().all(|&x| x == 7));
    for s in [a, b, held] {
        s.synchronize(Some(PROMPT)).unwrap();
        s.destroy(false).unwrap();
    }
}

#[test]
fn work_behind_a_kernel_still_waits_for_it() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let c = ctx();
    let gate = Gate::new();
    let held = gate.hold_the_worker(&c);
    // s: callback 0, kernel (needs the held core), callback 2: 2 must wait for the kernel.
    let s = c.create_stream(0).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let step = Arc::new(AtomicU32::new(0));
    let push = |i: u32| {
        let (o, st) = (order.clone(), step.clone());
        Box::new(move || {
            o.lock().unwrap().push(i);
            st.fetch_add(1, Ordering::AcqRel);
            Ok(())
        })
    };
    s.launch_engine(Engine::Host, push(0)).unwrap();
    let o = order.clone();
    s.launch(
        Arc::new(FnKernel(move |_b: BlockCtx| {
            o.lock().unwrap().push(1);
            Ok(())
        })),
        1,
    )
    .unwrap();
    s.launch_engine(Engine::Host, push(2)).unwrap();
    assert!(
        until(|| step.load(Ordering::Acquire) >= 1),
        "the first callback waited for the AI core"
    );
    // The kernel cannot run while the gate holds the only worker: nothing after it may.
    std::thread::sleep(Duration::from_millis(50));
    let early = order.lock().unwrap().clone();
    gate.open.store(true, Ordering::Release);
    assert_eq!(early, vec![0], "work queued behind a kernel ran before it");
    s.synchronize(Some(PROMPT)).unwrap();
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    held.synchronize(Some(PROMPT)).unwrap();
    s.destroy(false).unwrap();
    held.destroy(false).unwrap();
}
