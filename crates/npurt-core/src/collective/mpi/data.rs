//! The `mpi` backend's second phase in native code: once every rank's header came and
//! agreed ([`super::Exchange`]), the collective's data on the data communicator, on the
//! arrays' own memory (device memory is host memory), with one of MPI's non-blocking calls
//! (`MPI_Ibcast`, `MPI_Ialltoall`, `MPI_Iallreduce`, ...) or, for all_gather in groups of
//! up to [`P2P_GATHER_MAX`] ranks, one `MPI_Irecv` from and one `MPI_Isend` to every peer
//! plus a local copy (Open MPI's non-blocking all_gather took 1.5-2.5x its blocking one on
//! 2 ranks; docs/BENCH.md). Before this phase ran here, `_mpi_data.py` made the same calls
//! from Python at ~10 µs a call; it still runs what [`native_data`] refuses (float16 /
//! bfloat16 folds, AVG, buffers over MPI's `int` counts).

use super::super::types::{CollKind, HcclDataType, ReduceOp, Region};
use super::exchange::{check, Exchange, Outcome};
use super::ffi::{DataHandles, Handles, MpiLib};
use super::plan::Call;
use std::ffi::{c_int, c_void};
use std::time::Instant;

/// all_gather is point to point in groups of up to this many ranks (the default of
/// [`DataHandles::p2p_gather_max`]).
pub const P2P_GATHER_MAX: usize = 8;
/// The tag of all_gather's point-to-point messages on the data communicator.
pub const GATHER_TAG: c_int = 7105;

/// Whether MPI reduces `dtype` with `op` itself (float16 / bfloat16 and AVG are folded or
/// divided on the host by `_mpi_data.py`).
fn mpi_reduces(dtype: HcclDataType, op: ReduceOp) -> bool {
    !matches!(dtype, HcclDataType::Fp16 | HcclDataType::Bfp16) && op != ReduceOp::Avg
}

/// Whether the data phase of the two-phase call `c` runs here: a function of its header
/// and the group size only, so every rank whose header agrees decides the same.
pub fn native_data(c: &Call, n: usize) -> bool {
    let kind_ok = match c.kind {
        CollKind::Barrier | CollKind::Broadcast | CollKind::AllGather | CollKind::AllToAll => true,
        CollKind::AllReduce | CollKind::Reduce | CollKind::ReduceScatter => mpi_reduces(c.dtype, c.op),
        CollKind::Send | CollKind::Recv => false,
    };
    let bytes = (c.count as u128) * (c.dtype.size() as u128);
    let root_ok = !matches!(c.kind, CollKind::Broadcast | CollKind::Reduce) || (c.root as usize) < n;
    kind_ok && root_ok && n >= 2 && bytes <= i32::MAX as u128
}

/// Bytes the send and the receive buffer need for `c` on rank `rank` of `n` (0: unused).
pub(super) fn buffer_bytes(c: &Call, rank: usize, n: usize) -> (usize, usize) {
    let b = c.count as usize * c.dtype.size();
    match c.kind {
        CollKind::Barrier | CollKind::Send | CollKind::Recv => (0, 0),
        CollKind::Broadcast => (0, b),
        CollKind::AllGather => (b, n * b),
        CollKind::AllToAll | CollKind::AllReduce => (b, b),
        CollKind::Reduce => (b, if rank == c.root as usize { b } else { 0 }),
        CollKind::ReduceScatter => (b, b / n),
    }
}

fn overlap(a: &Region, b: &Region) -> bool {
    a.len > 0 && b.len > 0 && a.addr < b.addr + b.len && b.addr < a.addr + a.len
}

/// One data phase's requests and the buffers MPI uses until they complete.
pub(super) struct DataPhase {
    reqs: Vec<u64>,
    statuses: Vec<u64>,
    indices: Vec<c_int>,
    nreq: usize,
    left: usize,
    /// The input and output while MPI uses them (their `keep` holds the memory).
    pub(super) bufs: Option<(Option<Region>, Option<Region>)>,
    /// A copy of the input when it overlaps the output (MPI forbids aliasing).
    pub(super) scratch: Vec<u8>,
}

