//! Recorded launch lists: a model plan's kernels built once and replayed per run.
//!
//! Recording: between [`begin`] and [`end`] on one thread, every [`launch`] on that
//! thread is *captured* instead of queued: the kernel object (views, shapes and scalars
//! already checked and bound) and its block count are kept in order. [`end`] turns the
//! capture into an [`Instance`]: the launch list plus the arrays it was bound to (the run's
//! inputs, outputs and, through the kernels' views, its workspace). Anything that cannot be
//! replayed (random draws, which reserve generator offsets at launch; any task pushed on
//! the recording stream some other way) *taints* the capture and `end` refuses it.
//!
//! Replaying ([`Replay::run`]): claim an instance whose last run was queued on the same
//! stream (stream order runs the new run after it, and its workspace is the warmest), else
//! an idle one (its previous run completed), copy the caller's inputs into the instance's,
//! push the kernel list (one `Arc` clone and one ring push each: no per-node shape work or
//! allocation), copy the instance's outputs into the caller's. A kernel object may be
//! launched again once its previous launch has completed (the crate's rule): on the same
//! stream the new launch runs after it; on another, the instance must be idle (its
//! stream's completed count reached the last task of its run). So a stream with many runs
//! queued needs one instance, not one per run.
//!
//! The sanitizer sees a replay's input and output copies as accesses to the caller's
//! arrays (racecheck, initcheck); the instance's own arrays and kernels are not tracked.
//!
//! [`launch`]: crate::array::launch

use crate::array::{cores_hint, ArrayError, DeviceArray};
use crate::{copy, KernelArgError};
use npurt_core::{Error, Kernel, Stream};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::Arc;

type Captured = (Arc<dyn Kernel>, u32);

struct Capture {
    launches: Vec<Captured>,
    reads: Vec<DeviceArray>,
    taint: Option<String>,
    stream: Stream,
    submitted: u64,
}

thread_local! {
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

/// Starts capturing this thread's launches (`s`: the stream the plan runs on; a task
/// pushed on it while capturing taints the capture).
pub fn begin(s: &Stream) -> Result<(), KernelArgError> {
    CAPTURE.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_some() {
            return Err(KernelArgError::BadView(
                "a launch capture is already running on this thread".into(),
            ));
        }
        *c = Some(Capture {
            launches: Vec::new(),
            reads: Vec::new(),
            taint: None,
            stream: s.clone(),
            submitted: s.submitted_count(),
        });
        Ok(())
    })
}

/// Stops capturing and drops what was captured (a failed recording).
pub fn abort() {
    CAPTURE.with(|c| c.borrow_mut().take());
}

/// True while this thread captures launches.
pub fn capturing() -> bool {
    CAPTURE.with(|c| c.borrow().is_some())
}

/// Keeps `kernel` instead of launching it when this thread captures (true if kept).
pub(crate) fn capture(kernel: &Arc<dyn Kernel>, blocks: u32, inputs: &[&DeviceArray]) -> bool {
    CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(cap) => {
            cap.launches.push((kernel.clone(), blocks));
            cap.reads.extend(inputs.iter().map(|a| (*a).clone()));
            true
        }
        None => false,
    })
}

/// Marks the running capture (if any) as not replayable, saying why.
pub(crate) fn taint(why: &str) {
    CAPTURE.with(|c| {
        if let Some(cap) = c.borrow_mut().as_mut() {
            cap.taint.get_or_insert_with(|| why.to_string());
        }
    })
}

/// A plan bound to its own arrays: the captured launch list, the arrays its inputs are
/// copied into (None: an input no kernel reads) and the arrays its outputs are read from.
pub struct Instance {
    inputs: Vec<Option<DeviceArray>>,
    outputs: Vec<DeviceArray>,
    launches: Vec<Captured>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("inputs", &self.inputs.len())
            .field("outputs", &self.outputs.len())
            .field("launches", &self.launches.len())
            .finish()
    }
}

