//! Stream order under every hand-over the executor has: tiny kernels (run back to back by
//! one worker), long one-block kernels, multi-block jobs, host callbacks, events
//! waited on by other streams, synchronizes. Every task checks, when it starts and when it
//! ends, that its stream's completed count is exactly its own position (every earlier
//! task done, nothing later counted) and that no other task of its stream is running.

mod common;

use common::*;
use npurt_core::{BlockCtx, Engine, Kernel, KernelFault, Stream};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const STREAMS: usize = 6;
const PRODUCERS: usize = 2;
const STEPS: usize = 6_000;

/// What one stream's tasks check against.
struct Lane {
    stream: Stream,
    running: AtomicU32,
    errors: Mutex<Vec<String>>,
}

impl Lane {
    /// Called when a task at position `pos` starts (`enter`) or ends.
    fn check(&self, pos: &AtomicU64, what: &str, enter: bool) {
        let p = loop {
            // The producer stores the position right after the launch returned it.
            let p = pos.load(Ordering::Acquire);
            if p != u64::MAX {
                break p;
            }
            std::hint::spin_loop();
        };
        if enter && self.running.fetch_add(1, Ordering::AcqRel) != 0 {
            self.fail(format!("{what} at {p} started while another task of its stream ran"));
        }
        let done = self.stream.completed();
        if done != p {
            let at = if enter { "start" } else { "end" };
            self.fail(format!("{what} at {p}: completed count {done} at its {at}"));
        }
        if !enter {
            self.running.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn fail(&self, msg: String) {
        self.errors.lock().unwrap().push(msg);
    }
}

/// One-block kernel: spins for `spin`; tiny when `spin` is zero.
struct Step {
    lane: Arc<Lane>,
    pos: Arc<AtomicU64>,
    spin: Duration,
}

impl Kernel for Step {
    fn name(&self) -> &str {
        "step"
    }
    fn run_block(&self, _b: BlockCtx) -> Result<(), KernelFault> {
        self.lane.check(&self.pos, self.name(), true);
        let t = Instant::now();
        while t.elapsed() < self.spin {
            std::hint::spin_loop();
        }
        self.lane.check(&self.pos, self.name(), false);
        Ok(())
    }
}

/// Multi-block kernel: every block sees the stream's count at its own position.
struct Wide {
    lane: Arc<Lane>,
    pos: Arc<AtomicU64>,
}

impl Kernel for Wide {
    fn name(&self) -> &str {
        "wide"
    }
    fn run_block(&self, _b: BlockCtx) -> Result<(), KernelFault> {
        let p = loop {
            let p = self.pos.load(Ordering::Acquire);
            if p != u64::MAX {
                break p;
            }
            std::hint::spin_loop();
        };
        let done = self.lane.stream.completed();
        if done != p {
            self.lane.fail(format!("wide block at {p}: completed count {done}"));
        }
        std::thread::sleep(Duration::from_micros(20));
        Ok(())
    }
}

fn unset() -> Arc<AtomicU64> {
    Arc::new(AtomicU64::new(u64::MAX))
}

/// A small deterministic generator (xorshift) per producer.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn produce(lanes: &[Arc<Lane>], mine: &[usize], seed: u64) {
    let c = ctx(0);
    let mut x = seed | 1;
    for _ in 0..STEPS {
        let i = mine[(next(&mut x) % mine.len() as u64) as usize];
        let lane = &lanes[i];
        let s = &lane.stream;
        let pos = unset();
        let r = next(&mut x) % 100;
        let seq = match r {
            0..=69 => s.launch(
                Arc::new(Step {
                    lane: lane.clone(),
                    pos: pos.clone(),
                    spin: Duration::ZERO,
                }),
                1,
            ),
            70..=79 => {
                let spin = Duration::from_micros(20 + next(&mut x) % 300);
                s.launch(
                    Arc::new(Step {
                        lane: lane.clone(),
                        pos: pos.clone(),
                        spin,
                    }),
                    1,
                )
            }
            80..=84 => s.launch(
                Arc::new(Wide {
                    lane: lane.clone(),
                    pos: pos.clone(),
                }),
                2 + (r % 3) as u32,
            ),
            85..=91 => {
                let (l, p) = (lane.clone(), pos.clone());
                s.launch_engine(
                    Engine::Host,
                    Box::new(move || {
                        l.check(&p, "host callback", true);
                        l.check(&p, "host callback", false);
                        Ok(())
                    }),
                )
            }
            92..=97 => {
                // Another stream (of any producer) waits for this one's work so far.
                let e = c.create_event(false).unwrap();
                e.record(s).unwrap();
                let other = &lanes[(i + 1 + (next(&mut x) % (STREAMS as u64 - 1)) as usize) % STREAMS].stream;
                other.wait_event(&e).unwrap();
                continue;
            }
            _ => {
                s.synchronize(Some(Duration::from_secs(60))).unwrap();
                continue;
            }
        };
        pos.store(seq.unwrap(), Ordering::Release);
    }
}

#[test]
fn stream_order_holds_across_every_hand_over() {
    let c = ctx(0);
    let lanes: Vec<Arc<Lane>> = (0..STREAMS)
        .map(|i| {
            Arc::new(Lane {
                stream: c.create_stream((i % 3) as i64).unwrap(),
                running: AtomicU32::new(0),
                errors: Mutex::new(Vec::new()),
            })
        })
        .collect();
    std::thread::scope(|scope| {
        for p in 0..PRODUCERS {
            let lanes = &lanes;
            scope.spawn(move || {
                let mine: Vec<usize> = (0..STREAMS).filter(|i| i % PRODUCERS == p).collect();
                produce(lanes, &mine, 0x9e37_79b9 + p as u64);
            });
        }
    });
    for l in &lanes {
        l.stream.synchronize(Some(Duration::from_secs(60))).unwrap();
    }
    let errors: Vec<String> = lanes.iter().flat_map(|l| l.errors.lock().unwrap().clone()).collect();
    assert!(
        errors.is_empty(),
        "{} order violations, first: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    for l in lanes {
        l.stream.destroy(false).unwrap();
    }
}
