//! The quarantine's and redzones' fault trap. A raw access (ctypes, a numpy view made from
//! a stale pointer) to a quarantined block's or a redzone's `PROT_NONE` pages raises `SIGSEGV`; the handler finds
//! the block in a table of [`Slot`]s, writes its report (pre-rendered when the pages were
//! protected: where the block was allocated and freed) and the summary to stderr, and exits
//! with `NPURT_SANITIZER_EXITCODE` (1 if unset) — a report, not a segfault. A fault
//! anywhere else puts the previous handler back and returns: the access faults again and
//! that handler (or the default action) runs.
//!
//! A slot is a seqlock: one writer at a time (memcheck's lock), readers in the handler
//! that may interrupt the writer on any thread, so nothing in the handler locks or
//! allocates. `make loom` checks that a reader sees a whole slot or nothing.
//!
//! With `NPURT_SANITIZER_JSON` set, the handler also writes the JSON report: the findings
//! so far (re-rendered into a slot of their own at each new finding, [`so_far`]) and the
//! trap's finding (pre-rendered with its text), with `open`/`write`/`close` only.

use crate::sync::{fence, AtomicU32, AtomicU64};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// Slots (protected blocks that can trap at once; more blocks stay quarantined unprotected).
pub(super) const SLOTS: usize = 64;
/// Words of report text per slot (8 bytes each).
#[cfg(not(loom))]
const WORDS: usize = 160;
#[cfg(loom)]
const WORDS: usize = 4;
/// Words of a trap slot's JSON finding, of the findings so far, of the JSON file's path.
const JSON_WORDS: usize = 512;
const SO_FAR_WORDS: usize = 8192;
/// Bytes of the findings so far the trap can write.
pub(super) const SO_FAR_BYTES: usize = SO_FAR_WORDS * 8;
#[cfg(not(loom))]
const PATH_WORDS: usize = 64;

pub(super) struct Slot<const W: usize = WORDS> {
    seq: AtomicU32,
    start: AtomicU64,
    len: AtomicU64,
    text_len: AtomicU64,
    text: [AtomicU64; W],
}

impl<const W: usize> Slot<W> {
    /// Bytes of text a slot holds.
    pub(super) const CAPACITY: usize = W * 8;

    #[cfg(not(loom))]
    const fn new() -> Self {
        #[allow(clippy::declare_interior_mutable_const)]
        const ZERO: AtomicU64 = AtomicU64::new(0);
        Slot {
            seq: AtomicU32::new(0),
            start: AtomicU64::new(0),
            len: AtomicU64::new(0),
            text_len: AtomicU64::new(0),
            text: [ZERO; W],
        }
    }

