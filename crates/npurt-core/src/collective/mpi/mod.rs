//! The `mpi` backend's hot path in native code (issue 18): the first exchange of every
//! collective (the 64-byte headers; on the one-phase path the data too) and the local
//! completion of a one-phase collective, calling the `libmpi` mpi4py loaded directly.
//!
//! * `ffi.rs`: the MPI functions, resolved with `dlopen(RTLD_NOLOAD)` + `dlsym`; handles,
//!   request and status sizes come from mpi4py ([`Handles`]).
//! * `plan.rs`: the protocol without MPI (header, who gets which bytes, the fold in rank
//!   order with `reduce.rs`) and which calls take the one-phase path (`one_phase`, which
//!   `python/npurt/distributed/_mpi_small.py` asks).
//! * `exchange.rs`: [`Exchange`], the persistent receives, sends and the poll loop; what
//!   goes wrong (timeout, desync, abort notice, MPI error) is an [`Outcome`] for the
//!   Python side, which raises the same errors as before.

mod exchange;
#[cfg(test)]
mod exchange_tests;
mod ffi;
mod plan;
#[cfg(test)]
mod tests;

pub use exchange::{Exchange, Outcome};
pub use ffi::{loaded_libmpi, Handles, MpiLib};
pub use plan::{inbox_bytes, one_phase, Call, HEADER_BYTES, MAX_EAGER, MAX_RANKS};
