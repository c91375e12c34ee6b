//! Device arrays: [`TensorView`]s over [`DeviceBuffer`]s, built safely (the whole strided
//! range is checked to lie inside the buffer, and the view keeps the buffer alive), plus the
//! stream bookkeeping the Python `npurt.DeviceArray` needs (last-writer stream per buffer,
//! device checks, cross-stream ordering before a launch).

use crate::{DType, KernelArgError, Launch, TensorView};
use npurt_core::alloc;
use npurt_core::error::DeviceError;
use npurt_core::memory::{self, DeviceBuffer, DeviceMemory, PagePolicy};
use npurt_core::Pending;
use npurt_core::{Error, Stream};
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};

/// Why an array operation could not be queued: a runtime error (device, stream, memory) or
/// a kernel argument error. Both are raised before anything is queued.
#[derive(Debug, thiserror::Error)]
pub enum ArrayError {
    #[error(transparent)]
    Core(#[from] Error),
    #[error(transparent)]
    Arg(#[from] KernelArgError),
}

fn bad(msg: String) -> KernelArgError {
    KernelArgError::BadView(msg)
}

/// A view of `buf`: element `idx` at `buf.addr() + offset_bytes + Σ idx[d]*strides[d]*itemsize`.
/// Safe: every addressed byte is checked to lie inside the buffer's `nbytes`, and the view
/// holds a clone of the buffer (the memory stays mapped while any view or kernel lives).
/// Access is ordered by streams like every other use of device memory.
pub fn view(
    buf: &DeviceBuffer,
    offset_bytes: usize,
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<isize>,
) -> Result<TensorView, KernelArgError> {
    if shape.len() != strides.len() {
        return Err(bad(format!("shape {shape:?} and strides {strides:?} differ in length")));
    }
    let item = dtype.itemsize() as i128;
    let overflow = || bad(format!("view (shape {shape:?}, strides {strides:?}) overflows"));
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n))
        .ok_or_else(overflow)?;
    let (mut lo, mut hi) = (0i128, 0i128);
    if numel > 0 {
        for (&n, &s) in shape.iter().zip(&strides) {
            // |s| < 2^63 and n < 2^64: the product fits in i128; the sums are checked.
            let ext = s as i128 * (n as i128 - 1);
            if ext < 0 {
                lo = lo.checked_add(ext).ok_or_else(overflow)?;
            } else {
                hi = hi.checked_add(ext).ok_or_else(overflow)?;
            }
        }
        let start = lo.checked_mul(item).and_then(|v| v.checked_add(offset_bytes as i128));
        let end = hi
            .checked_add(1)
            .and_then(|v| v.checked_mul(item))
            .and_then(|v| v.checked_add(offset_bytes as i128));
        let (Some(start), Some(end)) = (start, end) else {
            return Err(overflow());
        };
        if start < 0 || end > buf.nbytes() as i128 {
            return Err(bad(format!(
                "view (offset {offset_bytes} B, shape {shape:?}, strides {strides:?}, {dtype}) spans bytes {start}..{end}, outside the buffer's {} bytes",
                buf.nbytes()
            )));
        }
    } else if offset_bytes > buf.nbytes() {
        return Err(bad(format!(
            "offset {offset_bytes} is past the buffer's {} bytes",
            buf.nbytes()
        )));
    }
    let keep: crate::Keep = Arc::new(buf.clone());
    // SAFETY: every element addressed lies in `buf.addr()..buf.addr()+buf.nbytes()` (checked
    // above), memory that stays mapped while `keep` (a clone of the buffer) lives; access to
    // device memory is ordered by streams (the runtime's contract for all device memory).
    unsafe { TensorView::new(buf.addr() + offset_bytes, dtype, shape, strides, keep) }
}

/// The `cores` hint for kernels: the configured worker count (fixed once the runtime runs).
pub fn cores_hint() -> u32 {
    static CORES: OnceLock<u32> = OnceLock::new();
    *CORES.get_or_init(|| {
        npurt_core::registry::config()
            .map(|c| c.worker_threads.max(1))
            .unwrap_or(1)
    })
}

