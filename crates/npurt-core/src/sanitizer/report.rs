//! Findings and how they are shown: compute-sanitizer's grep-friendly layout (every line
//! prefixed `========= `, one block per error, `LEAK SUMMARY` and `ERROR SUMMARY` lines)
//! and JSON for tools. Each checker builds a [`Finding`]; nothing else formats reports.

use crate::profiler::site;
use parking_lot::Mutex;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// The line prefix of every report line.
pub const PREFIX: &str = "========= ";

/// Findings kept in full (later ones only count).
const MAX_KEPT: usize = 4096;

/// One reported error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `memcheck`, `racecheck` or `synccheck`.
    pub tool: &'static str,
    /// A stable short name: `leak`, `double-free`, `invalid-free`, `use-after-free`,
    /// `out-of-bounds`, `race`, `host-race`, `unrecorded-event`, `destroyed-while-waited`,
    /// `callback-blocks`, `shared-stream`.
    pub kind: &'static str,
    /// The first line (after `Error: `).
    pub message: String,
    /// Further lines, shown indented.
    pub details: Vec<String>,
    /// Labelled call sites (`launched at`, `allocated at`...): site ids of
    /// [`crate::profiler::site`] (0: unknown).
    pub sites: Vec<(String, u32)>,
    /// Bytes leaked (leaks), else 0.
    pub bytes: usize,
    /// How many times the same error (kind and sites) was seen.
    pub count: u64,
}

impl Finding {
    pub fn new(tool: &'static str, kind: &'static str, message: String) -> Self {
        Finding {
            tool,
            kind,
            message,
            details: Vec::new(),
            sites: Vec::new(),
            bytes: 0,
            count: 1,
        }
    }

    pub fn detail(mut self, line: String) -> Self {
        self.details.push(line);
        self
    }

    pub fn site(mut self, label: impl Into<String>, id: u32) -> Self {
        self.sites.push((label.into(), id));
        self
    }

    /// The same error again: racecheck hazards between the same two call sites count as
    /// one when they differ only in numbers (streams, tasks); other errors must say the same.
    fn same(&self, o: &Finding) -> bool {
        let shape = |m: &str| m.chars().filter(|c| !c.is_ascii_digit()).collect::<String>();
        self.kind == o.kind
            && self.sites == o.sites
            && if self.tool == "racecheck" {
                shape(&self.message) == shape(&o.message)
            } else {
                self.message == o.message
            }
    }

    /// The block of text (every line prefixed, ending with an empty prefixed line).
    pub fn text(&self) -> String {
        let mut s = String::new();
        let times = if self.count > 1 {
            format!(" [{} times]", self.count)
        } else {
            String::new()
        };
        let _ = writeln!(s, "{PREFIX}Error: {}{times}", self.message);
        for d in &self.details {
            let _ = writeln!(s, "{PREFIX}    {d}");
        }
        for (label, id) in &self.sites {
            match site::meta(*id) {
                None => {
                    let _ = writeln!(s, "{PREFIX}    {label}: (no call site)");
                }
                Some(m) => match &m.stack {
                    Some(stack) => {
                        let _ = writeln!(s, "{PREFIX}    {label}:");
                        for line in stack.lines().rev() {
                            let _ = writeln!(s, "{PREFIX}        {line}");
                        }
                    }
                    None => {
                        let _ = writeln!(s, "{PREFIX}    {label}: {}", m.site);
                    }
                },
            }
        }
        let _ = writeln!(s, "{PREFIX}");
        s
    }

    /// One JSON object.
    /// [`json`](Self::json) in at most `cap` bytes: without the stacks if too long, then
    /// without details and sites.
    pub fn json_within(&self, cap: usize) -> String {
        let full = self.json();
        if full.len() <= cap {
            return full;
        }
        let mut f = self.clone();
        f.sites.retain(|_| false);
        let j = f.json();
        if j.len() <= cap {
            return j;
        }
        f.details.clear();
        f.message.truncate(cap / 2);
        f.json()
    }

    pub fn json(&self) -> String {
        let mut s = format!(
            "{{\"tool\":{},\"kind\":{},\"message\":{},\"count\":{},\"bytes\":{},\"details\":[",
            quote(self.tool),
            quote(self.kind),
            quote(&self.message),
            self.count,
            self.bytes
        );
        let details: Vec<String> = self.details.iter().map(|d| quote(d)).collect();
        s += &details.join(",");
        s += "],\"sites\":[";
        let sites: Vec<String> = self
            .sites
            .iter()
            .map(|(label, id)| {
                let m = site::meta(*id);
                let at = m.as_ref().map_or_else(|| "null".to_string(), |m| quote(&m.site));
                let stack = m
                    .and_then(|m| m.stack.clone())
                    .map(|st| {
                        let lines: Vec<String> = st.lines().rev().map(quote).collect();
                        format!("[{}]", lines.join(","))
                    })
                    .unwrap_or_else(|| "[]".to_string());
                format!("{{\"label\":{},\"site\":{at},\"stack\":{stack}}}", quote(label))
            })
            .collect();
        s += &sites.join(",");
        s += "]}";
        s
    }
}

