//! Comparisons and logic (bool results), `pow` and `where`, with numpy broadcasting.
//! Scalars become one-element zero-stride views. Tensors of one operation share a dtype
//! (numpy's promotion is the caller's job); comparisons of floats compute in f32 (f64 for
//! nothing: every float dtype converts exactly), of integers in i64.

use super::*;

/// A comparison or logical operation (bool output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    /// Logical and/or/xor of "non-zero".
    And,
    Or,
    Xor,
}

impl CompareOp {
    pub const ALL: [CompareOp; 9] = [
        CompareOp::Equal,
        CompareOp::NotEqual,
        CompareOp::Less,
        CompareOp::LessEqual,
        CompareOp::Greater,
        CompareOp::GreaterEqual,
        CompareOp::And,
        CompareOp::Or,
        CompareOp::Xor,
    ];

    /// numpy's function name.
    pub const fn name(self) -> &'static str {
        match self {
            CompareOp::Equal => "equal",
            CompareOp::NotEqual => "not_equal",
            CompareOp::Less => "less",
            CompareOp::LessEqual => "less_equal",
            CompareOp::Greater => "greater",
            CompareOp::GreaterEqual => "greater_equal",
            CompareOp::And => "logical_and",
            CompareOp::Or => "logical_or",
            CompareOp::Xor => "logical_xor",
        }
    }

    #[inline(always)]
    fn eval<T: Elem>(self, a: T, b: T) -> bool {
        use CompareOp::*;
        if T::DTYPE.is_float() {
            let (a, b) = (a.to_f32(), b.to_f32());
            match self {
                Equal => a == b,
                NotEqual => a != b,
                Less => a < b,
                LessEqual => a <= b,
                Greater => a > b,
                GreaterEqual => a >= b,
                And => a != 0.0 && b != 0.0,
                Or => a != 0.0 || b != 0.0,
                Xor => (a != 0.0) != (b != 0.0),
            }
        } else {
            let (a, b) = (a.to_i64(), b.to_i64());
            match self {
                Equal => a == b,
                NotEqual => a != b,
                Less => a < b,
                LessEqual => a <= b,
                Greater => a > b,
                GreaterEqual => a >= b,
                And => a != 0 && b != 0,
                Or => a != 0 || b != 0,
                Xor => (a != 0) != (b != 0),
            }
        }
    }
}

/// An operand as a view of `dtype` broadcast to `shape` (scalars: a one-element view).
fn operand_view(op: &'static str, x: Operand, dtype: DType, shape: &[usize]) -> Result<TensorView, KernelArgError> {
    match x {
        Operand::Tensor(t) => {
            check_dtype(op, "operand", &t, dtype)?;
            t.broadcast_to(shape)
        }
        Operand::Scalar(s) => {
            s.check_for(op, dtype)?;
            Ok(scalar_view(dtype, s, shape))
        }
    }
}

fn tensor_dtype(op: &'static str, xs: &[&Operand]) -> Result<DType, KernelArgError> {
    xs.iter()
        .find_map(|x| match x {
            Operand::Tensor(t) => Some(t.dtype()),
            Operand::Scalar(_) => None,
        })
        .ok_or_else(|| KernelArgError::Invalid {
            op,
            detail: "at least one operand must be a tensor".into(),
        })
}

fn shape_of(x: &Operand) -> &[usize] {
    match x {
        Operand::Tensor(t) => t.shape(),
        Operand::Scalar(_) => &[],
    }
}

/// Checks that the operands broadcast together to exactly `out`'s shape.
fn check_bshape(op: &'static str, xs: &[&Operand], out: &TensorView) -> Result<(), KernelArgError> {
    let mut s: Vec<usize> = Vec::new();
    for x in xs {
        s = broadcast_shapes(op, &s, shape_of(x))?;
    }
    if broadcast_shapes(op, &s, out.shape())? != out.shape() {
        return Err(KernelArgError::OutputShape {
            op,
            expected: s,
            got: out.shape().to_vec(),
        });
    }
    Ok(())
}

/// The generic kernel: `out[i] = f(inputs[..][i])` over broadcast views.
struct MapKernel<const N: usize> {
    name: &'static str,
    kind: Kind,
    ins: [TensorView; N],
    out: TensorView,
}

#[derive(Clone, Copy)]
enum Kind {
    Compare(CompareOp),
    Pow,
    Where,
}

