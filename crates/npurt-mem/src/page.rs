//! The huge-page ladder's vocabulary: policies, page kinds, the `NPURT_HUGEPAGES`
//! override, and the kernel facts the ladder reads (THP sysfs mode, `/proc/self/smaps`).

use std::sync::OnceLock;

/// Huge pages are 2 MiB on every platform the ladder targets (x86_64, aarch64 4K).
pub const HUGE_PAGE_SIZE: usize = 2 << 20;

/// Mappings of at most this many bytes use normal pages under [`PagePolicy::HugeFirst`].
pub const HUGE_MIN_REQUEST: usize = 1 << 20;

/// Name of the environment override read by [`HugePageMode::from_env`].
pub const HUGEPAGES_ENV: &str = "NPURT_HUGEPAGES";

/// What a caller wants from the ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PagePolicy {
    /// hugetlb, then THP, then normal pages; requests of at most 1 MiB go straight to
    /// normal pages. Fallback is never an error.
    #[default]
    HugeFirst,
    /// hugetlb, then THP; neither → [`crate::MemError::HugePagesUnavailable`].
    HugeOnly,
    /// Normal pages only (`MADV_NOHUGEPAGE` so THP "always" systems comply too).
    NormalOnly,
}

/// What a mapping actually got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageKind {
    /// Explicit hugetlb pages (`MAP_HUGETLB`): reserved at map time, always huge.
    HugeTlb,
    /// Transparent huge pages: the range is 2 MiB aligned and `MADV_HUGEPAGE` was
    /// accepted. This means "eligible"; whether the kernel really backs it with huge
    /// pages shows after first touch (see [`smaps_anon_huge_bytes`]).
    Thp,
    /// Normal (4 KiB) pages.
    Normal,
}

impl PageKind {
    /// All kinds, in ladder order.
    pub const ALL: [PageKind; 3] = [PageKind::HugeTlb, PageKind::Thp, PageKind::Normal];

    /// `"hugetlb"`, `"thp"` or `"normal"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PageKind::HugeTlb => "hugetlb",
            PageKind::Thp => "thp",
            PageKind::Normal => "normal",
        }
    }

    /// Index into per-kind arrays (order of [`PageKind::ALL`]).
    pub fn index(self) -> usize {
        match self {
            PageKind::HugeTlb => 0,
            PageKind::Thp => 1,
            PageKind::Normal => 2,
        }
    }
}

/// Which rungs of the ladder may be tried (`NPURT_HUGEPAGES=off|thp|hugetlb|auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum HugePageMode {
    /// hugetlb, then THP, then normal (default).
    #[default]
    Auto,
    /// Only hugetlb is tried (no THP).
    HugeTlb,
    /// Only THP is tried (no hugetlb).
    Thp,
    /// No huge pages at all: `HugeFirst` acts like `NormalOnly`, `HugeOnly` fails.
    Off,
}

impl HugePageMode {
    /// Parses `off|thp|hugetlb|auto` (case-insensitive; `0/no/false/none` = off,
    /// `1/on/yes/true` = auto). Unknown values give `None`.
    pub fn parse(s: &str) -> Option<HugePageMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" | "1" | "on" | "yes" | "true" => Some(HugePageMode::Auto),
            "hugetlb" | "hugetlbfs" => Some(HugePageMode::HugeTlb),
            "thp" => Some(HugePageMode::Thp),
            "off" | "0" | "no" | "false" | "none" | "never" => Some(HugePageMode::Off),
            _ => None,
        }
    }

    /// Reads `NPURT_HUGEPAGES` (unset or unknown → `Auto`). Read at every mapping, so
    /// changes apply to later segments.
    pub fn from_env() -> HugePageMode {
        std::env::var(HUGEPAGES_ENV)
            .ok()
            .and_then(|v| HugePageMode::parse(&v))
            .unwrap_or_default()
    }

    /// Whether `MAP_HUGETLB` may be tried.
    pub fn allows_hugetlb(self) -> bool {
        matches!(self, HugePageMode::Auto | HugePageMode::HugeTlb)
    }

    /// Whether `MADV_HUGEPAGE` may be tried.
    pub fn allows_thp(self) -> bool {
        matches!(self, HugePageMode::Auto | HugePageMode::Thp)
    }
}

/// The kernel's THP mode (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpMode {
    /// `[always]`
    Always,
    /// `[madvise]`
    Madvise,
    /// `[never]`
    Never,
    /// No THP support (file missing or unreadable).
    Unsupported,
}

/// Parses the content of a THP sysfs `enabled` file (the bracketed word wins).
pub fn parse_thp_mode(content: &str) -> ThpMode {
    let sel = content
        .split_whitespace()
        .find(|w| w.starts_with('[') && w.ends_with(']'))
        .map(|w| w.trim_matches(|c| c == '[' || c == ']'));
    match sel {
        Some("always") => ThpMode::Always,
        Some("madvise") => ThpMode::Madvise,
        Some("never") => ThpMode::Never,
        _ => ThpMode::Unsupported,
    }
}

