//! The conv-net kernels on one core, without the runtime: each launch's blocks run in
//! order on the calling thread (`run_inline`), so a figure is the core time of one launch
//! (what a request costs when every core serves its own stream).
//!
//! `cargo bench -p npurt-kernels --bench nn_bench [-- --quick] [--only TEXT]`
//!
//! Shapes: the model bench's conv net (`benches/model_streams.py`: 3→32 3×3 conv + Relu at
//! 32², 2×2/2 MaxPool, 32-channel depthwise 3×3 + HardSwish at 16²) and larger layers of the
//! same kinds (a ResNet stem's 3×3/2 pad-1 MaxPool at 64×112², a MobileNet depthwise at
//! 64×56²), the conv net's global average pool (a mean over the spatial axes), and the
//! transformer block's row kernels (softmax over 4 heads' 64×64 scores, layer_norm of
//! 64×128). Prints the CPU model and the ISA line first; best of several rounds (shared
//! machine).

mod common;

use common::{filled, v};
use npurt_kernels::nn::{conv, pool, Epilogue, PoolKind};
use npurt_kernels::{copy, layer_norm, reduce, run_inline, softmax, HostTensor, Launch, ReduceOp};
use std::time::Instant;

/// (name, x shape, kernel, strides, pads).
type PoolCase = (&'static str, [usize; 4], [usize; 2], [usize; 2], [usize; 4]);
/// (name, x shape, w shape, group, activation).
type ConvCase = (&'static str, [usize; 4], [usize; 4], usize, Epilogue);

/// Best-of-rounds microseconds of one launch, its blocks run in order on this thread.
fn time(launch: &Launch, quick: bool) -> f64 {
    let (kernel, blocks) = launch;
    let once = || run_inline(kernel.as_ref(), *blocks, false).expect("kernel fault");
    let t = Instant::now();
    once();
    let reps = ((0.02 / t.elapsed().as_secs_f64().max(1e-7)) as usize).clamp(3, 20_000);
    let rounds = if quick { 3 } else { 7 };
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                once();
            }
            t.elapsed().as_secs_f64() * 1e6 / reps as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only TEXT`: the rows whose name contains TEXT.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_default();
    println!("{}", npurt_kernels::isa::report());
    println!("one core, all blocks of a launch in order; best of rounds");
    let pools: [PoolCase; 5] = [
        (
            "max_pool 2x2/2 1x32x32x32 (conv net)",
            [1, 32, 32, 32],
            [2, 2],
            [2, 2],
            [0; 4],
        ),
        (
            "max_pool 3x3/2 p1 1x64x112x112 (stem)",
            [1, 64, 112, 112],
            [3, 3],
            [2, 2],
            [1; 4],
        ),
        (
            "max_pool 3x3/2 1x64x112x112 (no pads)",
            [1, 64, 112, 112],
            [3, 3],
            [2, 2],
            [0; 4],
        ),
        ("max_pool 3x3/1 p1 1x64x56x56", [1, 64, 56, 56], [3, 3], [1, 1], [1; 4]),
        ("avg_pool 2x2/2 1x64x56x56", [1, 64, 56, 56], [2, 2], [2, 2], [0; 4]),
    ];
    for (name, shape, k, s, p) in pools.into_iter().filter(|r| r.0.contains(&only)) {
        let x = filled(&shape, 1);
        let oh = (shape[2] + p[0] + p[2] - k[0]) / s[0] + 1;
        let ow = (shape[3] + p[1] + p[3] - k[1]) / s[1] + 1;
        let out = HostTensor::zeros(npurt_kernels::DType::F32, &[shape[0], shape[1], oh, ow]);
        let kind = if name.starts_with("max") {
            PoolKind::Max
        } else {
            PoolKind::Avg {
                count_include_pad: false,
            }
        };
        let l = pool(kind, &v(&x), &v(&out), &k, Some(&s), Some(&p), None, false, 2).expect("pool");
        let us = time(&l, quick);
        let gbs = (x.numel() + out.numel()) as f64 * 4.0 / us / 1e3;
        println!("{name:44} {us:9.2} us  {gbs:6.1} GB/s");
    }
    let convs: [ConvCase; 3] = [
        (
            "conv 3->32 3x3 p1 1x3x32x32 +relu (conv net)",
            [1, 3, 32, 32],
            [32, 3, 3, 3],
            1,
            Epilogue::Relu,
        ),
        (
            "depthwise 3x3 p1 1x32x16x16 +hswish (conv net)",
            [1, 32, 16, 16],
            [32, 1, 3, 3],
            32,
            Epilogue::HardSwish,
        ),
        (
            "depthwise 3x3 p1 1x64x56x56 +relu",
            [1, 64, 56, 56],
            [64, 1, 3, 3],
            64,
            Epilogue::Relu,
        ),
    ];
    for (name, xs, ws, group, epi) in convs.into_iter().filter(|r| r.0.contains(&only)) {
        let (x, w, b) = (filled(&xs, 2), filled(&ws, 3), filled(&[ws[0]], 4));
        let out = HostTensor::zeros(npurt_kernels::DType::F32, &[xs[0], ws[0], xs[2], xs[3]]);
        let l = conv(
            &v(&x),
            &v(&w),
            Some(&v(&b)),
            &v(&out),
            None,
            Some(&[1, 1, 1, 1]),
            None,
            group,
            epi,
            2,
        )
        .expect("conv");
        let us = time(&l, quick);
        let macs = (out.numel() * ws[1] * ws[2] * ws[3]) as f64;
        println!("{name:44} {us:9.2} us  {:6.1} GFLOP/s", 2.0 * macs / us / 1e3);
    }
    for (name, xs) in [
        ("global_avg_pool 1x32x16x16 (conv net)", [1, 32, 16, 16]),
        ("global_avg_pool 1x256x7x7", [1, 256, 7, 7]),
    ]
    .into_iter()
    .filter(|r| r.0.contains(&only))
    {
        let x = filled(&xs, 5);
        let out = HostTensor::zeros(npurt_kernels::DType::F32, &[xs[0], xs[1], 1, 1]);
        let l = reduce(ReduceOp::Mean, &v(&x), Some(&[2, 3]), &v(&out), 2).expect("mean");
        let us = time(&l, quick);
        println!("{name:44} {us:9.2} us  {:6.1} GB/s", x.numel() as f64 * 4.0 / us / 1e3);
    }
    if "softmax 1x4x64x64 (transformer)".contains(&only) {
        let x = filled(&[1, 4, 64, 64], 6);
        let out = HostTensor::zeros(npurt_kernels::DType::F32, &[1, 4, 64, 64]);
        let us = time(&softmax(&v(&x), -1, &v(&out), 2).expect("softmax"), quick);
        println!(
            "{:44} {us:9.2} us  {:6.1} GB/s",
            "softmax 1x4x64x64 (transformer)",
            x.numel() as f64 * 8.0 / us / 1e3
        );
    }
    if "layer_norm 64x128 (transformer)".contains(&only) {
        let x = filled(&[64, 128], 7);
        let (g, b) = (filled(&[128], 8), filled(&[128], 9));
        let out = HostTensor::zeros(npurt_kernels::DType::F32, &[64, 128]);
        let l = layer_norm(&v(&x), Some(&v(&g)), Some(&v(&b)), 1e-5, &v(&out), 2).expect("layer_norm");
        let us = time(&l, quick);
        println!(
            "{:44} {us:9.2} us  {:6.1} GB/s",
            "layer_norm 64x128 (transformer)",
            x.numel() as f64 * 8.0 / us / 1e3
        );
    }
    if "head split 1x64x4x32 -> 1x4x64x32 (transformer)".contains(&only) {
        // The attention's head split: a copy of a permuted view (runs of 32 floats).
        let x = filled(&[1, 64, 4, 32], 10);
        let out = HostTensor::zeros(npurt_kernels::DType::F32, &[1, 4, 64, 32]);
        let xt = v(&x).permute(&[0, 2, 1, 3]).expect("permute");
        let us = time(&copy(&xt, &v(&out), 2).expect("copy"), quick);
        let name = "head split 1x64x4x32 -> 1x4x64x32 (transformer)";
        println!("{name:44} {us:9.2} us  {:6.1} GB/s", x.numel() as f64 * 8.0 / us / 1e3);
    }
}
