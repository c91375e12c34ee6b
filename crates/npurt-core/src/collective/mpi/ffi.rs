//! The few MPI functions the native small path calls, resolved at run time in the `libmpi`
//! the process already loaded (mpi4py's): `dlopen(path, RTLD_NOLOAD | RTLD_NOW)` never loads
//! a second copy, so handles made by mpi4py (communicators, datatypes, requests) are valid
//! here. No MPI header is needed: handles travel as `usize` (Open MPI: pointers; MPICH:
//! `int`, which x86-64's and aarch64's calling conventions pass in the low half of the same
//! 64-bit register), requests and statuses are opaque arrays of the sizes mpi4py reports
//! (`MPI._sizeof`), and no status field is ever read.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

type Isend = unsafe extern "C" fn(*const c_void, c_int, usize, c_int, c_int, usize, *mut c_void) -> c_int;
type RecvInit = unsafe extern "C" fn(*mut c_void, c_int, usize, c_int, c_int, usize, *mut c_void) -> c_int;
type Startall = unsafe extern "C" fn(c_int, *mut c_void) -> c_int;
type Testsome = unsafe extern "C" fn(c_int, *mut c_void, *mut c_int, *mut c_int, *mut c_void) -> c_int;
type GetStatus = unsafe extern "C" fn(usize, *mut c_int, *mut c_void) -> c_int;
type RequestFree = unsafe extern "C" fn(*mut c_void) -> c_int;
// the data phase's (`data.rs`): datatypes, ops and communicators are handles (`usize`)
type Ibarrier = unsafe extern "C" fn(usize, *mut c_void) -> c_int;
type Ibcast = unsafe extern "C" fn(*mut c_void, c_int, usize, c_int, usize, *mut c_void) -> c_int;
type IallToAll =
    unsafe extern "C" fn(*const c_void, c_int, usize, *mut c_void, c_int, usize, usize, *mut c_void) -> c_int;
type Iallreduce = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, usize, usize, usize, *mut c_void) -> c_int;
type Ireduce =
    unsafe extern "C" fn(*const c_void, *mut c_void, c_int, usize, usize, c_int, usize, *mut c_void) -> c_int;

/// The resolved functions (plain C function pointers into the loaded `libmpi`).
pub struct MpiLib {
    pub(super) isend: Isend,
    pub(super) recv_init: RecvInit,
    pub(super) startall: Startall,
    pub(super) testsome: Testsome,
    pub(super) request_get_status: GetStatus,
    pub(super) request_free: RequestFree,
    pub(super) irecv: RecvInit,
    pub(super) ibarrier: Ibarrier,
    pub(super) ibcast: Ibcast,
    pub(super) iallgather: IallToAll,
    pub(super) ialltoall: IallToAll,
    pub(super) iallreduce: Iallreduce,
    pub(super) ireduce: Ireduce,
    /// `MPI_Ireduce_scatter_block(send, recv, recvcount, datatype, op, comm, req)`: the
    /// same C signature as `MPI_Iallreduce`.
    pub(super) ireduce_scatter_block: Iallreduce,
}

/// The path of the `libmpi` shared object mapped into this process (`/proc/self/maps`),
/// if any.
pub fn loaded_libmpi() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.rsplit('/').next().is_some_and(|f| f.starts_with("libmpi.so")))
        .map(str::to_owned)
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call
    // on this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".to_owned()
    } else {
        // SAFETY: non-NULL: a NUL-terminated C string (see above).
        unsafe { CStr::from_ptr(e as *const c_char) }
            .to_string_lossy()
            .into_owned()
    }
}

