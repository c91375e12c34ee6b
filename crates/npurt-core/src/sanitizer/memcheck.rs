//! memcheck: explicit-free allocations (the raw pointers of `aclrtMalloc` /
//! `aclrtMallocHost`, which nothing frees for the program) and what happens to them.
//!
//! * live at a device reset (that device's) or at exit: a leak, with the Python stack
//!   of the allocation;
//! * freed twice, or a pointer that never started an allocation: an invalid free;
//! * freed blocks stay in a quarantine (bounded by [`QUARANTINE_BYTES`]) instead of going
//!   back to their pool: the sanitizer holds a handle, so the address is not reused, and
//!   once only the quarantine holds it the block's whole pages are `mprotect`ed
//!   `PROT_NONE` (a raw access faults instead of reading reused memory); runtime calls
//!   given a quarantined address are reported before anything touches it;
//! * a copy outside its allocation's bounds is reported with the allocation's stack.
//!
//! Handles that free themselves (`npurt.malloc`, arrays) are not tracked: the garbage
//! collector frees them.

use super::report::{self, Finding};
use super::trap;
use crate::memory::AnyBuffer;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Most bytes kept in the quarantine (oldest blocks leave first).
pub const QUARANTINE_BYTES: usize = 256 << 20;
/// Most blocks kept in the quarantine.
const QUARANTINE_BLOCKS: usize = 4096;

struct Raw {
    /// Allocation number (see [`mark`]); reported as a leak already (by a `check` block).
    seq: u64,
    reported: bool,
    size: usize,
    /// The device of device memory; `None` for pinned host memory.
    device: Option<u32>,
    site: u32,
}

struct Freed {
    base: usize,
    size: usize,
    device: Option<u32>,
    alloc_site: u32,
    free_site: u32,
    hold: AnyBuffer,
    /// Pages made `PROT_NONE` (start, length), once only the quarantine held the block,
    /// and the trap slot that reports a fault there.
    protected: Option<(usize, usize, usize)>,
}

#[derive(Default)]
struct State {
    live: BTreeMap<usize, Raw>,
    quarantine: VecDeque<Freed>,
    bytes: usize,
    next_seq: u64,
    /// Trap slots in use.
    slots: Vec<bool>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

pub(super) fn start() {
    let mut g = STATE.lock();
    if g.is_none() {
        *g = Some(State {
            slots: vec![false; trap::SLOTS],
            ..State::default()
        });
    }
}

/// Forgets everything; quarantined blocks are unprotected and go back to their pools.
pub(super) fn stop() {
    let st = STATE.lock().take();
    if let Some(mut st) = st {
        for f in std::mem::take(&mut st.quarantine) {
            release(&mut st, f);
        }
    }
}

fn with<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    if !super::enabled(super::MEMCHECK) {
        return None;
    }
    STATE.lock().as_mut().map(f)
}

fn device_of(b: &AnyBuffer) -> Option<u32> {
    match b {
        AnyBuffer::Device(d) => Some(d.device()),
        AnyBuffer::Host(_) => None,
    }
}

fn what(device: Option<u32>) -> String {
    match device {
        Some(d) => format!("device {d} memory"),
        None => "pinned host memory".to_string(),
    }
}

/// An explicit-free allocation was handed out (`acl.rt.malloc` / `malloc_host`).
pub fn raw_alloc(buf: &AnyBuffer) {
    use crate::memory::Buffer;
    if !super::enabled(super::MEMCHECK) {
        return;
    }
    let site = super::stack_here();
    with(|st| {
        sweep(st);
        let base = buf.addr();
        st.next_seq += 1;
        st.live.insert(
            base,
            Raw {
                seq: st.next_seq,
                reported: false,
                size: buf.nbytes(),
                device: device_of(buf),
                site,
            },
        );
    });
}

/// An explicit-free allocation is being freed (before the handle's own `free`): it goes
/// to the quarantine, which keeps its memory.
pub fn raw_free(buf: &AnyBuffer) {
    use crate::memory::Buffer;
    if !super::enabled(super::MEMCHECK) {
        return;
    }
    let free_site = super::stack_here();
    with(|st| {
        let base = buf.addr();
        let Some(raw) = st.live.remove(&base) else {
            return;
        };
        st.bytes += raw.size;
        st.quarantine.push_back(Freed {
            base,
            size: raw.size,
            device: raw.device,
            alloc_site: raw.site,
            free_site,
            hold: buf.clone(),
            protected: None,
        });
        while st.bytes > QUARANTINE_BYTES || st.quarantine.len() > QUARANTINE_BLOCKS {
            let Some(old) = st.quarantine.pop_front() else { break };
            st.bytes -= old.size;
            release(st, old);
        }
        sweep(st);
    });
}

