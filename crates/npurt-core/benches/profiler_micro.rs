//! The profiler's cost at the Rust level: `cargo bench -p npurt-core --bench profiler_micro`.
//! Launches `N` empty one-block kernels on one stream and synchronizes, in rounds that
//! alternate: no observer (never installed), a `Collector` installed (records and launch
//! notes kept), observer removed again, call sites only (a trivial site source). Prints ns
//! per task (median of the rounds) and each case's ratio to the first; the per-task cost of
//! profiling is `on - off`. Ratios within one run are what to compare; absolute figures
//! move with the machine's load.

mod common;

use common::{cpu_ns, median, Nop};
use npurt_core::profiler::{site, Collector, TaskObserver};
use npurt_core::{registry, Kernel, Stream};
use std::sync::Arc;
use std::time::Instant;

const N: u32 = 200_000;
const ROUNDS: usize = 7;

fn round(s: &Stream, k: &Arc<dyn Kernel>) -> f64 {
    let t = Instant::now();
    for _ in 0..N {
        s.launch(k.clone(), 1).unwrap();
    }
    s.synchronize(None).unwrap();
    t.elapsed().as_nanos() as f64 / N as f64
}

/// The launching thread's cost alone: bursts shorter than the ring (never blocked on a
/// full ring), the wait for the worker outside the timing.
fn launch_only(s: &Stream, k: &Arc<dyn Kernel>) -> f64 {
    let mut total = 0u128;
    let bursts = 200;
    for _ in 0..bursts {
        let t = Instant::now();
        for _ in 0..BURST {
            s.launch(k.clone(), 1).unwrap();
        }
        total += t.elapsed().as_nanos();
        s.synchronize(None).unwrap();
    }
    total as f64 / (bursts * BURST) as f64
}

const BURST: u32 = 512;

/// Bursts of `BURST` launches, each followed by a synchronize: the ring never fills, so
/// the producer never parks on it. Returns the process's CPU time per task (every thread:
/// the launching one, the workers, and their spinning while idle, alike in both cases):
/// on a machine shared with other work this is steadier than wall time.
fn bursts(s: &Stream, k: &Arc<dyn Kernel>) -> f64 {
    let c = cpu_ns();
    for _ in 0..200 {
        for _ in 0..BURST {
            s.launch(k.clone(), 1).unwrap();
        }
        s.synchronize(None).unwrap();
    }
    (cpu_ns() - c) as f64 / (200 * BURST) as f64
}

fn fixed_site(_want: u8) -> u32 {
    thread_local!(static ID: u32 = site::intern(site::LaunchMeta {
        site: "bench.rs:1".into(),
        stack: None,
        shapes: None,
    }));
    ID.with(|i| *i)
}

fn main() -> Result<(), npurt_core::Error> {
    let dev = registry::set_device(0)?;
    let s = dev.default_context().create_stream(0)?;
    let k: Arc<dyn Kernel> = Arc::new(Nop);
    site::set_source(fixed_site);
    round(&s, &k); // warm-up
    let names = [
        "off (never observed)",
        "collector on",
        "off again",
        "call sites only",
        "launch call only, off",
        "launch call only, on",
        "bursts, CPU time, off",
        "bursts, CPU time, on",
    ];
    let mut t: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut kept = 0usize;
    for _ in 0..ROUNDS {
        t[0].push(round(&s, &k));
        let obs = Arc::new(Collector::new());
        let handle: Arc<dyn TaskObserver> = obs.clone();
        dev.add_observer(handle.clone());
        t[1].push(round(&s, &k));
        dev.remove_observer(&handle);
        kept = obs.take().0.len();
        t[2].push(round(&s, &k));
        site::set_always(true);
        t[3].push(round(&s, &k));
        site::set_always(false);
        t[4].push(launch_only(&s, &k));
        let obs = Arc::new(Collector::new());
        let handle: Arc<dyn TaskObserver> = obs.clone();
        dev.add_observer(handle.clone());
        t[5].push(launch_only(&s, &k));
        dev.remove_observer(&handle);
        drop(obs.take());
        t[6].push(bursts(&s, &k));
        let obs = Arc::new(Collector::new());
        let handle: Arc<dyn TaskObserver> = obs.clone();
        dev.add_observer(handle.clone());
        t[7].push(bursts(&s, &k));
        dev.remove_observer(&handle);
        drop(obs.take());
    }
    let base = median(t[0].clone());
    for (name, v) in names.iter().zip(t) {
        let m = median(v);
        println!("{name:<22} {m:8.1} ns/task   x{:.3}", m / base);
    }
    println!("records kept per observed round: {kept} of {N}");
    Ok(())
}
