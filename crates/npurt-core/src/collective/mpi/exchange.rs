//! One rank's side of the `mpi` backend's first exchange (every collective's headers; the
//! whole collective on the one-phase path; then a two-phase call's data: `data.rs`):
//! persistent receives into inbox rows, one `MPI_Isend` per peer, a poll loop with a
//! deadline that also watches the abort notice, the header check, the local completion.
//! Anything unusual is an [`Outcome`] the Python side turns into its usual error.

use super::super::types::Region;
use super::data::DataPhase;
use super::ffi::{DataHandles, Handles, MpiLib};
use super::plan::{self, Call, Msg};
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Polls yield the core between them for this long after the hot window (`_SPIN_S`), then sleep.
const SPIN: Duration = Duration::from_millis(2);
/// The data phase (every rank arrived) yields this long before sleeping (`_DATA_SPIN_S`):
/// MPI's non-blocking collectives progress only inside MPI calls.
const DATA_SPIN: Duration = Duration::from_millis(50);
/// In the hot window the abort notice is read every this many polls (from the first), the
/// clock (deadline, window) every `CLOCK_EVERY`: 1 KiB all_reduce, perf, both were ~5 %.
const NOTICE_EVERY: u32 = 16;
const CLOCK_EVERY: u32 = 8;

/// How an exchange ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every message came, the headers agree, the collective is complete.
    Done,
    /// The deadline passed; the peers (group ranks) whose message has not come (none: the
    /// data phase stalled after every rank arrived).
    Timeout(Vec<u32>),
    /// Every message came but the headers differ ([`Exchange::headers`] has them).
    Desync,
    /// The abort-notice receive completed (still pending: `MPI_Request_get_status` does
    /// not complete it); the exchange may be resumed ([`Exchange::resume`]).
    Notice,
    /// The interrupt check said stop (a signal); the exchange is abandoned.
    Interrupted,
    /// An MPI call returned this error code; the exchange is abandoned.
    Mpi(i32),
}

/// This rank's side of a group's first exchanges. A started exchange that did not end in
/// `Done` / `Desync` leaves MPI owning the buffers: they are then never freed.
pub struct Exchange {
    lib: Arc<MpiLib>,
    h: Handles,
    tag: c_int,
    pub(super) rank: usize,
    pub(super) n: usize,
    row: usize,
    hot: Duration,
    inbox: Vec<u8>,
    outbox: Vec<u8>,
    reqs: Vec<u64>,
    statuses: Vec<u64>,
    indices: Vec<c_int>,
    got: Vec<bool>,
    left: usize,
    pub(super) active: bool,
    pub(super) closed: bool,
    call: Option<(Call, Option<Region>)>,
    /// The two-phase call's buffers, for its data phase once the headers agree.
    pub(super) planned: Option<(Option<Region>, Option<Region>)>,
    pub(super) dh: Option<DataHandles>,
    data: DataPhase,
    in_data: bool,
}

/// An MPI return code as a Result (0: `MPI_SUCCESS`).
pub(super) fn check(code: c_int) -> Result<(), i32> {
    (code == 0).then_some(()).ok_or(code)
}

impl Exchange {
    /// Posts (inactive) persistent receives of `row` bytes (the largest message) from every
    /// peer on the communicator `h.comm`, tag `tag`. `hot`: how long polls run back to back.
    pub fn new(
        lib: Arc<MpiLib>,
        h: Handles,
        rank: usize,
        n: usize,
        tag: i32,
        row: usize,
        hot: Duration,
    ) -> Result<Exchange, i32> {
        assert!(rank < n && row >= plan::HEADER_BYTES && row <= i32::MAX as usize);
        let nreq = 2 * (n - 1);
        let words = |bytes: usize| bytes.div_ceil(8);
        let mut x = Exchange {
            lib,
            h,
            tag,
            rank,
            n,
            row,
            hot,
            inbox: vec![0; n * row],
            outbox: Vec::new(),
            reqs: vec![0; words(nreq * h.request_size)],
            statuses: vec![0; words(nreq.max(1) * h.status_size)],
            indices: vec![0; nreq],
            got: vec![false; n],
            left: 0,
            active: false,
            closed: false,
            call: None,
            planned: None,
            dh: None,
            data: DataPhase::new(n, &h),
            in_data: false,
        };
        for (i, p) in (0..n).filter(|&p| p != rank).enumerate() {
            let buf = x.inbox[p * row..].as_mut_ptr().cast::<c_void>();
            let req = x.req(i);
            // SAFETY: `buf` is row `p` of the inbox (`row` bytes, owned by `x`, freed only
            // when no receive is active: see Drop); `req` points at a request slot of
            // `request_size` bytes; the handles are mpi4py's for this communicator.
            check(unsafe { (x.lib.recv_init)(buf, row as c_int, h.byte, p as c_int, tag, h.comm, req) })?;
        }
        Ok(x)
    }

