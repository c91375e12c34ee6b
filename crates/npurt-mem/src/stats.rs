//! Pool statistics in torch's `memory_stats()` shape, and a `memory_summary()` table.

use std::fmt::Write as _;

use crate::error::human_bytes;
use crate::page::PageKind;

/// One statistic: current value, peak since the last reset, and cumulative increments
/// (`allocated`) and decrements (`freed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Current value.
    pub current: u64,
    /// Peak of `current` since creation or `reset_peak_stats()`.
    pub peak: u64,
    /// Sum of all increments.
    pub allocated: u64,
    /// Sum of all decrements.
    pub freed: u64,
}

impl Stat {
    #[inline]
    pub(crate) fn inc(&mut self, n: u64) {
        self.current += n;
        self.allocated += n;
        if self.current > self.peak {
            self.peak = self.current;
        }
    }

    #[inline]
    pub(crate) fn dec(&mut self, n: u64) {
        debug_assert!(self.current >= n, "stat underflow");
        self.current -= n;
        self.freed += n;
    }
}

/// Index of the `all` entry of a [`StatArray`].
pub const ALL: usize = 0;
/// Index of the `small_pool` entry of a [`StatArray`].
pub const SMALL_POOL: usize = 1;
/// Index of the `large_pool` entry of a [`StatArray`].
pub const LARGE_POOL: usize = 2;
/// Names of the [`StatArray`] entries, as torch spells them.
pub const STAT_TYPES: [&str; 3] = ["all", "small_pool", "large_pool"];

/// A statistic for `all`, `small_pool` and `large_pool`.
pub type StatArray = [Stat; 3];

#[inline]
pub(crate) fn inc(a: &mut StatArray, pool: usize, n: u64) {
    a[ALL].inc(n);
    a[pool].inc(n);
}

#[inline]
pub(crate) fn dec(a: &mut StatArray, pool: usize, n: u64) {
    a[ALL].dec(n);
    a[pool].dec(n);
}

/// A snapshot of a pool's statistics (plain data).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolStats {
    /// Number of live allocations.
    pub allocation: StatArray,
    /// Number of mapped segments.
    pub segment: StatArray,
    /// Number of active blocks (torch's name; equal to `allocation`: npurt frees a block
    /// only once no queued work uses it).
    pub active: StatArray,
    /// Bytes of live allocations (block sizes, i.e. rounded to 512).
    pub allocated_bytes: StatArray,
    /// Bytes mapped by the pool.
    pub reserved_bytes: StatArray,
    /// Bytes of active blocks (equal to `allocated_bytes`, see `active`).
    pub active_bytes: StatArray,
    /// Bytes the callers asked for (unrounded) in live allocations.
    pub requested_bytes: StatArray,
    /// Allocations that had to release cached segments and retry.
    pub num_alloc_retries: u64,
    /// Allocations that failed with OutOfMemory.
    pub num_ooms: u64,
    /// Segments mapped (cumulative).
    pub num_device_alloc: u64,
    /// Segments unmapped (cumulative).
    pub num_device_free: u64,
    /// Currently reserved bytes by page kind, indexed by [`PageKind::index`].
    pub page_bytes: [u64; 3],
    /// The device capacity.
    pub capacity: u64,
    /// The quota, if set.
    pub limit: Option<u64>,
    /// `max_split_size` (`u64::MAX` = unlimited).
    pub max_split_size: u64,
    /// Largest free cached block.
    pub largest_free_block: u64,
}

impl PoolStats {
    /// The seven statistic arrays (allocation, segment, active, allocated/reserved/
    /// active/requested bytes).
    fn arrays_mut(&mut self) -> [&mut StatArray; 7] {
        [
            &mut self.allocation,
            &mut self.segment,
            &mut self.active,
            &mut self.allocated_bytes,
            &mut self.reserved_bytes,
            &mut self.active_bytes,
            &mut self.requested_bytes,
        ]
    }

    fn arrays(&self) -> [&StatArray; 7] {
        [
            &self.allocation,
            &self.segment,
            &self.active,
            &self.allocated_bytes,
            &self.reserved_bytes,
            &self.active_bytes,
            &self.requested_bytes,
        ]
    }