/// A JSON string literal.
fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

static FINDINGS: Mutex<Vec<Finding>> = Mutex::new(Vec::new());
/// Print each new error to stderr when found (compute-sanitizer prints as it goes).
static PRINT: AtomicBool = AtomicBool::new(false);
/// Findings before this index are not merged with new ones (a block's report shows its
/// own errors even when an earlier block saw the same).
static FLOOR: AtomicUsize = AtomicUsize::new(0);

/// A block of the program starts (`check`): returns the index its findings start at.
pub fn begin_block() -> usize {
    let v = FINDINGS.lock();
    FLOOR.store(v.len(), Relaxed);
    v.len()
}

/// Prints each new finding's block to stderr as it is found (`false`: only collect).
pub fn set_print(on: bool) {
    PRINT.store(on, Relaxed);
}

/// Records a finding (the same error again only counts).
pub fn push(f: Finding) {
    let mut v = FINDINGS.lock();
    let floor = FLOOR.load(Relaxed).min(v.len());
    if let Some(old) = v[floor..].iter_mut().find(|o| o.same(&f)) {
        old.count += 1;
        return;
    }
    if v.len() >= MAX_KEPT {
        return;
    }
    if PRINT.load(Relaxed) {
        eprint!("{}", f.text());
    }
    v.push(f);
    drop(v);
    refresh_trap_json();
}

/// The fault trap's copy of the findings so far, when a trap may write the JSON report:
/// the report's start, ready for the trap's own finding (`...,"findings":[a,b,`).
pub(super) fn refresh_trap_json() {
    let Some(slot) = super::trap::so_far() else { return };
    let v = FINDINGS.lock();
    let leaked: usize = v.iter().filter(|f| f.kind == "leak").map(|f| f.bytes).sum();
    let mut s = format!("{{\"errors\":{},\"leaked_bytes\":{leaked},\"findings\":[", v.len() + 1);
    let room = super::trap::SO_FAR_BYTES - 64;
    for f in v.iter() {
        let item = f.json_within(room / 4);
        if s.len() + item.len() + 1 > room {
            break; // (the count stays right; the oldest findings' blocks were printed)
        }
        s += &item;
        s.push(',');
    }
    slot.publish(0, u64::MAX, s.as_bytes());
}

/// Findings so far (distinct errors).
pub fn count() -> usize {
    FINDINGS.lock().len()
}

/// A copy of the findings so far.
pub fn snapshot() -> Vec<Finding> {
    FINDINGS.lock().clone()
}

/// Takes the findings so far (the next report starts empty).
pub fn take() -> Vec<Finding> {
    FLOOR.store(0, Relaxed);
    let out = std::mem::take(&mut *FINDINGS.lock());
    refresh_trap_json();
    out
}

/// The findings from the `since`-th on (a [`check`](crate::sanitizer) block's).
pub fn snapshot_from(since: usize) -> Vec<Finding> {
    FINDINGS
        .lock()
        .get(since..)
        .map(<[Finding]>::to_vec)
        .unwrap_or_default()
}

/// Takes the findings from the `since`-th on; earlier ones stay.
pub fn take_from(since: usize) -> Vec<Finding> {
    let mut v = FINDINGS.lock();
    let at = since.min(v.len());
    FLOOR.store(FLOOR.load(Relaxed).min(at), Relaxed);
    let out = v.split_off(at);
    drop(v);
    refresh_trap_json();
    out
}

/// The summary lines: leaks (when memcheck ran) and the error count.
pub fn summary(findings: &[Finding], leaks: bool) -> String {
    let mut s = String::new();
    if leaks {
        let (bytes, n) = findings
            .iter()
            .filter(|f| f.kind == "leak")
            .fold((0usize, 0usize), |(b, n), f| (b + f.bytes, n + 1));
        let _ = writeln!(s, "{PREFIX}LEAK SUMMARY: {bytes} bytes leaked in {n} allocations");
    }
    let _ = writeln!(s, "{PREFIX}ERROR SUMMARY: {} errors", findings.len());
    s
}

/// The whole text report: the header, every block, the summaries.
pub fn text(findings: &[Finding], leaks: bool) -> String {
    let mut s = format!("{PREFIX}NPURT-SANITIZER\n");
    for f in findings {
        s += &f.text();
    }
    s + &summary(findings, leaks)
}

/// The JSON report: `{"errors": N, "leaked_bytes": B, "findings": [...]}`.
pub fn json(findings: &[Finding]) -> String {
    let leaked: usize = findings.iter().filter(|f| f.kind == "leak").map(|f| f.bytes).sum();
    let items: Vec<String> = findings.iter().map(Finding::json).collect();
    format!(
        "{{\"errors\":{},\"leaked_bytes\":{leaked},\"findings\":[{}]}}",
        findings.len(),
        items.join(",")
    )
}
