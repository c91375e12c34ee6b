//! [`Exchange`]'s poll loop against a fake MPI in this process (no MPI library): messages
//! are copied into a mailbox by `MPI_Isend` and out of it by the persistent receives that
//! `MPI_Testsome` finds started, so two ranks can run one after the other on one thread.
//! Covers completion and the fold, a timeout naming the missing peer then a resume, a
//! desync, an abort notice, and closing.

use super::exchange::{Exchange, Outcome};
use super::ffi::{Handles, MpiLib};
use super::plan::{Call, HEADER_BYTES};
use crate::collective::{CollKind, HcclDataType, ReduceOp, Region};
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
static NOTICES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

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

fn exchange(test: usize, rank: usize, n: usize) -> Exchange {
    let lib = Arc::new(MpiLib {
        isend,
        recv_init,
        startall,
        testsome,
        request_get_status: get_status,
        request_free,
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

fn region(v: &mut [f32]) -> Region {
    Region {
        addr: v.as_mut_ptr() as usize,
        len: std::mem::size_of_val(v),
        keep: None,
    }
}

fn all_reduce(count: u64) -> Call {
    Call {
        kind: CollKind::AllReduce,
        seq: 1,
        dtype: HcclDataType::Fp32,
        count,
        op: ReduceOp::Sum,
        root: 0,
        eager: true,
    }
}

#[test]
fn completes_times_out_naming_the_missing_peer_and_resumes() {
    let (mut x0, mut x1) = (exchange(1, 0, 2), exchange(1, 1, 2));
    let (mut a, mut b) = (vec![1.5f32; 100], vec![2.25f32; 100]);
    let (ra, rb) = (region(&mut a), region(&mut b));
    let never = &mut || false;
    let soon = Instant::now() + Duration::from_millis(3);
    assert_eq!(
        x0.run(all_reduce(100), Some(&ra), Some(ra.clone()), soon, 0, never),
        Outcome::Timeout(vec![1])
    );
    assert!(x0.pending() && x0.missing() == vec![1]);
    let later = Instant::now() + Duration::from_secs(5);
    assert_eq!(
        x1.run(all_reduce(100), Some(&rb), Some(rb.clone()), later, 0, never),
        Outcome::Done
    );
    assert_eq!(x0.resume(later, 0, never), Outcome::Done);
    assert!(!x0.pending());
    assert!(a.iter().chain(&b).all(|&v| v == 3.75), "{:?} {:?}", &a[..3], &b[..3]);
    assert_eq!(x0.close(), Ok(()));
    assert_eq!(x1.close(), Ok(()));
}

#[test]
fn differing_headers_end_in_desync_with_every_header() {
    let (mut x0, mut x1) = (exchange(2, 0, 2), exchange(2, 1, 2));
    let (mut a, mut b) = (vec![1.0f32; 100], vec![1.0f32; 99]);
    let (ra, rb) = (region(&mut a), region(&mut b));
    let never = &mut || false;
    let soon = Instant::now() + Duration::from_millis(3);
    assert!(matches!(
        x0.run(all_reduce(100), Some(&ra), Some(ra.clone()), soon, 0, never),
        Outcome::Timeout(_)
    ));
    let later = Instant::now() + Duration::from_secs(5);
    assert_eq!(
        x1.run(all_reduce(99), Some(&rb), Some(rb.clone()), later, 0, never),
        Outcome::Desync
    );
    assert_eq!(x0.resume(later, 0, never), Outcome::Desync);
    let heads = x1.headers();
    assert_eq!(heads.len(), 2 * HEADER_BYTES);
    assert_eq!(heads[..HEADER_BYTES], all_reduce(100).header());
    assert_eq!(heads[HEADER_BYTES..], all_reduce(99).header());
    assert!(a.iter().chain(&b).all(|&v| v == 1.0)); // nothing written
}

#[test]
fn an_abort_notice_ends_the_wait() {
    let mut x0 = exchange(3, 0, 3);
    let mut a = vec![1.0f32; 8];
    let ra = region(&mut a);
    NOTICES.lock().unwrap_or_else(|e| e.into_inner()).push(0xABC);
    let later = Instant::now() + Duration::from_secs(5);
    assert_eq!(
        x0.run(all_reduce(8), Some(&ra), Some(ra.clone()), later, 0xABC, &mut || false),
        Outcome::Notice
    );
    assert!(x0.pending() && x0.missing() == vec![1, 2]);
    // a second collective while one is pending is refused, not started
    assert_eq!(
        x0.run(all_reduce(8), Some(&ra), Some(ra.clone()), later, 0, &mut || false),
        Outcome::Mpi(-2)
    );
}