    #[cfg(loom)]
    pub(super) fn new() -> Self {
        Slot {
            seq: AtomicU32::new(0),
            start: AtomicU64::new(0),
            len: AtomicU64::new(0),
            text_len: AtomicU64::new(0),
            text: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Makes `[start, start + len)` trap with `text` (cut to the slot's size); `len` 0
    /// empties the slot. One writer at a time.
    pub(super) fn publish(&self, start: u64, len: u64, text: &[u8]) {
        let s = self.seq.load(Relaxed);
        self.seq.store(s.wrapping_add(1), Relaxed); // odd: being written
        fence(Release);
        self.start.store(start, Relaxed);
        self.len.store(len, Relaxed);
        let n = text.len().min(W * 8);
        for (i, chunk) in text[..n].chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.text[i].store(u64::from_le_bytes(w), Relaxed);
        }
        self.text_len.store(n as u64, Relaxed);
        self.seq.store(s.wrapping_add(2), Release);
    }

    /// The text of this slot if it covers `addr`, copied into `out` as it was published
    /// (never half of two publications); its length.
    pub(super) fn read(&self, addr: u64, out: &mut [u8]) -> Option<usize> {
        let s1 = self.seq.load(Acquire);
        if s1 & 1 == 1 {
            return None;
        }
        let (start, len) = (self.start.load(Relaxed), self.len.load(Relaxed));
        let n = (self.text_len.load(Relaxed) as usize).min(W * 8).min(out.len() / 8 * 8);
        for i in 0..n.div_ceil(8) {
            out[i * 8..i * 8 + 8].copy_from_slice(&self.text[i].load(Relaxed).to_le_bytes());
        }
        fence(Acquire);
        let hit = addr >= start && addr - start < len;
        (self.seq.load(Relaxed) == s1 && hit).then_some(n)
    }
}

#[cfg(not(loom))]
pub(super) use handler::{arm, json_slot, slot, so_far};

/// The loom build has no process-wide table (loom atomics live inside a model): memcheck
/// never protects pages there (`sweep` returns first), so these are never reached.
#[cfg(loom)]
pub(super) fn slot(_i: usize) -> &'static Slot {
    unreachable!("no trap table under loom")
}
#[cfg(loom)]
pub(super) fn json_slot(_i: usize) -> &'static Slot<JSON_WORDS> {
    unreachable!("no trap table under loom")
}
#[cfg(loom)]
pub(super) fn so_far() -> Option<&'static Slot<SO_FAR_WORDS>> {
    None
}
#[cfg(loom)]
pub(super) fn arm() {}

