//! Binary elementwise arithmetic with numpy broadcasting and scalar operands.

use super::*;

struct BinaryKernel {
    op: BinaryOp,
    a: Src,
    b: Src,
    out: TensorView,
    /// Elements of `out`. The collapsed iteration ([`Strided`]) is built by each block, on
    /// the worker: building it at launch cost the submitting thread about a third of a
    /// tiny launch (callgrind), and a block of any size pays it once.
    numel: usize,
}

/// A checked operand as the kernel holds it: a view already broadcast to the output's
/// shape, or a scalar kept by value (read through a zero stride; nothing allocated).
enum Src {
    View(TensorView),
    Scalar(Scalar),
}

/// Zero strides for scalar operands of up to this many dims (more: built on the heap).
static ZEROS: [isize; 32] = [0; 32];

impl Src {
    fn strides(&self, ndim: usize) -> std::borrow::Cow<'_, [isize]> {
        match self {
            Src::View(t) => std::borrow::Cow::Borrowed(t.strides()),
            Src::Scalar(_) if ndim <= ZEROS.len() => std::borrow::Cow::Borrowed(&ZEROS[..ndim]),
            Src::Scalar(_) => std::borrow::Cow::Owned(vec![0; ndim]),
        }
    }
}

/// Checks an operand against the output's dtype and shape (numpy's broadcasting; in-place
/// use allowed only as the identical view) and returns it as the kernel holds it.
fn operand(op: &'static str, what: &'static str, x: Operand, out: &TensorView) -> Result<Src, KernelArgError> {
    match x {
        Operand::Tensor(t) => {
            check_dtype(op, what, &t, out.dtype())?;
            let t = if t.shape() == out.shape() {
                t
            } else {
                t.broadcast_to(out.shape())?
            };
            check_output(op, out, &[(what, &t)], true)?;
            Ok(Src::View(t))
        }
        Operand::Scalar(s) => {
            s.check_for(op, out.dtype())?;
            Ok(Src::Scalar(s))
        }
    }
}

/// The shape `a` and `b` broadcast to, when it is not `out`'s (the error numpy gives).
fn check_shapes(op: &'static str, a: &Operand, b: &Operand, out: &TensorView) -> Result<(), KernelArgError> {
    let shape = |x: &Operand| match x {
        Operand::Tensor(t) => Some(t.shape().to_vec()),
        Operand::Scalar(_) => None,
    };
    let same = |x: &Operand| match x {
        Operand::Tensor(t) => t.shape() == out.shape(),
        Operand::Scalar(_) => true,
    };
    if same(a) && same(b) {
        return Ok(());
    }
    let ab = match (shape(a), shape(b)) {
        (Some(x), Some(y)) => broadcast_shapes(op, &x, &y)?,
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => Vec::new(),
    };
    let full = broadcast_shapes(op, &ab, out.shape())?;
    if full != out.shape() {
        return Err(KernelArgError::OutputShape {
            op,
            expected: ab,
            got: out.shape().to_vec(),
        });
    }
    Ok(())
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
    let (a, b) = (a.into(), b.into());
    check_shapes(name, &a, &b, out)?;
    if out.has_self_overlap() {
        return Err(KernelArgError::SelfOverlap { op: name, what: "out" });
    }
    let a = operand(name, "a", a, out)?;
    let b = operand(name, "b", b, out)?;
    let numel = out.numel();
    let blocks = blocks_for(numel, GRAIN_ELEMENTWISE, cores);
    Ok((
        Arc::new(BinaryKernel {
            op,
            a,
            b,
            out: out.clone(),
            numel,
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
    fn map<T: Elem>(&self, it: &Strided<3>, s: usize, e: usize, f: impl Fn(T, T) -> T) {
        // A scalar operand is read through a zero stride from a local copy.
        let (va, vb) = (self.scalar::<T>(&self.a), self.scalar::<T>(&self.b));
        let ptr = |src: &Src, v: &T| match src {
            Src::View(t) => t.ptr::<T>() as *const T,
            Src::Scalar(_) => v as *const T,
        };
        let (pa, pb) = (ptr(&self.a, &va), ptr(&self.b, &vb));
        // SAFETY: the views were validated by `operand` at launch (out is exactly a or b,
        // or disjoint from them; every view lies in its memory, kept alive by the kernel);
        // a scalar's pointer is to a local that outlives the call and is only read, at
        // stride 0; blocks get disjoint output ranges.
        unsafe { map2(it, self.out.ptr::<T>(), pa, pb, s, e, f) }
    }

    #[inline(always)]
    fn scalar<T: Elem>(&self, src: &Src) -> T {
        match src {
            Src::Scalar(v) => v.to_elem::<T>(),
            Src::View(_) => T::from_i64(0),
        }
    }

    /// [`BinaryKernel::run`] on the elementwise family's ISA path.
    fn run_best<T: Elem>(&self, it: &Strided<3>, s: usize, e: usize) {
        crate::isa::isa_call!(crate::isa::path(crate::isa::Family::Elementwise), BinaryKernel, self, run::<T: Elem>(it: &Strided<3>, s: usize, e: usize))
    }

    #[inline(always)]
    fn run<T: Elem>(&self, it: &Strided<3>, s: usize, e: usize) {
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
                Add => self.map(it, s, e, fl::<T>(|x, y| x + y)),
                Sub => self.map(it, s, e, fl::<T>(|x, y| x - y)),
                Mul => self.map(it, s, e, fl::<T>(|x, y| x * y)),
                Div => self.map(it, s, e, fl::<T>(|x, y| x / y)),
                Maximum => self.map(it, s, e, fl::<T>(max_nan)),
                Minimum => self.map(it, s, e, fl::<T>(min_nan)),
            }
        } else if d == DType::Bool {
            match self.op {
                Add | Maximum => self.map(it, s, e, int::<T>(|x, y| x | y)),
                Mul | Minimum => self.map(it, s, e, int::<T>(|x, y| x & y)),
                Sub | Div => unreachable!("rejected at launch"),
            }
        } else {
            match self.op {
                Add => self.map(it, s, e, int::<T>(i64::wrapping_add)),
                Sub => self.map(it, s, e, int::<T>(i64::wrapping_sub)),
                Mul => self.map(it, s, e, int::<T>(i64::wrapping_mul)),
                Maximum => self.map(it, s, e, int::<T>(i64::max)),
                Minimum => self.map(it, s, e, int::<T>(i64::min)),
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
        let (s, e) = split_aligned(blk, self.numel, ALIGN);
        if s < e {
            let out = &self.out;
            let nd = out.ndim();
            let it = Strided::new(out.shape(), [out.strides(), &self.a.strides(nd), &self.b.strides(nd)]);
            dispatch_dtype!(out.dtype(), T => self.run_best::<T>(&it, s, e));
        }
        Ok(())
    }
}
