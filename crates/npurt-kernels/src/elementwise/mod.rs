//! Elementwise kernels: unary math, binary arithmetic with numpy broadcasting and scalar
//! operands, casts/copies, the fused `axpy`, and fill.
//!
//! Blocks split the output's row-major index space into contiguous ranges (multiples of 16
//! elements). Contiguous runs use slice loops the compiler vectorises; any other layout
//! (transposed, strided, broadcast, negative strides) walks the strides.

use crate::layout::{by_size, copy_run, Strided};
use crate::plan::{blocks_for, GRAIN_ELEMENTWISE, GRAIN_TRANSCENDENTAL};
use crate::tensor::{broadcast_shapes, check_dtype, check_output};
use crate::{dispatch_dtype, math, Bool8, DType, Elem, KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::Arc;

mod activation;
mod axpy;
mod binary;
mod cast;
mod compare;
mod scalar;
mod unary;

pub(crate) use activation::formulas;
pub use activation::{activation, Activation};
pub use axpy::axpy;
pub use binary::binary;
pub(crate) use cast::cast_impl;
pub use cast::{cast, copy, fill};
pub use compare::{compare, pow, where_, CompareOp};
pub(crate) use scalar::scalar_view;
pub use scalar::{Operand, Scalar};
pub use unary::unary;

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

// ---------------------------------------------------------------------------------------
// Inner loops over one run. Validation guarantees that an output run either is exactly an
// input run (same pointer, same stride: in-place) or does not overlap it, so the
// contiguous paths can use slices (vectorised without runtime alias checks).
// ---------------------------------------------------------------------------------------

/// An elementwise function that is always inlined into the loops of [`run1`]. A closure
/// called from several loops may stay an out-of-line call (LLVM weighs a big body, such as
/// an inlined `exp`, against the number of call sites), which keeps every loop scalar;
/// `call` is `#[inline(always)]`, so the big math is inlined where it is an `#[inline(always)]`
/// function called by name (the unit-struct ops of `unary.rs`), and small closures work
/// through the blanket impl.
pub(crate) trait Map1<A, O>: Copy {
    fn call(self, a: A) -> O;
}

impl<A, O, F: Fn(A) -> O + Copy> Map1<A, O> for F {
    #[inline(always)]
    fn call(self, a: A) -> O {
        self(a)
    }
}

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
    f: impl Map1<A, O>,
) {
    if so == 1 && sa == 1 {
        if std::ptr::eq(o as *const O as *const u8, a as *const u8)
            && std::any::TypeId::of::<A>() == std::any::TypeId::of::<O>()
        {
            // SAFETY: in place: one exclusive slice over the run (contract).
            let io = unsafe { std::slice::from_raw_parts_mut(o, n) };
            for v in io {
                // SAFETY: A and O are the same type (checked above).
                *v = f.call(unsafe { std::mem::transmute_copy::<O, A>(v) });
            }
        } else {
            // SAFETY: disjoint runs (contract).
            let (os, xs) = unsafe { (std::slice::from_raw_parts_mut(o, n), std::slice::from_raw_parts(a, n)) };
            for (o, &x) in os.iter_mut().zip(xs) {
                *o = f.call(x);
            }
        }
    } else if so == 1 && sa == 0 {
        // SAFETY: a is readable and o's contiguous run writable (contract); a broadcast
        // input never overlaps the output.
        unsafe { std::slice::from_raw_parts_mut(o, n).fill(f.call(a.read())) }
    } else {
        for i in 0..n as isize {
            // SAFETY: element i of each run is in the strided range (contract); in place,
            // element i is read before it is written.
            unsafe { o.offset(i * so).write(f.call(a.offset(i * sa).read())) }
        }
    }
}

