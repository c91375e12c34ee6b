//! Rust-level costs of the hot paths: `cargo bench -p npurt-core --bench micro`.
//! Prints ns per operation (median of 5 runs) for event record + query, launch, and
//! launch + synchronize round trips.

mod common;

use common::{median, Nop};
use npurt_core::{registry, Kernel};
use std::sync::Arc;
use std::time::Instant;

fn measure(n: u32, mut f: impl FnMut()) -> f64 {
    let runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    median(runs)
}

fn main() -> Result<(), npurt_core::Error> {
    let dev = registry::set_device(0)?;
    let ctx = dev.default_context();
    let s = ctx.create_stream(0)?;
    let ev = ctx.create_event(false)?;
    let k: Arc<dyn Kernel> = Arc::new(Nop);
    let rec = measure(1_000_000, || {
        ev.record(&s).unwrap();
        std::hint::black_box(ev.query().unwrap());
    });
    println!("event record + query (no timing): {rec:8.1} ns");
    let q = measure(1_000_000, || {
        std::hint::black_box(ev.query().unwrap());
    });
    println!("event query:                       {q:8.1} ns");
    let launch = measure(1_000_000, || {
        s.launch(k.clone(), 1).unwrap();
    });
    s.synchronize(None)?;
    println!("launch (one stream, pipelined):    {launch:8.1} ns");
    let rt = measure(100_000, || {
        s.launch(k.clone(), 1).unwrap();
        s.synchronize(None).unwrap();
    });
    println!("launch + synchronize round trip:   {rt:8.1} ns");
    // Launches round-robin over S streams (what `python -m npurt.bench`'s empty workload
    // does): a stream its worker drained meanwhile goes back on the ready list.
    let many: Vec<_> = (0..64).map(|_| ctx.create_stream(0)).collect::<Result<_, _>>()?;
    for n in [1usize, 2, 4, 8, 64] {
        let mut i = 0;
        let per = measure(1_000_000, || {
            many[i % n].launch(k.clone(), 1).unwrap();
            i += 1;
        });
        for m in &many[..n] {
            m.synchronize(None)?;
        }
        println!("launch round-robin over {n:2} streams: {per:8.1} ns");
    }
    for m in many {
        m.destroy(false)?;
    }
    s.destroy(false)?;
    drop(ev);
    registry::reset_device(0)?;
    Ok(())
}
