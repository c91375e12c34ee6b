//! Elementwise kernels: unary math, binary arithmetic with numpy broadcasting and scalar
//! operands, casts/copies, the fused `axpy`, and fill.
//!
//! Blocks split the output's row-major index space into contiguous ranges (multiples of 16
//! elements). Contiguous runs use slice loops the compiler vectorises; any other layout
//! (transposed, strided, broadcast, negative strides) walks the strides.

use crate::layout::{by_size, copy_run, Strided};
use crate::plan::{blocks_for, GRAIN_ELEMENTWISE, GRAIN_TRANSCENDENTAL};
use crate::tensor::{broadcast_shapes, check_dtype, check_output};
use crate::{dispatch_dtype, math, AlignedBuffer, DType, Elem, Keep, KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::Arc;

/// Output elements per alignment unit when splitting over blocks.
const ALIGN: usize = 16;

/// The `[start, end)` range of a block over `n` elements, in whole units of `align`.
pub(crate) fn split_aligned(blk: BlockCtx, n: usize, align: usize) -> (usize, usize) {
    let (a, b) = blk.split(n.div_ceil(align));
    ((a * align).min(n), (b * align).min(n))
}

/// Unary elementwise operations (output dtype = input dtype).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Exp,
    Log,
    Sqrt,
    /// 1 / sqrt(x).
    Rsqrt,
    Tanh,
    Sigmoid,
    /// max(x, 0) (NaN stays NaN). Also for integers.
    Relu,
    /// Exact GELU, x/2·(1 + erf(x/√2)) (PyTorch's default `approximate='none'`).
    Gelu,
    /// GELU's tanh approximation (PyTorch's `approximate='tanh'`).
    GeluTanh,
    /// x·sigmoid(x).
    Silu,
    /// Also for integers (wrapping: abs(i8::MIN) = i8::MIN, like numpy).
    Abs,
    /// Also for integers (wrapping).
    Neg,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 12] = [
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Abs,
        UnaryOp::Neg,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Silu => "silu",
            UnaryOp::Abs => "abs",
            UnaryOp::Neg => "neg",
        }
    }

    /// Whether the op is defined for `dtype` (floats: all; integers: relu, abs, neg).
    pub fn supports(self, dtype: DType) -> bool {
        dtype.is_float() || (dtype.is_int() && matches!(self, UnaryOp::Relu | UnaryOp::Abs | UnaryOp::Neg))
    }

    fn transcendental(self) -> bool {
        !matches!(
            self,
            UnaryOp::Relu | UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Sqrt | UnaryOp::Rsqrt
        )
    }
}

/// Binary elementwise operations with numpy broadcasting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// True division; floats only (numpy's `divide` of integers returns floats: cast first).
    Div,
    /// Elementwise max; NaN propagates (numpy's `maximum`).
    Maximum,
    /// Elementwise min; NaN propagates (numpy's `minimum`).
    Minimum,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 6] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
    ];

    /// numpy's function name.
    pub const fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "subtract",
            BinaryOp::Mul => "multiply",
            BinaryOp::Div => "divide",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
        }
    }

    /// Floats: all; integers: all but `Div`; bool: add (or), multiply (and), maximum (or),
    /// minimum (and).
    pub fn supports(self, dtype: DType) -> bool {
        match dtype {
            d if d.is_float() => true,
            DType::Bool => matches!(
                self,
                BinaryOp::Add | BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum
            ),
            _ => self != BinaryOp::Div,
        }
    }
}

/// A Python-style scalar operand, converted to the tensor dtype at launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Float(f64),
    Int(i64),
    Bool(bool),
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::Float(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Float(v as f64)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::Int(v)
    }
}
impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Scalar::Int(v as i64)
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

impl Scalar {
    /// The value as an element of `T` (numpy's cast rules).
    pub fn to_elem<T: Elem>(self) -> T {
        match self {
            Scalar::Float(v) => T::from_f64(v),
            Scalar::Int(v) => T::from_i64(v),
            Scalar::Bool(v) => T::from_i64(v as i64),
        }
    }

