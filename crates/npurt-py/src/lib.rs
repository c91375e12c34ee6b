//! PyO3 glue for npurt: the native module `npurt._npurt`. It wraps npurt-core types,
//! releases the GIL around every blocking call (`gil.rs`, `wait.rs`), converts arguments
//! (`args.rs`, `pybuf.rs`, `operand.rs`) and maps errors in one place (`errors.rs`); it
//! holds no runtime logic. Each file registers its own names (`register`).

#![forbid(unsafe_code)]

mod acl;
mod args;
mod array;
mod collective;
mod context;
mod copy;
mod device;
mod errors;
mod event;
mod fault;
mod gil;
mod history;
mod host;
mod ipc;
mod isa;
mod kernels;
mod logs;
mod memory;
mod mempool;
mod memstats;
mod operand;
mod profiler;
mod profmem;
mod pybuf;
mod replay;
mod runtime;
mod sanitizer;
mod shared;
mod stream;
mod view;
mod wait;

use pyo3::prelude::*;

/// mimalloc for the extension's own allocations: a launch allocates its kernel object on
/// the submitting thread and a worker frees it, and glibc's arena lock made that pair the
/// bottleneck of small launches (futex waits on both threads). mimalloc frees cross-thread
/// blocks into the owner's lock-free list.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _npurt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    runtime::register(m)?;
    shared::register(m)?;
    errors::register(m)?;
    device::register(m)?;
    stream::register(m)?;
    event::register(m)?;
    context::register(m)?;
    isa::register(m)?;
    kernels::register(m)?;
    memory::register(m)?;
    ipc::register(m)?;
    collective::register(m)?;
    host::register(m)?;
    pybuf::register(m)?;
    mempool::register(m)?;
    view::register(m)?;
    acl::register(m)?;
    copy::register(m)?;
    operand::register(m)?;
    memstats::register(m)?;
    history::register(m)?;
    fault::register(m)?;
    array::register(m)?;
    profiler::register(m)?;
    logs::register(m)?;
    sanitizer::register(m)?;
    profmem::register(m)?;
    replay::register(m)
}
