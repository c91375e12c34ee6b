//! Casts, copies and fill.

use super::*;

struct CastKernel {
    name: &'static str,
    x: TensorView,
    out: TensorView,
    it: Strided<2>,
}

/// `out = x.astype(out.dtype)` (numpy's cast rules; float→int truncates toward zero and
/// saturates out of range, NaN→0; →bool is `!= 0`), `x` broadcast to `out`'s shape. In
/// place only with the same dtype (a no-op).
pub fn cast(x: &TensorView, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    cast_impl("cast", x, out, cores)
}

/// `out[...] = x` (numpy's `copyto`), `x` broadcast to `out`'s shape, same dtype. Copying
/// a permuted, sliced or broadcast view materialises it (a (batched) 2-D transpose with the
/// tiled kernel of [`crate::permute`]).
pub fn copy(x: &TensorView, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    check_dtype("copy", "x", x, out.dtype())?;
    if x.shape() == out.shape() && !out.same_layout(x) {
        check_output("copy", out, &[("x", x)], false)?;
        if let Some(l) = crate::movement::transpose_plan(x, out, cores) {
            return Ok(l);
        }
    }
    cast_impl("copy", x, out, cores)
}

pub(crate) fn cast_impl(
    name: &'static str,
    x: &TensorView,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let xb = broadcast_into(name, x, out)?;
    let it = Strided::new(out.shape(), [out.strides(), xb.strides()]);
    let blocks = blocks_for(it.numel(), GRAIN_ELEMENTWISE, cores);
    Ok((
        Arc::new(CastKernel {
            name,
            x: xb,
            out: out.clone(),
            it,
        }),
        blocks,
    ))
}

impl CastKernel {
    /// [`CastKernel::run`] on the cast family's ISA path (float→int at most AVX2: its
    /// AVX-512 code measured slower).
    fn run_best<I: Elem, O: Elem>(&self, s: usize, e: usize) {
        let mut level = crate::isa::path(crate::isa::Family::Cast);
        if I::DTYPE.is_float() && !O::DTYPE.is_float() {
            level = level.min(crate::isa::Isa::Avx2);
        }
        crate::isa::isa_call!(level, CastKernel, self, run::<I: Elem, O: Elem>(s: usize, e: usize))
    }

    #[inline(always)]
    fn run<I: Elem, O: Elem>(&self, s: usize, e: usize) {
        // SAFETY: the views were validated by broadcast_into at launch (in place only as the
        // same layout, which requires I == O); blocks get disjoint output ranges.
        unsafe { map1(&self.it, &self.out, &self.x, s, e, |v: I| v.cast::<O>()) }
    }
}

impl Kernel for CastKernel {
    fn name(&self) -> &str {
        self.name
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = split_aligned(blk, self.it.numel(), ALIGN);
        if s >= e {
            return Ok(());
        }
        if self.x.dtype() == self.out.dtype() {
            // A plain copy (bit patterns preserved, e.g. NaN payloads, bool bytes).
            let [so, sx] = self.it.inner_strides();
            if self.x.same_layout(&self.out) {
                return Ok(()); // in place: nothing to do
            }
            by_size!(self.out.dtype().itemsize(), T => {
                let (po, px) = (self.out.ptr::<T>(), self.x.ptr::<T>() as *const T);
                self.it.for_each_run(s, e, |off, n| {
                    // SAFETY: the views' contract; out does not overlap x (check_output:
                    // overlap is only allowed as the same layout, handled above); blocks
                    // own disjoint ranges.
                    unsafe { copy_run(po.wrapping_offset(off[0]), so, px.wrapping_offset(off[1]), sx, n) }
                });
            });
        } else {
            dispatch_dtype!(self.out.dtype(), O => dispatch_dtype!(self.x.dtype(), I => self.run_best::<I, O>(s, e)));
        }
        Ok(())
    }
}

/// `out[...] = value` (numpy's `fill`; zeros/ones/full). The value must be representable in
/// `out`'s dtype.
pub fn fill(out: &TensorView, value: impl Into<Scalar>, cores: u32) -> Result<Launch, KernelArgError> {
    let value = value.into();
    value.check_for("fill", out.dtype())?;
    let x = scalar_view(out.dtype(), value, out.shape());
    cast_impl("fill", &x, out, cores)
}
