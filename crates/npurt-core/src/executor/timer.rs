//! One process-wide timer thread for device-side deadlines (a stream waiting on an event
//! with a timeout). Callbacks run on the timer thread and must be quick.

use parking_lot::{Condvar, Mutex};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::time::Instant;

type Callback = Box<dyn FnOnce() + Send>;

struct Entry {
    at: Instant,
    seq: u64,
    cb: Callback,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

struct Timer {
    heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
    cv: Condvar,
}

fn timer() -> &'static Timer {
    static T: OnceLock<&'static Timer> = OnceLock::new();
    T.get_or_init(|| {
        let t: &'static Timer = Box::leak(Box::new(Timer {
            heap: Mutex::new((BinaryHeap::new(), 0)),
            cv: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("npurt-timer".into())
            .spawn(move || run(t))
            .expect("failed to start the npurt timer thread");
        t
    })
}

fn run(t: &'static Timer) {
    crate::thread_role::mark_runtime_thread();
    let mut g = t.heap.lock();
    loop {
        let now = Instant::now();
        match g.0.peek() {
            Some(Reverse(e)) if e.at <= now => {
                let Reverse(e) = g.0.pop().expect("peeked");
                drop(g);
                (e.cb)();
                g = t.heap.lock();
            }
            Some(Reverse(e)) => {
                let at = e.at;
                t.cv.wait_until(&mut g, at);
            }
            None => t.cv.wait(&mut g),
        }
    }
}

/// Runs `cb` on the timer thread at (or soon after) `at`.
pub(crate) fn schedule(at: Instant, cb: Callback) {
    let t = timer();
    let mut g = t.heap.lock();
    g.1 += 1;
    let seq = g.1;
    g.0.push(Reverse(Entry { at, seq, cb }));
    drop(g);
    t.cv.notify_one();
}
