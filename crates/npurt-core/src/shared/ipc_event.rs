//! Interprocess events: a slot of the device's shared region holding the record count and
//! the highest completed record, plus a futex word (`seq`, non-private: it lives in a
//! shared mapping) bumped on every completion and on close.
//!
//! The producer's record takes the next record number and, when its stream reaches the
//! recorded point, stores it as completed (`fetch_max`) and wakes sleepers (no syscall
//! when nobody sleeps). A waiter waits for the latest record at wait time — or, before any
//! record, for the first one: across processes "not recorded yet" usually means "not yet
//! recorded by the other process". A slot whose producer died or dropped the event is
//! CLOSED: waiting on a record that will never complete is a typed error, not a hang.
//! The handle names the region (device, capacity), the slot, its generation and a random
//! 64-bit nonce: `npev1:<device>:<capacity hex>:<slot>:<generation hex>:<nonce hex>`.

use super::region::{Region, CLOSED, FREE, LIVE, MAX_EVENTS};
use super::{open_region, protocol, status_dir, SharedError};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// This process's view of one interprocess event slot.
pub struct IpcEvent {
    region: Arc<Region>,
    slot: usize,
    generation: u32,
    nonce: u64,
    device: u32,
    capacity: u64,
    /// Created here (dropping it closes the slot) rather than opened from a handle.
    owner: bool,
    /// The process that made this view: a forked child's inherited copy never closes or
    /// completes the parent's slot (see [`super::inherited`]).
    pid: u32,
}

impl std::fmt::Debug for IpcEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "IpcEvent(device={}, slot={}, owner={})",
            self.device, self.slot, self.owner
        )
    }
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most `b.len()` bytes into the buffer we own.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != 8 {
        // No getrandom: the clock and pid are not secret, but the handle is only a name
        // inside the user's own 0700 directory.
        return crate::clock::now_ns() ^ (u64::from(std::process::id()) << 40);
    }
    u64::from_le_bytes(b)
}

/// Closes the event slots of dead producers (called under the region lock).
pub(crate) fn close_dead(r: &Region) {
    for i in 0..MAX_EVENTS {
        let e = r.event(i);
        if e.state.load(Acquire) == LIVE && !super::alive(e.pid.load(Relaxed), e.start.load(Relaxed)) {
            protocol::close(e);
        }
    }
}

impl IpcEvent {
    /// A new interprocess event on `device` (whose region has `capacity`).
    pub fn create(device: u32, capacity: u64) -> Result<IpcEvent, SharedError> {
        Self::create_in(&status_dir()?, device, capacity)
    }

    pub(crate) fn create_in(dir: &std::path::Path, device: u32, capacity: u64) -> Result<IpcEvent, SharedError> {
        let region = open_region(dir, device, capacity)?;
        let _g = region.lock()?;
        close_dead(&region);
        let free = (0..MAX_EVENTS).find(|&i| region.event(i).state.load(Acquire) == FREE);
        let slot = free
            .or_else(|| (0..MAX_EVENTS).find(|&i| region.event(i).state.load(Acquire) == CLOSED))
            .ok_or(SharedError::Full {
                what: "interprocess event",
                max: MAX_EVENTS,
            })?;
        let e = region.event(slot);
        let (pid, start) = super::me();
        let nonce = random_u64();
        let generation = e.generation.fetch_add(1, AcqRel).wrapping_add(1);
        e.pid.store(pid, Relaxed);
        e.start.store(start, Relaxed);
        e.nonce.store(nonce, Relaxed);
        e.recorded.store(0, Relaxed);
        e.completed.store(0, Relaxed);
        e.state.store(LIVE, Release);
        drop(_g);
        Ok(IpcEvent {
            region,
            slot,
            generation,
            nonce,
            device,
            capacity,
            owner: true,
            pid,
        })
    }

    /// The handle another process opens with [`open`](Self::open).
    pub fn handle(&self) -> String {
        format!(
            "npev1:{}:{:x}:{}:{:x}:{:016x}",
            self.device, self.capacity, self.slot, self.generation, self.nonce
        )
    }

    /// Opens a handle made by [`handle`](Self::handle) (in this or another process).
    pub fn open(handle: &str) -> Result<IpcEvent, SharedError> {
        Self::open_in(&status_dir()?, handle)
    }

