//! [`DeviceMemory`]'s reports: the summary's per-pool lines and the segment snapshot
//! (torch's `memory_snapshot`), plus what the shared status region knows of the device's
//! other processes.

use super::device_mem::DeviceMemory;
use npurt_mem::{BlockSnapshot, BlockStatus, PageKind, SegmentSnapshot};

impl DeviceMemory {
    /// The summary's per-pool and per-page-kind lines: allocated / reserved bytes of the
    /// caching pool, each memory pool and the dedicated segments, and reserved bytes by
    /// page kind.
    pub(super) fn pool_lines(&self) -> String {
        use npurt_mem::human_bytes;
        let row = |name: String, a: u64, r: u64, n: usize| {
            format!(
                "|{:<27}|{:>15}|{:>15}|{:>15}|\n",
                name,
                human_bytes(a),
                human_bytes(r),
                n
            )
        };
        let thin = "|".to_string() + &"-".repeat(75) + "|\n";
        let mut s = format!(
            "|{:<27}|{:>15}|{:>15}|{:>15}|\n",
            " Pool", "Allocated", "Reserved", "Segments"
        );
        s += &thin;
        let ps = self.pool.stats();
        s += &row(
            " caching pool".into(),
            ps.allocated_bytes[0].current,
            ps.reserved_bytes[0].current,
            ps.segment[0].current as usize,
        );
        for p in self.pools() {
            let st = p.pool.stats();
            s += &row(
                format!(" mempool {}", p.id),
                st.allocated_bytes[0].current,
                p.pool.capacity() as u64,
                1,
            );
        }
        let ext = self.ext.lock();
        let mapped: usize = ext.dedicated.values().map(|&(m, _, _)| m).sum();
        let n = ext.dedicated.len();
        s += &row(
            " dedicated segments".into(),
            ext.stats.allocated_bytes[0].current,
            mapped as u64,
            n,
        );
        drop(ext);
        s += &thin;
        let all = self.stats();
        let kinds = [
            (PageKind::HugeTlb, "hugetlb"),
            (PageKind::Thp, "thp"),
            (PageKind::Normal, "normal"),
        ];
        for (k, name) in kinds {
            let bytes = human_bytes(all.page_bytes[k.index()]);
            s += &format!("|{:<27}|{:>15}|{:<31}|\n", format!(" {name} pages"), bytes, " reserved");
        }
        s += &("|".to_string() + &"=".repeat(75) + "|\n");
        s
    }

    /// Every segment on the device with its blocks (torch's `memory_snapshot`): the
    /// caching pool's, each memory pool's, the shareable pool's and the dedicated ones.
    pub fn segments(&self) -> Vec<(super::events::MemPoolKind, SegmentSnapshot)> {
        use super::events::MemPoolKind;
        let mut out: Vec<_> = self
            .pool
            .snapshot()
            .into_iter()
            .map(|s| (MemPoolKind::Device, s))
            .collect();
        for p in self.pools() {
            out.extend(p.pool.snapshot().into_iter().map(|s| (MemPoolKind::Pool(p.id), s)));
        }
        if let Some(p) = self.share.pool() {
            out.extend(p.snapshot().into_iter().map(|s| (MemPoolKind::Shareable, s)));
        }
        let ext = self.ext.lock();
        for (&base, &(mapped, requested, kind)) in &ext.dedicated {
            let block = BlockSnapshot {
                addr: base,
                size: mapped,
                requested,
                status: BlockStatus::Allocated,
            };
            let seg = SegmentSnapshot {
                base,
                size: mapped,
                mapped_len: mapped,
                page_kind: kind,
                large: true,
                blocks: vec![block],
            };
            out.push((MemPoolKind::Dedicated, seg));
        }
        out
    }

    /// Every process using this device, from the shared status region (this one
    /// included); empty when the device is process-private.
    pub fn processes(&self) -> Vec<crate::shared::ProcessInfo> {
        self.shared.as_ref().map_or_else(Vec::new, |a| a.processes())
    }

    /// True when this device is attached to its shared status region.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Publishes this process's live streams and events in the shared region (the
    /// status thread calls it; memory is published on every allocation already).
    pub fn publish_activity(&self, streams: u64, events: u64) {
        if let Some(a) = &self.shared {
            a.publish(streams, events);
        }
    }
}
