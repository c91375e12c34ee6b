//! The pool's *active* statistics (allocated + pending blocks), derived instead of kept:
//! the alloc/free hot path updates the allocation statistics only, `State::stats.active*`
//! count the pending blocks, and a snapshot adds them up. Peaks that only exist while
//! blocks are pending are tracked on the (rare) allocations made meanwhile.

use crate::state::State;
use crate::stats::{self, Stat, StatArray};

/// Fills `active` (which holds the pending part on entry) as allocated + pending:
/// `current` and `allocated` add up, `freed` counts what left both, `peak` is the larger of
/// the allocation peak and the peaks seen while blocks were pending (`pending_peak`).
pub(crate) fn derive_active(active: &mut StatArray, allocated: &StatArray, pending_peak: &[u64; 3]) {
    for idx in 0..3 {
        let (pend, a) = (active[idx], allocated[idx]);
        active[idx] = Stat {
            current: a.current + pend.current,
            peak: a.peak.max(pending_peak[idx]).max(a.current + pend.current),
            allocated: a.allocated,
            freed: a.freed.saturating_sub(pend.current),
        };
    }
}

impl State {
    /// An allocation while blocks are pending: active (allocated + pending) may peak.
    #[cold]
    pub(crate) fn bump_active_peaks(&mut self, p: usize) {
        let s = &self.stats;
        for idx in [stats::ALL, p] {
            let n = s.allocation[idx].current + s.active[idx].current;
            let b = s.allocated_bytes[idx].current + s.active_bytes[idx].current;
            self.active_peak[0][idx] = self.active_peak[0][idx].max(n);
            self.active_peak[1][idx] = self.active_peak[1][idx].max(b);
        }
    }

    /// `reset_peak_stats` for the derived active statistics.
    pub(crate) fn reset_active_peaks(&mut self) {
        for idx in 0..3 {
            self.active_peak[0][idx] = self.stats.allocation[idx].current + self.stats.active[idx].current;
            self.active_peak[1][idx] = self.stats.allocated_bytes[idx].current + self.stats.active_bytes[idx].current;
        }
    }
}
