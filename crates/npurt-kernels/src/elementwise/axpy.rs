//! The fused `out = alpha * x + y`.

use super::*;

struct AxpyKernel {
    alpha: Scalar,
    x: TensorView,
    y: TensorView,
    out: TensorView,
    it: Strided<3>,
}

/// Fused `out = alpha * x + y` (one pass; for floats computed as numpy would: the product
/// rounded, then the sum, in f32). `x`, `y` broadcast to `out`'s shape, all one dtype (not
/// bool); `alpha` must be representable in it. `out` may be exactly `x` or `y`.
pub fn axpy(
    alpha: impl Into<Scalar>,
    x: &TensorView,
    y: &TensorView,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let alpha = alpha.into();
    let dt = out.dtype();
    if dt == DType::Bool {
        return Err(KernelArgError::UnsupportedDType {
            op: "axpy",
            dtype: dt,
            hint: "",
        });
    }
    check_dtype("axpy", "x", x, dt)?;
    check_dtype("axpy", "y", y, dt)?;
    alpha.check_for("axpy", dt)?;
    let (xb, yb) = broadcast_pair_into("axpy", ("x", x), ("y", y), out)?;
    let it = Strided::new(out.shape(), [out.strides(), xb.strides(), yb.strides()]);
    let blocks = blocks_for(it.numel(), GRAIN_ELEMENTWISE, cores);
    Ok((
        Arc::new(AxpyKernel {
            alpha,
            x: xb,
            y: yb,
            out: out.clone(),
            it,
        }),
        blocks,
    ))
}

impl AxpyKernel {
    /// [`AxpyKernel::run`] on the elementwise family's ISA path.
    fn run_best<T: Elem>(&self, s: usize, e: usize) {
        crate::isa::isa_call!(crate::isa::path(crate::isa::Family::Elementwise), AxpyKernel, self, run::<T: Elem>(s: usize, e: usize))
    }

    #[inline(always)]
    fn run<T: Elem>(&self, s: usize, e: usize) {
        let (po, px, py) = (
            self.out.ptr::<T>(),
            self.x.ptr::<T>() as *const T,
            self.y.ptr::<T>() as *const T,
        );
        if T::DTYPE.is_float() {
            let a = self.alpha.to_elem::<f32>();
            let f = move |x: T, y: T| T::from_f32(a * x.to_f32() + y.to_f32());
            // SAFETY: the views were validated by broadcast_pair_into at launch (out is
            // exactly x or y, or disjoint from them); blocks get disjoint output ranges.
            unsafe { map2(&self.it, po, px, py, s, e, f) }
        } else {
            let a = self.alpha.to_elem::<i64>();
            let f = move |x: T, y: T| T::from_i64(a.wrapping_mul(x.to_i64()).wrapping_add(y.to_i64()));
            // SAFETY: as above.
            unsafe { map2(&self.it, po, px, py, s, e, f) }
        }
    }
}

impl Kernel for AxpyKernel {
    fn name(&self) -> &str {
        "axpy"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = split_aligned(blk, self.it.numel(), ALIGN);
        if s < e {
            dispatch_dtype!(self.out.dtype(), T => self.run_best::<T>(s, e));
        }
        Ok(())
    }
}