    pub(crate) fn open_in(dir: &std::path::Path, handle: &str) -> Result<IpcEvent, SharedError> {
        let bad = || SharedError::BadHandle(format!("{:?}", handle.chars().take(80).collect::<String>()));
        let h = handle.trim_end_matches('\0');
        let f: Vec<&str> = h.split(':').collect();
        if f.len() != 6 || f[0] != "npev1" {
            return Err(bad());
        }
        let device: u32 = f[1].parse().map_err(|_| bad())?;
        let capacity = u64::from_str_radix(f[2], 16).map_err(|_| bad())?;
        let slot: usize = f[3].parse().map_err(|_| bad())?;
        let generation = u32::from_str_radix(f[4], 16).map_err(|_| bad())?;
        let nonce = u64::from_str_radix(f[5], 16).map_err(|_| bad())?;
        if slot >= MAX_EVENTS || capacity == 0 {
            return Err(bad());
        }
        let region = open_region(dir, device, capacity)?;
        let ev = IpcEvent {
            region,
            slot,
            generation,
            nonce,
            device,
            capacity,
            owner: false,
            pid: std::process::id(),
        };
        ev.check_slot()?;
        Ok(ev)
    }

    fn e(&self) -> &super::region::EventSlot {
        self.region.event(self.slot)
    }

    fn check_slot(&self) -> Result<(), SharedError> {
        let e = self.e();
        if e.generation.load(Acquire) != self.generation
            || e.nonce.load(Relaxed) != self.nonce
            || e.state.load(Acquire) == FREE
        {
            return Err(SharedError::StaleHandle);
        }
        Ok(())
    }

    pub fn device(&self) -> u32 {
        self.device
    }

    /// Takes the next record number (the caller completes it when its point is reached).
    pub(crate) fn begin_record(&self) -> Result<u64, SharedError> {
        self.check_slot()?;
        Ok(self.e().recorded.fetch_add(1, AcqRel) + 1)
    }

    /// Marks record `n` (and so every earlier one) complete and wakes sleepers.
    pub(crate) fn complete(&self, n: u64) {
        let e = self.e();
        if e.generation.load(Acquire) != self.generation || super::inherited(self.pid) {
            return; // the slot was reused (nobody waits any more), or this is a forked copy
        }
        protocol::complete(e, n);
    }

    /// What a wait made now waits for: the latest record, or the first one if none yet.
    pub fn target(&self) -> u64 {
        self.e().recorded.load(Acquire).max(1)
    }

    /// Records made so far (by any process).
    pub fn recorded(&self) -> u64 {
        self.e().recorded.load(Acquire)
    }

    /// True once record `target` completed; a typed error when it never will (stale
    /// handle, producer closed the event). `check_owner` also looks for a dead producer
    /// (a `/proc` read: callers do it every few milliseconds, not on every poll).
    pub fn poll(&self, target: u64, check_owner: bool) -> Result<bool, SharedError> {
        let e = self.e();
        if protocol::reached(e, target) {
            if e.generation.load(Acquire) != self.generation {
                return Err(SharedError::StaleHandle);
            }
            return Ok(true);
        }
        self.check_slot()?;
        let pid = e.pid.load(Relaxed);
        if e.state.load(Acquire) == CLOSED {
            return Err(SharedError::ProducerClosed { pid });
        }
        if check_owner && !self.owner && !super::alive(pid, e.start.load(Relaxed)) {
            return Err(SharedError::ProducerGone { pid });
        }
        Ok(false)
    }

    /// The futex word's current value (read before [`poll`](Self::poll), passed to
    /// [`sleep`](Self::sleep), so a completion in between is not missed).
    pub fn seq(&self) -> u32 {
        self.e().seq.load(Acquire)
    }

    /// Sleeps until the futex word moves from `seen` or `timeout` passes.
    pub fn sleep(&self, seen: u32, timeout: Duration) {
        protocol::sleep(self.e(), seen, timeout);
    }

    /// Host wait for record `target` until `deadline`: Ok(true) when done, Ok(false) at the
    /// deadline. Sleeps on the futex in slices of at most 20 ms, checking the producer.
    pub fn wait(&self, target: u64, deadline: Option<Instant>) -> Result<bool, SharedError> {
        loop {
            let seen = self.seq();
            if self.poll(target, true)? {
                return Ok(true);
            }
            let mut slice = Duration::from_millis(20);
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    return Ok(false);
                }
                slice = slice.min(d - now);
            }
            self.sleep(seen, slice);
        }
    }
}

impl Drop for IpcEvent {
    fn drop(&mut self) {
        if !self.owner || super::inherited(self.pid) {
            return; // a forked child's copy: the event stays the parent's
        }
        let e = self.e();
        if e.generation.load(Acquire) == self.generation && e.state.load(Acquire) == LIVE {
            protocol::close(e);
        }
    }
}