/// A device array: a buffer, a view of it and the buffer's last-writer stream (shared by
/// every view of the same buffer).
#[derive(Clone)]
pub struct DeviceArray {
    buf: DeviceBuffer,
    view: TensorView,
    offset: usize,
    writer: Arc<Mutex<Option<Stream>>>,
}

impl DeviceArray {
    /// A new contiguous array (contents unspecified) from the device's caching pool
    /// (`mem`, or the current device's). Blocks from the pool are idle for every stream.
    pub fn empty(mem: Option<&Arc<DeviceMemory>>, dtype: DType, shape: Vec<usize>) -> Result<Self, ArrayError> {
        Self::empty_with(dtype, shape, |n| match mem {
            Some(m) => memory::malloc_on(m, n, PagePolicy::HugeFirst),
            None => alloc::malloc(n, PagePolicy::HugeFirst),
        })
    }

    /// [`empty`](Self::empty) for a `device=` argument (None: the current device):
    /// [`alloc::malloc_for`] decides which context's memory limit applies, as for `malloc`.
    pub fn empty_for(device: Option<i64>, dtype: DType, shape: Vec<usize>) -> Result<Self, ArrayError> {
        Self::empty_for_ex(device, dtype, shape, None)
    }

    /// [`empty_for`](Self::empty_for) that says whether the memory must be shareable with
    /// other processes (`None`: the process default; see [`alloc::malloc_ex`]).
    pub fn empty_for_ex(
        device: Option<i64>,
        dtype: DType,
        shape: Vec<usize>,
        shareable: Option<bool>,
    ) -> Result<Self, ArrayError> {
        Self::empty_with(dtype, shape, |n| {
            alloc::malloc_for_ex(device, n, PagePolicy::HugeFirst, shareable)
        })
    }

    /// An array over an existing buffer (e.g. one imported from another process): the
    /// view is checked to lie inside it; no last writer yet.
    pub fn from_buffer(
        buf: DeviceBuffer,
        offset_bytes: usize,
        dtype: DType,
        shape: Vec<usize>,
        strides: Vec<isize>,
    ) -> Result<Self, ArrayError> {
        let view = view(&buf, offset_bytes, dtype, shape, strides)?;
        Ok(DeviceArray {
            buf,
            view,
            offset: offset_bytes,
            writer: Arc::new(Mutex::new(None)),
        })
    }

    fn empty_with(
        dtype: DType,
        shape: Vec<usize>,
        malloc: impl FnOnce(usize) -> npurt_core::Result<DeviceBuffer>,
    ) -> Result<Self, ArrayError> {
        let numel = shape
            .iter()
            .try_fold(1usize, |a, &s| a.checked_mul(s))
            .and_then(|n| n.checked_mul(dtype.itemsize()))
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
        let nbytes = numel.max(1);
        let buf = malloc(nbytes)?;
        let strides = crate::contiguous_strides(&shape);
        let view = view(&buf, 0, dtype, shape, strides)?;
        Ok(DeviceArray {
            buf,
            view,
            offset: 0,
            writer: Arc::new(Mutex::new(None)),
        })
    }

    /// Another view of the same buffer (checked to lie inside it).
    pub fn view_as(
        &self,
        offset_bytes: usize,
        dtype: DType,
        shape: Vec<usize>,
        strides: Vec<isize>,
    ) -> Result<Self, ArrayError> {
        Ok(DeviceArray {
            buf: self.buf.clone(),
            view: view(&self.buf, offset_bytes, dtype, shape, strides)?,
            offset: offset_bytes,
            writer: self.writer.clone(),
        })
    }

