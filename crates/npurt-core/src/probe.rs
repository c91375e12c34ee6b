//! Machine probes for reports: how long a cache line takes to move between two cores.
//!
//! Every cross-core figure npurt reports (a launch: the submitting thread and a worker; a
//! collective: two ranks) is a few cache-line transfers. On a VM that figure is not the
//! CPU's alone: the hypervisor may place the two vCPUs on one die (a transfer takes ~40-60
//! ns on a Zen 5) or on two (~190 ns), and it moves them while a job runs. Empty-kernel
//! launches on one stream went 2.7-3.0 M/s with the probe at ~190 ns and 6.1-7.4 M/s at
//! 40-60 ns, in alternating runs a minute apart (docs/BENCH.md). Reports print the probe
//! beside their figures so that runs can be compared.

use crossbeam_utils::CachePadded;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most a probe may take: a thread that never runs (both on one CPU, an offline CPU)
/// makes it give up instead of spinning forever.
const DEADLINE: Duration = Duration::from_secs(1);

/// The first two CPUs this process may run on (None: only one).
fn two_cpus() -> Option<(usize, usize)> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
    // `size_of::<cpu_set_t>()` bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; pid 0 is this thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET only reads the set for an index below CPU_SETSIZE.
    let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) });
    Some((cpus.next()?, cpus.next()?))
}

/// Pins the calling thread to `cpu` (false if it is out of range or the OS refused, e.g.
/// a CPU this process may not use).
fn pin(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes one bit below
    // CPU_SETSIZE (checked above); pid 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The line the two threads bounce, and a separate word a side that could not pin its
/// thread sets so the other stops waiting.
struct Shared {
    flag: CachePadded<AtomicU64>,
    gave_up: AtomicBool,
}

/// Spins until `flag` holds `want` (true), or the other side gave up or `until` passed
/// (false; both looked at every 1024 polls).
fn wait_for(sh: &Shared, want: u64, until: Instant) -> bool {
    let mut n = 0u32;
    while sh.flag.load(Acquire) != want {
        n = n.wrapping_add(1);
        if n.is_multiple_of(1024) && (sh.gave_up.load(Acquire) || Instant::now() >= until) {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// One-way time in ns for a cache line to move between threads pinned to `cpus`: the
/// median of `rounds` rounds of `trips` round trips. None if a thread could not be pinned
/// or the probe passed its one-second deadline (e.g. both CPUs the same one).
pub fn core_to_core_ns_on(cpus: (usize, usize), rounds: usize, trips: u64) -> Option<f64> {
    let until = Instant::now() + DEADLINE;
    let sh = Arc::new(Shared {
        flag: CachePadded::new(AtomicU64::new(0)),
        gave_up: AtomicBool::new(false),
    });
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        sh.flag.store(0, Release);
        let other = sh.clone();
        let echo = std::thread::spawn(move || {
            if !pin(cpus.1) {
                other.gave_up.store(true, Release);
                return false;
            }
            (0..trips).all(|i| {
                wait_for(&other, 2 * i + 1, until) && {
                    other.flag.store(2 * i + 2, Release);
                    true
                }
            })
        });
        let timed = std::thread::scope(|s| {
            s.spawn(|| {
                if !pin(cpus.0) {
                    sh.gave_up.store(true, Release);
                    return None;
                }
                let t0 = Instant::now();
                for i in 0..trips {
                    sh.flag.store(2 * i + 1, Release);
                    if !wait_for(&sh, 2 * i + 2, until) {
                        sh.gave_up.store(true, Release); // (the echo stops waiting too)
                        return None;
                    }
                }
                Some(t0.elapsed())
            })
            .join()
            .ok()
            .flatten()
        });
        let echoed = echo.join().unwrap_or(false);
        match timed {
            Some(t) if echoed => times.push(t.as_nanos() as f64 / (2 * trips.max(1)) as f64),
            _ => return None,
        }
    }
    times.sort_by(f64::total_cmp);
    Some(times[times.len() / 2])
}

/// [`core_to_core_ns_on`] the first two CPUs this process may use (None with only one).
pub fn core_to_core_ns() -> Option<f64> {
    core_to_core_ns_on(two_cpus()?, 5, 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cpus_give_a_plausible_latency_and_one_cpu_gives_up_in_time() {
        let Some((a, b)) = two_cpus() else {
            return; // one CPU: nothing to move a line between (and `core_to_core_ns` says so)
        };
        let ns = core_to_core_ns_on((a, b), 3, 2_000).expect("two CPUs answer");
        assert!(ns > 1.0 && ns < 100_000.0, "{ns} ns");
        // Both threads on one CPU: a round trip needs a context switch, 4000 of them do
        // not fit the deadline; the probe must say so, not hang.
        let t = Instant::now();
        assert!(core_to_core_ns_on((a, a), 1, 1_000_000).is_none());
        assert!(t.elapsed() < DEADLINE + Duration::from_secs(2));
        // CPUs that cannot be pinned (out of range, or not this process's): None at once
        // (the side that could pin stops waiting), no panic.
        let t = Instant::now();
        assert!(core_to_core_ns_on((a, usize::MAX), 1, 10).is_none());
        assert!(core_to_core_ns_on((libc::CPU_SETSIZE as usize, b), 1, 10).is_none());
        assert!(t.elapsed() < DEADLINE / 2, "{:?}", t.elapsed());
    }
}
