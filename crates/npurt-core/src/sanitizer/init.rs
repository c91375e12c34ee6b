//! initcheck (opt-in, `NPURT_SANITIZER=...,initcheck`): reads of device memory that
//! nothing wrote since it was allocated — a kernel's input, the source of a D2H or D2D
//! copy, a copy the host makes from device memory.
//!
//! Shadow state: per device allocation seen on the memory hook, the byte ranges written
//! since its allocation (a block handed out again by its pool starts unwritten). Writes are
//! the destinations of copies and memsets, kernel outputs, arrays marked written (model
//! replays, collectives: every array a task writes is marked), and host accesses (a numpy
//! view counts as written: what the host does through it is invisible; `to_host` reads).
//! All in program order: a read queued after a write counts as initialised even when no
//! event orders the two (that is racecheck's finding). A strided view counts as its whole byte span. Each
//! uninitialised range is reported once (then counts as written).

use super::race::Access;
use super::report::{self, Finding};
use super::tool::Tool;
use crate::memory::events::{MemAction, MemEvent, MemObserver};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Default)]
struct State {
    /// Written ranges: start → end, disjoint and not touching.
    written: BTreeMap<usize, usize>,
    /// Device allocations: base → (size, allocation site).
    allocs: BTreeMap<usize, (usize, u32)>,
}

static STATE: Tool<State> = Tool::new(super::INITCHECK);

pub(super) fn start() {
    STATE.start(State::default, Some(|| Arc::new(Blocks)));
}

pub(super) fn stop() {
    STATE.stop();
}

/// New blocks start unwritten; freed ones are forgotten.
struct Blocks;

impl MemObserver for Blocks {
    fn on_mem_event(&self, e: &MemEvent) {
        let alloc = match e.action {
            MemAction::Alloc => true,
            MemAction::Free => false,
            _ => return,
        };
        let site = if alloc && !crate::thread_role::is_runtime_thread() {
            crate::profiler::site::capture(false, false)
        } else {
            0
        };
        STATE.with(|st| {
            st.unwrite(e.addr, e.addr.saturating_add(e.size));
            if alloc {
                st.allocs.insert(e.addr, (e.size, site));
            } else {
                st.allocs.remove(&e.addr);
            }
        });
    }
}

/// `[start, start + len)` was written (an array marked written by its task).
pub fn written(start: usize, len: usize) {
    STATE.with(|st| st.write(start, start.saturating_add(len)));
}

/// The accesses of one task or host step, in order (reads are checked before the step's
/// writes count); `what` names it, `site` is where it was issued.
pub(super) fn accesses(list: &[Access], what: &str, site: u32) {
    let found = STATE.with(|st| {
        let mut found = Vec::new();
        for a in list.iter().filter(|a| !a.write) {
            found.extend(st.read(a.start, a.start.saturating_add(a.len), what, site));
        }
        for a in list.iter().filter(|a| a.write) {
            st.write(a.start, a.start.saturating_add(a.len));
        }
        found
    });
    for f in found.into_iter().flatten() {
        report::push(f);
    }
}

impl State {
    fn write(&mut self, mut start: usize, mut end: usize) {
        if end <= start {
            return;
        }
        // Merge with every range touching [start, end).
        let touching: Vec<(usize, usize)> = self
            .written
            .range(..=end)
            .rev()
            .take_while(|(_, e)| **e >= start)
            .map(|(s, e)| (*s, *e))
            .collect();
        for (s, e) in touching {
            self.written.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.written.insert(start, end);
    }

    fn unwrite(&mut self, start: usize, end: usize) {
        let over: Vec<(usize, usize)> = self
            .written
            .range(..end)
            .rev()
            .take_while(|(_, e)| **e > start)
            .map(|(s, e)| (*s, *e))
            .collect();
        for (s, e) in over {
            self.written.remove(&s);
            if s < start {
                self.written.insert(s, start);
            }
            if e > end {
                self.written.insert(end, e);
            }
        }
    }

    /// The first unwritten run of `[start, end)` inside a tracked allocation, reported
    /// (and then counted as written).
    fn read(&mut self, start: usize, end: usize, what: &str, site: u32) -> Option<Finding> {
        let (&base, &(size, alloc_site)) = self.allocs.range(..=start).next_back()?;
        let end = end.min(base + size);
        if start >= end {
            return None;
        }
        let (lo, hi) = self.first_gap(start, end)?;
        let unwritten = self.unwritten_bytes(start, end);
        self.write(start, end);
        let m = format!(
            "Uninitialized read of {unwritten} bytes by {what}: bytes {}..{} of the {size}-byte allocation at {base:#x} \
             were never written since it was allocated",
            lo - base,
            hi - base
        );
        Some(
            Finding::new("initcheck", "uninitialized-read", m)
                .detail(format!("read of {} bytes at {start:#x}", end - start))
                .site("read at", site)
                .site("allocated at", alloc_site),
        )
    }

    /// The first run of `[start, end)` no written range covers.
    fn first_gap(&self, start: usize, end: usize) -> Option<(usize, usize)> {
        let mut at = start;
        if let Some((_, &e)) = self.written.range(..=at).next_back() {
            at = at.max(e);
        }
        if at >= end {
            return None;
        }
        let next = self.written.range(at..end).next().map_or(end, |(s, _)| *s);
        Some((at, next))
    }

    fn unwritten_bytes(&self, start: usize, end: usize) -> usize {
        let covered: usize = self
            .written
            .range(..end)
            .rev()
            .take_while(|(_, e)| **e > start)
            .map(|(s, e)| (*e).min(end) - (*s).max(start))
            .sum();
        (end - start) - covered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_ranges_merge_split_and_leave_gaps() {
        let mut st = State::default();
        st.allocs.insert(1000, (100, 0));
        st.write(1000, 1010);
        st.write(1020, 1030);
        st.write(1010, 1020); // joins the two
        assert_eq!(st.written.len(), 1);
        assert!(st.read(1000, 1030, "k", 0).is_none());
        let f = st.read(1025, 1050, "kernel add", 0).expect("1030..1050 unwritten");
        assert!(
            f.message.contains("Uninitialized read of 20 bytes by kernel add"),
            "{}",
            f.message
        );
        assert!(
            f.message.contains("bytes 30..50 of the 100-byte allocation"),
            "{}",
            f.message
        );
        assert!(st.read(1025, 1050, "k", 0).is_none(), "reported once");
        st.unwrite(1005, 1040); // a block handed out again
        assert_eq!(st.first_gap(1000, 1100), Some((1005, 1040)));
        assert_eq!(st.unwritten_bytes(1000, 1100), 35 + 50);
        assert!(st.read(5000, 5010, "k", 0).is_none(), "untracked memory is not checked");
        assert!(st.read(1100, 1200, "k", 0).is_none(), "past the allocation");
    }
}
