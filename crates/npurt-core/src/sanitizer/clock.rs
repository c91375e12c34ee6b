//! Vector clocks (PyTorch CSAN's algorithm, with host threads as participants too).
//!
//! A participant is a stream (its id) or a host thread ([`HOST`] | a number). A clock maps
//! each participant to how many of its steps are known to happen before: for a stream,
//! tasks (its submission count); for a host thread, its host accesses. An access `(p, t)`
//! (participant `p`'s `t`-th step) happens before a clock `K` when `K[p] >= t`.
//!
//! A stream's clock only changes at a wait (element-wise max with the waited point's
//! clock) and when a host thread submits to it (max with the host's clock: program
//! order); [`History`] keeps each change with the first task it applies to, so the clock
//! of any task or event point (`(stream, count)`) can be looked up later. A host thread's
//! clock grows at syncs (max with the synced point's clock) and, on a callback thread, is
//! the clock of the callback's task.

/// The participant-id bit of host threads.
pub const HOST: u64 = 1 << 63;

/// Clock entries kept per stream history (older ones merge into the next).
const MAX_HISTORY: usize = 1 << 14;

/// Participant → steps known to happen before (sorted by participant).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VClock(Vec<(u64, u64)>);

impl VClock {
    /// The steps of `p` known to happen before (0: none).
    pub fn get(&self, p: u64) -> u64 {
        match self.0.binary_search_by_key(&p, |e| e.0) {
            Ok(i) => self.0[i].1,
            Err(_) => 0,
        }
    }

    /// Raises `p`'s entry to at least `v`; true if it changed.
    pub fn raise(&mut self, p: u64, v: u64) -> bool {
        match self.0.binary_search_by_key(&p, |e| e.0) {
            Ok(i) if self.0[i].1 >= v => false,
            Ok(i) => {
                self.0[i].1 = v;
                true
            }
            Err(_) if v == 0 => false,
            Err(i) => {
                self.0.insert(i, (p, v));
                true
            }
        }
    }

    /// Element-wise max with `other`; true if anything changed.
    pub fn merge(&mut self, other: &VClock) -> bool {
        let mut changed = false;
        for &(p, v) in &other.0 {
            changed |= self.raise(p, v);
        }
        changed
    }

    /// True when step `tick` of `p` happens before this clock.
    pub fn covers(&self, p: u64, tick: u64) -> bool {
        self.get(p) >= tick
    }
}

/// A stream's clock over time: `(first task it applies to, clock without the stream's own
/// entry)`, in task order.
#[derive(Clone, Debug, Default)]
pub struct History(Vec<(u64, VClock)>);

impl History {
    /// The clock of task `pos` (0-based), own entry included (`pos + 1`).
    pub fn at_task(&self, own: u64, pos: u64) -> VClock {
        let i = self.0.partition_point(|e| e.0 <= pos);
        let mut k = if i == 0 {
            VClock::default()
        } else {
            self.0[i - 1].1.clone()
        };
        k.raise(own, pos + 1);
        k
    }

    /// The clock of the point "the first `count` tasks" (an event record, a stream wait).
    pub fn at_count(&self, own: u64, count: u64) -> VClock {
        if count == 0 {
            return VClock::default();
        }
        self.at_task(own, count - 1)
    }

    /// Merges `k` into the clock of tasks from `from` on; true if it changed.
    pub fn merge_from(&mut self, from: u64, k: &VClock) -> bool {
        let mut cur = self.0.last().map(|e| e.1.clone()).unwrap_or_default();
        if !cur.merge(k) {
            return false;
        }
        match self.0.last_mut() {
            Some(last) if last.0 >= from => last.1 = cur,
            _ => self.0.push((from, cur)),
        }
        if self.0.len() > MAX_HISTORY {
            // The oldest points get a later (larger) clock: races with them may be missed,
            // never invented.
            self.0.drain(..MAX_HISTORY / 2);
        }
        true
    }

    /// Entries kept (for tests).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_is_an_element_wise_max() {
        let mut a = VClock::default();
        assert!(a.raise(3, 2));
        assert!(!a.raise(3, 1));
        let mut b = VClock::default();
        b.raise(3, 1);
        b.raise(HOST | 1, 5);
        assert!(a.merge(&b));
        assert_eq!((a.get(3), a.get(HOST | 1), a.get(7)), (2, 5, 0));
        assert!(!a.merge(&b));
        assert!(a.covers(HOST | 1, 5) && !a.covers(HOST | 1, 6));
    }

    #[test]
    fn history_answers_the_clock_of_any_task_or_point() {
        let mut h = History::default();
        let mut k = VClock::default();
        k.raise(9, 4);
        assert!(h.merge_from(2, &k)); // task 2 waited for stream 9's first 4 tasks
        assert!(!h.merge_from(5, &k));
        assert_eq!(h.at_task(1, 1).get(9), 0, "task 1 came before the wait");
        assert_eq!(h.at_task(1, 1).get(1), 2);
        assert_eq!(h.at_task(1, 2).get(9), 4);
        assert_eq!(h.at_count(1, 2).get(9), 0, "an event recorded after 2 tasks");
        assert_eq!(h.at_count(1, 3).get(9), 4);
        assert_eq!(h.at_count(1, 0), VClock::default());
        k.raise(9, 6);
        assert!(h.merge_from(2, &k)); // same first task: the entry is updated in place
        assert_eq!(h.len(), 1);
        assert_eq!(h.at_task(1, 2).get(9), 6);
    }
}