    pub fn tensor(&self) -> &TensorView {
        &self.view
    }
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buf
    }
    pub fn offset(&self) -> usize {
        self.offset
    }
    pub fn device(&self) -> u32 {
        self.buf.device()
    }
    /// True if both are views of the same buffer.
    pub fn shares_buffer(&self, other: &DeviceArray) -> bool {
        self.buf == other.buf
    }

    /// The stream that last wrote the buffer, if any.
    pub fn last_writer(&self) -> Option<Stream> {
        self.writer.lock().clone()
    }

    /// Records `s` as the buffer's last writer (no reference-count traffic when it already is).
    pub fn mark_written(&self, s: &Stream) {
        if npurt_core::sanitizer::on() {
            // initcheck: every task writing an array marks it (replays, collectives too)
            let (start, len) = self.tensor().byte_span();
            npurt_core::sanitizer::init::written(start, len);
        }
        let mut w = self.writer.lock();
        if w.as_ref() != Some(s) {
            *w = Some(s.clone());
        }
    }

    /// The last writer if `s` must wait for it: another stream whose work may be pending.
    fn writer_to_wait_for(&self, s: &Stream) -> Option<Stream> {
        let w = self.writer.lock();
        match w.as_ref() {
            // A released writer still counts while its queued work runs.
            Some(w) if w != s && w.has_pending_work() => Some(w.clone()),
            _ => None,
        }
    }

    /// Checks the buffer is usable and on `s`'s device (`what` names it in the error).
    fn check_on(&self, s: &Stream, what: &'static str) -> Result<(), Error> {
        self.buf.check()?;
        if self.buf.device() != s.device() {
            return Err(DeviceError::WrongDevice {
                what,
                owner: self.buf.device(),
                current: s.device(),
            }
            .into());
        }
        Ok(())
    }

    /// [`prepare_on`](Self::prepare_on)'s checks; true when no other stream's write is pending.
    pub fn ready_on(&self, s: &Stream) -> Result<bool, Error> {
        self.check_on(s, "array").map(|()| self.writer_to_wait_for(s).is_none())
    }

    /// Checks the buffer is usable and on `s`'s device, and orders `s` after the buffer's
    /// last writer if that is another stream (a device-side wait, no host blocking).
    pub fn prepare_on(&self, s: &Stream) -> Result<(), Error> {
        self.check_on(s, "array")?;
        match self.order_after_writer(s)? {
            Some(p) => s.push_pending(p).map(drop), // may block on a full ring
            None => Ok(()),
        }
    }

    /// Orders `s` after the buffer's last writer if that is another stream (device-side).
    /// Never blocks: a full ring gives the wait back.
    fn order_after_writer(&self, s: &Stream) -> Result<Option<Pending>, Error> {
        match self.writer_to_wait_for(s) {
            Some(w) => s.try_wait_writer(&w),
            None => Ok(None),
        }
    }

    /// Waits (blocking) until every write queued on the buffer has completed: waits for its
    /// last-writer stream (also when that stream was released meanwhile), raising its
    /// sticky error.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.wait_writes(None).map(drop)
    }

    /// [`synchronize`](Self::synchronize) for at most `timeout`; true when the writes are
    /// done (bindings wait in slices and check for signals in between).
    pub fn wait_writes(&self, timeout: Option<std::time::Duration>) -> Result<bool, Error> {
        self.buf.check()?;
        match self.last_writer() {
            Some(w) if w.has_pending_work() || w.check().is_err() => {
                let target = w.submitted_count();
                w.wait_completed(target, timeout)
            }
            _ => Ok(true),
        }
    }
}

/// The part of a launch that found the stream's ring full: device-side waits, then the
/// kernel. [`finish_launch`] pushes them in order (it blocks: release the GIL first).
pub struct PendingLaunch {
    waits: Vec<Pending>,
    kernel: Pending,
}

