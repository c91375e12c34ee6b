//! Unary elementwise math (`exp`, `log`, `relu`, ...).

use super::*;

struct UnaryKernel {
    op: UnaryOp,
    x: TensorView,
    out: TensorView,
    it: Strided<2>,
}

/// `out = op(x)`; `x` is broadcast to `out`'s shape; same dtype; `out` may be `x` itself.
pub fn unary(op: UnaryOp, x: &TensorView, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    let name = op.name();
    check_dtype(name, "x", x, out.dtype())?;
    if !op.supports(x.dtype()) {
        let hint = if x.dtype().is_float() {
            ""
        } else {
            " (cast to a float dtype first)"
        };
        return Err(KernelArgError::UnsupportedDType {
            op: name,
            dtype: x.dtype(),
            hint,
        });
    }
    let xb = broadcast_into(name, x, out)?;
    let it = Strided::new(out.shape(), [out.strides(), xb.strides()]);
    let grain = if op.transcendental() {
        GRAIN_TRANSCENDENTAL
    } else {
        GRAIN_ELEMENTWISE
    };
    let blocks = blocks_for(it.numel(), grain, cores);
    Ok((
        Arc::new(UnaryKernel {
            op,
            x: xb,
            out: out.clone(),
            it,
        }),
        blocks,
    ))
}

impl UnaryKernel {
    /// [`UnaryKernel::run`] on the elementwise family's ISA path.
    fn run_best<T: Elem>(&self, s: usize, e: usize) {
        crate::isa::isa_call!(crate::isa::path(crate::isa::Family::Elementwise), UnaryKernel, self, run::<T: Elem>(s: usize, e: usize))
    }

    #[inline(always)]
    fn map<T: Elem>(&self, s: usize, e: usize, f: impl Map1<T, T>) {
        // SAFETY: the views were validated by broadcast_into at launch (out is exactly x or
        // disjoint from it); blocks get disjoint output ranges.
        unsafe { map1(&self.it, &self.out, &self.x, s, e, f) }
    }

    #[inline(always)]
    fn run<T: Elem>(&self, s: usize, e: usize) {
        use UnaryOp::*;
        let float = T::DTYPE.is_float();
        match self.op {
            Exp => self.map::<T>(s, e, F32Op(math::exp)),
            Log => self.map::<T>(s, e, F32Op(math::log)),
            Sqrt => self.map::<T>(s, e, F32Op(f32::sqrt)),
            Rsqrt => self.map::<T>(s, e, F32Op(rsqrt)),
            Tanh => self.map::<T>(s, e, F32Op(math::tanh)),
            Sigmoid => self.map::<T>(s, e, F32Op(math::sigmoid)),
            Gelu => self.map::<T>(s, e, F32Op(math::gelu_erf)),
            GeluTanh => self.map::<T>(s, e, F32Op(math::gelu_tanh)),
            Silu => self.map::<T>(s, e, F32Op(math::silu)),
            Relu if float => self.map::<T>(s, e, F32Op(super::formulas::relu)),
            Relu => self.map::<T>(s, e, |x: T| T::from_i64(x.to_i64().max(0))),
            Abs if float => self.map::<T>(s, e, F32Op(f32::abs)),
            Abs => self.map::<T>(s, e, |x: T| T::from_i64(x.to_i64().wrapping_abs())),
            Neg if float => self.map::<T>(s, e, F32Op(neg)),
            Neg => self.map::<T>(s, e, |x: T| T::from_i64(x.to_i64().wrapping_neg())),
        }
    }
}

#[inline(always)]
fn rsqrt(x: f32) -> f32 {
    1.0 / x.sqrt()
}
#[inline(always)]
fn neg(v: f32) -> f32 {
    -v
}

/// A float op computed in f32 (f16/bf16 converted on load, rounded once on store); the
/// function is a fn item (a zero-sized type), so `call` inlines its body at every loop.
#[derive(Clone, Copy)]
struct F32Op<G>(G);

impl<T: Elem, G: Fn(f32) -> f32 + Copy> Map1<T, T> for F32Op<G> {
    #[inline(always)]
    fn call(self, x: T) -> T {
        T::from_f32((self.0)(x.to_f32()))
    }
}

impl Kernel for UnaryKernel {
    fn name(&self) -> &str {
        self.op.name()
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = split_aligned(blk, self.it.numel(), ALIGN);
        if s < e {
            dispatch_dtype!(self.out.dtype(), T => self.run_best::<T>(s, e));
        }
        Ok(())
    }
}
