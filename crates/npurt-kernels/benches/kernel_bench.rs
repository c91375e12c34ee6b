//! Kernel throughput on the host cores, without the runtime: blocks run on N std threads
//! claiming block indices like the executor's AI-core workers (one persistent helper pool,
//! the calling thread takes part).
//!
//! `cargo bench -p npurt-kernels --bench kernel_bench [-- --no-numpy] [--quick]`
//!
//! Prints GFLOP/s of f32 matmul 1024³ and 256³, GB/s of axpy (out = a*x + y) over 16M f32
//! (12 bytes moved per element), and the time of softmax and layer_norm over (4096, 1024)
//! f32, each on 2 threads and on 1; then (unless `--no-numpy`, when python3 with numpy is
//! available) numpy's numbers for the same work in the same run (its default threads, and
//! with OPENBLAS_NUM_THREADS=1), and the ratios. Each number is the best of several rounds
//! (the machine is shared).

mod common;

use common::{filled, v};
use npurt_core::{BlockCtx, Kernel};
use npurt_kernels::{axpy, layer_norm, matmul, softmax, DType, HostTensor, Launch};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One launch being run by the pool.
struct Job {
    kernel: Arc<dyn Kernel>,
    blocks: u32,
    next: AtomicU32,
    done: AtomicU32,
}

impl Job {
    fn work(&self, core: u32) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.blocks {
                return;
            }
            self.kernel
                .run_block(BlockCtx {
                    block_idx: i,
                    block_dim: self.blocks,
                    core_id: core,
                })
                .expect("kernel fault");
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// `threads - 1` helpers spinning for jobs (yielding when idle), plus the caller.
struct Pool {
    threads: usize,
    gen: Arc<AtomicU64>,
    job: Arc<Mutex<Option<Arc<Job>>>>,
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    fn new(threads: usize) -> Pool {
        let gen = Arc::new(AtomicU64::new(0));
        let job: Arc<Mutex<Option<Arc<Job>>>> = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (1..threads)
            .map(|core| {
                let (gen, job, stop) = (gen.clone(), job.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut seen = 0;
                    let mut idle = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let g = gen.load(Ordering::Acquire);
                        if g == seen {
                            idle += 1;
                            if idle < 20_000 {
                                std::hint::spin_loop();
                            } else {
                                std::thread::sleep(Duration::from_micros(50));
                            }
                            continue;
                        }
                        idle = 0;
                        seen = g;
                        let j = job.lock().unwrap().clone();
                        if let Some(j) = j {
                            j.work(core as u32);
                        }
                    }
                })
            })
            .collect();
        Pool {
            threads,
            gen,
            job,
            stop,
            handles,
        }
    }

    fn run(&self, (kernel, blocks): &Launch) {
        let j = Arc::new(Job {
            kernel: kernel.clone(),
            blocks: *blocks,
            next: AtomicU32::new(0),
            done: AtomicU32::new(0),
        });
        if self.threads > 1 && *blocks > 1 {
            *self.job.lock().unwrap() = Some(j.clone());
            self.gen.fetch_add(1, Ordering::Release);
        }
        j.work(0);
        while j.done.load(Ordering::Acquire) < *blocks {
            std::hint::spin_loop();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            h.join().unwrap();
        }
    }
}

/// Seconds per launch: the best of `rounds` rounds of `reps` launches (after a warm-up).
/// The best round, not the median: the machine is shared, and a round that another
/// tenant's work slowed down says nothing about the kernel (numpy is measured the same way).
fn time(pool: &Pool, launch: &Launch, reps: usize, rounds: usize) -> f64 {
    for _ in 0..reps.div_ceil(4).max(1) {
        pool.run(launch);
    }
    let mut ts: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                pool.run(launch);
            }
            t.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ts[0]
}

