//! Two observers: [`Collector`] keeps everything between a start and a stop (the Python
//! profiler), [`Ring`] keeps the last `capacity` records (the flight recorder dumped when a
//! stream fails, `NPURT_DUMP_ON_ERROR`).

use super::{LaunchNote, TaskObserver, TaskRecord};
use parking_lot::Mutex;
use std::collections::VecDeque;

/// Keeps every record and launch note until [`take`](Self::take).
#[derive(Default)]
pub struct Collector {
    records: Mutex<Vec<TaskRecord>>,
    launches: Mutex<Vec<LaunchNote>>,
}

impl Collector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything collected so far (and forgets it).
    pub fn take(&self) -> (Vec<TaskRecord>, Vec<LaunchNote>) {
        (
            std::mem::take(&mut *self.records.lock()),
            std::mem::take(&mut *self.launches.lock()),
        )
    }
}

impl TaskObserver for Collector {
    fn on_task(&self, record: TaskRecord) {
        self.records.lock().push(record);
    }
    fn on_launch(&self, note: LaunchNote) {
        self.launches.lock().push(note);
    }
}

/// The last `capacity` task records (older ones are dropped).
pub struct Ring {
    capacity: usize,
    records: Mutex<VecDeque<TaskRecord>>,
}

impl Ring {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            records: Mutex::new(VecDeque::with_capacity(capacity)),
        }
    }

    /// The records held now, oldest first (they stay in the ring).
    pub fn snapshot(&self) -> Vec<TaskRecord> {
        self.records.lock().iter().cloned().collect()
    }
}

impl TaskObserver for Ring {
    fn on_task(&self, record: TaskRecord) {
        let mut r = self.records.lock();
        if r.len() == self.capacity {
            r.pop_front();
        }
        r.push_back(record);
    }
}
