//! [`PoolConfig`]: how a [`crate::CachingPool`] is built.

use std::sync::Arc;

use crate::page::{HugePageMode, PageKind, PagePolicy};

/// A segment mapped into (`mapped`) or released from a pool, as told to a
/// [`SegmentObserver`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentEvent {
    /// `true`: the segment was added (mapped); `false`: released (unmapped right after).
    pub mapped: bool,
    /// Base address.
    pub addr: usize,
    /// Usable bytes (what `reserved` counts).
    pub size: usize,
    /// Pages backing it.
    pub page_kind: PageKind,
    /// Large pool (`false`: the small pool's 2 MiB segments).
    pub large: bool,
}

/// Told about every segment the pool maps or releases (also those still mapped when the
/// pool is dropped). Called with the pool lock held: it must be quick and must not call
/// into the pool.
pub type SegmentObserver = Arc<dyn Fn(&SegmentEvent) + Send + Sync>;

/// Asked before the pool maps a segment, and told when one is released: how device room
/// shared with other processes is charged (npurt-core's shared status region). Both are
/// called with the pool lock held and must be quick (atomics, no blocking).
pub trait ReserveGate: Send + Sync {
    /// Takes `bytes` of shared room, or says why not (the OutOfMemory's `what`).
    fn try_reserve(&self, bytes: usize) -> Result<(), String>;
    /// Gives back `bytes` taken with [`try_reserve`](Self::try_reserve).
    fn release(&self, bytes: usize);
}

/// Pool configuration.
#[derive(Clone)]
pub struct PoolConfig {
    /// The device's hard limit: reserved bytes never exceed it.
    pub capacity: usize,
    /// Page policy of new segments.
    pub policy: PagePolicy,
    /// Ladder rungs; `None` reads `NPURT_HUGEPAGES` at every mapping.
    pub huge_mode: Option<HugePageMode>,
    /// Blocks of at least this size are never split and serve only requests of at
    /// least this size (`usize::MAX` = no limit). Values ≤ 20 MiB are raised to just
    /// above 20 MiB (torch clamps too) so standard 20 MiB segments stay splittable.
    /// Ignored by fixed pools.
    pub max_split_size: usize,
    /// Release idle cached segments when reserved exceeds this fraction of the limit.
    pub gc_threshold: Option<f64>,
    /// `false`: a fixed pool that maps `capacity` once up front and never grows.
    pub grow: bool,
    /// Segment size for large requests of at most 10 MiB. `None` (the default) maps
    /// request-sized segments (page-rounded): on the CPU a mapping costs microseconds,
    /// and exact segments keep a dynamic-shape workload's reserved/peak ratio near 1.15
    /// instead of 1.4 (1.3 with 2 MiB rounding). `Some(20 << 20)` gives torch's `kLargeBuffer` behaviour.
    pub large_segment: Option<usize>,
    /// Before a growing pool maps a segment that would take its reserved bytes past their
    /// peak, it unmaps cached segments that are entirely free (all too small for the
    /// request, or best fit would have used them). Default `true`: on a dynamic-shape
    /// replay (`npurt.bench`'s trace, 12 seeds) this takes the median reserved/peak ratio
    /// from 1.27 to 1.11 (a plain first-fit allocator over one address range: 1.12) for
    /// about one extra mapping per 200 steps. `false` keeps every cached segment until `empty_cache`, gc or an OOM
    /// retry, as torch does.
    pub trim_before_growth: bool,
    /// Segment map/unmap observer (see [`SegmentObserver`]).
    pub segment_observer: Option<SegmentObserver>,
    /// Cross-process room for new segments (see [`ReserveGate`]).
    pub reserve_gate: Option<Arc<dyn ReserveGate>>,
    /// Map every segment as a sealed memfd ([`crate::Segment::map_shared`]) so that its
    /// blocks can be exported to other processes ([`crate::CachingPool::share`]). Such
    /// segments get hugetlb pages or normal ones, never THP. `HugeOnly` then means hugetlb.
    pub shareable: bool,
}

impl PoolConfig {
    /// Growable pool of `capacity` bytes with default settings.
    pub fn new(capacity: usize) -> PoolConfig {
        PoolConfig {
            capacity,
            policy: PagePolicy::HugeFirst,
            huge_mode: None,
            max_split_size: usize::MAX,
            gc_threshold: None,
            grow: true,
            large_segment: None,
            trim_before_growth: true,
            segment_observer: None,
            reserve_gate: None,
            shareable: false,
        }
    }
}

impl std::fmt::Debug for PoolConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolConfig")
            .field("capacity", &self.capacity)
            .field("policy", &self.policy)
            .field("huge_mode", &self.huge_mode)
            .field("max_split_size", &self.max_split_size)
            .field("gc_threshold", &self.gc_threshold)
            .field("grow", &self.grow)
            .field("large_segment", &self.large_segment)
            .field("trim_before_growth", &self.trim_before_growth)
            .field("segment_observer", &self.segment_observer.is_some())
            .field("reserve_gate", &self.reserve_gate.is_some())
            .field("shareable", &self.shareable)
            .finish()
    }
}
