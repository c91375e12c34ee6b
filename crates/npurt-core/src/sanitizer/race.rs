//! racecheck: accesses to byte ranges by tasks and host threads, checked against vector
//! clocks ([`clock`](super::clock)). Two accesses to overlapping bytes, at least one a
//! write, by different participants, neither known to happen before the other, are a race.
//!
//! What counts as an access: a copy or memset (its source read, its destination written),
//! a device-array kernel (its inputs' byte spans read, its output's written), a copy on the
//! calling thread, a numpy view or buffer export of npurt memory (a host write: the
//! runtime cannot see what the host then does through it), `to_host`'s read-only view (a
//! host read of the array's byte span). A host callback's accesses are
//! its task's. The shadow of a block is forgotten when the block goes back to its pool
//! (the pool hands it out again only after every task using it ran).

use super::clock::{History, VClock, HOST};
use super::race_report::{publish, Race};
use super::tool::Tool;
use crate::memory::events::{MemAction, MemEvent, MemObserver};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Shadow records kept (beyond this the oldest history is dropped: races may be missed).
const MAX_RECORDS: usize = 1 << 20;

/// One byte range a task or host step touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub start: usize,
    pub len: usize,
    pub write: bool,
}

#[derive(Clone)]
pub(super) struct Rec {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) write: bool,
    pub(super) who: u64,
    pub(super) tick: u64,
    pub(super) site: u32,
    pub(super) what: Arc<str>,
}

struct Host {
    steps: u64,
    clock: VClock,
    tid: u64,
}

#[derive(Default)]
pub(super) struct State {
    streams: HashMap<u64, History>,
    hosts: HashMap<u64, Host>,
    shadow: BTreeMap<(usize, u64), Rec>,
    max_len: usize,
    uid: u64,
    /// Device allocations seen on the memory hook: base → (size, allocation stack).
    allocs: BTreeMap<usize, (usize, u32)>,
}

/// Accesses staged for the next task: `(stream, what, accesses)`.
type Staged = (u64, Arc<str>, Vec<Access>);

pub(super) static STATE: Tool<State> = Tool::new(super::RACECHECK);
static NEXT_HOST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

thread_local! {
    /// This host thread's participant id (0: none yet).
    static HOST_ID: Cell<u64> = const { Cell::new(0) };
    /// On a callback thread, the callback's task `(stream, pos)`.
    static CALLBACK: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
    /// The accesses of the next kernel or copy this thread queues on a stream.
    static STAGED: RefCell<Option<Staged>> = const { RefCell::new(None) };
}

pub(super) fn start() {
    STATE.start(State::default, Some(|| Arc::new(Blocks)));
}

pub(super) fn stop() {
    STATE.stop();
}

/// Forgets blocks going back to their pools; remembers new ones' allocation stacks.
struct Blocks;

impl MemObserver for Blocks {
    fn on_mem_event(&self, e: &MemEvent) {
        match e.action {
            MemAction::Alloc => {
                // file:line only (cached): arrays are allocated in loops
                let site = if crate::thread_role::is_runtime_thread() {
                    0
                } else {
                    crate::profiler::site::capture(false, false)
                };
                STATE.with(|st| {
                    st.forget(e.addr, e.size);
                    st.allocs.insert(e.addr, (e.size, site));
                });
            }
            MemAction::Free => {
                STATE.with(|st| {
                    st.forget(e.addr, e.size);
                    st.allocs.remove(&e.addr);
                });
            }
            _ => {}
        }
    }
}

/// Pinned or other memory at `[start, start + len)` went back to its allocator.
pub fn forget(start: usize, len: usize) {
    STATE.with(|st| st.forget(start, len));
}

/// Stream `stream`'s tasks from position `first` on were dropped (a forced destroy): they
/// never run, so their accesses are forgotten (what they had superseded stays forgotten:
/// races with it may be missed, none is invented).
pub(super) fn dropped(stream: u64, first: u64) {
    STATE.with(|st| st.shadow.retain(|_, r| r.who != stream || r.tick <= first));
}

/// The accesses of the next kernel or copy this thread queues on stream `stream`.
pub fn stage(stream: u64, what: &str, accesses: Vec<Access>) {
    if super::enabled(super::RACECHECK | super::INITCHECK) {
        STAGED.with(|s| *s.borrow_mut() = Some((stream, Arc::from(what), accesses)));
    }
}

