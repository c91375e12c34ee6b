//! Device teardown, in its own test binary: a forced reset must not hit other tests.

mod common;

use common::*;
use npurt_core::registry;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn forced_reset_releases_threads_waiting_on_dropped_work() {
    setup();
    let dev = registry::set_device(1).unwrap();
    let s = dev.default_context().create_stream(0).unwrap();
    s.launch(Arc::new(Spin(Duration::from_millis(100))), 1).unwrap();
    for _ in 0..10 {
        s.launch(Arc::new(Spin(Duration::from_millis(100))), 1).unwrap();
    }
    let s2 = s.clone();
    let waiter = std::thread::spawn(move || s2.synchronize(Some(Duration::from_secs(10))));
    std::thread::sleep(Duration::from_millis(30));
    let t = Instant::now();
    registry::reset_device_force(1).unwrap();
    let r = waiter.join().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "waiter stayed blocked after a forced reset"
    );
    assert!(r.is_err(), "the stream's device was reset");
}