/// `o[i] = f(a[i], b[i])`.
///
/// # Safety
/// As for [`run1`], for both inputs.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn run2<T: Copy + 'static>(
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
        // SAFETY: b is a broadcast input, never overlapping the output; the runs of o and a
        // meet run1's contract (this function's).
        unsafe {
            let y = b.read();
            run1(o, 1, a, 1, n, |x| f(x, y))
        }
    } else if so == 1 && sa == 0 && sb == 1 {
        // SAFETY: mirror of the arm above.
        unsafe {
            let x = a.read();
            run1(o, 1, b, 1, n, |y| f(x, y))
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

/// `out = f(x)` over the flat range `[s, e)` of `it` (strides `[out, x]`).
///
/// # Safety
/// `out` and `x` are the views `it` was built from, validated by `check_output` (out is
/// exactly x or disjoint from it; in place only with one dtype), with element types `O`
/// and `A`; no other block writes `[s, e)` meanwhile.
#[inline(always)]
unsafe fn map1<A: Elem, O: Elem>(
    it: &Strided<2>,
    out: &TensorView,
    x: &TensorView,
    s: usize,
    e: usize,
    f: impl Map1<A, O>,
) {
    let [so, sx] = it.inner_strides();
    let (po, px) = (out.ptr::<O>(), x.ptr::<A>() as *const A);
    for (off, n) in it.runs(s, e) {
        // SAFETY: the views' contract makes every element they address valid; the run lies
        // within the shapes; the output is exactly x or disjoint from it (caller).
        unsafe { run1(po.wrapping_offset(off[0]), so, px.wrapping_offset(off[1]), sx, n, f) }
    }
}

/// `out = f(a, b)` over the flat range `[s, e)` of `it` (strides `[out, a, b]`), from the
/// element-0 pointers of the three operands.
///
/// # Safety
/// As for [`map1`], for both inputs (element type `T` throughout): every element `it`
/// addresses from each pointer is valid (the output for writes), and the output is exactly
/// an input or disjoint from it.
#[inline(always)]
unsafe fn map2<T: Elem>(
    it: &Strided<3>,
    po: *mut T,
    pa: *const T,
    pb: *const T,
    s: usize,
    e: usize,
    f: impl Fn(T, T) -> T,
) {
    let [so, sa, sb] = it.inner_strides();
    for (off, n) in it.runs(s, e) {
        // SAFETY: as in map1, for both inputs.
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
    }
}

// ---------------------------------------------------------------------------------------
// Argument checks shared by the kernels
// ---------------------------------------------------------------------------------------

/// `x` broadcast to `out`'s shape (or the error numpy would give), checked as the input of
/// `out` (in-place use allowed).
fn broadcast_into(op: &'static str, x: &TensorView, out: &TensorView) -> Result<TensorView, KernelArgError> {
    let full = broadcast_shapes(op, x.shape(), out.shape())?;
    if full != out.shape() {
        return Err(KernelArgError::OutputShape {
            op,
            expected: full,
            got: out.shape().to_vec(),
        });
    }
    let xb = x.broadcast_to(out.shape())?;
    check_output(op, out, &[("x", &xb)], true)?;
    Ok(xb)
}

/// `a` and `b` broadcast together and into `out`'s shape (numpy's rules; the expected
/// output shape reported is their joint broadcast), checked as the inputs of `out`
/// (in-place use allowed).
fn broadcast_pair_into(
    op: &'static str,
    (na, a): (&'static str, &TensorView),
    (nb, b): (&'static str, &TensorView),
    out: &TensorView,
) -> Result<(TensorView, TensorView), KernelArgError> {
    let ab = broadcast_shapes(op, a.shape(), b.shape())?;
    let full = broadcast_shapes(op, &ab, out.shape())?;
    if full != out.shape() {
        return Err(KernelArgError::OutputShape {
            op,
            expected: ab,
            got: out.shape().to_vec(),
        });
    }
    let (a, b) = (a.broadcast_to(out.shape())?, b.broadcast_to(out.shape())?);
    check_output(op, out, &[(na, &a), (nb, &b)], true)?;
    Ok((a, b))
}
