//! Streams a worker keeps owning after their queues emptied (`executor/held.rs`): tiny
//! kernels launched round-robin over many streams run in order, every one of them, also
//! with a long kernel or a multi-block one in between (the held streams are then handed
//! to other workers), and every stream is given up — idle again — once the work stops.

mod common;

use common::*;
use npurt_core::{BlockCtx, Kernel, KernelFault, Stream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const STREAMS: usize = 8;

/// One-block kernel that checks it runs at position `pos` of its stream (every earlier
/// task done) and counts itself.
struct Next {
    stream: Stream,
    pos: u64,
    ran: Arc<AtomicU64>,
    bad: Arc<AtomicU64>,
    spin: Duration,
}

impl Kernel for Next {
    fn name(&self) -> &str {
        "next"
    }
    fn run_block(&self, _b: BlockCtx) -> Result<(), KernelFault> {
        if self.stream.completed() != self.pos {
            self.bad.fetch_add(1, Ordering::Relaxed);
        }
        let t = Instant::now();
        while t.elapsed() < self.spin {
            std::hint::spin_loop();
        }
        self.ran.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn every_stream_idle(streams: &[Stream], within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if streams.iter().all(|s| s.is_idle()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn round_robin_tiny_kernels_run_in_order_and_the_streams_go_idle_after() {
    let c = ctx(0);
    let streams: Vec<Stream> = (0..STREAMS).map(|_| c.create_stream(0).unwrap()).collect();
    let (ran, bad) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let rounds = 5_000u64;
    let mut launched = 0u64;
    for round in 0..rounds {
        for (i, s) in streams.iter().enumerate() {
            // now and then a long one-block kernel (a batch past the spill time) or a
            // multi-block one among the tiny ones
            let (spin, blocks) = match (round % 997, i) {
                (500, 3) => (Duration::from_millis(2), 1),
                (700, 5) => (Duration::from_micros(200), 2),
                _ => (Duration::ZERO, 1),
            };
            let k = Next {
                stream: s.clone(),
                pos: round,
                ran: ran.clone(),
                bad: bad.clone(),
                spin,
            };
            s.launch(Arc::new(k), blocks).unwrap();
            launched += blocks as u64;
        }
    }
    for s in &streams {
        s.synchronize(Some(Duration::from_secs(60))).unwrap();
    }
    assert_eq!(ran.load(Ordering::Relaxed), launched);
    assert_eq!(bad.load(Ordering::Relaxed), 0, "kernels ran out of order");
    // nothing is left owned once the work stopped (a worker that finds nothing gives its
    // held streams up before it searches or sleeps)
    assert!(
        every_stream_idle(&streams, Duration::from_secs(5)),
        "a stream stayed owned"
    );
    for s in streams {
        s.destroy(false).unwrap();
    }
}

#[test]
fn a_stream_destroyed_while_held_is_released_and_later_streams_work() {
    let c = ctx(1);
    let (ran, bad) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    for cycle in 0..20 {
        let streams: Vec<Stream> = (0..3).map(|_| c.create_stream(0).unwrap()).collect();
        for round in 0..200u64 {
            for s in &streams {
                let k = Next {
                    stream: s.clone(),
                    pos: round,
                    ran: ran.clone(),
                    bad: bad.clone(),
                    spin: Duration::ZERO,
                };
                s.launch(Arc::new(k), 1).unwrap();
            }
        }
        // destroy right away (waits for the queued work), possibly while a worker holds it
        for s in streams {
            s.destroy(false).unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        }
    }
    assert_eq!(ran.load(Ordering::Relaxed), 20 * 200 * 3);
    assert_eq!(bad.load(Ordering::Relaxed), 0);
}
