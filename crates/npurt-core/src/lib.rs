//! npurt-core: an Ascend-NPU-style device runtime that runs on the CPU, with the semantics
//! of the CANN runtime (AscendCL `aclrt*`): devices, contexts, streams, events, kernels on
//! an AI-Core executor, and engines for copies and host callbacks.
//!
//! ```
//! use npurt_core::{current, BlockCtx, Kernel, KernelFault};
//! use std::sync::{Arc, atomic::{AtomicU32, Ordering}};
//!
//! struct Count(AtomicU32);
//! impl Kernel for Count {
//!     fn name(&self) -> &str { "count" }
//!     fn run_block(&self, _b: BlockCtx) -> Result<(), KernelFault> {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!         Ok(())
//!     }
//! }
//!
//! let stream = current::current_context()?.create_stream(0)?;
//! let k = Arc::new(Count(AtomicU32::new(0)));
//! stream.launch(k.clone(), 8)?;
//! stream.synchronize(None)?;
//! assert_eq!(k.0.load(Ordering::Relaxed), 8);
//! # Ok::<(), npurt_core::Error>(())
//! ```
//!
//! The layers, bottom up; a module imports from its own layer or below:
//!
//! 1. base: [`error`] (with the [`AclCode`] table), [`config`], `clock`, `sync` (the
//!    loom shim), `futex` (the one futex, with its loom model), `kernel`, [`profiler`], [`thread_role`], [`fault`] (test-only fault
//!    injection);
//! 2. the stream's parts: `stream::{queue, sched_state, timeline, task}`;
//! 3. the scheduler and what it schedules: `executor` ⇄ `stream` (the one inherent
//!    circle: a stream puts itself on its device's ready list, workers run its tasks); a
//!    stream reaches its context's stream list only through a `Weak` (`stream::StreamList`);
//! 4. `event` (points on streams; `Stream::wait_event` lives there) and [`memory`]
//!    (device memory, buffers, copies; copies are stream tasks); [`logging`] (levels, the
//!    logging environment, the plog line; above memory, whose hook writes its lines —
//!    every layer logs through the `log` facade, not through this module);
//! 5. `context`: a context owns its streams and memory;
//! 6. `device` (one active device) and [`registry`] (the process-wide registry with ACL's
//!    reference-counted lifetime);
//! 7. the per-thread fronts: [`current`] (current context and stream, lazy device 0) and
//!    [`alloc`] (`malloc`, `resolve`, `current_memory`);
//! 8. [`collective`]: communicators and collectives on streams (over memory, ipc, streams).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(unreachable_pub)]

// The facade (cudarc style): the API namespaces below are public — functions grouped by
// concern (`alloc::malloc`, `memory::memcpy_async`, `registry::set_device`...) and the
// error enums; every other module is internal and its public types are re-exported here.
pub mod alloc;
pub mod clock;
pub mod collective;
pub mod config;
pub mod current;
pub mod error;
pub mod fault;
pub mod ipc;
pub mod isa;
pub mod logging;
pub mod memory;
pub mod probe;
pub mod profiler;
pub mod registry;
pub mod sanitizer;
pub mod shared;
pub mod thread_role;

mod context;
mod device;
mod event;
mod executor;
mod futex;
mod ipc_error;
mod kernel;
mod lifecycle;
mod stream;
mod sync;

pub use config::{Config, ExecConfig, WorkerPolicy};
pub use context::Context;
pub use device::{busy_percent, Device, DeviceProps, LeakReport};
pub use error::{AclCode, Error, ErrorKind, Result};
pub use event::Event;
pub use kernel::{BlockCtx, Kernel, KernelFault};
pub use memory::{DeviceBuffer, HostBuffer, MemPool};
pub use stream::task::{Engine, EngineDesc, EngineOp};
pub use stream::{Pending, Stream, LOWEST_PRIORITY, MAX_BLOCKS};

/// Device-side wait deadlines scheduled and not yet fired or cancelled (leak checks).
pub fn timer_pending() -> usize {
    executor::timer::pending()
}

/// Streams parked on a cross-process condition (an interprocess event) right now.
pub fn external_waits_pending() -> usize {
    executor::extwait::pending()
}

/// Objects alive in this process: (user streams, events, contexts) — for leak checks.
pub fn live_counts() -> (usize, usize, usize) {
    (
        stream::live_user_streams(),
        event::live_events(),
        context::live_contexts(),
    )
}
