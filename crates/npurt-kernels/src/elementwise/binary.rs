//! Binary elementwise arithmetic with numpy broadcasting and scalar operands.

use super::*;

struct BinaryKernel {
    op: BinaryOp,
    a: TensorView,
    b: TensorView,
    out: TensorView,
    it: Strided<3>,
}

fn operand_view(op: &'static str, what: &'static str, x: Operand, dtype: DType) -> Result<TensorView, KernelArgError> {
    match x {
        Operand::Tensor(t) => {
            check_dtype(op, what, &t, dtype)?;
            Ok(t)
        }
        Operand::Scalar(s) => {
            s.check_for(op, dtype)?;
            Ok(scalar_view(dtype, s, &[]))
        }
    }
}

/// `out = a op b` with numpy broadcasting (`a` and `b` broadcast together, then into
/// `out`'s shape); scalars are converted to `out`'s dtype (they must be representable:
/// numpy's type promotion is the caller's job). Tensors must have `out`'s dtype. `out` may
/// be exactly `a` and/or `b` (in place); any other overlap is an error.
pub fn binary(
    op: BinaryOp,
    a: impl Into<Operand>,
    b: impl Into<Operand>,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let name = op.name();
    let dt = out.dtype();
    if !op.supports(dt) {
        let hint = match (op, dt) {
            (BinaryOp::Div, d) if d.is_int() || d == DType::Bool => {
                " (numpy's true division returns floats: cast first)"
            }
            _ => "",
        };
        return Err(KernelArgError::UnsupportedDType {
            op: name,
            dtype: dt,
            hint,
        });
    }
    let a = operand_view(name, "a", a.into(), dt)?;
    let b = operand_view(name, "b", b.into(), dt)?;
    let (a, b) = broadcast_pair_into(name, ("a", &a), ("b", &b), out)?;
    let it = Strided::new(out.shape(), [out.strides(), a.strides(), b.strides()]);
    let blocks = blocks_for(it.numel(), GRAIN_ELEMENTWISE, cores);
    Ok((
        Arc::new(BinaryKernel {
            op,
            a,
            b,
            out: out.clone(),
            it,
        }),
        blocks,
    ))
}

#[inline(always)]
fn max_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || a > b {
        a
    } else {
        b
    }
}
#[inline(always)]
fn min_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || a < b {
        a
    } else {
        b
    }
}

impl BinaryKernel {
    #[inline(always)]
    fn map<T: Elem>(&self, s: usize, e: usize, f: impl Fn(T, T) -> T) {
        // SAFETY: the views were validated by broadcast_pair_into at launch (out is exactly
        // a or b, or disjoint from them); blocks get disjoint output ranges.
        unsafe { map2(&self.it, [&self.out, &self.a, &self.b], s, e, f) }
    }

    fn run<T: Elem>(&self, s: usize, e: usize) {
        use BinaryOp::*;
        let d = T::DTYPE;
        #[inline(always)]
        fn fl<T: Elem>(g: impl Fn(f32, f32) -> f32) -> impl Fn(T, T) -> T {
            move |x: T, y: T| T::from_f32(g(x.to_f32(), y.to_f32()))
        }
        #[inline(always)]
        fn int<T: Elem>(g: impl Fn(i64, i64) -> i64) -> impl Fn(T, T) -> T {
            move |x: T, y: T| T::from_i64(g(x.to_i64(), y.to_i64()))
        }
        if d.is_float() {
            match self.op {
                Add => self.map(s, e, fl::<T>(|x, y| x + y)),
                Sub => self.map(s, e, fl::<T>(|x, y| x - y)),
                Mul => self.map(s, e, fl::<T>(|x, y| x * y)),
                Div => self.map(s, e, fl::<T>(|x, y| x / y)),
                Maximum => self.map(s, e, fl::<T>(max_nan)),
                Minimum => self.map(s, e, fl::<T>(min_nan)),
            }
        } else if d == DType::Bool {
            match self.op {
                Add | Maximum => self.map(s, e, int::<T>(|x, y| x | y)),
                Mul | Minimum => self.map(s, e, int::<T>(|x, y| x & y)),
                Sub | Div => unreachable!("rejected at launch"),
            }
        } else {
            match self.op {
                Add => self.map(s, e, int::<T>(i64::wrapping_add)),
                Sub => self.map(s, e, int::<T>(i64::wrapping_sub)),
                Mul => self.map(s, e, int::<T>(i64::wrapping_mul)),
                Maximum => self.map(s, e, int::<T>(i64::max)),
                Minimum => self.map(s, e, int::<T>(i64::min)),
                Div => unreachable!("rejected at launch"),
            }
        }
    }
}

impl Kernel for BinaryKernel {
    fn name(&self) -> &str {
        self.op.name()
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = split_aligned(blk, self.it.numel(), ALIGN);
        if s < e {
            dispatch_dtype!(self.out.dtype(), T => self.run::<T>(s, e));
        }
        Ok(())
    }
}