fn host_id() -> u64 {
    HOST_ID.with(|h| {
        if h.get() == 0 {
            h.set(HOST | NEXT_HOST.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        }
        h.get()
    })
}

/// Task `pos` was queued on stream `stream` by this thread (launch site `site`; `staged`:
/// a kernel or copy, which takes the staged accesses).
pub(super) fn submitted(stream: u64, pos: u64, site: u32, staged: bool) {
    let acc = if staged {
        STAGED.with(|s| s.borrow_mut().take_if(|(id, _, _)| *id == stream))
    } else {
        None
    };
    if let Some((_, what, list)) = acc.as_ref().filter(|_| super::enabled(super::INITCHECK)) {
        super::init::accesses(list, what, site);
    }
    let cb = CALLBACK.with(Cell::get);
    let hid = host_id();
    let found = STATE.with(|st| {
        // Program order: what this thread did before happens before the task.
        let before = match cb {
            Some((s, p)) => st.stream(s).at_task(s, p),
            None => st.host(hid).clock_now(hid),
        };
        st.stream(stream).merge_from(pos, &before);
        let Some((_, what, list)) = acc else { return Vec::new() };
        let k = st.streams[&stream].at_task(stream, pos);
        let mut found = Vec::new();
        for a in list {
            st.access(&mut found, a, stream, pos + 1, &k, site, &what);
        }
        found
    });
    publish(found.unwrap_or_default());
}

/// Stream `waiter` (next task: `from`) waits for the first `count` tasks of `on`.
pub(super) fn wait(waiter: u64, from: u64, on: u64, count: u64) {
    STATE.with(|st| {
        let k = st.stream(on).at_count(on, count);
        st.stream(waiter).merge_from(from, &k);
    });
}

/// This host thread saw the first `count` tasks of `stream` complete (a sync).
pub(super) fn host_sync(stream: u64, count: u64) {
    let hid = host_id();
    STATE.with(|st| {
        let k = st.stream(stream).at_count(stream, count);
        st.host(hid).clock.merge(&k);
    });
}

/// A host callback (task `pos` of `stream`) starts on this thread.
pub(super) fn callback_enter(stream: u64, pos: u64) {
    CALLBACK.with(|c| c.set(Some((stream, pos))));
}

/// The callback task this (engine) thread runs, if any.
pub fn in_callback() -> Option<(u64, u64)> {
    CALLBACK.with(Cell::get)
}

/// This host thread runs a callback on behalf of the callback task `task` (pyACL's
/// `process_report` runs what a stream's host task handed it), or (`None`) is done with
/// it; returns the previous setting. A thread done with a task is ordered after it.
pub fn run_as(task: Option<(u64, u64)>) -> Option<(u64, u64)> {
    let prev = CALLBACK.with(|c| c.replace(task));
    if let (None, Some((s, p))) = (task, prev) {
        host_sync(s, p + 1);
    }
    prev
}

/// The host (this thread) touches `[start, start + len)`; `what` says how.
pub fn host_access(start: usize, len: usize, write: bool, what: &str) {
    if len == 0 || !super::enabled(super::RACECHECK | super::INITCHECK) {
        return;
    }
    let site = crate::profiler::site::capture(false, false);
    if super::enabled(super::INITCHECK) {
        super::init::accesses(&[Access { start, len, write }], what, site);
    }
    let cb = CALLBACK.with(Cell::get);
    let hid = host_id();
    let a = Access { start, len, write };
    let what: Arc<str> = Arc::from(what);
    let found = STATE.with(|st| {
        let mut found = Vec::new();
        match cb {
            Some((s, p)) => {
                let k = st.stream(s).at_task(s, p);
                st.access(&mut found, a, s, p + 1, &k, site, &what);
            }
            None => {
                let h = st.host(hid);
                h.steps += 1;
                let (tick, k) = (h.steps, h.clock_now(hid));
                st.access(&mut found, a, hid, tick, &k, site, &what);
            }
        }
        found
    });
    publish(found.unwrap_or_default());
}

impl Host {
    fn clock_now(&self, id: u64) -> VClock {
        let mut k = self.clock.clone();
        k.raise(id, self.steps);
        k
    }
}

impl State {
    fn stream(&mut self, id: u64) -> &mut History {
        self.streams.entry(id).or_default()
    }

    /// Host thread `id`'s state. A thread seen for the first time starts after everything
    /// the other host threads did so far (threads are started by a thread that prepared
    /// their data: the start orders them, though the runtime cannot see it).
    fn host(&mut self, id: u64) -> &mut Host {
        if !self.hosts.contains_key(&id) {
            let mut clock = VClock::default();
            for (other, h) in &self.hosts {
                clock.merge(&h.clock_now(*other));
            }
            let tid = crate::profiler::thread_id();
            self.hosts.insert(id, Host { steps: 0, clock, tid });
        }
        self.hosts.get_mut(&id).expect("inserted above")
    }

    fn forget(&mut self, start: usize, len: usize) {
        let end = start.saturating_add(len);
        let keys: Vec<(usize, u64)> = self
            .shadow
            .range((start, 0)..(end, 0))
            .filter(|(_, r)| r.end <= end)
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.shadow.remove(&k);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn access(
        &mut self,
        found: &mut Vec<Race>,
        a: Access,
        who: u64,
        tick: u64,
        k: &VClock,
        site: u32,
        what: &Arc<str>,
    ) {
        let (start, end) = (a.start, a.start.saturating_add(a.len));
        let rec = Rec {
            start,
            end,
            write: a.write,
            who,
            tick,
            site,
            what: what.clone(),
        };
        let lo = start.saturating_sub(self.max_len);
        let mut covered = Vec::new();
        for (key, r) in self.shadow.range((lo, 0)..(end, 0)) {
            if r.end <= start {
                continue;
            }
            let conflict = r.who != who && (r.write || a.write) && !k.covers(r.who, r.tick);
            if conflict {
                found.push(Race {
                    first: r.clone(),
                    second: rec.clone(),
                    alloc: None,
                });
            }
            // Superseded: a write hides everything it covers, a read the same
            // participant's reads (CSAN keeps the last write and the reads since).
            if r.start >= start && r.end <= end && (a.write || (!r.write && r.who == who)) {
                covered.push(*key);
            }
        }
        for key in covered {
            self.shadow.remove(&key);
        }
        if self.shadow.len() >= MAX_RECORDS {
            self.shadow.clear();
            self.max_len = 0;
        }
        self.uid += 1;
        self.max_len = self.max_len.max(end - start);
        self.shadow.insert((start, self.uid), rec);
        for f in found.iter_mut().filter(|f| f.alloc.is_none()) {
            f.alloc = self
                .allocs
                .range(..=start)
                .next_back()
                .filter(|(b, (n, _))| start < *b + *n)
                .map(|(b, (n, s))| (*b, *n, *s));
        }
    }

    pub(super) fn who(&self, who: u64) -> String {
        if who & HOST != 0 {
            let tid = self.hosts.get(&who).map_or(0, |h| h.tid);
            format!("host thread {tid}")
        } else {
            format!("stream {who}")
        }
    }
}
