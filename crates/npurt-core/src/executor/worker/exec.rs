//! Running one task of a stream the worker owns (kernels inline or as jobs, records,
//! waits, engine hand-offs), and the task records the profiler gets.

use super::*;

impl Worker {
    pub(super) fn finish_job(&self, job: &Job, err: Option<crate::error::TaskError>) {
        let failed = err.is_some();
        if let Some(e) = err {
            job.stream.set_error_at(e, job.meta);
        }
        if job.start_ns != 0 {
            let mut rec = record(
                &job.stream,
                TaskKind::Kernel,
                job.kernel.name(),
                job.submit_ns,
                job.start_ns,
                job.meta,
            );
            rec.blocks = job.blocks;
            rec.spans = std::mem::take(&mut *job.spans.lock());
            rec.spans.sort_by_key(|s| (s.core, s.start_ns));
            rec.failed = failed;
            job.stream.dev.profiler.emit(rec);
        }
        job.stream.timeline.advance(1);
    }

    /// An injected fault for this kernel launch (`NPURT_FAULT=kernel:N` / `hang:N`); true
    /// if one fired (the kernel then does not run). A failure sets the stream's sticky
    /// error as a real kernel fault does; a hang holds this core until the stream is
    /// aborted or the device goes down (a forced destroy or reset ends it).
    #[cold]
    fn injected(&self, s: &StreamInner, kernel: &dyn crate::kernel::Kernel, blocks: u32) -> bool {
        use crate::fault::{fires, stall, Fault};
        if fires(Fault::Kernel) {
            s.set_error(TaskError::Kernel {
                kernel: kernel.name().to_string(),
                block: 0,
                blocks,
                message: "injected fault (NPURT_FAULT kernel)".to_string(),
            });
            return true;
        }
        if fires(Fault::Hang) {
            stall(None, || {
                s.aborted() || self.dev.shutdown.load(Acquire) || crate::lifecycle::is_shut_down()
            });
            return true;
        }
        false
    }