impl DataPhase {
    pub(super) fn new(n: usize, h: &Handles) -> DataPhase {
        let slots = 2 * (n - 1);
        let words = |bytes: usize| bytes.div_ceil(8);
        DataPhase {
            reqs: vec![0; words(slots * h.request_size)],
            statuses: vec![0; words(slots * h.status_size)],
            indices: vec![0; slots],
            nreq: 0,
            left: 0,
            bufs: None,
            scratch: Vec::new(),
        }
    }

    fn slot(&mut self, i: usize, h: &Handles) -> *mut c_void {
        assert!((i + 1) * h.request_size <= self.reqs.len() * 8);
        self.reqs
            .as_mut_ptr()
            .cast::<u8>()
            .wrapping_add(i * h.request_size)
            .cast()
    }

    /// The input's address for MPI: a copy in `scratch` when it overlaps the output.
    fn staged(&mut self, send: &Region, recv: Option<&Region>) -> *const c_void {
        if !recv.is_some_and(|r| overlap(send, r)) {
            return send.addr as *const c_void;
        }
        self.scratch.clear();
        // SAFETY: `send` is `len` readable bytes kept alive by its `keep` (or the caller);
        // the copy goes into this object's own vector.
        self.scratch
            .extend_from_slice(unsafe { std::slice::from_raw_parts(send.addr as *const u8, send.len) });
        self.scratch.as_ptr().cast()
    }

