//! Kernels launched on real npurt streams (2 AI-core workers): multi-block jobs give the
//! same bits as running the blocks inline, streams run independent work, a fault becomes
//! the stream's sticky error (the ISA paths are compared in `isa.rs`).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::*;
use npurt_core::{registry, Config};
use npurt_kernels::{
    binary, layer_norm, matmul, reduce, run_inline, softmax, unary, BinaryOp, DType, Fault, HostTensor, ReduceOp,
    UnaryOp,
};
use std::sync::{Arc, Once};

fn stream() -> npurt_core::Stream {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let cfg = Config {
            device_count: 1,
            worker_threads: 2,
            aicore_num: 2,
            ..Config::default()
        };
        registry::configure(cfg).unwrap();
    });
    registry::use_device(0)
        .unwrap()
        .default_context()
        .create_stream(0)
        .unwrap()
}

struct Layer {
    h: HostTensor,
    y: HostTensor,
    p: HostTensor,
}

impl Layer {
    fn new() -> Self {
        Layer {
            h: HostTensor::zeros(DType::F32, &[64, 128]),
            y: HostTensor::zeros(DType::F32, &[64, 128]),
            p: HostTensor::zeros(DType::F32, &[64]),
        }
    }

    /// h = gelu(x @ w.T); y = softmax(scale * layer_norm(h) * g); p = max(y, -1).
    fn launches(&self, x: &HostTensor, w: &HostTensor, g: &HostTensor, scale: f64) -> Vec<npurt_kernels::Launch> {
        vec![
            matmul(&v(x), &v(w), &v(&self.h), false, true, 2).unwrap(),
            unary(UnaryOp::Gelu, &v(&self.h), &v(&self.h), 2).unwrap(),
            layer_norm(&v(&self.h), Some(&v(g)), None, 1e-5, &v(&self.y), 2).unwrap(),
            binary(BinaryOp::Mul, &v(&self.y), scale, &v(&self.y), 2).unwrap(),
            softmax(&v(&self.y), -1, &v(&self.y), 2).unwrap(),
            reduce(ReduceOp::Max, &v(&self.y), Some(&[1]), &v(&self.p), 2).unwrap(),
        ]
    }

    fn read(&self) -> (Vec<f64>, Vec<f64>) {
        (self.y.to_f64_vec(), self.p.to_f64_vec())
    }
}

#[test]
fn mlp_layer_on_two_streams_matches_inline() {
    let mut rng = Rng::new(51);
    let (x, _) = random(&mut rng, DType::F32, &[64, 96], -1.0, 1.0);
    let (w, _) = random(&mut rng, DType::F32, &[128, 96], -0.2, 0.2);
    let (g, _) = random(&mut rng, DType::F32, &[128], 0.5, 1.5);
    let streams = [stream(), stream()];
    let layers = [Layer::new(), Layer::new()];
    for (i, (s, l)) in streams.iter().zip(&layers).enumerate() {
        for (k, blocks) in l.launches(&x, &w, &g, 2.0 + i as f64) {
            // More blocks than suggested, so every kernel is a multi-block job.
            s.launch(k, blocks.max(3)).unwrap();
        }
    }
    for s in &streams {
        s.synchronize(None).unwrap();
    }
    // The kernels are dropped once the streams are done with them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while layers
        .iter()
        .any(|l| l.y.is_shared() || l.p.is_shared() || l.h.is_shared())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "kernels still alive after synchronize"
        );
        std::thread::yield_now();
    }
    for (i, l) in layers.iter().enumerate() {
        let on_streams = l.read();
        // The same chain, blocks run inline one by one in reverse order.
        for (k, _) in l.launches(&x, &w, &g, 2.0 + i as f64) {
            run_inline(k.as_ref(), 5, true).unwrap();
        }
        assert!(on_streams == l.read(), "layer {i}");
        assert!(on_streams.1.iter().all(|&m| m > 0.0 && m <= 1.0));
    }
    for s in streams {
        s.destroy(false).unwrap();
    }
}

#[test]
fn a_fault_is_the_streams_sticky_error() {
    let s = stream();
    s.launch(
        Arc::new(Fault {
            block: 1,
            message: "injected fault".into(),
        }),
        4,
    )
    .unwrap();
    let err = s.synchronize(None).unwrap_err();
    assert!(err.to_string().contains("injected fault"), "{err}");
    s.destroy(false).ok();
}