/// The THP mode of this machine (read once).
pub fn thp_mode() -> ThpMode {
    static MODE: OnceLock<ThpMode> = OnceLock::new();
    *MODE.get_or_init(|| {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .map(|s| parse_thp_mode(&s))
            .unwrap_or(ThpMode::Unsupported)
    })
}

/// True when `MADV_HUGEPAGE` regions can get huge pages (`[always]` or `[madvise]`).
pub fn thp_enabled() -> bool {
    matches!(thp_mode(), ThpMode::Always | ThpMode::Madvise)
}

/// The system page size.
pub fn page_size() -> usize {
    static PS: OnceLock<usize> = OnceLock::new();
    *PS.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if v > 0 {
            v as usize
        } else {
            4096
        }
    })
}

/// `AnonHugePages` bytes of the VMA(s) of this process overlapping `[addr, addr+len)`,
/// from `/proc/self/smaps`. `None` if smaps is unreadable or no VMA overlaps.
/// Whole VMAs are counted: the kernel may merge neighbouring mappings with the same
/// flags into one VMA, in which case the figure covers the neighbours too.
pub fn smaps_anon_huge_bytes(addr: usize, len: usize) -> Option<usize> {
    smaps_field_bytes(addr, len, "AnonHugePages")
}

/// `Rss` bytes of the VMA(s) overlapping `[addr, addr+len)` (see [`smaps_anon_huge_bytes`]).
pub fn smaps_rss_bytes(addr: usize, len: usize) -> Option<usize> {
    smaps_field_bytes(addr, len, "Rss")
}

/// Sum of a `kB` field of `/proc/self/smaps` over the VMAs overlapping a range.
pub fn smaps_field_bytes(addr: usize, len: usize, field: &str) -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
    parse_smaps_field(&text, addr, addr.checked_add(len)?, field)
}

fn parse_vma_header(line: &str) -> Option<(usize, usize)> {
    let range = line.split_whitespace().next()?;
    let (a, b) = range.split_once('-')?;
    Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?))
}

fn parse_smaps_field(text: &str, start: usize, end: usize, field: &str) -> Option<usize> {
    let mut in_range = false;
    let mut found = false;
    let mut total = 0usize;
    for line in text.lines() {
        if let Some((a, b)) = parse_vma_header(line) {
            in_range = a < end && start < b;
            found |= in_range;
            continue;
        }
        if !in_range {
            continue;
        }
        if let Some(rest) = line.strip_prefix(field).and_then(|r| r.strip_prefix(':')) {
            let kb: usize = rest.split_whitespace().next()?.parse().ok()?;
            total += kb * 1024;
        }
    }
    found.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_modes() {
        assert_eq!(HugePageMode::parse("OFF"), Some(HugePageMode::Off));
        assert_eq!(HugePageMode::parse("thp"), Some(HugePageMode::Thp));
        assert_eq!(HugePageMode::parse("hugetlb"), Some(HugePageMode::HugeTlb));
        assert_eq!(HugePageMode::parse(" auto "), Some(HugePageMode::Auto));
        assert_eq!(HugePageMode::parse("bogus"), None);
        assert!(!HugePageMode::Off.allows_thp() && !HugePageMode::Off.allows_hugetlb());
        assert!(HugePageMode::Thp.allows_thp() && !HugePageMode::Thp.allows_hugetlb());
        assert_eq!(parse_thp_mode("always [madvise] never\n"), ThpMode::Madvise);
        assert_eq!(parse_thp_mode("[always] madvise never"), ThpMode::Always);
        assert_eq!(parse_thp_mode("always madvise [never]"), ThpMode::Never);
        assert_eq!(parse_thp_mode(""), ThpMode::Unsupported);
        assert_eq!(PageKind::Thp.as_str(), "thp");
        assert_eq!(PageKind::ALL.map(|k| k.index()), [0, 1, 2]);
    }

    #[test]
    fn parse_smaps_text() {
        let text = "\
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Size:               4096 kB
Rss:                4096 kB
AnonHugePages:      2048 kB
7f0000400000-7f0000600000 rw-p 00000000 00:00 0 [heap]
Size:               2048 kB
AnonHugePages:         0 kB
";
        let base = 0x7f00_0000_0000usize;
        assert_eq!(
            parse_smaps_field(text, base, base + 4096, "AnonHugePages"),
            Some(2 << 20)
        );
        assert_eq!(parse_smaps_field(text, base, base + (6 << 20), "Rss"), Some(4 << 20));
        assert_eq!(
            parse_smaps_field(text, base + (4 << 20), base + (5 << 20), "AnonHugePages"),
            Some(0)
        );
        assert_eq!(parse_smaps_field(text, 0x1000, 0x2000, "Rss"), None);
    }

    #[test]
    fn live_smaps_readable() {
        let v = vec![1u8; 1 << 20];
        // Heap memory is mapped, so some VMA covers it.
        assert!(smaps_rss_bytes(v.as_ptr() as usize, v.len()).is_some());
        assert!(page_size().is_power_of_two());
    }
}