    /// Posts `c`'s data requests on the data communicator (buffers already checked against
    /// [`buffer_bytes`]; `bufs` is kept until the requests complete). Err: an MPI error code
    /// (requests posted before it stay MPI's: the caller never frees this object then).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post(
        &mut self,
        lib: &MpiLib,
        h: &Handles,
        dh: &DataHandles,
        c: &Call,
        rank: usize,
        n: usize,
        bufs: (Option<Region>, Option<Region>),
    ) -> Result<(), i32> {
        let b = c.count as usize * c.dtype.size();
        let (cm, byte) = (dh.comm, h.byte);
        let at = |r: &Option<Region>| r.as_ref().map_or((0, 0), |r| (r.addr, r.len));
        let (s, r) = (at(&bufs.0), at(&bufs.1));
        let (s, r) = (
            Region {
                addr: s.0,
                len: s.1,
                keep: None,
            },
            Region {
                addr: r.0,
                len: r.1,
                keep: None,
            },
        );
        // Kept before anything is posted: an MPI error part way leaves posted requests
        // with MPI, and the buffers must outlive them (the exchange is then never freed).
        self.bufs = Some(bufs);
        let rp = r.addr as *mut c_void;
        let dt = dh.dtypes[c.dtype as usize];
        let op = dh.ops[(c.op as usize).min(3)];
        self.nreq = 1;
        let s0 = self.slot(0, h);
        // SAFETY (every MPI call below): the buffers are the checked Regions (or this
        // object's scratch), kept with `bufs` / `scratch` until every request completed or
        // forever (see `Exchange`'s Drop); counts fit an int (`native_data`); the handles
        // are mpi4py's for this process; each request goes into its own slot.
        let code = match c.kind {
            CollKind::Barrier => unsafe { (lib.ibarrier)(cm, s0) },
            CollKind::Broadcast => unsafe { (lib.ibcast)(rp, b as c_int, byte, c.root as c_int, cm, s0) },
            CollKind::AllGather if n <= dh.p2p_gather_max => {
                let src = self.staged(&s, Some(&r));
                let peers: Vec<usize> = (0..n).filter(|&p| p != rank).collect();
                self.nreq = 2 * peers.len();
                for (i, &p) in peers.iter().enumerate() {
                    let slot = self.slot(i, h);
                    let at = rp.wrapping_byte_add(p * b);
                    check(unsafe { (lib.irecv)(at, b as c_int, byte, p as c_int, GATHER_TAG, cm, slot) })?;
                }
                for (i, &p) in peers.iter().enumerate() {
                    let slot = self.slot(peers.len() + i, h);
                    check(unsafe { (lib.isend)(src, b as c_int, byte, p as c_int, GATHER_TAG, cm, slot) })?;
                }
                // SAFETY: `src` is `b` bytes (the input or its copy, which never overlaps
                // the output), the destination the rank's own `b` bytes of the output.
                unsafe { std::ptr::copy(src.cast::<u8>(), rp.cast::<u8>().add(rank * b), b) };
                0
            }
            CollKind::AllGather => {
                let src = self.staged(&s, Some(&r));
                unsafe { (lib.iallgather)(src, b as c_int, byte, rp, b as c_int, byte, cm, s0) }
            }
            CollKind::AllToAll => {
                let (src, part) = (self.staged(&s, Some(&r)), (b / n) as c_int);
                unsafe { (lib.ialltoall)(src, part, byte, rp, part, byte, cm, s0) }
            }
            CollKind::AllReduce => {
                let src = if s.addr == r.addr {
                    dh.in_place as *const c_void
                } else {
                    self.staged(&s, Some(&r))
                };
                unsafe { (lib.iallreduce)(src, rp, c.count as c_int, dt, op, cm, s0) }
            }
            CollKind::Reduce => {
                let root = rank == c.root as usize;
                let src = if root && s.addr == r.addr {
                    dh.in_place as *const c_void
                } else {
                    self.staged(&s, root.then_some(&r))
                };
                let dst = if root { rp } else { std::ptr::null_mut() };
                unsafe { (lib.ireduce)(src, dst, c.count as c_int, dt, op, c.root as c_int, cm, s0) }
            }
            CollKind::ReduceScatter => {
                let src = self.staged(&s, Some(&r));
                let per = (c.count as usize / n) as c_int;
                unsafe { (lib.ireduce_scatter_block)(src, rp, per, dt, op, cm, s0) }
            }
            CollKind::Send | CollKind::Recv => -1,
        };
        self.left = self.nreq;
        check(code)
    }

    /// One `MPI_Testsome` over the posted requests; true once every one completed (the
    /// buffers are then released).
    pub(super) fn poll(&mut self, lib: &MpiLib, h: &Handles) -> Result<bool, i32> {
        if self.left > 0 {
            let mut out: c_int = 0;
            let r0 = self.slot(0, h);
            // SAFETY: `nreq` request slots (active or completed = null), as many index ints
            // and status slots of `status_size` bytes.
            let code = unsafe {
                (lib.testsome)(
                    self.nreq as c_int,
                    r0,
                    &mut out,
                    self.indices.as_mut_ptr(),
                    self.statuses.as_mut_ptr().cast(),
                )
            };
            check(code)?;
            if out != h.undefined && out > 0 {
                self.left = self.left.saturating_sub(out as usize);
            }
        }
        if self.left == 0 {
            self.bufs = None;
        }
        Ok(self.left == 0)
    }
}

impl Exchange {
    /// Lets two-phase calls run their data phase here ([`Exchange::run_two_phase`]).
    pub fn set_data(&mut self, dh: DataHandles) {
        self.dh = Some(dh);
    }

    /// A two-phase call whose data phase runs here ([`native_data`]): the header
    /// exchange of [`Exchange::run`], then, when the headers agree, the data on the data
    /// communicator; `Done` once both completed. `send` / `recv`: the input and the output
    /// (broadcast: `recv`, else `send`; the same region: in place). Refused (`Mpi(-3)`)
    /// without [`Exchange::set_data`], for a call the rule refuses or buffers too small.
    pub fn run_two_phase(
        &mut self,
        call: Call,
        send: Option<Region>,
        recv: Option<Region>,
        deadline: Instant,
        notice: usize,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Outcome {
        let recv = recv.or_else(|| send.clone().filter(|_| call.kind == CollKind::Broadcast));
        let (ns, nr) = buffer_bytes(&call, self.rank, self.n);
        let short = |r: &Option<Region>, need: usize| need > 0 && r.as_ref().is_none_or(|r| r.len < need);
        if call.eager || self.dh.is_none() || !native_data(&call, self.n) || short(&send, ns) || short(&recv, nr) {
            return Outcome::Mpi(-3);
        }
        self.start(call, None, None, Some((send, recv)), deadline, notice, interrupt)
    }
}