impl Instance {
    /// Kernels replayed per run (without the input and output copies).
    pub fn len(&self) -> usize {
        self.launches.len()
    }
    pub fn is_empty(&self) -> bool {
        self.launches.is_empty()
    }
}

/// Ends the capture: an [`Instance`] over `inputs` / `outputs`, or why it cannot be replayed.
/// Waits (blocking: call without the GIL) for pending writes of the arrays the kernels read
/// that are not the instance's own (weights, plan constants), so a replay needs no waits.
pub fn end(inputs: Vec<Option<DeviceArray>>, outputs: Vec<DeviceArray>) -> Result<Result<Instance, String>, Error> {
    let Some(cap) = CAPTURE.with(|c| c.borrow_mut().take()) else {
        return Ok(Err("no launch capture is running on this thread".into()));
    };
    if let Some(why) = cap.taint {
        return Ok(Err(why));
    }
    if cap.stream.submitted_count() != cap.submitted {
        return Ok(Err(
            "a step queued work other than kernels (copies, waits or callbacks)".into(),
        ));
    }
    for a in &cap.reads {
        a.synchronize()?;
    }
    Ok(Ok(Instance {
        inputs,
        outputs,
        launches: cap.launches,
    }))
}

enum State {
    Free,
    Claimed,
    Busy(Stream, u64),
}

/// The instances of one plan, each used by one run at a time.
#[derive(Default)]
pub struct Replay {
    slots: Mutex<Vec<(Arc<Instance>, State)>>,
}

fn push(s: &Stream, (k, b): Captured) -> Result<(), Error> {
    match s.try_launch(k, b)? {
        Ok(_) => Ok(()),
        Err(p) => s.push_pending(p).map(drop),
    }
}

/// Queues a copy kernel `src` → `dst`; `caller` is the side that is the caller's array
/// (`Caller::Reads`: `src`; `Caller::Writes`: `dst`), which the sanitizer sees accessed.
fn copy_launch(s: &Stream, src: &DeviceArray, dst: &DeviceArray, caller: Caller) -> Result<(), ArrayError> {
    if src.tensor().numel() == 0 {
        return Ok(());
    }
    let k = copy(src.tensor(), dst.tensor(), cores_hint())?;
    if npurt_core::sanitizer::on() {
        stage_caller(s, caller, src, dst);
    }
    push(s, k)?;
    Ok(())
}

/// Which side of a replay's copy is the caller's array.
#[derive(Clone, Copy)]
enum Caller {
    /// An input copy: the caller's array is read.
    Reads,
    /// An output copy: the caller's array is written.
    Writes,
}

/// racecheck and initcheck see a replay's copies in and out as accesses to the caller's
/// arrays. The instance's own arrays and its kernels are not tracked: they are private to
/// the instance, which runs once at a time (a claim waits for the previous run).
#[cold]
fn stage_caller(s: &Stream, caller: Caller, src: &DeviceArray, dst: &DeviceArray) {
    use npurt_core::sanitizer::race::{stage, Access};
    let (a, write, what) = match caller {
        Caller::Reads => (src, false, "kernel copy (replay input)"),
        Caller::Writes => (dst, true, "kernel copy (replay output)"),
    };
    let (start, len) = a.tensor().byte_span();
    stage(s.id(), what, vec![Access { start, len, write }]);
}

impl Replay {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an instance (idle).
    pub fn add(&self, inst: Instance) {
        self.slots.lock().push((Arc::new(inst), State::Free));
    }

    /// How many instances there are.
    pub fn instances(&self) -> usize {
        self.slots.lock().len()
    }