/// A free of `addr` that matched no live explicit-free allocation: a double free (the
/// address is quarantined) or an invalid free. Returns true when reported.
pub fn bad_free(addr: usize, api: &str) -> bool {
    if !super::enabled(super::MEMCHECK) {
        return false;
    }
    let site = super::stack_here();
    with(|st| {
        if let Some(f) = st.quarantine.iter().rev().find(|f| f.base == addr) {
            let m = format!(
                "Invalid {api} of {addr:#x}: double free of {} B of {}",
                f.size,
                what(f.device)
            );
            report::push(
                Finding::new("memcheck", "double-free", m)
                    .site("freed again at", site)
                    .site("first freed at", f.free_site)
                    .site("allocated at", f.alloc_site),
            );
            return true;
        }
        let inside = st.live.range(..=addr).next_back().filter(|(b, r)| addr < *b + r.size);
        let mut f = Finding::new(
            "memcheck",
            "invalid-free",
            format!("Invalid {api} of {addr:#x}: not the start of a live allocation"),
        )
        .site("freed at", site);
        if let Some((b, r)) = inside {
            f = f
                .detail(format!(
                    "{addr:#x} is {} B inside a {} B allocation at {b:#x}",
                    addr - b,
                    r.size
                ))
                .site("allocated at", r.site);
        }
        report::push(f);
        true
    })
    .unwrap_or(false)
}

/// `[addr, addr + n)` is being used by `api`: reported (true) when it touches a
/// quarantined (freed) block.
pub fn check_freed(addr: usize, n: usize, api: &str) -> bool {
    let end = addr.saturating_add(n.max(1));
    let hit = with(|st| {
        let f = st
            .quarantine
            .iter()
            .rev()
            .find(|f| addr < f.base + f.size && f.base < end)?;
        Some((f.base, f.size, f.device, f.free_site, f.alloc_site))
    });
    let Some(Some((base, size, device, free_site, alloc_site))) = hit else {
        return false;
    };
    // The stack only for a report (pageable pointers come through here on every call),
    // and never under the lock (capturing takes the interpreter lock).
    let site = super::stack_here();
    let m = format!(
        "Invalid {api} of {n} bytes at {addr:#x}: use after free ({size} B of {} at {base:#x}, freed)",
        what(device)
    );
    report::push(
        Finding::new("memcheck", "use-after-free", m)
            .site("accessed at", site)
            .site("freed at", free_site)
            .site("allocated at", alloc_site),
    );
    true
}

/// A copy or view of `nbytes` at `offset` overran a `capacity`-byte operand (`side`).
pub fn out_of_bounds(op: &str, side: &str, addr: Option<usize>, offset: usize, nbytes: usize, capacity: usize) {
    if !super::enabled(super::MEMCHECK) {
        return;
    }
    let site = super::stack_here();
    with(|st| {
        let at = addr.map_or_else(String::new, |a| format!(" at {a:#x}"));
        let mut f = Finding::new(
            "memcheck",
            "out-of-bounds",
            format!(
                "Invalid {op} of {nbytes} bytes at offset {offset} of the {side}{at}: out of bounds of its {capacity} bytes"
            ),
        )
        .site("called at", site);
        if let Some(raw) = addr.and_then(|a| st.live.range(..=a).next_back().filter(|(b, r)| a < *b + r.size)) {
            f = f.site("allocated at", raw.1.site);
        }
        report::push(f);
    });
}

fn leak(base: usize, r: &Raw, when: &str) -> Finding {
    let mut f = Finding::new(
        "memcheck",
        "leak",
        format!("Leaked {} bytes at {base:#x} ({}) {when}", r.size, what(r.device)),
    )
    .site("allocated at", r.site);
    f.bytes = r.size;
    f
}