/// Queues a kernel built by `build(cores)` on `s`, after checking `inputs` and `out` (usable,
/// on `s`'s device; `s` is ordered after their last writers). Returns the task when the
/// stream's ring is full (push it with [`finish_launch`] once the GIL is released);
/// otherwise marks `out` written.
pub fn launch(
    s: &Stream,
    inputs: &[&DeviceArray],
    out: &DeviceArray,
    build: impl FnOnce(u32) -> Result<Launch, KernelArgError>,
) -> Result<Option<PendingLaunch>, ArrayError> {
    for a in inputs {
        a.check_on(s, "array")?;
    }
    out.check_on(s, "output array")?;
    let (kernel, blocks) = build(cores_hint())?;
    if crate::replay::capture(&kernel, blocks, inputs) {
        return Ok(None); // recorded for a replay (replay.rs), not queued
    }
    if npurt_core::sanitizer::on() {
        stage_accesses(s, kernel.name(), inputs, out);
    }
    // The implicit waits never block here (the caller may hold the GIL, and a full ring may
    // be waiting for host callbacks that need it): a wait that finds the ring full defers
    // it and everything after it to `finish_launch`. No allocation unless that happens.
    let mut waits = Vec::new();
    for a in inputs.iter().copied().chain(std::iter::once(out)) {
        if let Some(p) = a.order_after_writer(s)? {
            waits.push(p);
        }
    }
    let pending = if waits.is_empty() {
        s.try_launch(kernel, blocks)?.err()
    } else {
        Some(s.pending_launch(kernel, blocks)?)
    };
    out.mark_written(s);
    if pending.is_some() {
        log::debug!(
            "launch deferred: stream {} (device {}) is full; {} waits go first",
            s.id(),
            s.device(),
            waits.len()
        );
    }
    Ok(pending.map(|kernel| PendingLaunch { waits, kernel }))
}

/// The sanitizer's view of a launch: the byte span of each input read, the output's
/// written (a strided view counts as its whole span).
#[cold]
fn stage_accesses(s: &Stream, name: &str, inputs: &[&DeviceArray], out: &DeviceArray) {
    use npurt_core::sanitizer::race::{stage, Access};
    let span = |a: &DeviceArray, write| {
        let (start, len) = a.tensor().byte_span();
        Access { start, len, write }
    };
    let mut acc: Vec<Access> = inputs.iter().map(|a| span(a, false)).collect();
    acc.push(span(out, true));
    stage(s.id(), &format!("kernel {name}"), acc);
}

/// Pushes what [`launch`] returned, in order (waits for room in the ring).
pub fn finish_launch(s: &Stream, p: PendingLaunch) -> Result<(), Error> {
    for w in p.waits {
        s.push_pending(w)?;
    }
    s.push_pending(p.kernel).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_must_lie_inside_the_buffer() {
        let mem = alloc::device_memory(0).unwrap();
        let buf = memory::malloc_on(&mem, 64, PagePolicy::HugeFirst).unwrap();
        let f = DType::F32;
        assert!(view(&buf, 0, f, vec![4, 4], vec![4, 1]).is_ok());
        assert!(view(&buf, 4, f, vec![4, 4], vec![4, 1]).is_err());
        assert!(view(&buf, 0, f, vec![5, 4], vec![4, 1]).is_err());
        assert!(view(&buf, 0, f, vec![2, 2], vec![-4, 1]).is_err());
        assert!(view(&buf, 48, f, vec![2, 2], vec![-4, 1]).is_ok());
        assert!(view(&buf, 0, f, vec![4, 4], vec![1, 4]).is_ok());
        assert!(view(&buf, 0, f, vec![0, 100], vec![100, 1]).is_ok());
        assert!(view(&buf, 65, f, vec![0], vec![1]).is_err());
        assert!(view(&buf, 0, f, vec![4], vec![4, 1]).is_err());
        assert!(view(&buf, 0, DType::I64, vec![8], vec![1]).is_ok());
        assert!(view(&buf, 0, f, vec![usize::MAX / 2, 2], vec![isize::MAX, 1]).is_err());
        let v = view(&buf, 48, f, vec![2, 2], vec![-4, 1]).unwrap();
        assert_eq!(v.byte_span(), (buf.addr() + 32, 24), "rows at bytes 48.. and 32..");
        assert_eq!(view(&buf, 8, f, vec![0, 3], vec![3, 1]).unwrap().byte_span().1, 0);
        let a = DeviceArray::empty(Some(&mem), f, vec![3, 5]).unwrap();
        assert!(a.view_as(0, f, vec![5, 3], vec![1, 5]).is_ok());
        assert!(a.view_as(4, f, vec![5, 3], vec![1, 5]).is_err());
    }
}
