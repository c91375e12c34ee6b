//! racecheck's reports: a race found under the shadow's lock becomes a [`Finding`] after
//! it (naming participants and sites takes other locks).

use super::clock::HOST;
use super::race::{Rec, STATE};
use super::report::{self, Finding};

/// A race found under the lock, reported after it (reports look sites up).
pub(super) struct Race {
    pub(super) first: Rec,
    pub(super) second: Rec,
    pub(super) alloc: Option<(usize, usize, u32)>,
}

pub(super) fn publish(found: Vec<Race>) {
    if found.is_empty() {
        return;
    }
    let names: Vec<(String, String)> = {
        let g = STATE.lock();
        let Some(st) = g.as_ref() else { return };
        found
            .iter()
            .map(|r| (st.who(r.first.who), st.who(r.second.who)))
            .collect()
    };
    for (r, (w1, w2)) in found.into_iter().zip(names) {
        report::push(finding(&r, &w1, &w2));
    }
}

fn side(r: &Rec, who: &str) -> String {
    let rw = if r.write { "Write" } else { "Read" };
    if r.who & HOST != 0 {
        format!("{rw} access by {who} ({})", r.what)
    } else {
        format!("{rw} access by {who} ({}, task {})", r.what, r.tick - 1)
    }
}

fn finding(r: &Race, w1: &str, w2: &str) -> Finding {
    let (a, b) = (&r.first, &r.second);
    let (host_a, host_b) = (a.who & HOST != 0, b.who & HOST != 0);
    let kernel = a.what.starts_with("kernel");
    let head = match (host_a, host_b, a.write, kernel) {
        (false, true, false, false) => "Host write to a pinned source whose async copy has not run",
        (false, true, true, false) => "Host access to an async copy's destination before the copy is known complete",
        (false, true, false, true) => "Host write to memory a queued kernel has not read yet",
        (false, true, true, true) => "Host access to a kernel's output before the kernel is known complete",
        _ => "Race reported between",
    };
    let kind = if host_b && !host_a { "host-race" } else { "race" };
    let message = if kind == "race" {
        format!("{head} {}", side(a, w1))
    } else {
        format!("{head}: {}", side(a, w1))
    };
    let (lo, hi) = (a.start.max(b.start), a.end.min(b.end));
    let mut f = Finding::new("racecheck", kind, message).detail(format!("and {}", side(b, w2)));
    let place = match r.alloc {
        Some((base, n, _)) => format!(
            " (bytes {}..{} of the {n}-byte allocation at {base:#x})",
            lo - base,
            hi - base
        ),
        None => String::new(),
    };
    f = f.detail(format!("on {} bytes at {lo:#x}{place}", hi - lo));
    f = f.site("first access at", a.site).site("second access at", b.site);
    if let Some((_, _, s)) = r.alloc {
        f = f.site("allocated at", s);
    }
    f
}