#[cfg(not(loom))]
mod handler {
    use super::{Slot, JSON_WORDS, PATH_WORDS, SLOTS, SO_FAR_WORDS, WORDS};
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::Relaxed};
    use std::sync::OnceLock;

    static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
    static JSON: [Slot<JSON_WORDS>; SLOTS] = [const { Slot::new() }; SLOTS];
    static SO_FAR: Slot<SO_FAR_WORDS> = Slot::new();
    static PATH: Slot<PATH_WORDS> = Slot::new();
    static WANT_JSON: AtomicBool = AtomicBool::new(false);
    static EXIT: AtomicI32 = AtomicI32::new(1);
    static OLD: OnceLock<libc::sigaction> = OnceLock::new();

    pub(crate) fn slot(i: usize) -> &'static Slot {
        &TABLE[i]
    }

    /// The JSON finding of trap slot `i` (published over the same range).
    pub(crate) fn json_slot(i: usize) -> &'static Slot<JSON_WORDS> {
        &JSON[i]
    }

    /// The findings so far, as the start of the JSON report (`None`: no JSON file wanted
    /// or no trap armed yet).
    pub(crate) fn so_far() -> Option<&'static Slot<SO_FAR_WORDS>> {
        WANT_JSON.load(Relaxed).then_some(&SO_FAR)
    }

    /// Installs the handler unless it is the current one (someone may have installed
    /// theirs since: it becomes the one a foreign fault goes to).
    pub(crate) fn arm() {
        let code = std::env::var("NPURT_SANITIZER_EXITCODE")
            .ok()
            .and_then(|v| v.trim().parse::<i32>().ok())
            .filter(|c| *c != 0)
            .unwrap_or(1);
        EXIT.store(code, Relaxed);
        if let Some(path) = std::env::var_os("NPURT_SANITIZER_JSON").filter(|p| !p.is_empty()) {
            let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
            if bytes.len() < PATH_WORDS * 8 && !WANT_JSON.swap(true, Relaxed) {
                PATH.publish(0, u64::MAX, bytes);
                super::super::report::refresh_trap_json();
            }
        }
        // SAFETY: a zeroed sigaction is a valid "query" buffer; sigaction only reads `act`
        // and writes `old`, both live locals.
        unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut cur);
            if cur.sa_sigaction == on_segv as *const () as usize {
                return;
            }
            let _ = OLD.set(cur);
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_segv as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGSEGV, &act, std::ptr::null_mut());
        }
    }

    fn put(s: &[u8]) {
        // SAFETY: write(2) of a live buffer; async-signal-safe.
        unsafe { libc::write(2, s.as_ptr().cast(), s.len()) };
    }

    /// `0x…` of `v` into `out` (no allocation: runs in a signal handler).
    fn hex(v: u64, out: &mut [u8; 18]) -> &[u8] {
        out[0] = b'0';
        out[1] = b'x';
        let digits = (64 - v.leading_zeros()).div_ceil(4).max(1) as usize;
        for i in 0..digits {
            let d = ((v >> (4 * (digits - 1 - i))) & 0xf) as u8;
            out[2 + i] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
        }
        &out[..2 + digits]
    }

    /// The JSON report: the findings so far and trap slot `i`'s (async-signal-safe).
    fn write_json(i: usize, addr: u64) {
        if !WANT_JSON.load(Relaxed) {
            return;
        }
        let mut path = [0u8; PATH_WORDS * 8 + 8];
        let mut so_far = [0u8; SO_FAR_WORDS * 8];
        let mut item = [0u8; JSON_WORDS * 8];
        let (Some(np), Some(ns), Some(ni)) = (
            PATH.read(0, &mut path[..PATH_WORDS * 8]),
            SO_FAR.read(0, &mut so_far),
            JSON[i].read(addr, &mut item),
        ) else {
            return;
        };
        path[np] = 0;
        // SAFETY: open/write/close are async-signal-safe; `path` is NUL-terminated.
        unsafe {
            let fd = libc::open(
                path.as_ptr().cast(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                0o644,
            );
            if fd < 0 {
                return;
            }
            for part in [&so_far[..ns], &item[..ni], b"]}\n"] {
                libc::write(fd, part.as_ptr().cast(), part.len());
            }
            libc::close(fd);
        }
    }

    extern "C" fn on_segv(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
        // SAFETY: an SA_SIGINFO handler gets a valid siginfo from the kernel.
        let addr = unsafe { (*info).si_addr() } as u64;
        let mut text = [0u8; WORDS * 8];
        for (i, s) in TABLE.iter().enumerate() {
            if let Some(n) = s.read(addr, &mut text) {
                write_json(i, addr);
                let mut h = [0u8; 18];
                put(b"========= Error: Invalid access at ");
                put(hex(addr, &mut h));
                put(b": ");
                put(&text[..n]); // why the page traps (a freed block, a redzone), then its report
                put(b"========= ERROR SUMMARY: at least 1 errors (the program stopped at this access)\n");
                // SAFETY: _exit is async-signal-safe and ends the process at once.
                unsafe { libc::_exit(EXIT.load(Relaxed)) };
            }
        }
        if let Some(old) = OLD.get() {
            // SAFETY: restores the handler found at install time (a copy of what the
            // kernel gave us); the faulting access then runs into it.
            unsafe { libc::sigaction(libc::SIGSEGV, old, std::ptr::null_mut()) };
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::Arc;

    /// A handler reading while the block is republished sees the old block's text, the new
    /// one's, or nothing — never a mix, never the old range with the new text.
    #[test]
    fn loom_a_trap_slot_is_read_whole_or_not_at_all() {
        loom::model(|| {
            let s = Arc::new(Slot::<WORDS>::new());
            s.publish(100, 10, b"AAAAAAAAA1");
            let w = {
                let s = s.clone();
                loom::thread::spawn(move || s.publish(200, 10, b"BBBBBBBBB2"))
            };
            let mut out = [0u8; WORDS * 8];
            if let Some(n) = s.read(105, &mut out) {
                assert_eq!(&out[..n], b"AAAAAAAAA1");
            }
            if let Some(n) = s.read(205, &mut out) {
                assert_eq!(&out[..n], b"BBBBBBBBB2");
            }
            w.join().unwrap();
            assert_eq!(s.read(205, &mut out), Some(10));
            assert_eq!(s.read(105, &mut out), None);
        });
    }
}
