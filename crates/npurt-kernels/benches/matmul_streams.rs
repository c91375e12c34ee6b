//! Throughput of 256³ f32 matmuls (one block each) by parallel workers, without Python:
//! 1 and 2 plain threads running the kernel inline, then 1 and 2 npurt streams launched
//! from one Rust thread (the runtime's 2 AI-core workers). Ratios are from the same run.
//!
//! `cargo bench -p npurt-kernels --bench matmul_streams [-- N]` (N matmuls per
//! figure, default 4000). Each figure is the median of 5 rounds.

use npurt_core::{registry, Config};
use npurt_kernels::{matmul, run_inline, DType, HostTensor};
use std::time::Instant;

const N: usize = 256;

fn tensor(seed: u64) -> HostTensor {
    let mut s = seed;
    let v: Vec<f64> = (0..N * N)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f64) / (1u64 << 24) as f64 - 0.5
        })
        .collect();
    HostTensor::from_f64(DType::F32, &v, &[N, N])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Matmuls per second over `threads` plain threads (each its own output).
fn threads(a: &HostTensor, b: &HostTensor, threads: usize, total: usize) -> f64 {
    let outs: Vec<HostTensor> = (0..threads).map(|_| HostTensor::zeros(DType::F32, &[N, N])).collect();
    // SAFETY: the host tensors outlive every kernel (joined below).
    let (va, vb) = unsafe { (a.view(), b.view()) };
    let t = Instant::now();
    std::thread::scope(|sc| {
        for o in &outs {
            let (va, vb) = (va.clone(), vb.clone());
            // SAFETY: as above; each thread writes its own output.
            let vo = unsafe { o.view() };
            sc.spawn(move || {
                let (k, _) = matmul(&va, &vb, &vo, false, false, 1).unwrap();
                for _ in 0..total / threads {
                    run_inline(k.as_ref(), 1, false).unwrap();
                }
            });
        }
    });
    (total / threads * threads) as f64 / t.elapsed().as_secs_f64()
}

/// Matmuls per second launched round-robin on `streams` npurt streams (one block each).
fn streams(a: &HostTensor, b: &HostTensor, streams: usize, total: usize) -> f64 {
    let ctx = registry::use_device(0).unwrap().default_context();
    let ss: Vec<_> = (0..streams).map(|_| ctx.create_stream(0).unwrap()).collect();
    let outs: Vec<HostTensor> = (0..streams).map(|_| HostTensor::zeros(DType::F32, &[N, N])).collect();
    // SAFETY: the host tensors outlive the kernels (streams synchronized below).
    let ks: Vec<_> = outs
        .iter()
        .map(|o| unsafe { matmul(&a.view(), &b.view(), &o.view(), false, false, 2).unwrap().0 })
        .collect();
    let t = Instant::now();
    for i in 0..total {
        ss[i % streams].launch(ks[i % streams].clone(), 1).unwrap();
    }
    for s in &ss {
        s.synchronize(None).unwrap();
    }
    let r = total as f64 / t.elapsed().as_secs_f64();
    drop(ks);
    for s in ss {
        s.destroy(false).unwrap();
    }
    r
}

fn main() {
    let total: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(4000);
    registry::configure(Config {
        device_count: 1,
        worker_threads: 2,
        aicore_num: 2,
        ..Config::default()
    })
    .unwrap();
    let (a, b) = (tensor(1), tensor(2));
    threads(&a, &b, 2, 200);
    streams(&a, &b, 2, 200);
    let mut r: [Vec<f64>; 4] = Default::default();
    for _ in 0..5 {
        r[0].push(threads(&a, &b, 1, total));
        r[1].push(threads(&a, &b, 2, total));
        r[2].push(streams(&a, &b, 1, total));
        r[3].push(streams(&a, &b, 2, total));
    }
    let m: Vec<f64> = r.into_iter().map(median).collect();
    let gf = |x: f64| x * 2.0 * (N * N * N) as f64 / 1e9;
    println!("threads 1: {:.0}/s ({:.1} GFLOP/s)", m[0], gf(m[0]));
    println!(
        "threads 2: {:.0}/s ({:.1} GFLOP/s)  ratio {:.3}",
        m[1],
        gf(m[1]),
        m[1] / m[0]
    );
    println!("streams 1: {:.0}/s ({:.1} GFLOP/s)", m[2], gf(m[2]));
    println!(
        "streams 2: {:.0}/s ({:.1} GFLOP/s)  ratio {:.3}",
        m[3],
        gf(m[3]),
        m[3] / m[2]
    );
}
