//! memcheck's quarantine pages: a freed explicit-free block stays held by the sanitizer
//! (its address is not handed out again) and, once only the quarantine holds it, its whole
//! pages are `PROT_NONE` with a trap slot that turns a fault there into a report.
//!
//! The quarantine is the sanitizer's, not the program's: when the program asks for its
//! memory figures (`memory_allocated`, `mem_get_info`, `memory_stats`, a pool's destroy...)
//! [`settle`] gives every quarantined block back first, so the figures (and a pool that
//! must be empty) are what they would be without the sanitizer. Blocks freed before such
//! a query are then no longer trapped (reuse of their addresses is not seen).

use super::memcheck::{what, State, STATE};
use super::report::Finding;
use super::trap;
use crate::memory::AnyBuffer;
use std::sync::Arc;

/// A freed explicit-free block held in the quarantine.
pub(super) struct Freed {
    pub(super) base: usize,
    pub(super) size: usize,
    /// The whole block (the allocation and its redzone, if padded).
    pub(super) span: usize,
    pub(super) device: Option<u32>,
    pub(super) alloc_site: u32,
    pub(super) free_site: u32,
    pub(super) hold: AnyBuffer,
    /// Pages made `PROT_NONE` (start, length), once only the quarantine held the block,
    /// and the trap slot that reports a fault there.
    pub(super) protected: Option<(usize, usize, usize)>,
}

/// The program asks for its memory figures: every quarantined block goes back to its pool
/// first (see the module's text). Returns the blocks released.
pub fn settle() -> usize {
    if !super::enabled(super::MEMCHECK) {
        return 0;
    }
    // Taken out under the lock, released after it: a release drops buffers, whose pools
    // report the free on the memory hook (other sanitizer state takes its own locks).
    let out: Vec<Freed> = {
        let mut g = STATE.lock();
        let Some(st) = g.as_mut() else { return 0 };
        st.bytes = 0;
        let all: Vec<Freed> = st.quarantine.drain(..).collect();
        all.into_iter()
            .map(|mut f| {
                unprotect(st, &mut f);
                f
            })
            .collect()
    };
    let n = out.len();
    drop(out);
    n
}

/// Protects quarantined blocks that only the quarantine still holds (while trap slots
/// are free: a protected page always has a slot that reports a fault there).
pub(super) fn sweep(st: &mut State) {
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
        if let Some((start, len)) = protect(f.base, f.span) {
            st.slots[slot] = true;
            let f2 = Finding::new(
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
            .site("allocated at", f.alloc_site);
            arm_slot(slot, start, len, "the page belongs to a freed (quarantined) block", &f2);
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
    (end > start && protect_pages(start, end - start)).then_some((start, end - start))
}

/// Makes the whole pages `[start, start + len)` inaccessible; true if done. The caller owns
/// them: pages of a block only the quarantine holds, or of a live block's redzone (which
/// the program was not given); they are made accessible again before the block goes back
/// to its pool ([`unprotect_pages`]).
pub(super) fn protect_pages(start: usize, len: usize) -> bool {
    // SAFETY: page-aligned whole pages of a block the caller owns (see above); no Rust
    // reference to them exists.
    unsafe { libc::mprotect(start as *mut libc::c_void, len, libc::PROT_NONE) == 0 }
}

/// Restores read/write on pages [`protect_pages`] made inaccessible.
pub(super) fn unprotect_pages(start: usize, len: usize) {
    // SAFETY: exactly a range `protect_pages` made inaccessible; read/write is the
    // protection the block's segment was mapped with.
    unsafe { libc::mprotect(start as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE) };
}

/// Leaves the quarantine: pages accessible again (then their trap slot is free), then the
/// block goes back to its pool.
pub(super) fn release(st: &mut State, mut f: Freed) {
    unprotect(st, &mut f);
    drop(f.hold);
}

/// Makes a quarantined block's protected pages accessible again and frees its trap slot.
fn unprotect(st: &mut State, f: &mut Freed) {
    if let Some((start, len, slot)) = f.protected.take() {
        unprotect_pages(start, len);
        clear_slot(st, slot);
    }
}

/// Trap slot `slot` reports `f` for a fault in `[start, start + len)` (`why`: what the
/// page is), in the text and the JSON report; the handler is installed.
pub(super) fn arm_slot(slot: usize, start: usize, len: usize, why: &str, f: &Finding) {
    let text = format!("{why}\n{}", f.text());
    trap::slot(slot).publish(start as u64, len as u64, text.as_bytes());
    let cap = trap::json_slot(slot);
    let json = f.json_within(cap_of(cap));
    cap.publish(start as u64, len as u64, json.as_bytes());
    trap::arm();
}

fn cap_of<const W: usize>(_: &trap::Slot<W>) -> usize {
    trap::Slot::<W>::CAPACITY
}

/// Empties trap slot `slot` (its pages are accessible again).
pub(super) fn clear_slot(st: &mut State, slot: usize) {
    trap::slot(slot).publish(0, 0, b"");
    trap::json_slot(slot).publish(0, 0, b"");
    st.slots[slot] = false;
}

pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}