    /// Adds `other` in (peaks add up: exact for one source, an upper bound for several;
    /// the largest free block is the larger one).
    pub fn merge(&mut self, other: &PoolStats) {
        for (a, b) in self.arrays_mut().into_iter().zip(other.arrays()) {
            for (x, y) in a.iter_mut().zip(b.iter()) {
                x.current += y.current;
                x.peak += y.peak;
                x.allocated += y.allocated;
                x.freed += y.freed;
            }
        }
        self.num_alloc_retries += other.num_alloc_retries;
        self.num_ooms += other.num_ooms;
        self.num_device_alloc += other.num_device_alloc;
        self.num_device_free += other.num_device_free;
        for (x, y) in self.page_bytes.iter_mut().zip(other.page_bytes.iter()) {
            *x += y;
        }
        self.largest_free_block = self.largest_free_block.max(other.largest_free_block);
    }

    /// Counts a block of `bytes` in a segment of its own (`requested` bytes asked for), in
    /// the large pool: one allocation, segment and active block, mapped and reserved at
    /// once (the runtime's dedicated mappings, which bypass the caching pool).
    pub fn add_dedicated(&mut self, bytes: u64, requested: u64, kind: PageKind) {
        self.dedicated(inc, bytes, requested);
        self.page_bytes[kind.index()] += bytes;
        self.num_device_alloc += 1;
    }

    /// Undoes [`add_dedicated`](Self::add_dedicated) when the segment is unmapped.
    pub fn remove_dedicated(&mut self, bytes: u64, requested: u64, kind: PageKind) {
        self.dedicated(dec, bytes, requested);
        self.page_bytes[kind.index()] -= bytes;
        self.num_device_free += 1;
    }

    /// `op` (inc or dec) on the large pool's arrays for one dedicated segment.
    fn dedicated(&mut self, op: fn(&mut StatArray, usize, u64), bytes: u64, requested: u64) {
        for a in [&mut self.allocation, &mut self.segment, &mut self.active] {
            op(a, LARGE_POOL, 1);
        }
        for a in [
            &mut self.allocated_bytes,
            &mut self.reserved_bytes,
            &mut self.active_bytes,
        ] {
            op(a, LARGE_POOL, bytes);
        }
        op(&mut self.requested_bytes, LARGE_POOL, requested);
    }

    /// Sets every peak to the current value (`reset_peak_memory_stats`).
    pub fn reset_peaks(&mut self) {
        for a in self.arrays_mut() {
            for s in a.iter_mut() {
                s.peak = s.current;
            }
        }
    }

    /// Zeroes the cumulative `allocated`/`freed` counters, retries and OOMs.
    pub fn reset_accumulated(&mut self) {
        for a in self.arrays_mut() {
            for s in a.iter_mut() {
                s.allocated = 0;
                s.freed = 0;
            }
        }
        self.num_alloc_retries = 0;
        self.num_ooms = 0;
    }

    /// Reserved bytes of one page kind.
    pub fn page_bytes_of(&self, kind: PageKind) -> u64 {
        self.page_bytes[kind.index()]
    }

    /// Flattens into torch-style `(key, value)` pairs, e.g. `"allocated_bytes.all.current"`,
    /// `"reserved_bytes.large_pool.peak"`, `"num_ooms"`, `"page_bytes.thp"`.
    pub fn to_kv(&self) -> Vec<(String, u64)> {
        let mut out = Vec::with_capacity(7 * 12 + 12);
        let arrays: [(&str, &StatArray); 7] = [
            ("allocation", &self.allocation),
            ("segment", &self.segment),
            ("active", &self.active),
            ("allocated_bytes", &self.allocated_bytes),
            ("reserved_bytes", &self.reserved_bytes),
            ("active_bytes", &self.active_bytes),
            ("requested_bytes", &self.requested_bytes),
        ];
        for (name, arr) in arrays {
            for (t, st) in STAT_TYPES.iter().zip(arr.iter()) {
                for (m, v) in [
                    ("current", st.current),
                    ("peak", st.peak),
                    ("allocated", st.allocated),
                    ("freed", st.freed),
                ] {
                    out.push((format!("{name}.{t}.{m}"), v));
                }
            }
        }
        for (k, v) in [
            ("num_alloc_retries", self.num_alloc_retries),
            ("num_ooms", self.num_ooms),
            ("num_device_alloc", self.num_device_alloc),
            ("num_device_free", self.num_device_free),
            ("max_split_size", self.max_split_size),
            ("capacity", self.capacity),
            ("largest_free_block", self.largest_free_block),
        ] {
            out.push((k.to_string(), v));
        }
        if let Some(l) = self.limit {
            out.push(("limit".to_string(), l));
        }
        for k in PageKind::ALL {
            out.push((format!("page_bytes.{}", k.as_str()), self.page_bytes[k.index()]));
        }
        out
    }