    /// Runs one task. Returns false when the stream was handed to someone else.
    pub(super) fn exec(&mut self, s: &Arc<StreamInner>, task: Task) -> bool {
        let Task { op, submit_ns, meta } = task;
        // A task created while its device was observed carries its submit time.
        let profiling = submit_ns != 0;
        let start_ns = if profiling { crate::clock::now_ns() } else { 0 };
        let kind = op.kind();
        let mut wait_on = None;
        match op {
            Op::Kernel { kernel, blocks } if crate::fault::armed() && self.injected(s, &*kernel, blocks) => {}
            Op::Kernel { kernel, blocks: 1 } => {
                let blk = BlockCtx {
                    block_idx: 0,
                    block_dim: 1,
                    core_id: self.core,
                };
                let r = run_block(&*kernel, blk);
                let failed = r.is_err();
                if let Err(e) = r {
                    s.set_error_at(e, meta);
                }
                if profiling {
                    let mut rec = record(s, kind, kernel.name(), submit_ns, start_ns, meta);
                    (rec.core, rec.failed) = (self.core, failed);
                    s.dev.profiler.emit(rec);
                }
            }
            Op::Kernel { kernel, blocks } => {
                let job = Arc::new(Job::new(kernel, blocks, s.clone(), submit_ns, meta));
                self.dev.publish(job.clone());
                return match job.work(self.core) {
                    JobTurn::Finished(err) => {
                        self.finish_job(&job, err);
                        true
                    }
                    JobTurn::Released => false,
                };
            }
            Op::Record(stamp) => stamp.store(crate::clock::now_ns(), Release),
            Op::Wait { on, target, timeout } => {
                wait_on = Some((on.id, target));
                if on.timeline.completed() < target {
                    // Whoever comes first (the target or the deadline) resumes the stream;
                    // reaching the target first cancels the timer entry.
                    let once = Arc::new(AtomicBool::new(false));
                    let key = timeout.map(|t| {
                        let (me, first) = (Arc::downgrade(s), once.clone());
                        crate::executor::timer::schedule(
                            Instant::now() + t,
                            Box::new(move || {
                                if !first.swap(true, AcqRel) {
                                    if let Some(me) = me.upgrade() {
                                        me.set_error_at(TaskError::WaitTimeout { secs: t.as_secs_f64() }, meta);
                                        if profiling {
                                            let mut rec = record(
                                                &me,
                                                TaskKind::Wait,
                                                TaskKind::Wait.label(),
                                                submit_ns,
                                                start_ns,
                                                meta,
                                            );
                                            (rec.wait_on, rec.failed) = (wait_on, true);
                                            me.dev.profiler.emit(rec);
                                        }
                                        resume(me);
                                    }
                                }
                            }),
                        )
                    });
                    let (me, first) = (s.clone(), once.clone());
                    let wake = Wake::Resume(Box::new(move || {
                        if !first.swap(true, AcqRel) {
                            if let Some(k) = key {
                                crate::executor::timer::cancel(k);
                            }
                            if profiling {
                                let mut rec =
                                    record(&me, TaskKind::Wait, TaskKind::Wait.label(), submit_ns, start_ns, meta);
                                rec.wait_on = wait_on;
                                me.dev.profiler.emit(rec);
                            }
                            resume(me);
                        }
                    }));
                    if let Registered::Queued = on.timeline.register(target, wake) {
                        return false;
                    }
                    // The target was reached meanwhile: carry on, unless the deadline won.
                    if once.swap(true, AcqRel) {
                        return false; // the timer already failed and resumed the stream
                    }
                    if let Some(k) = key {
                        crate::executor::timer::cancel(k);
                    }
                }
            }
            Op::WaitExternal { cond, timeout } => match cond.poll(false) {
                Ok(true) => {}
                Err(e) => s.set_error_at(e, meta),
                Ok(false) => {
                    crate::executor::extwait::park(s.clone(), cond, timeout, meta);
                    return false;
                }
            },
            Op::Engine(engine, op, desc) => {
                s.dev.send_engine(
                    engine,
                    EngineJob {
                        stream: s.clone(),
                        op,
                        submit_ns,
                        meta,
                        desc,
                    },
                );
                return false;
            }
        }
        if profiling && kind != TaskKind::Kernel {
            let mut rec = record(s, kind, kind.label(), submit_ns, start_ns, meta);
            rec.wait_on = wait_on;
            s.dev.profiler.emit(rec);
        }
        s.timeline.advance(1);
        true
    }
}

/// Whether `op` is known to run in about a microsecond (see `held.rs`): a tiny one-block
/// kernel, or a task that only hands the stream on (records, waits, engine work).
pub(super) fn is_tiny(op: &Op) -> bool {
    match op {
        Op::Kernel { kernel, blocks: 1 } => kernel.is_tiny() && !crate::fault::armed(),
        Op::Record(_) | Op::Wait { .. } | Op::Engine(..) => true,
        _ => false, // multi-block kernels; kinds added later are not tiny unless listed
    }
}

/// A record of a task of `s` that ends now (the fields every kind has; the caller fills
/// in the rest). The task's sequence number is the stream's completed count: tasks
/// complete in order and this one has not been counted yet.
pub(in crate::executor) fn record(
    s: &StreamInner,
    kind: TaskKind,
    name: &str,
    submit_ns: u64,
    start_ns: u64,
    meta: u32,
) -> TaskRecord {
    TaskRecord {
        device: s.dev.ordinal,
        context: s.ctx_id,
        stream: s.id,
        seq: s.timeline.completed(),
        kind,
        name: crate::profiler::intern_name(name),
        blocks: 1,
        bytes: 0,
        core: NO_CORE,
        spans: Vec::new(),
        submit_ns,
        start_ns,
        end_ns: crate::clock::now_ns(),
        meta,
        wait_on: None,
        failed: false,
    }
}