    /// Request slot `i` (recvs: 0..n-1 in peer order, sends: n-1..2n-2).
    fn req(&mut self, i: usize) -> *mut c_void {
        debug_assert!(i < 2 * (self.n - 1));
        self.reqs
            .as_mut_ptr()
            .cast::<u8>()
            .wrapping_add(i * self.h.request_size)
            .cast()
    }

    /// Starts `call`: fills this rank's row (and the outbox), starts the receives, sends
    /// every peer its message, then polls as [`Exchange::resume`]. `send`: the input
    /// (broadcast: the root's buffer), `recv`: the output, completed on `Done`; `notice`:
    /// the abort-notice receive's handle (0: none); `interrupt`: called between sleeps.
    pub fn run(
        &mut self,
        call: Call,
        send: Option<&Region>,
        recv: Option<Region>,
        deadline: Instant,
        notice: usize,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Outcome {
        self.start(call, send, recv, None, deadline, notice, interrupt)
    }

    /// [`Exchange::run`]; `planned`: a two-phase call's buffers for its data phase
    /// ([`Exchange::run_two_phase`]), kept once the exchange started.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start(
        &mut self,
        call: Call,
        send: Option<&Region>,
        recv: Option<Region>,
        planned: Option<(Option<Region>, Option<Region>)>,
        deadline: Instant,
        notice: usize,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Outcome {
        let (n, row, rank) = (self.n, self.row, self.rank);
        // (-1: a message larger than the receive rows; -2: an exchange pending, or closed)
        if call.eager && plan::HEADER_BYTES + call.peer_bytes(n) > row {
            return Outcome::Mpi(-1);
        }
        if self.active || self.closed {
            return Outcome::Mpi(-2);
        }
        self.planned = planned;
        if call.eager && plan::per_peer_chunk(call.kind) && self.outbox.is_empty() {
            self.outbox = vec![0; (n - 1) * row];
        }
        let input: &[u8] = match send {
            // SAFETY: a Region is `len` readable bytes kept alive by its owner (`keep`, or
            // the caller for the duration of this call); nothing writes them meanwhile
            // (the stream ordering); the slice is dropped before any MPI call.
            Some(r) if r.len > 0 => unsafe { std::slice::from_raw_parts(r.addr as *const u8, r.len) },
            _ => &[],
        };
        let msgs = plan::fill(
            &call,
            rank,
            n,
            input,
            &mut self.inbox[rank * row..(rank + 1) * row],
            &mut self.outbox,
            row,
        );
        self.got.iter_mut().for_each(|g| *g = false);
        self.got[rank] = true;
        self.left = 2 * (n - 1);
        self.active = true;
        self.call = Some((call, recv));
        let r0 = self.req(0);
        // SAFETY: slots 0..n-1 hold the persistent receives made in `new`, inactive.
        if let Err(e) = check(unsafe { (self.lib.startall)((n - 1) as c_int, r0) }) {
            return Outcome::Mpi(e);
        }
        for (i, (p, m)) in msgs.into_iter().enumerate() {
            let (ptr, len) = match m {
                Msg::Own(len) => (self.inbox[rank * row..].as_ptr(), len),
                Msg::Chunk(j, len) => (self.outbox[j * row..].as_ptr(), len),
            };
            let (req, h, (tag, p, len)) = (self.req(n - 1 + i), self.h, (self.tag, p as c_int, len as c_int));
            // SAFETY: `ptr` is `len` bytes of this object's rows, not written until the
            // send completed (the next `run` starts only after every request completed,
            // else the buffers are never freed); `req` a send slot.
            if let Err(e) = check(unsafe { (self.lib.isend)(ptr.cast(), len, h.byte, p, tag, h.comm, req) }) {
                return Outcome::Mpi(e);
            }
        }
        self.resume(deadline, notice, interrupt)
    }

    /// Polls the started exchange until every message came (then checks the headers and
    /// completes the collective, or posts its data phase and polls that), `deadline`
    /// passes or the notice receive completed: back to back for the hot window, then
    /// yielding the core until [`SPIN`] ([`DATA_SPIN`] in the data phase), then sleeping
    /// (20 µs doubling to 1 ms).
    pub fn resume(&mut self, deadline: Instant, notice: usize, interrupt: &mut dyn FnMut() -> bool) -> Outcome {
        if !self.active {
            return Outcome::Mpi(-2);
        }
        let mut t0 = Instant::now();
        let mut pause = Duration::ZERO;
        let mut spin = if self.in_data { DATA_SPIN } else { SPIN };
        let nreq = 2 * (self.n - 1);
        // hot window: the notice and the clock every few polls (MPI calls take locks)
        let (mut polls, mut hot) = (0u32, !self.hot.is_zero());
        loop {
            polls = polls.wrapping_add(1);
            if self.in_data {
                match self.data.poll(&self.lib, &self.h) {
                    Err(e) => return Outcome::Mpi(e),
                    Ok(true) => {
                        self.in_data = false;
                        self.active = false;
                        return Outcome::Done;
                    }
                    Ok(false) => {}
                }
            } else if self.left > 0 {
                let mut out: c_int = 0;
                let r0 = self.req(0);
                // SAFETY: `nreq` request slots (active, inactive persistent or null), as
                // many index ints and status slots of `status_size` bytes.
                let code = unsafe {
                    (self.lib.testsome)(
                        nreq as c_int,
                        r0,
                        &mut out,
                        self.indices.as_mut_ptr(),
                        self.statuses.as_mut_ptr().cast(),
                    )
                };
                if let Err(e) = check(code) {
                    return Outcome::Mpi(e);
                }
                if out != self.h.undefined && out > 0 {
                    for &i in &self.indices[..out as usize] {
                        let i = i as usize;
                        if i < self.n - 1 {
                            let p = if i < self.rank { i } else { i + 1 };
                            self.got[p] = true;
                        }
                        self.left -= 1;
                    }
                }
            }
            if notice != 0 && (!hot || polls % NOTICE_EVERY == 1) {
                let mut flag: c_int = 0;
                // SAFETY: `notice` is a live request handle of this process (mpi4py's
                // abort-notice receive; get_status neither completes nor frees it); the
                // status slot 0 has `status_size` bytes.
                let code =
                    unsafe { (self.lib.request_get_status)(notice, &mut flag, self.statuses.as_mut_ptr().cast()) };
                if let Err(e) = check(code) {
                    return Outcome::Mpi(e);
                }
                if flag != 0 {
                    return Outcome::Notice;
                }
            }
            if !self.in_data && self.left == 0 {
                match self.complete() {
                    Some(o) => return o,
                    None => {
                        (t0, pause, spin, hot) = (Instant::now(), Duration::ZERO, DATA_SPIN, !self.hot.is_zero());
                        continue;
                    }
                }
            }
            if hot && polls % CLOCK_EVERY != 0 {
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Outcome::Timeout(self.missing());
            }
            let e = now - t0;
            hot = e < self.hot;
            if hot {
                continue;
            }
            if e < spin {
                std::thread::yield_now();
            } else {
                if interrupt() {
                    return Outcome::Interrupted;
                }
                pause = (pause * 2)
                    .clamp(Duration::from_micros(20), Duration::from_millis(1))
                    .min(deadline - now);
                std::thread::sleep(pause);
            }
        }
    }

    /// The headers came: the outcome, or None once the data phase was posted.
    fn complete(&mut self) -> Option<Outcome> {
        let (call, recv) = self.call.take().expect("a started call");
        if !plan::headers_agree(self.n, &self.inbox, self.row) {
            self.active = false;
            self.planned = None;
            return Some(Outcome::Desync);
        }
        if let Some(bufs) = self.planned.take() {
            let dh = self.dh.expect("run_two_phase checked it");
            if let Err(e) = self.data.post(&self.lib, &self.h, &dh, &call, self.rank, self.n, bufs) {
                return Some(Outcome::Mpi(e));
            }
            self.in_data = true;
            return None;
        }
        self.active = false;
        if call.eager {
            let out: &mut [u8] = match &recv {
                // SAFETY: the receive Region is `len` writable bytes kept alive by its
                // owner, written by nobody else meanwhile (the stream ordering); it is not
                // the inbox (this object's own memory).
                Some(r) if r.len > 0 => unsafe { std::slice::from_raw_parts_mut(r.addr as *mut u8, r.len) },
                _ => &mut [],
            };
            plan::finish(&call, self.rank, self.n, &self.inbox, self.row, out);
        }
        Some(Outcome::Done)
    }

    /// The peers whose message has not come (in the pending exchange).
    pub fn missing(&self) -> Vec<u32> {
        (0..self.n).filter(|&p| !self.got[p]).map(|p| p as u32).collect()
    }

    /// Every rank's header as received (row p: rank p's; this rank's own included).
    pub fn headers(&self) -> Vec<u8> {
        (0..self.n)
            .flat_map(|p| {
                self.inbox[p * self.row..p * self.row + plan::HEADER_BYTES]
                    .iter()
                    .copied()
            })
            .collect()
    }

    /// Whether an exchange was started and has not ended (its buffers belong to MPI).
    pub fn pending(&self) -> bool {
        self.active
    }

    /// Frees the persistent receives (nothing pending; MPI still initialised).
    pub fn close(&mut self) -> Result<(), i32> {
        if self.active || self.closed {
            return Ok(());
        }
        self.closed = true;
        for i in 0..self.n - 1 {
            let req = self.req(i);
            // SAFETY: slot `i` holds an inactive persistent receive made in `new`.
            check(unsafe { (self.lib.request_free)(req) })?;
        }
        Ok(())
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        if self.active {
            // MPI may still write the inbox and read the rows: never free them.
            std::mem::forget(std::mem::take(&mut self.inbox));
            std::mem::forget(std::mem::take(&mut self.outbox));
            std::mem::forget(std::mem::take(&mut self.reqs));
            std::mem::forget(std::mem::take(&mut self.statuses));
            std::mem::forget(std::mem::replace(&mut self.data, DataPhase::new(2, &self.h)));
            std::mem::forget(self.planned.take());
        }
    }
}
