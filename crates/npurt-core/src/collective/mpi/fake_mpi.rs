//! A fake MPI in this process (no MPI library) for [`Exchange`]'s tests: messages are
//! copied into a mailbox by `MPI_Isend` and out of it by the receives (persistent ones that
//! `MPI_Startall` started, or `MPI_Irecv`'s) that `MPI_Testsome` finds, so two ranks can run
//! one after the other on one thread. The data phase's collectives are not faked: they
//! return an MPI error ([`NO_COLL`]).

use super::exchange::Exchange;
use super::ffi::{Handles, MpiLib};
use super::plan::HEADER_BYTES;
use crate::collective::Region;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};
use std::time::Duration;

enum Req {
    Done,
    Recv {
        comm: usize,
        src: usize,
        tag: c_int,
        buf: usize,
        cap: usize,
        active: bool,
    },
    Freed,
}

/// Requests (handle = index + 1; 0 is the null request) and messages in flight
/// `(receiver's comm, sender's rank, tag, bytes)`. A comm handle is `test << 8 | rank`.
struct World {
    reqs: Vec<Req>,
    mail: Vec<(usize, usize, c_int, Vec<u8>)>,
}

static WORLD: Mutex<World> = Mutex::new(World {
    reqs: Vec::new(),
    mail: Vec::new(),
});
/// Notice request handles whose receive "completed".
pub(super) static NOTICES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn world() -> std::sync::MutexGuard<'static, World> {
    WORLD.lock().unwrap_or_else(|e| e.into_inner())
}

fn new_req(w: &mut World, r: Req, slot: *mut c_void) {
    w.reqs.push(r);
    // SAFETY: the exchange passes a request slot of `request_size` (8) bytes.
    unsafe { slot.cast::<u64>().write_unaligned(w.reqs.len() as u64) };
}

unsafe extern "C" fn isend(
    buf: *const c_void,
    n: c_int,
    _dt: usize,
    dest: c_int,
    tag: c_int,
    comm: usize,
    req: *mut c_void,
) -> c_int {
    // SAFETY: the exchange passes `n` readable bytes.
    let data = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n as usize) }.to_vec();
    let mut w = world();
    w.mail.push(((comm & !0xff) | dest as usize, comm & 0xff, tag, data));
    new_req(&mut w, Req::Done, req);
    0
}

unsafe extern "C" fn recv_init(
    buf: *mut c_void,
    n: c_int,
    _dt: usize,
    src: c_int,
    tag: c_int,
    comm: usize,
    req: *mut c_void,
) -> c_int {
    let r = Req::Recv {
        comm,
        src: src as usize,
        tag,
        buf: buf as usize,
        cap: n as usize,
        active: false,
    };
    new_req(&mut world(), r, req);
    0
}

unsafe extern "C" fn irecv(
    buf: *mut c_void,
    n: c_int,
    dt: usize,
    src: c_int,
    tag: c_int,
    comm: usize,
    req: *mut c_void,
) -> c_int {
    // SAFETY: as recv_init; the request is then started.
    unsafe { recv_init(buf, n, dt, src, tag, comm, req) };
    if let Some(Req::Recv { active, .. }) = world().reqs.last_mut() {
        *active = true;
    }
    0
}