fn build<const N: usize>(
    name: &'static str,
    kind: Kind,
    ins: [TensorView; N],
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let named: Vec<(&'static str, &TensorView)> = ins.iter().map(|t| ("an input", t)).collect();
    // In place only where dtypes agree (pow, where's x/y); a bool output never aliases.
    check_output(name, out, &named, matches!(kind, Kind::Pow | Kind::Where))?;
    let blocks = blocks_for(out.numel(), GRAIN_ELEMENTWISE, cores);
    Ok((
        Arc::new(MapKernel {
            name,
            kind,
            ins,
            out: out.clone(),
        }),
        blocks,
    ))
}

/// `out = op(a, b)` as bool; `a`, `b` tensors of one dtype or scalars (at least one
/// tensor); `out` bool with the broadcast shape, overlapping no input.
pub fn compare(
    op: CompareOp,
    a: impl Into<Operand>,
    b: impl Into<Operand>,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let name = op.name();
    let (a, b) = (a.into(), b.into());
    check_dtype(name, "out", out, DType::Bool)?;
    let dt = tensor_dtype(name, &[&a, &b])?;
    check_bshape(name, &[&a, &b], out)?;
    let ins = [
        operand_view(name, a, dt, out.shape())?,
        operand_view(name, b, dt, out.shape())?,
    ];
    build(name, Kind::Compare(op), ins, out, cores)
}

/// `out = a ** b` for floats (f32 `powf`), numpy broadcasting; `out` may be exactly an input.
pub fn pow(
    a: impl Into<Operand>,
    b: impl Into<Operand>,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let name = "power";
    let (a, b) = (a.into(), b.into());
    if !out.dtype().is_float() {
        return Err(KernelArgError::UnsupportedDType {
            op: name,
            dtype: out.dtype(),
            hint: " (cast to a float dtype first)",
        });
    }
    check_bshape(name, &[&a, &b], out)?;
    let ins = [
        operand_view(name, a, out.dtype(), out.shape())?,
        operand_view(name, b, out.dtype(), out.shape())?,
    ];
    build(name, Kind::Pow, ins, out, cores)
}

/// `out = cond ? x : y` (numpy's `where`); `cond` any dtype (non-zero is true), `x`, `y`
/// out's dtype (or scalars); broadcasting of all three.
pub fn where_(
    cond: impl Into<Operand>,
    x: impl Into<Operand>,
    y: impl Into<Operand>,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let name = "where";
    let (c, x, y) = (cond.into(), x.into(), y.into());
    check_bshape(name, &[&c, &x, &y], out)?;
    let cdt = match &c {
        Operand::Tensor(t) => t.dtype(),
        Operand::Scalar(_) => DType::Bool,
    };
    let ins = [
        operand_view(name, c, cdt, out.shape())?,
        operand_view(name, x, out.dtype(), out.shape())?,
        operand_view(name, y, out.dtype(), out.shape())?,
    ];
    build(name, Kind::Where, ins, out, cores)
}

impl<const N: usize> MapKernel<N> {
    fn strided<const M: usize>(&self) -> Strided<M> {
        let mut st: Vec<&[isize]> = vec![self.out.strides()];
        st.extend(self.ins.iter().map(|t| t.strides()));
        Strided::new(self.out.shape(), std::array::from_fn(|k| st[k]))
    }

    fn run<T: Elem>(&self, s: usize, e: usize) {
        let at = |t: &TensorView, off: isize| t.ptr::<u8>().wrapping_offset(off * t.dtype().itemsize() as isize);
        match self.kind {
            Kind::Compare(op) => {
                let it = self.strided::<3>();
                let [so, sa, sb] = it.inner_strides();
                for (off, n) in it.runs(s, e) {
                    for i in 0..n as isize {
                        // SAFETY: every element of the runs is inside its view (contract);
                        // out overlaps no input (check_output); blocks own disjoint ranges.
                        unsafe {
                            let a = (at(&self.ins[0], off[1] + i * sa) as *const T).read();
                            let b = (at(&self.ins[1], off[2] + i * sb) as *const T).read();
                            (at(&self.out, off[0] + i * so) as *mut Bool8).write(Bool8(op.eval(a, b) as u8));
                        }
                    }
                }
            }
            Kind::Pow => {
                let it = self.strided::<3>();
                let [so, sa, sb] = it.inner_strides();
                for (off, n) in it.runs(s, e) {
                    for i in 0..n as isize {
                        // SAFETY: as above (in place: each element is read before written).
                        unsafe {
                            let a = (at(&self.ins[0], off[1] + i * sa) as *const T).read().to_f32();
                            let b = (at(&self.ins[1], off[2] + i * sb) as *const T).read().to_f32();
                            (at(&self.out, off[0] + i * so) as *mut T).write(T::from_f32(a.powf(b)));
                        }
                    }
                }
            }
            Kind::Where => unreachable!("where runs run_where"),
        }
    }
}

impl<const N: usize> Kernel for MapKernel<N> {
    fn name(&self) -> &str {
        self.name
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = split_aligned(blk, self.out.numel(), ALIGN);
        if s >= e {
            return Ok(());
        }
        match self.kind {
            Kind::Where => {
                let cd = self.ins[0].dtype();
                by_size!(self.out.dtype().itemsize(), T => dispatch_dtype!(cd, C => self.run_where::<T, C>(s, e)))
            }
            _ => dispatch_dtype!(self.ins[0].dtype(), T => self.run::<T>(s, e)),
        }
        Ok(())
    }
}

impl<const N: usize> MapKernel<N> {
    /// `where` moves elements by size (any dtype).
    fn run_where<T: Copy + 'static, C: Elem>(&self, s: usize, e: usize) {
        let it = self.strided::<4>();
        let [so, sc, sx, sy] = it.inner_strides();
        let at = |t: &TensorView, off: isize| t.ptr::<u8>().wrapping_offset(off * t.dtype().itemsize() as isize);
        for (off, n) in it.runs(s, e) {
            for i in 0..n as isize {
                // SAFETY: as in `run`.
                unsafe {
                    let c = (at(&self.ins[0], off[1] + i * sc) as *const C).read();
                    let v = if c.to_f64() != 0.0 {
                        (at(&self.ins[1], off[2] + i * sx) as *const T).read()
                    } else {
                        (at(&self.ins[2], off[3] + i * sy) as *const T).read()
                    };
                    (at(&self.out, off[0] + i * so) as *mut T).write(v);
                }
            }
        }
    }
}
