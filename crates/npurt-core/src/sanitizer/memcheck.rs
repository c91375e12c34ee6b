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

use super::quarantine::{release, sweep, Freed};
use super::redzone::{self, Zone};
use super::report::{self, Finding};
use super::tool::Tool;
use super::trap;
use crate::memory::AnyBuffer;
use std::collections::{BTreeMap, VecDeque};

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
    /// The redzone behind it (`padding`).
    zone: Option<Zone>,
}

#[derive(Default)]
pub(super) struct State {
    live: BTreeMap<usize, Raw>,
    pub(super) quarantine: VecDeque<Freed>,
    pub(super) bytes: usize,
    next_seq: u64,
    /// Trap slots in use.
    pub(super) slots: Vec<bool>,
}

pub(super) static STATE: Tool<State> = Tool::new(super::MEMCHECK);

pub(super) fn start() {
    let make = || State {
        slots: vec![false; trap::SLOTS],
        ..State::default()
    };
    STATE.start(make, None);
}

/// Forgets everything; quarantined blocks are unprotected and go back to their pools,
/// live blocks' redzones are unprotected.
pub(super) fn stop() {
    if let Some(mut st) = STATE.stop() {
        for f in std::mem::take(&mut st.quarantine) {
            release(&mut st, f);
        }
        for mut r in std::mem::take(&mut st.live).into_values() {
            if let Some(z) = r.zone.as_mut() {
                redzone::disarm(&mut st, z);
            }
        }
    }
}

fn device_of(b: &AnyBuffer) -> Option<u32> {
    match b {
        AnyBuffer::Device(d) => Some(d.device()),
        AnyBuffer::Host(_) => None,
    }
}

pub(super) fn what(device: Option<u32>) -> String {
    match device {
        Some(d) => format!("device {d} memory"),
        None => "pinned host memory".to_string(),
    }
}

/// An explicit-free allocation was handed out (`acl.rt.malloc` / `malloc_host`).
pub fn raw_alloc(buf: &AnyBuffer) {
    use crate::memory::Buffer;
    raw_alloc_sized(buf, buf.nbytes());
}

/// An explicit-free allocation of `size` bytes was handed out in `buf`; the rest of `buf`
/// (if any: `padding`) is its redzone.
pub fn raw_alloc_sized(buf: &AnyBuffer, size: usize) {
    use crate::memory::Buffer;
    if !super::enabled(super::MEMCHECK) {
        return;
    }
    let site = super::stack_here();
    STATE.with(|st| {
        sweep(st);
        let base = buf.addr();
        let size = size.min(buf.nbytes());
        let pad = buf.nbytes() - size;
        let zone = (pad > 0).then(|| redzone::arm(st, base, size, base + size, pad, site));
        st.next_seq += 1;
        let seq = st.next_seq;
        st.live.insert(
            base,
            Raw {
                seq,
                reported: false,
                size,
                device: device_of(buf),
                site,
                zone,
            },
        );
    });
}

/// Checks and lifts the redzone of a block leaving the live set (`when`: freed, reset...).
fn retire(st: &mut State, base: usize, r: &mut Raw, when: &str, site: u32) {
    if let Some(mut z) = r.zone.take() {
        if let Some(run) = redzone::overwritten(&z) {
            report::push(redzone::corrupted(base, r.size, run, when, r.site, site));
        }
        redzone::disarm(st, &mut z);
    }
}

/// An explicit-free allocation is being freed (before the handle's own `free`): it goes
/// to the quarantine, which keeps its memory.
pub fn raw_free(buf: &AnyBuffer) {
    use crate::memory::Buffer;
    if !super::enabled(super::MEMCHECK) {
        return;
    }
    let free_site = super::stack_here();
    STATE.with(|st| {
        let base = buf.addr();
        let Some(mut raw) = st.live.remove(&base) else {
            return;
        };
        retire(st, base, &mut raw, "when it was freed", free_site);
        st.bytes += raw.size;
        st.quarantine.push_back(Freed {
            base,
            size: raw.size,
            span: buf.nbytes(),
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
    STATE
        .with(|st| {
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
/// quarantined (freed) block or a live block's redzone (`padding`).
pub fn check_freed(addr: usize, n: usize, api: &str) -> bool {
    let end = addr.saturating_add(n.max(1));
    let zone = STATE.with(|st| {
        let (b, r) = st.live.range(..end).next_back()?;
        let z = r.zone.as_ref()?;
        (addr < z.end() && z.start < end).then_some((*b, r.size, r.site))
    });
    if let Some(Some((base, size, alloc_site))) = zone {
        let site = super::stack_here();
        report::push(redzone::reached(api, addr, n, base, size, alloc_site, site));
        return true;
    }
    let hit = STATE.with(|st| {
        let f = st
            .quarantine
            .iter()
            .rev()
            .find(|f| addr < f.base + f.span && f.base < end)?;
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
    STATE.with(|st| {
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
    STATE.with(|st| {
        let gone: Vec<usize> = st
            .live
            .iter()
            .filter(|(_, r)| r.device == Some(device))
            .map(|(b, _)| *b)
            .collect();
        for b in gone {
            let Some(mut r) = st.live.remove(&b) else { continue };
            retire(st, b, &mut r, "at the device's reset", 0);
            if !r.reported {
                report::push(leak(b, &r, &format!("at the reset of device {device}")));
            }
        }
    });
}

/// The program ends: every explicit-free allocation still live leaks.
pub fn at_exit() {
    STATE.with(|st| {
        for (b, mut r) in std::mem::take(&mut st.live) {
            retire(st, b, &mut r, "at exit", 0);
            if !r.reported {
                report::push(leak(b, &r, "at exit"));
            }
        }
    });
}

/// The number of the next explicit-free allocation (the start of a `check` block).
pub fn mark() -> u64 {
    STATE.with(|st| st.next_seq + 1).unwrap_or(0)
}

/// A `check` block ends: its explicit-free allocations (numbers from `since` on) still
/// live leak. They stay tracked (a later free is fine), reported once.
pub fn leaks_since(since: u64) {
    STATE.with(|st| {
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
