//! 8 threads × 64 streams × 10^6 tasks: nothing lost, each thread's order kept per stream.

mod common;

use common::*;
use npurt_core::{BlockCtx, Kernel, KernelFault, Stream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const THREADS: usize = 8;
const STREAMS: usize = 64;
const TASKS: usize = 1_000_000;

/// Per (stream, thread): the sequence number of the last task that ran.
struct Ledger {
    last: Vec<AtomicU64>,
    errors: AtomicU64,
}

struct Tick {
    ledger: Arc<Ledger>,
    slot: usize,
    seq: u64,
}

impl Kernel for Tick {
    fn name(&self) -> &str {
        "tick"
    }
    fn run_block(&self, _b: BlockCtx) -> Result<(), KernelFault> {
        let prev = self.ledger.last[self.slot].swap(self.seq, Ordering::Relaxed);
        if prev + 1 != self.seq {
            self.ledger.errors.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[test]
fn stress_many_threads_many_streams() {
    let c = ctx(0);
    let streams: Vec<Stream> = (0..STREAMS).map(|i| c.create_stream((i % 8) as i64).unwrap()).collect();
    let ledger = Arc::new(Ledger {
        last: (0..STREAMS * THREADS).map(|_| AtomicU64::new(0)).collect(),
        errors: AtomicU64::new(0),
    });
    let per_thread = TASKS / THREADS;
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (streams, ledger) = (&streams, &ledger);
            scope.spawn(move || {
                let mut seq = vec![0u64; STREAMS];
                for i in 0..per_thread {
                    let si = (i * 7 + t) % STREAMS;
                    seq[si] += 1;
                    let k = Tick {
                        ledger: ledger.clone(),
                        slot: si * THREADS + t,
                        seq: seq[si],
                    };
                    streams[si].launch(Arc::new(k), 1).unwrap();
                }
            });
        }
    });
    for s in &streams {
        s.synchronize(None).unwrap();
    }
    assert_eq!(ledger.errors.load(Ordering::Relaxed), 0, "a thread's order was broken");
    let total: u64 = ledger.last.iter().map(|a| a.load(Ordering::Relaxed)).sum();
    assert_eq!(total as usize, per_thread * THREADS, "tasks were lost");
    let completed: u64 = streams.iter().map(|s| s.completed()).sum();
    assert_eq!(completed as usize, per_thread * THREADS);
    for s in streams {
        s.destroy(false).unwrap();
    }
}