const NUMPY: &str = r#"
import time, numpy as np
def best(f, reps, rounds=7):
    for _ in range(max(1, reps // 4)): f()
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps): f()
        ts.append((time.perf_counter() - t) / reps)
    return min(ts)
rng = np.random.default_rng(0)
for n, reps in ((1024, 10), (256, 200)):
    a = rng.standard_normal((n, n), dtype=np.float32); b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    print("matmul%d %.6g" % (n, 2 * n**3 / best(lambda: np.matmul(a, b, out=c), reps) / 1e9))
N = 16 << 20
x = rng.standard_normal(N, dtype=np.float32); y = rng.standard_normal(N, dtype=np.float32); o = np.empty(N, np.float32)
def axpy():
    np.multiply(x, np.float32(0.5), out=o); np.add(o, y, out=o)
print("axpy %.6g" % (12 * N / best(axpy, 10) / 1e9))
X = rng.standard_normal((4096, 1024), dtype=np.float32)
w = rng.standard_normal(1024, dtype=np.float32); bb = rng.standard_normal(1024, dtype=np.float32)
def softmax():
    e = np.exp(X - X.max(axis=-1, keepdims=True)); e /= e.sum(axis=-1, keepdims=True); return e
def layernorm():
    m = X.mean(axis=-1, keepdims=True); v = X.var(axis=-1, keepdims=True)
    return (X - m) / np.sqrt(v + 1e-5) * w + bb
print("softmax %.6g" % (best(softmax, 10) * 1e3))
print("layernorm %.6g" % (best(layernorm, 10) * 1e3))
"#;

fn numpy_numbers(threads: Option<usize>) -> Option<Vec<(String, f64)>> {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(NUMPY);
    if let Some(t) = threads {
        for var in ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"] {
            cmd.env(var, t.to_string());
        }
    }
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(
        text.lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                Some((it.next()?.to_string(), it.next()?.parse().ok()?))
            })
            .collect(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let rounds = if quick { 3 } else { 7 };
    // Where it runs: CPU model, ISA level (NPURT_ISA caps it) and each family's path.
    println!("{}", npurt_kernels::isa::report());
    let mut ours: Vec<(String, f64)> = vec![];
    for threads in [2usize, 1] {
        let pool = Pool::new(threads);
        let cores = threads as u32;
        println!("== {threads} thread(s) (cores hint {cores}) ==");
        for (n, reps) in [(1024usize, 10usize), (256, 200)] {
            let (a, b, c) = (
                filled(&[n, n], 1),
                filled(&[n, n], 2),
                HostTensor::zeros(DType::F32, &[n, n]),
            );
            let l = matmul(&v(&a), &v(&b), &v(&c), false, false, cores).unwrap();
            let t = time(&pool, &l, if quick { reps / 2 } else { reps }, rounds);
            let gf = 2.0 * (n as f64).powi(3) / t / 1e9;
            println!(
                "matmul {n}^3 f32: {gf:7.1} GFLOP/s  ({:.3} ms, {} blocks)",
                t * 1e3,
                l.1
            );
            ours.push((format!("matmul{n}@{threads}"), gf));
        }
        {
            let n = 16usize << 20;
            let (x, y, o) = (filled(&[n], 3), filled(&[n], 4), HostTensor::zeros(DType::F32, &[n]));
            let l = axpy(0.5, &v(&x), &v(&y), &v(&o), cores).unwrap();
            let t = time(&pool, &l, 10, rounds);
            let gbs = 12.0 * n as f64 / t / 1e9;
            println!(
                "axpy 16M f32:      {gbs:7.1} GB/s     ({:.3} ms, {} blocks)",
                t * 1e3,
                l.1
            );
            ours.push((format!("axpy@{threads}"), gbs));
        }
        {
            let shape = [4096usize, 1024];
            let (x, o) = (filled(&shape, 5), HostTensor::zeros(DType::F32, &shape));
            let (w, b) = (filled(&[1024], 6), filled(&[1024], 7));
            let l = softmax(&v(&x), -1, &v(&o), cores).unwrap();
            let t = time(&pool, &l, 10, rounds);
            println!("softmax (4096,1024) f32:    {:7.3} ms  ({} blocks)", t * 1e3, l.1);
            ours.push((format!("softmax@{threads}"), t * 1e3));
            let l = layer_norm(&v(&x), Some(&v(&w)), Some(&v(&b)), 1e-5, &v(&o), cores).unwrap();
            let t = time(&pool, &l, 10, rounds);
            println!("layer_norm (4096,1024) f32: {:7.3} ms  ({} blocks)", t * 1e3, l.1);
            ours.push((format!("layernorm@{threads}"), t * 1e3));
        }
    }
    if args.iter().any(|a| a == "--no-numpy") {
        return;
    }
    let (Some(np), Some(np1)) = (numpy_numbers(None), numpy_numbers(Some(1))) else {
        println!("(numpy not available: no comparison)");
        return;
    };
    let get = |v: &[(String, f64)], k: &str| v.iter().find(|(n, _)| n == k).map(|x| x.1).unwrap_or(f64::NAN);
    println!("== numpy in the same run (best of rounds, like npurt); speed ratio = npurt / numpy ==");
    for (key, unit, higher_better) in [
        ("matmul1024", "GFLOP/s", true),
        ("matmul256", "GFLOP/s", true),
        ("axpy", "GB/s", true),
        ("softmax", "ms", false),
        ("layernorm", "ms", false),
    ] {
        for (threads, np) in [(2, &np), (1, &np1)] {
            let (n, o) = (get(np, key), get(&ours, &format!("{key}@{threads}")));
            let ratio = if higher_better { o / n } else { n / o };
            println!("{key:11} {threads} thread(s): numpy {n:8.2} {unit:8} npurt {o:8.2} {unit:8} ratio {ratio:5.2}x");
        }
    }
}
