//! The profiler's cost at the Rust level: `cargo bench -p npurt-core --bench profiler_micro`.
//! Launches `N` empty one-block kernels on one stream and synchronizes, in rounds that
//! alternate: no observer (never installed), a `Collector` installed (records and launch
//! notes kept), observer removed again, call sites only (a trivial site source). Prints ns
//! per task (median of the rounds) and each case's ratio to the first; the per-task cost of
//! profiling is `on - off`. Ratios within one run are what to compare; absolute figures
//! move with the machine's load.

use npurt_core::profiler::{site, Collector, TaskObserver};
use npurt_core::{registry, BlockCtx, Kernel, KernelFault, Stream};
use std::sync::Arc;
use std::time::Instant;

struct Nop;
impl Kernel for Nop {
    fn name(&self) -> &str {
        "nop"
    }
    fn run_block(&self, _b: BlockCtx) -> Result<(), KernelFault> {
        Ok(())
    }
}

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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
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
    let names = ["off (never observed)", "collector on", "off again", "call sites only"];
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
    }
    let base = median(t[0].clone());
    for (name, v) in names.iter().zip(t) {
        let m = median(v);
        println!("{name:<22} {m:8.1} ns/task   x{:.3}", m / base);
    }
    println!("records kept per observed round: {kept} of {N}");
    Ok(())
}