    /// A readable table in the spirit of torch's `memory_summary()`.
    pub fn summary(&self) -> String {
        let line = "|".to_string() + &"=".repeat(75) + "|\n";
        let thin = "|".to_string() + &"-".repeat(75) + "|\n";
        let mut s = String::new();
        s += &line;
        s += &format!("|{:^75}|\n", "npurt caching pool memory summary");
        s += &thin;
        s += &format!(
            "|{:^37}|{:^37}|\n",
            format!("OOMs: {}", self.num_ooms),
            format!("alloc retries: {}", self.num_alloc_retries)
        );
        s += &format!(
            "|{:^37}|{:^37}|\n",
            format!("capacity: {}", human_bytes(self.capacity)),
            format!(
                "quota: {}",
                self.limit.map(human_bytes).unwrap_or_else(|| "none".into())
            )
        );
        s += &line;
        s += "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n";
        s += &thin;
        let rows: [(&str, &StatArray, bool); 7] = [
            ("Allocated memory", &self.allocated_bytes, true),
            ("Active memory", &self.active_bytes, true),
            ("Requested memory", &self.requested_bytes, true),
            ("Reserved memory", &self.reserved_bytes, true),
            ("Allocations", &self.allocation, false),
            ("Active allocs", &self.active, false),
            ("Segments", &self.segment, false),
        ];
        for (name, arr, bytes) in rows {
            for (i, label) in [name, "      from large pool", "      from small pool"]
                .iter()
                .enumerate()
            {
                let st = &arr[[ALL, LARGE_POOL, SMALL_POOL][i]];
                let f = |v: u64| if bytes { human_bytes(v) } else { v.to_string() };
                let _ = writeln!(
                    s,
                    "| {:<21} | {:>10} | {:>10} | {:>10} | {:>10} |",
                    label,
                    f(st.current),
                    f(st.peak),
                    f(st.allocated),
                    f(st.freed)
                );
            }
            s += &thin;
        }
        for k in PageKind::ALL {
            let _ = writeln!(
                s,
                "| {:<21} | {:>10} | {:<37}|",
                format!("Reserved {}", k.as_str()),
                human_bytes(self.page_bytes[k.index()]),
                ""
            );
        }
        let _ = writeln!(
            s,
            "| {:<21} | {:>10} | {:<37}|",
            "Largest free block",
            human_bytes(self.largest_free_block),
            ""
        );
        s += &line;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_and_kv() {
        let mut a = StatArray::default();
        inc(&mut a, SMALL_POOL, 10);
        inc(&mut a, LARGE_POOL, 5);
        dec(&mut a, SMALL_POOL, 10);
        assert_eq!(
            a[ALL],
            Stat {
                current: 5,
                peak: 15,
                allocated: 15,
                freed: 10
            }
        );
        let mut ps = PoolStats {
            allocated_bytes: a,
            num_ooms: 2,
            ..Default::default()
        };
        ps.page_bytes[PageKind::Thp.index()] = 7;
        let kv = ps.to_kv();
        let get = |k: &str| kv.iter().find(|(n, _)| n == k).map(|p| p.1);
        assert_eq!(get("allocated_bytes.all.current"), Some(5));
        assert_eq!(get("allocated_bytes.small_pool.peak"), Some(10));
        assert_eq!(get("reserved_bytes.large_pool.peak"), Some(0));
        assert_eq!(get("num_ooms"), Some(2));
        assert_eq!(get("page_bytes.thp"), Some(7));
        assert_eq!(get("segment.all.current"), Some(0));
        let s = ps.summary();
        assert!(s.contains("Allocated memory") && s.contains("from small pool"));
        assert!(s.lines().all(|l| l.chars().count() == 77), "{s}");
    }
}
