//! The runtime's monotonic clock: nanoseconds since the first call in this process.
//! Event timestamps and profiler records use it, so they are comparable across devices.

use std::sync::OnceLock;
use std::time::Instant;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds since the process-wide epoch (never 0, so 0 can mean "unset").
#[inline]
pub fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64 + 1
}