/// The data phase's collectives, which the fake does not run: an MPI error code.
pub(super) const NO_COLL: c_int = 99;
unsafe extern "C" fn ibarrier(_c: usize, _r: *mut c_void) -> c_int {
    NO_COLL
}
unsafe extern "C" fn ibcast(_b: *mut c_void, _n: c_int, _d: usize, _root: c_int, _c: usize, _r: *mut c_void) -> c_int {
    NO_COLL
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn ialltoall(
    _s: *const c_void,
    _sn: c_int,
    _sd: usize,
    _r: *mut c_void,
    _rn: c_int,
    _rd: usize,
    _c: usize,
    _q: *mut c_void,
) -> c_int {
    NO_COLL
}
unsafe extern "C" fn iallreduce(
    _s: *const c_void,
    _r: *mut c_void,
    _n: c_int,
    _d: usize,
    _o: usize,
    _c: usize,
    _q: *mut c_void,
) -> c_int {
    NO_COLL
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn ireduce(
    _s: *const c_void,
    _r: *mut c_void,
    _n: c_int,
    _d: usize,
    _o: usize,
    _root: c_int,
    _c: usize,
    _q: *mut c_void,
) -> c_int {
    NO_COLL
}

unsafe extern "C" fn startall(n: c_int, reqs: *mut c_void) -> c_int {
    let mut w = world();
    for i in 0..n as usize {
        // SAFETY: `n` request slots of 8 bytes.
        let h = unsafe { reqs.cast::<u64>().add(i).read_unaligned() } as usize;
        if let Some(Req::Recv { active, .. }) = w.reqs.get_mut(h.wrapping_sub(1)) {
            *active = true;
        }
    }
    0
}

unsafe extern "C" fn testsome(
    n: c_int,
    reqs: *mut c_void,
    out: *mut c_int,
    idx: *mut c_int,
    _st: *mut c_void,
) -> c_int {
    let mut guard = world();
    let World { reqs: table, mail } = &mut *guard;
    let mut k = 0usize;
    for i in 0..n as usize {
        // SAFETY (slot, index and count writes): `n` request slots, `n` index ints and the
        // count, as MPI_Testsome's caller provides; message copies stay within `cap`.
        let slot = unsafe { reqs.cast::<u64>().add(i) };
        let h = unsafe { slot.read_unaligned() } as usize;
        let done = match table.get_mut(h.wrapping_sub(1)) {
            Some(Req::Done) => {
                unsafe { slot.write_unaligned(0) };
                true
            }
            Some(Req::Recv {
                comm,
                src,
                tag,
                buf,
                cap,
                active,
            }) if *active => match mail.iter().position(|m| m.0 == *comm && m.1 == *src && m.2 == *tag) {
                Some(j) => {
                    let m = mail.remove(j).3;
                    unsafe { std::ptr::copy_nonoverlapping(m.as_ptr(), *buf as *mut u8, m.len().min(*cap)) };
                    *active = false;
                    true
                }
                None => false,
            },
            _ => false,
        };
        if done {
            unsafe { idx.add(k).write(i as c_int) };
            k += 1;
        }
    }
    unsafe { out.write(k as c_int) };
    0
}

unsafe extern "C" fn get_status(h: usize, flag: *mut c_int, _st: *mut c_void) -> c_int {
    let came = NOTICES.lock().unwrap_or_else(|e| e.into_inner()).contains(&h);
    // SAFETY: the exchange passes a flag int.
    unsafe { flag.write(came as c_int) };
    0
}

unsafe extern "C" fn request_free(req: *mut c_void) -> c_int {
    // SAFETY: a request slot of 8 bytes.
    let h = unsafe { req.cast::<u64>().read_unaligned() } as usize;
    if let Some(r) = world().reqs.get_mut(h.wrapping_sub(1)) {
        *r = Req::Freed;
    }
    0
}

const ROW: usize = HEADER_BYTES + 4096;

pub(super) fn exchange(test: usize, rank: usize, n: usize) -> Exchange {
    let lib = Arc::new(MpiLib {
        isend,
        recv_init,
        startall,
        testsome,
        request_get_status: get_status,
        request_free,
        irecv,
        ibarrier,
        ibcast,
        iallgather: ialltoall,
        ialltoall,
        iallreduce,
        ireduce,
        ireduce_scatter_block: iallreduce,
    });
    let h = Handles {
        comm: test << 8 | rank,
        byte: 1,
        request_size: 8,
        status_size: 8,
        undefined: -32766,
    };
    Exchange::new(lib, h, rank, n, 7101, ROW, Duration::ZERO).expect("fake MPI")
}

pub(super) fn region(v: &mut [f32]) -> Region {
    Region {
        addr: v.as_mut_ptr() as usize,
        len: std::mem::size_of_val(v),
        keep: None,
    }
}