    /// Checks that the value is representable in `dtype` without changing it (an integral
    /// float for an integer dtype, in range; 0/1 for bool).
    pub fn check_for(self, op: &'static str, dtype: DType) -> Result<(), KernelArgError> {
        let ok = match (self, dtype) {
            (_, d) if d.is_float() => true,
            (Scalar::Bool(_), _) => true,
            (Scalar::Int(v), d) => dispatch_dtype!(d, T => T::from_i64(v).to_i64() == v),
            (Scalar::Float(v), d) => {
                v.is_finite() && v.fract() == 0.0 && dispatch_dtype!(d, T => T::from_f64(v).to_f64() == v)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(KernelArgError::Invalid {
                op,
                detail: format!("scalar {self:?} is not representable as {dtype} (cast the tensor first)"),
            })
        }
    }
}

/// An operand of [`binary`]: a tensor or a scalar.
#[derive(Debug, Clone)]
pub enum Operand {
    Tensor(TensorView),
    Scalar(Scalar),
}

impl From<TensorView> for Operand {
    fn from(t: TensorView) -> Self {
        Operand::Tensor(t)
    }
}
impl From<&TensorView> for Operand {
    fn from(t: &TensorView) -> Self {
        Operand::Tensor(t.clone())
    }
}
impl<S: Into<Scalar>> From<S> for Operand {
    fn from(s: S) -> Self {
        Operand::Scalar(s.into())
    }
}

/// A one-element buffer holding `s` as `dtype`, viewed with zero strides over `shape`.
pub(crate) fn scalar_view(dtype: DType, s: Scalar, shape: &[usize]) -> TensorView {
    let buf = AlignedBuffer::zeroed(dtype.itemsize());
    let addr = buf.addr();
    dispatch_dtype!(dtype, T => {
        // SAFETY: the buffer is freshly allocated, 64-byte aligned, one element of T long,
        // and not shared yet.
        unsafe { (addr as *mut T).write(s.to_elem::<T>()) }
    });
    let keep: Keep = Arc::new(buf);
    // SAFETY: every index addresses the one element, valid while `keep` lives; this view
    // is only ever an input.
    unsafe { TensorView::new(addr, dtype, shape.to_vec(), vec![0; shape.len()], keep) }.expect("a scalar view is valid")
}

// ---------------------------------------------------------------------------------------
// Inner loops over one run. Validation guarantees that an output run either is exactly an
// input run (same pointer, same stride: in-place) or does not overlap it, so the
// contiguous paths can use slices (vectorised without runtime alias checks).
// ---------------------------------------------------------------------------------------

/// `o[i] = f(a[i])` for `n` elements with element strides `so`, `sa`.
///
/// # Safety
/// The `n` strided elements of `o` are valid for writes and of `a` for reads, nothing
/// else accesses them meanwhile, and `o`'s elements either are exactly `a`'s (same
/// address, same stride, same type) or overlap none of them.
#[inline(always)]
unsafe fn run1<A: Copy + 'static, O: Copy + 'static>(
    o: *mut O,
    so: isize,
    a: *const A,
    sa: isize,
    n: usize,
    f: impl Fn(A) -> O,
) {
    if so == 1 && sa == 1 {
        if std::ptr::eq(o as *const O as *const u8, a as *const u8)
            && std::any::TypeId::of::<A>() == std::any::TypeId::of::<O>()
        {
            // SAFETY: in place: one exclusive slice over the run (contract).
            let io = unsafe { std::slice::from_raw_parts_mut(o, n) };
            for v in io {
                // SAFETY: A and O are the same type (checked above).
                *v = f(unsafe { std::mem::transmute_copy::<O, A>(v) });
            }
        } else {
            // SAFETY: disjoint runs (contract).
            let (os, xs) = unsafe { (std::slice::from_raw_parts_mut(o, n), std::slice::from_raw_parts(a, n)) };
            for (o, &x) in os.iter_mut().zip(xs) {
                *o = f(x);
            }
        }
    } else if so == 1 && sa == 0 {
        // SAFETY: a is readable (contract); a broadcast input never overlaps the output.
        let v = f(unsafe { a.read() });
        let os = unsafe { std::slice::from_raw_parts_mut(o, n) };
        os.fill(v);
    } else {
        for i in 0..n as isize {
            // SAFETY: element i of each run is in the strided range (contract); in place,
            // element i is read before it is written.
            unsafe { o.offset(i * so).write(f(a.offset(i * sa).read())) }
        }
    }
}

/// `o[i] = f(a[i], b[i])`.
///
/// # Safety
/// As for [`run1`], for both inputs.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn run2<T: Copy>(
    o: *mut T,
    so: isize,
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    n: usize,
    f: impl Fn(T, T) -> T,
) {
    let (ou, au, bu) = (o as usize, a as usize, b as usize);
    if so == 1 && sa == 1 && sb == 1 {
        // SAFETY (all arms): contiguous runs of n elements; the output is exactly an input
        // run or disjoint from it (contract), so exactly one mutable slice exists and no
        // shared slice overlaps it.
        unsafe {
            let os = std::slice::from_raw_parts_mut(o, n);
            match (ou == au, ou == bu) {
                (false, false) => {
                    let (xs, ys) = (std::slice::from_raw_parts(a, n), std::slice::from_raw_parts(b, n));
                    for ((o, &x), &y) in os.iter_mut().zip(xs).zip(ys) {
                        *o = f(x, y);
                    }
                }
                (true, false) => {
                    let ys = std::slice::from_raw_parts(b, n);
                    for (o, &y) in os.iter_mut().zip(ys) {
                        *o = f(*o, y);
                    }
                }
                (false, true) => {
                    let xs = std::slice::from_raw_parts(a, n);
                    for (o, &x) in os.iter_mut().zip(xs) {
                        *o = f(x, *o);
                    }
                }
                (true, true) => {
                    for o in os.iter_mut() {
                        *o = f(*o, *o);
                    }
                }
            }
        }
    } else if so == 1 && sa == 1 && sb == 0 {
        // SAFETY: as above; b is a broadcast input, never overlapping the output.
        unsafe {
            let y = b.read();
            let os = std::slice::from_raw_parts_mut(o, n);
            if ou == au {
                for o in os.iter_mut() {
                    *o = f(*o, y);
                }
            } else {
                let xs = std::slice::from_raw_parts(a, n);
                for (o, &x) in os.iter_mut().zip(xs) {
                    *o = f(x, y);
                }
            }
        }
    } else if so == 1 && sa == 0 && sb == 1 {
        // SAFETY: mirror of the arm above.
        unsafe {
            let x = a.read();
            let os = std::slice::from_raw_parts_mut(o, n);
            if ou == bu {
                for o in os.iter_mut() {
                    *o = f(x, *o);
                }
            } else {
                let ys = std::slice::from_raw_parts(b, n);
                for (o, &y) in os.iter_mut().zip(ys) {
                    *o = f(x, y);
                }
            }
        }
    } else {
        for i in 0..n as isize {
            // SAFETY: element i of each run is in its strided range (contract).
            unsafe {
                o.offset(i * so)
                    .write(f(a.offset(i * sa).read(), b.offset(i * sb).read()))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Unary
// ---------------------------------------------------------------------------------------

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
    check_output(name, out, &[("x", &xb)], true)?;
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

/// `t` broadcast to `out`'s shape, or the error numpy would give.
fn broadcast_into(op: &'static str, t: &TensorView, out: &TensorView) -> Result<TensorView, KernelArgError> {
    let full = broadcast_shapes(op, t.shape(), out.shape())?;
    if full != out.shape() {
        return Err(KernelArgError::OutputShape {
            op,
            expected: full,
            got: out.shape().to_vec(),
        });
    }
    t.broadcast_to(out.shape())
}

impl UnaryKernel {
    /// [`UnaryKernel::run`], compiled for AVX2+FMA when the CPU has them (same results:
    /// the compiler never fuses a multiply and an add on its own).
    fn run_best<T: Elem>(&self, s: usize, e: usize) {
        #[cfg(target_arch = "x86_64")]
        if crate::math::has_avx2_fma() {
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2<T: Elem>(k: &UnaryKernel, s: usize, e: usize) {
                k.run::<T>(s, e)
            }
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return unsafe { avx2::<T>(self, s, e) };
        }
        self.run::<T>(s, e)
    }

    #[inline(always)]
    fn map<T: Elem>(&self, s: usize, e: usize, f: impl Fn(T) -> T) {
        let [so, sx] = self.it.inner_strides();
        let (po, px) = (self.out.ptr::<T>(), self.x.ptr::<T>() as *const T);
        self.it.for_each_run(s, e, |off, n| {
            // SAFETY: the views' contract makes every element they address valid; the run
            // lies within the shapes; the output is exactly x or disjoint from it
            // (check_output); blocks get disjoint output ranges.
            unsafe { run1(po.wrapping_offset(off[0]), so, px.wrapping_offset(off[1]), sx, n, &f) }
        });
    }

    #[inline(always)]
    fn run<T: Elem>(&self, s: usize, e: usize) {
        use UnaryOp::*;
        #[inline(always)]
        fn ff<T: Elem>(g: impl Fn(f32) -> f32) -> impl Fn(T) -> T {
            move |x: T| T::from_f32(g(x.to_f32()))
        }
        let float = T::DTYPE.is_float();
        match self.op {
            Exp => self.map(s, e, ff::<T>(math::exp)),
            Log => self.map(s, e, ff::<T>(math::log)),
            Sqrt => self.map(s, e, ff::<T>(f32::sqrt)),
            Rsqrt => self.map(s, e, |x: T| T::from_f32(1.0 / x.to_f32().sqrt())),
            Tanh => self.map(s, e, ff::<T>(math::tanh)),
            Sigmoid => self.map(s, e, ff::<T>(math::sigmoid)),
            Gelu => self.map(s, e, ff::<T>(math::gelu_erf)),
            GeluTanh => self.map(s, e, ff::<T>(math::gelu_tanh)),
            Silu => self.map(s, e, ff::<T>(math::silu)),
            Relu if float => self.map(s, e, |x: T| {
                let v = x.to_f32();
                T::from_f32(if v < 0.0 { 0.0 } else { v })
            }),
            Relu => self.map(s, e, |x: T| T::from_i64(x.to_i64().max(0))),
            Abs if float => self.map(s, e, |x: T| T::from_f32(x.to_f32().abs())),
            Abs => self.map(s, e, |x: T| T::from_i64(x.to_i64().wrapping_abs())),
            Neg if float => self.map(s, e, |x: T| T::from_f32(-x.to_f32())),
            Neg => self.map(s, e, |x: T| T::from_i64(x.to_i64().wrapping_neg())),
        }
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

// ---------------------------------------------------------------------------------------
// Binary
// ---------------------------------------------------------------------------------------

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
    let ab = broadcast_shapes(name, a.shape(), b.shape())?;
    let full = broadcast_shapes(name, &ab, out.shape())?;
    if full != out.shape() {
        return Err(KernelArgError::OutputShape {
            op: name,
            expected: ab,
            got: out.shape().to_vec(),
        });
    }
    let (a, b) = (a.broadcast_to(out.shape())?, b.broadcast_to(out.shape())?);
    check_output(name, out, &[("a", &a), ("b", &b)], true)?;
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
        let [so, sa, sb] = self.it.inner_strides();
        let (po, pa, pb) = (
            self.out.ptr::<T>(),
            self.a.ptr::<T>() as *const T,
            self.b.ptr::<T>() as *const T,
        );
        self.it.for_each_run(s, e, |off, n| {
            // SAFETY: as in UnaryKernel::map, for both inputs.
            unsafe {
                run2(
                    po.wrapping_offset(off[0]),
                    so,
                    pa.wrapping_offset(off[1]),
                    sa,
                    pb.wrapping_offset(off[2]),
                    sb,
                    n,
                    &f,
                )
            }
        });
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

// ---------------------------------------------------------------------------------------
// Cast / copy / fill
// ---------------------------------------------------------------------------------------

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
/// a permuted, sliced or broadcast view materialises it.
pub fn copy(x: &TensorView, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    check_dtype("copy", "x", x, out.dtype())?;
    cast_impl("copy", x, out, cores)
}

pub(crate) fn cast_impl(
    name: &'static str,
    x: &TensorView,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let xb = broadcast_into(name, x, out)?;
    check_output(name, out, &[("x", &xb)], true)?;
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
    fn run<I: Elem, O: Elem>(&self, s: usize, e: usize) {
        let [so, sx] = self.it.inner_strides();
        let (po, px) = (self.out.ptr::<O>(), self.x.ptr::<I>() as *const I);
        self.it.for_each_run(s, e, |off, n| {
            // SAFETY: as in UnaryKernel::map (in place only when I == O, see check_output:
            // same_layout requires the same dtype).
            unsafe {
                run1(
                    po.wrapping_offset(off[0]),
                    so,
                    px.wrapping_offset(off[1]),
                    sx,
                    n,
                    |v: I| v.cast::<O>(),
                )
            }
        });
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
            dispatch_dtype!(self.out.dtype(), O => dispatch_dtype!(self.x.dtype(), I => self.run::<I, O>(s, e)));
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

// ---------------------------------------------------------------------------------------
// axpy
// ---------------------------------------------------------------------------------------

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
    let xy = broadcast_shapes("axpy", x.shape(), y.shape())?;
    let full = broadcast_shapes("axpy", &xy, out.shape())?;
    if full != out.shape() {
        return Err(KernelArgError::OutputShape {
            op: "axpy",
            expected: xy,
            got: out.shape().to_vec(),
        });
    }
    let (xb, yb) = (x.broadcast_to(out.shape())?, y.broadcast_to(out.shape())?);
    check_output("axpy", out, &[("x", &xb), ("y", &yb)], true)?;
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
    fn run<T: Elem>(&self, s: usize, e: usize) {
        let [so, sx, sy] = self.it.inner_strides();
        let (po, px, py) = (
            self.out.ptr::<T>(),
            self.x.ptr::<T>() as *const T,
            self.y.ptr::<T>() as *const T,
        );
        if T::DTYPE.is_float() {
            let a = self.alpha.to_elem::<f32>();
            let f = move |x: T, y: T| T::from_f32(a * x.to_f32() + y.to_f32());
            self.it.for_each_run(s, e, |off, n| {
                // SAFETY: as in BinaryKernel::map.
                unsafe {
                    run2(
                        po.wrapping_offset(off[0]),
                        so,
                        px.wrapping_offset(off[1]),
                        sx,
                        py.wrapping_offset(off[2]),
                        sy,
                        n,
                        f,
                    )
                }
            });
        } else {
            let a = self.alpha.to_elem::<i64>();
            let f = move |x: T, y: T| T::from_i64(a.wrapping_mul(x.to_i64()).wrapping_add(y.to_i64()));
            self.it.for_each_run(s, e, |off, n| {
                // SAFETY: as in BinaryKernel::map.
                unsafe {
                    run2(
                        po.wrapping_offset(off[0]),
                        so,
                        px.wrapping_offset(off[1]),
                        sx,
                        py.wrapping_offset(off[2]),
                        sy,
                        n,
                        f,
                    )
                }
            });
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
            dispatch_dtype!(self.out.dtype(), T => self.run::<T>(s, e));
        }
        Ok(())
    }
}
