//! The `mpi` backend's hot path in native code (issue 18): the first exchange of every
//! collective (the 64-byte headers; on the one-phase path the data too) and the local
//! completion of a one-phase collective, calling the `libmpi` mpi4py loaded directly.
//!
//! * `ffi.rs`: the MPI functions, resolved with `dlopen(RTLD_NOLOAD)` + `dlsym`; handles,
//!   request and status sizes come from mpi4py ([`Handles`]).
//! * `plan.rs`: the protocol without MPI (header, who gets which bytes, the fold in rank
//!   order with `reduce.rs`) and which calls take the one-phase path (`one_phase`, which
//!   `python/npurt/distributed/_mpi_small.py` asks).
//! * `data.rs`: the second phase of a two-phase call once the headers agree (MPI's
//!   non-blocking collectives on the data communicator; all_gather point to point), and
//!   which calls run it here ([`native_data`]).
//! * `exchange.rs`: [`Exchange`], the persistent receives, sends and the poll loop; what
//!   goes wrong (timeout, desync, abort notice, MPI error) is an [`Outcome`] for the
//!   Python side, which raises the same errors as before.

mod data;
#[cfg(test)]
mod data_tests;
mod exchange;
#[cfg(test)]
mod exchange_tests;
#[cfg(test)]
mod fake_mpi;
mod ffi;
mod plan;
#[cfg(test)]
mod tests;

pub use data::{native_data, GATHER_TAG, P2P_GATHER_MAX};
pub use exchange::{Exchange, Outcome};
pub use ffi::{loaded_libmpi, DataHandles, Handles, MpiLib};
pub use plan::{inbox_bytes, one_phase, Call, EAGER_FIT, HEADER_BYTES, MAX_EAGER, MAX_RANKS};
