//! Fill: every block writes its share of a memory range with a value pattern.

use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::any::Any;

/// Memory a [`Fill`] writes: a raw range plus whatever keeps it alive until the kernel is
/// done (a device buffer, a pinned host buffer, a Python buffer export...).
pub struct FillTarget {
    ptr: usize,
    len: usize,
    _keep: Box<dyn Any + Send + Sync>,
}

impl FillTarget {
    /// # Safety
    /// `ptr..ptr+len` must be valid for writes for as long as `keep` lives, and nothing else
    /// may access that range while the kernel runs (the caller orders access with the
    /// stream, as for any device buffer).
    pub unsafe fn new(ptr: *mut u8, len: usize, keep: Box<dyn Any + Send + Sync>) -> Self {
        Self {
            ptr: ptr as usize,
            len,
            _keep: keep,
        }
    }
}

/// Writes `pattern` (repeated; its length must divide the range length) over the target.
pub struct Fill {
    target: FillTarget,
    pattern: Vec<u8>,
}

impl Fill {
    /// Checks that the pattern tiles the range.
    pub fn new(target: FillTarget, pattern: Vec<u8>) -> Result<Self, String> {
        if pattern.is_empty() || !target.len.is_multiple_of(pattern.len()) {
            return Err(format!(
                "fill pattern of {} bytes does not tile a range of {} bytes",
                pattern.len(),
                target.len
            ));
        }
        Ok(Self { target, pattern })
    }
}

impl Kernel for Fill {
    fn name(&self) -> &str {
        "fill"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let elem = self.pattern.len();
        let (start, end) = blk.split(self.target.len / elem);
        let bytes = (end - start) * elem;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: FillTarget::new's contract makes the whole range writable while the kernel
        // lives; blocks get disjoint element ranges from BlockCtx::split.
        let out = unsafe { std::slice::from_raw_parts_mut((self.target.ptr as *mut u8).add(start * elem), bytes) };
        for chunk in out.chunks_exact_mut(elem) {
            chunk.copy_from_slice(&self.pattern);
        }
        Ok(())
    }
}
