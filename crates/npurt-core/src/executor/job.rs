//! A multi-block kernel in flight: idle cores claim its blocks with one `fetch_add` each;
//! whoever finishes the last block completes the task and takes over the stream.

use crate::error::TaskError;
use crate::kernel::{BlockCtx, Kernel};
use crate::profiler::CoreSpan;
use crate::stream::StreamInner;
use parking_lot::Mutex;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{AcqRel, Relaxed};
use std::sync::Arc;

pub(crate) struct Job {
    pub(crate) kernel: Arc<dyn Kernel>,
    pub(crate) blocks: u32,
    next: AtomicU32,
    done: AtomicU32,
    pub(crate) stream: Arc<StreamInner>,
    error: Mutex<Option<TaskError>>,
    pub(crate) submit_ns: u64,
    pub(crate) start_ns: u64,
    pub(crate) meta: u32,
    /// Each core's turn, when profiling (`start_ns != 0`).
    pub(crate) spans: Mutex<Vec<CoreSpan>>,
}

/// What a core's turn on a job ended with.
pub(crate) enum JobTurn {
    /// Blocks are still running elsewhere (or none were left to claim).
    Released,
    /// This core finished the last block; it now owns the stream.
    Finished(Option<TaskError>),
}

impl Job {
    pub(crate) fn new(
        kernel: Arc<dyn Kernel>,
        blocks: u32,
        stream: Arc<StreamInner>,
        submit_ns: u64,
        meta: u32,
    ) -> Self {
        let start_ns = if submit_ns != 0 { crate::clock::now_ns() } else { 0 };
        Self {
            kernel,
            blocks,
            next: AtomicU32::new(0),
            done: AtomicU32::new(0),
            stream,
            error: Mutex::new(None),
            submit_ns,
            start_ns,
            meta,
            spans: Mutex::new(Vec::new()),
        }
    }

    /// Notes (or extends) a core's turn that began at `start_ns` (profiling only).
    #[cold]
    fn note_span(&self, core: u32, blocks: u32, start_ns: u64) {
        let end_ns = crate::clock::now_ns();
        let mut spans = self.spans.lock();
        match spans.iter_mut().find(|s| s.core == core && s.start_ns == start_ns) {
            Some(s) => (s.blocks, s.end_ns) = (blocks, end_ns),
            None => spans.push(CoreSpan {
                core,
                blocks,
                start_ns,
                end_ns,
            }),
        }
    }

    /// True while unclaimed blocks remain.
    pub(crate) fn has_blocks(&self) -> bool {
        self.next.load(Relaxed) < self.blocks
    }

    /// Claims and runs blocks until none are left.
    pub(crate) fn work(&self, core_id: u32) -> JobTurn {
        let t0 = if self.start_ns != 0 { crate::clock::now_ns() } else { 0 };
        let mut ran = 0;
        loop {
            let b = self.next.fetch_add(1, Relaxed);
            if b >= self.blocks {
                return JobTurn::Released;
            }
            if self.error.lock().is_none() {
                let blk = BlockCtx {
                    block_idx: b,
                    block_dim: self.blocks,
                    core_id,
                };
                if let Err(e) = run_block(&*self.kernel, blk) {
                    self.error.lock().get_or_insert(e);
                }
            }
            ran += 1;
            if t0 != 0 {
                // Before the block counts as done: the finisher's record then holds every
                // core's turn.
                self.note_span(core_id, ran, t0);
            }
            if self.done.fetch_add(1, AcqRel) + 1 == self.blocks {
                return JobTurn::Finished(self.error.lock().take());
            }
        }
    }
}

/// Runs one block, turning a fault or a panic into a [`TaskError`].
pub(crate) fn run_block(kernel: &dyn Kernel, blk: BlockCtx) -> Result<(), TaskError> {
    match catch_unwind(AssertUnwindSafe(|| kernel.run_block(blk))) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(fault)) => Err(TaskError::Kernel {
            kernel: kernel.name().to_string(),
            block: blk.block_idx,
            blocks: blk.block_dim,
            message: fault.0,
        }),
        Err(payload) => Err(TaskError::Panic {
            kernel: kernel.name().to_string(),
            block: blk.block_idx,
            message: panic_message(&payload),
        }),
    }
}

pub(crate) fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}