/// Device `device` is being reset: its explicit-free allocations still live leak.
pub fn device_reset(device: u32) {
    with(|st| {
        let gone: Vec<usize> = st
            .live
            .iter()
            .filter(|(_, r)| r.device == Some(device))
            .map(|(b, _)| *b)
            .collect();
        for b in gone {
            if let Some(r) = st.live.remove(&b).filter(|r| !r.reported) {
                report::push(leak(b, &r, &format!("at the reset of device {device}")));
            }
        }
    });
}

/// The program ends: every explicit-free allocation still live leaks.
pub fn at_exit() {
    with(|st| {
        for (b, r) in std::mem::take(&mut st.live).into_iter().filter(|(_, r)| !r.reported) {
            report::push(leak(b, &r, "at exit"));
        }
    });
}

/// The number of the next explicit-free allocation (the start of a `check` block).
pub fn mark() -> u64 {
    with(|st| st.next_seq + 1).unwrap_or(0)
}

/// A `check` block ends: its explicit-free allocations (numbers from `since` on) still
/// live leak. They stay tracked (a later free is fine), reported once.
pub fn leaks_since(since: u64) {
    with(|st| {
        for (b, r) in st.live.iter_mut().filter(|(_, r)| r.seq >= since && !r.reported) {
            r.reported = true;
            report::push(leak(*b, r, "at the end of the check"));
        }
    });
}

/// Live explicit-free allocations and quarantined blocks (for tests and stats).
pub fn counts() -> (usize, usize) {
    STATE
        .lock()
        .as_ref()
        .map_or((0, 0), |st| (st.live.len(), st.quarantine.len()))
}

/// Protects quarantined blocks that only the quarantine still holds (while trap slots
/// are free: a protected page always has a slot that reports a fault there).
fn sweep(st: &mut State) {
    if cfg!(loom) {
        return; // (the loom build models the trap's slots, not the pages)
    }
    for f in st.quarantine.iter_mut().filter(|f| f.protected.is_none()) {
        let Some(slot) = st.slots.iter().position(|used| !used) else {
            return;
        };
        if !sole_holder(&f.hold) {
            continue;
        }
        if let Some((start, len)) = protect(f.base, f.size) {
            st.slots[slot] = true;
            let text = Finding::new(
                "memcheck",
                "use-after-free",
                format!(
                    "use after free: {} B of {} at {:#x} were freed",
                    f.size,
                    what(f.device),
                    f.base
                ),
            )
            .site("freed at", f.free_site)
            .site("allocated at", f.alloc_site)
            .text();
            trap::slot(slot).publish(start as u64, len as u64, text.as_bytes());
            trap::arm();
            f.protected = Some((start, len, slot));
        }
    }
}

fn sole_holder(b: &AnyBuffer) -> bool {
    match b {
        AnyBuffer::Device(d) => Arc::strong_count(&d.0) == 1,
        AnyBuffer::Host(h) => Arc::strong_count(&h.0) == 1,
    }
}

/// The whole pages of `[base, base + size)`, made inaccessible.
fn protect(base: usize, size: usize) -> Option<(usize, usize)> {
    let page = page_size();
    let start = base.div_ceil(page) * page;
    let end = (base + size) / page * page;
    if end <= start {
        return None;
    }
    // SAFETY: the pages lie inside a block only the quarantine holds (no handle, queued
    // task or view can reach them); they are made accessible again before the block goes
    // back to its pool (`release`).
    let rc = unsafe { libc::mprotect(start as *mut libc::c_void, end - start, libc::PROT_NONE) };
    (rc == 0).then_some((start, end - start))
}

/// Leaves the quarantine: pages accessible again (then their trap slot is free), then the
/// block goes back to its pool.
fn release(st: &mut State, f: Freed) {
    if let Some((start, len, slot)) = f.protected {
        // SAFETY: exactly the range `protect` made inaccessible; restores read/write, the
        // protection the block's segment was mapped with.
        unsafe { libc::mprotect(start as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE) };
        trap::slot(slot).publish(0, 0, b"");
        st.slots[slot] = false;
    }
    drop(f.hold);
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// True when `addr` lies in a protected quarantined page (a fault there is a use after
/// free, not a crash of the runtime).
pub fn protected_at(addr: usize) -> bool {
    STATE.try_lock().is_some_and(|g| {
        g.as_ref().is_some_and(|st| {
            st.quarantine
                .iter()
                .any(|f| f.protected.is_some_and(|(s, l, _)| addr >= s && addr < s + l))
        })
    })
}
