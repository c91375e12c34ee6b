//! Shared helpers for the integration tests.
#![allow(dead_code)]

use npurt_core::collective::{local, CollKind, Communicator, HcclDataType, OpDesc, ReduceOp, Region};
use npurt_core::{registry, BlockCtx, Config, Context, Kernel, KernelFault};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

/// Two devices with two workers each; configured once per test binary.
pub fn setup() {
    configure_once(2, 2);
}

/// `devices` devices with `workers` AI-core workers each, configured by the first call of
/// the test binary (a binary uses one configuration).
pub fn configure_once(devices: u32, workers: u32) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let cfg = Config {
            device_count: devices,
            worker_threads: workers,
            aicore_num: workers,
            ..Config::default()
        };
        registry::configure(cfg).unwrap();
    });
}

/// Device `id`'s default context (taking the process's implicit reference).
pub fn ctx(id: i64) -> Context {
    setup();
    registry::use_device(id).unwrap().default_context()
}

/// Counts how often each block index ran.
pub struct Blocks {
    pub hits: Vec<AtomicU32>,
}

impl Blocks {
    pub fn new(n: u32) -> Arc<Self> {
        Arc::new(Self {
            hits: (0..n).map(|_| AtomicU32::new(0)).collect(),
        })
    }
}

impl Kernel for Blocks {
    fn name(&self) -> &str {
        "blocks"
    }
    fn run_block(&self, b: BlockCtx) -> Result<(), KernelFault> {
        assert_eq!(b.block_dim as usize, self.hits.len());
        self.hits[b.block_idx as usize].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Spins for a duration per block.
pub struct Spin(pub Duration);

impl Kernel for Spin {
    fn name(&self) -> &str {
        "spin"
    }
    fn run_block(&self, _b: BlockCtx) -> Result<(), KernelFault> {
        let t = Instant::now();
        while t.elapsed() < self.0 {
            std::hint::spin_loop();
        }
        Ok(())
    }
}

/// Runs a closure as a kernel.
pub struct FnKernel<F>(pub F);

impl<F: Fn(BlockCtx) -> Result<(), KernelFault> + Send + Sync + 'static> Kernel for FnKernel<F> {
    fn name(&self) -> &str {
        "fn"
    }
    fn run_block(&self, b: BlockCtx) -> Result<(), KernelFault> {
        (self.0)(b)
    }
}

// -- collectives (`collective.rs`, `collective_errors.rs`) ------------------------------

/// The bytes of `v` as a collective's buffer (kept alive by the caller).
pub fn region(v: &mut [f32]) -> Region {
    Region {
        addr: v.as_mut_ptr() as usize,
        len: std::mem::size_of_val(v),
        keep: None,
    }
}

/// A float32 collective's descriptor.
pub fn desc(kind: CollKind, count: u64, op: ReduceOp, root: u32) -> OpDesc {
    OpDesc {
        kind,
        dtype: HcclDataType::Fp32,
        op,
        count,
        root,
    }
}

/// Runs `f(rank, comm)` on one thread per rank and returns the results in rank order.
pub fn ranks<T: Send + 'static>(
    world: u32,
    timeout: Duration,
    f: impl Fn(u32, Communicator) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let comms = local::init_all(world, timeout).unwrap();
    let f = std::sync::Arc::new(f);
    let hs: Vec<_> = comms
        .into_iter()
        .enumerate()
        .map(|(r, c)| {
            let f = f.clone();
            std::thread::spawn(move || f(r as u32, c))
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}