impl MpiLib {
    /// Resolves the functions in the already loaded library `path` or the libraries it
    /// depends on (`dlsym` on its handle searches them too: mpi4py's extension module finds
    /// the MPI library whatever its name); None: the `libmpi` found in `/proc/self/maps`.
    /// Fails when it is not loaded or no function of that name is found.
    pub fn open(path: Option<&str>) -> Result<MpiLib, String> {
        let path = match path {
            Some(p) => p.to_owned(),
            None => loaded_libmpi().ok_or("no libmpi is loaded in this process")?,
        };
        let c = CString::new(path.clone()).map_err(|_| format!("bad library path {path:?}"))?;
        // SAFETY: `c` is a valid C string; RTLD_NOLOAD only looks up a library already
        // loaded (its initialisers ran), adding a reference that is never dropped, so the
        // function pointers below stay valid for the process's life.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_NOW) };
        if h.is_null() {
            return Err(format!("{path} is not loaded: {}", dl_error()));
        }
        let sym = |name: &str| -> Result<*mut c_void, String> {
            let n = CString::new(name).expect("no NUL in a symbol name");
            // SAFETY: `h` is a live handle from dlopen, `n` a valid C string.
            let p = unsafe { libc::dlsym(h, n.as_ptr()) };
            if p.is_null() {
                Err(format!("{path} has no {name}: {}", dl_error()))
            } else {
                Ok(p)
            }
        };
        // SAFETY (each transmute): the symbol is the MPI standard's C function of that name,
        // whose signature the type spells with handles as `usize` (see the module docs);
        // function and data pointers have the same size on the supported targets.
        unsafe {
            Ok(MpiLib {
                isend: std::mem::transmute::<*mut c_void, Isend>(sym("MPI_Isend")?),
                recv_init: std::mem::transmute::<*mut c_void, RecvInit>(sym("MPI_Recv_init")?),
                startall: std::mem::transmute::<*mut c_void, Startall>(sym("MPI_Startall")?),
                testsome: std::mem::transmute::<*mut c_void, Testsome>(sym("MPI_Testsome")?),
                request_get_status: std::mem::transmute::<*mut c_void, GetStatus>(sym("MPI_Request_get_status")?),
                request_free: std::mem::transmute::<*mut c_void, RequestFree>(sym("MPI_Request_free")?),
                irecv: std::mem::transmute::<*mut c_void, RecvInit>(sym("MPI_Irecv")?),
                ibarrier: std::mem::transmute::<*mut c_void, Ibarrier>(sym("MPI_Ibarrier")?),
                ibcast: std::mem::transmute::<*mut c_void, Ibcast>(sym("MPI_Ibcast")?),
                iallgather: std::mem::transmute::<*mut c_void, IallToAll>(sym("MPI_Iallgather")?),
                ialltoall: std::mem::transmute::<*mut c_void, IallToAll>(sym("MPI_Ialltoall")?),
                iallreduce: std::mem::transmute::<*mut c_void, Iallreduce>(sym("MPI_Iallreduce")?),
                ireduce: std::mem::transmute::<*mut c_void, Ireduce>(sym("MPI_Ireduce")?),
                ireduce_scatter_block: std::mem::transmute::<*mut c_void, Iallreduce>(sym(
                    "MPI_Ireduce_scatter_block",
                )?),
            })
        }
    }
}

/// What the native path needs to know about the MPI implementation and the communicator,
/// from mpi4py: the handles (`MPI._handleof`), the sizes of `MPI_Request` and `MPI_Status`
/// (`MPI._sizeof`) and `MPI_UNDEFINED`.
#[derive(Clone, Copy, Debug)]
pub struct Handles {
    /// The control communicator (headers; the one-phase path's messages).
    pub comm: usize,
    pub byte: usize,
    pub request_size: usize,
    pub status_size: usize,
    pub undefined: i32,
}

/// What the data phase (`data.rs`) needs besides [`Handles`]: the data communicator, the
/// value of `MPI_IN_PLACE`, the MPI datatype of each HCCL data type (indexed by its code;
/// 0: MPI has none, as for float16 / bfloat16) and the ops sum, prod, max, min.
#[derive(Clone, Copy, Debug)]
pub struct DataHandles {
    pub comm: usize,
    pub in_place: usize,
    pub dtypes: [usize; 12],
    pub ops: [usize; 4],
    /// all_gather is one receive and one send per peer in groups of up to this many ranks
    /// (`data::P2P_GATHER_MAX` unless a test lowers it), else `MPI_Iallgather`.
    pub p2p_gather_max: usize,
}