    /// An instance a run on `s` may use, marked claimed, with the state to restore if the
    /// run queues nothing: one whose last run was queued on `s` itself first (stream order
    /// runs the new run after it, and its workspace is the warmest), else an idle one.
    fn claim(&self, s: &Stream) -> Option<(usize, Arc<Instance>, State)> {
        let mut slots = self.slots.lock();
        let mut idle = None;
        for (i, (_, st)) in slots.iter().enumerate() {
            match st {
                State::Busy(b, _) if b == s => {
                    idle = Some(i);
                    break;
                }
                State::Free if idle.is_none() => idle = Some(i),
                State::Busy(b, target) if idle.is_none() && b.completed() >= *target => idle = Some(i),
                _ => {}
            }
        }
        let i = idle?;
        let prev = std::mem::replace(&mut slots[i].1, State::Claimed);
        Some((i, slots[i].0.clone(), prev))
    }

    /// Queues one run on `s`: `inputs` (contiguous, the instance's shapes and dtypes) are
    /// copied in, the kernels pushed, the results copied into `outputs`, which become
    /// written by `s`. False (nothing queued) when every instance is busy. May block on a
    /// full ring: call without the GIL.
    pub fn run(&self, s: &Stream, inputs: &[DeviceArray], outputs: &[DeviceArray]) -> Result<bool, ArrayError> {
        let Some((i, inst, prev)) = self.claim(s) else {
            return Ok(false);
        };
        self.queue_claimed((i, prev), &inst, s, inputs, outputs).map(|()| true)
    }

    /// [`Replay::run`] into new arrays of the instance's output shapes and dtypes on its
    /// device (the caching pool, as `DeviceArray::empty_for`), returned; None when every
    /// instance is busy. One call for a serving loop's request.
    pub fn run_fresh(&self, s: &Stream, inputs: &[DeviceArray]) -> Result<Option<Vec<DeviceArray>>, ArrayError> {
        let Some((i, inst, prev)) = self.claim(s) else {
            return Ok(None);
        };
        let outs = inst
            .outputs
            .iter()
            .map(|o| {
                DeviceArray::empty_for(
                    Some(i64::from(o.device())),
                    o.tensor().dtype(),
                    o.tensor().shape().to_vec(),
                )
            })
            .collect::<Result<Vec<_>, _>>();
        match outs {
            Ok(outs) => self
                .queue_claimed((i, prev), &inst, s, inputs, &outs)
                .map(|()| Some(outs)),
            Err(e) => {
                self.slots.lock()[i].1 = prev;
                Err(e)
            }
        }
    }

    /// Queues a run of claimed instance `i` and records it busy until that run completes
    /// (`prev`, its state before the claim, when nothing was queued).
    fn queue_claimed(
        &self,
        (i, prev): (usize, State),
        inst: &Instance,
        s: &Stream,
        inputs: &[DeviceArray],
        outputs: &[DeviceArray],
    ) -> Result<(), ArrayError> {
        let before = s.submitted_count();
        let res = Self::queue(inst, s, inputs, outputs);
        let state = if s.submitted_count() == before {
            prev
        } else {
            State::Busy(s.clone(), s.submitted_count())
        };
        self.slots.lock()[i].1 = state;
        res
    }

    fn queue(inst: &Instance, s: &Stream, inputs: &[DeviceArray], outputs: &[DeviceArray]) -> Result<(), ArrayError> {
        if inputs.len() != inst.inputs.len() || outputs.len() != inst.outputs.len() {
            return Err(KernelArgError::BadView(format!(
                "a replay takes {} inputs and {} outputs, got {} and {}",
                inst.inputs.len(),
                inst.outputs.len(),
                inputs.len(),
                outputs.len()
            ))
            .into());
        }
        for (x, dst) in inputs.iter().zip(&inst.inputs) {
            if let Some(dst) = dst {
                x.prepare_on(s)?;
                copy_launch(s, x, dst, Caller::Reads)?;
            }
        }
        for k in &inst.launches {
            push(s, k.clone())?;
        }
        for (src, o) in inst.outputs.iter().zip(outputs) {
            o.prepare_on(s)?;
            copy_launch(s, src, o, Caller::Writes)?;
            o.mark_written(s);
        }
        Ok(())
    }
}
