//! memcheck's redzones (opt-in, `NPURT_SANITIZER=...,padding`; compute-sanitizer's
//! `--padding`). An explicit-free device allocation (`acl.rt.malloc`) is handed out with
//! [`PAD_BYTES`] more behind it than the program asked for (bounds checks keep using the
//! program's size). The redzone is filled with [`CANARY`]; its whole pages are
//! `PROT_NONE` with a trap slot (a raw access there is a report, not a read of the
//! neighbour); the bytes before the first whole page are checked when the block is freed,
//! at device reset and at exit (a raw write past the end shows as overwritten canaries).
//! Runtime calls given a range reaching into a redzone (a copy, `acl.util.ptr_to_bytes`)
//! are reported when they are made ([`super::memcheck::check_freed`]).

use super::memcheck::State;
use super::quarantine::{arm_slot, clear_slot, page_size, protect_pages, unprotect_pages};
use super::report::Finding;

/// Bytes of redzone behind each padded allocation: two pages, so at least one whole page
/// of it can be protected whatever the allocation's size.
pub const PAD_BYTES: usize = 8192;
/// The byte a redzone is filled with.
pub(super) const CANARY: u8 = 0xFB;

/// The redzone of one live allocation.
pub(super) struct Zone {
    pub(super) start: usize,
    pub(super) len: usize,
    /// Protected pages (start, length) and their trap slot.
    pub(super) guard: Option<(usize, usize, usize)>,
}

impl Zone {
    pub(super) fn end(&self) -> usize {
        self.start + self.len
    }
}

/// Sets up the redzone `[start, start + len)` behind the `size`-byte allocation at `base`:
/// canaries, then its whole pages protected (while a trap slot is free).
pub(super) fn arm(st: &mut State, base: usize, size: usize, start: usize, len: usize, site: u32) -> Zone {
    // SAFETY: `[start, start + len)` is the tail of the allocation's own block, beyond
    // what the program was given: nothing else reads or writes it.
    unsafe { std::ptr::write_bytes(start as *mut u8, CANARY, len) };
    let mut zone = Zone {
        start,
        len,
        guard: None,
    };
    if cfg!(loom) {
        return zone;
    }
    let page = page_size();
    let (gs, ge) = (start.div_ceil(page) * page, (start + len) / page * page);
    let Some(slot) = st.slots.iter().position(|used| !used) else {
        return zone;
    };
    if ge > gs && protect_pages(gs, ge - gs) {
        st.slots[slot] = true;
        let f = Finding::new(
            "memcheck",
            "out-of-bounds",
            format!("out-of-bounds access past the end of the {size}-byte allocation at {base:#x}"),
        )
        .site("allocated at", site);
        let why = format!("the page is in the redzone past the end of the {size}-byte allocation at {base:#x}");
        arm_slot(slot, gs, ge - gs, &why, &f);
        zone.guard = Some((gs, ge - gs, slot));
    }
    zone
}

/// Lifts the redzone's protection (the block is freed or forgotten).
pub(super) fn disarm(st: &mut State, zone: &mut Zone) {
    if let Some((start, len, slot)) = zone.guard.take() {
        unprotect_pages(start, len);
        clear_slot(st, slot);
    }
}

/// The first overwritten run of the redzone's unprotected bytes, as offsets into it.
pub(super) fn overwritten(zone: &Zone) -> Option<(usize, usize)> {
    let (gs, ge) = zone.guard.map_or((zone.end(), zone.end()), |(s, l, _)| (s, s + l));
    let mut bad: Option<(usize, usize)> = None;
    for a in (zone.start..gs).chain(ge..zone.end()) {
        // SAFETY: an unprotected byte of the redzone (the block is live or quarantined,
        // held by memcheck); a volatile read: a raw write may have changed it.
        let b = unsafe { std::ptr::read_volatile(a as *const u8) };
        match (b != CANARY, bad) {
            (true, None) => bad = Some((a, a + 1)),
            (true, Some((s, e))) if e == a => bad = Some((s, a + 1)),
            (false, Some(_)) => break,
            _ => {}
        }
    }
    bad.map(|(s, e)| (s - zone.start, e - zone.start))
}

/// The report of an overwritten redzone, found `when` (at `site`).
pub(super) fn corrupted(base: usize, size: usize, run: (usize, usize), when: &str, alloc: u32, site: u32) -> Finding {
    Finding::new(
        "memcheck",
        "out-of-bounds",
        format!(
            "Invalid write past the end of the {size}-byte allocation at {base:#x}: {} bytes of its redzone \
             (bytes {}..{} of the allocation) were overwritten, found {when}",
            run.1 - run.0,
            size + run.0,
            size + run.1
        ),
    )
    .site("found at", site)
    .site("allocated at", alloc)
}

/// The report of a runtime call given `n` bytes at `addr` reaching into the redzone of the
/// `size`-byte allocation at `base`.
pub(super) fn reached(api: &str, addr: usize, n: usize, base: usize, size: usize, alloc: u32, site: u32) -> Finding {
    let past = addr.saturating_add(n).saturating_sub(base + size).min(n);
    Finding::new(
        "memcheck",
        "out-of-bounds",
        format!(
            "Invalid {api} of {n} bytes at {addr:#x}: {past} bytes past the end of the {size}-byte allocation at \
             {base:#x} (into its redzone)"
        ),
    )
    .site("accessed at", site)
    .site("allocated at", alloc)
}
