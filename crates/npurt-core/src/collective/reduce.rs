//! The reduce kernels: `dst[i] = ((src_0[i] ∘ src_1[i]) ∘ src_2[i]) ∘ ...` in rank order,
//! for every HCCL data type and op — the fixed order is what makes results bitwise
//! identical run to run and on every rank (each element is reduced by exactly one rank,
//! always over the sources in rank order).
//!
//! Work goes in blocks of [`BLOCK`] elements: every source block is copied into an aligned
//! scratch array first (so sources may be unaligned, and `dst` may be one of the sources:
//! in-place all_reduce), then folded with a plain loop the compiler vectorises. fp16 and
//! bf16 accumulate in f32 and round once at the end; integers wrap; AVG is the sum
//! divided by the number of sources (integers truncate).

use super::types::{HcclDataType, ReduceOp};
use half::{bf16, f16};

/// Elements per block.
pub(crate) const BLOCK: usize = 512;

trait Elem: Copy + Default + 'static {
    type Acc: Copy + Default;
    fn load(self) -> Self::Acc;
    fn store(a: Self::Acc) -> Self;
    fn add(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn mul(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn max(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn min(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn div(a: Self::Acc, n: usize) -> Self::Acc;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            type Acc = $t;
            #[inline(always)] fn load(self) -> $t { self }
            #[inline(always)] fn store(a: $t) -> $t { a }
            #[inline(always)] fn add(a: $t, b: $t) -> $t { a.wrapping_add(b) }
            #[inline(always)] fn mul(a: $t, b: $t) -> $t { a.wrapping_mul(b) }
            #[inline(always)] fn max(a: $t, b: $t) -> $t { if b > a { b } else { a } }
            #[inline(always)] fn min(a: $t, b: $t) -> $t { if b < a { b } else { a } }
            #[inline(always)] fn div(a: $t, n: usize) -> $t { a / (n as $t) }
        }
    )*};
}
int_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_elem {
    ($t:ty, $acc:ty, $load:expr, $store:expr) => {
        impl Elem for $t {
            type Acc = $acc;
            #[inline(always)]
            fn load(self) -> $acc {
                $load(self)
            }
            #[inline(always)]
            fn store(a: $acc) -> $t {
                $store(a)
            }
            #[inline(always)]
            fn add(a: $acc, b: $acc) -> $acc {
                a + b
            }
            #[inline(always)]
            fn mul(a: $acc, b: $acc) -> $acc {
                a * b
            }
            // numpy's maximum/minimum: a NaN on either side wins.
            #[inline(always)]
            fn max(a: $acc, b: $acc) -> $acc {
                if b > a || b.is_nan() {
                    b
                } else {
                    a
                }
            }
            #[inline(always)]
            fn min(a: $acc, b: $acc) -> $acc {
                if b < a || b.is_nan() {
                    b
                } else {
                    a
                }
            }
            #[inline(always)]
            fn div(a: $acc, n: usize) -> $acc {
                a / (n as $acc)
            }
        }
    };
}
float_elem!(f32, f32, |x| x, |a| a);
float_elem!(f64, f64, |x| x, |a| a);
float_elem!(f16, f32, f16::to_f32, f16::from_f32);
float_elem!(bf16, f32, bf16::to_f32, bf16::from_f32);

/// Copies `n` elements of `T` from possibly unaligned bytes into `out`.
#[inline(always)]
fn read_block<T: Elem>(src: *const u8, out: &mut [T; BLOCK], n: usize) {
    // SAFETY: the caller guarantees `src` is readable for `n * size_of::<T>()` bytes
    // (checked sizes, see `reduce`); `out` holds BLOCK >= n elements and does not overlap
    // `src` (it is a local array); every bit pattern is a valid T for these plain types.
    unsafe { std::ptr::copy_nonoverlapping(src, out.as_mut_ptr().cast::<u8>(), n * std::mem::size_of::<T>()) }
}

#[inline(always)]
fn fold<T: Elem>(acc: &mut [T::Acc; BLOCK], x: &[T; BLOCK], n: usize, f: impl Fn(T::Acc, T::Acc) -> T::Acc) {
    for (a, v) in acc[..n].iter_mut().zip(&x[..n]) {
        *a = f(*a, v.load());
    }
}

fn reduce_typed<T: Elem>(dst: *mut u8, srcs: &[*const u8], nelem: usize, op: ReduceOp) {
    let size = std::mem::size_of::<T>();
    let mut acc = [T::Acc::default(); BLOCK];
    let mut tmp = [T::default(); BLOCK];
    let mut out = [T::default(); BLOCK];
    let mut done = 0usize;
    while done < nelem {
        let n = BLOCK.min(nelem - done);
        let off = done * size;
        // SAFETY (pointer offsets below): `off + n * size <= nelem * size`, inside every
        // buffer (the caller's contract).
        read_block::<T>(unsafe { srcs[0].add(off) }, &mut tmp, n);
        for (a, v) in acc[..n].iter_mut().zip(&tmp[..n]) {
            *a = v.load();
        }
        for s in &srcs[1..] {
            read_block::<T>(unsafe { s.add(off) }, &mut tmp, n);
            match op {
                ReduceOp::Sum | ReduceOp::Avg => fold::<T>(&mut acc, &tmp, n, T::add),
                ReduceOp::Prod => fold::<T>(&mut acc, &tmp, n, T::mul),
                ReduceOp::Max => fold::<T>(&mut acc, &tmp, n, T::max),
                ReduceOp::Min => fold::<T>(&mut acc, &tmp, n, T::min),
            }
        }
        let k = srcs.len();
        for (o, a) in out[..n].iter_mut().zip(&acc[..n]) {
            *o = T::store(if op == ReduceOp::Avg { T::div(*a, k) } else { *a });
        }
        // SAFETY: `dst` is writable for `nelem * size` bytes (the caller's contract); `out`
        // is a local array, so the ranges do not overlap even when `dst` is a source.
        unsafe { std::ptr::copy_nonoverlapping(out.as_ptr().cast::<u8>(), dst.add(off), n * size) };
        done += n;
    }
}

/// `dst[i] = srcs[0][i] ∘ srcs[1][i] ∘ ...` (left to right) for `nelem` elements.
///
/// # Safety
/// Every pointer in `srcs` must be readable and `dst` writable for `nelem * dtype.size()`
/// bytes while this runs, and nobody else may write those ranges meanwhile. `dst` may equal
/// a source (the same range); it must not partly overlap one. `srcs` must not be empty.
pub(crate) unsafe fn reduce(dst: *mut u8, srcs: &[*const u8], nelem: usize, dtype: HcclDataType, op: ReduceOp) {
    debug_assert!(!srcs.is_empty());
    use HcclDataType as D;
    match dtype {
        D::Int8 => reduce_typed::<i8>(dst, srcs, nelem, op),
        D::Int16 => reduce_typed::<i16>(dst, srcs, nelem, op),
        D::Int32 => reduce_typed::<i32>(dst, srcs, nelem, op),
        D::Int64 => reduce_typed::<i64>(dst, srcs, nelem, op),
        D::Uint8 => reduce_typed::<u8>(dst, srcs, nelem, op),
        D::Uint16 => reduce_typed::<u16>(dst, srcs, nelem, op),
        D::Uint32 => reduce_typed::<u32>(dst, srcs, nelem, op),
        D::Uint64 => reduce_typed::<u64>(dst, srcs, nelem, op),
        D::Fp16 => reduce_typed::<f16>(dst, srcs, nelem, op),
        D::Bfp16 => reduce_typed::<bf16>(dst, srcs, nelem, op),
        D::Fp32 => reduce_typed::<f32>(dst, srcs, nelem, op),
        D::Fp64 => reduce_typed::<f64>(dst, srcs, nelem, op),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<T: Copy>(srcs: &[Vec<T>], dtype: HcclDataType, op: ReduceOp) -> Vec<T> {
        let mut dst = srcs[0].clone();
        let ptrs: Vec<*const u8> = srcs.iter().map(|s| s.as_ptr().cast()).collect();
        // SAFETY: every source and dst hold `len` elements of the dtype's size.
        unsafe { reduce(dst.as_mut_ptr().cast(), &ptrs, dst.len(), dtype, op) };
        dst
    }

    #[test]
    fn ops_in_rank_order() {
        let n = 1300; // more than two blocks, a partial last one
        let srcs: Vec<Vec<f32>> = (0..3)
            .map(|r| (0..n).map(|i| (i * (r + 1)) as f32 * 0.1).collect())
            .collect();
        let s = run(&srcs, HcclDataType::Fp32, ReduceOp::Sum);
        for i in 0..n {
            assert_eq!(s[i].to_bits(), ((srcs[0][i] + srcs[1][i]) + srcs[2][i]).to_bits());
        }
        let m = run(&srcs, HcclDataType::Fp32, ReduceOp::Max);
        assert_eq!(m[7], srcs[2][7]);
        let a = run(&srcs, HcclDataType::Fp32, ReduceOp::Avg);
        assert_eq!(a[5], ((srcs[0][5] + srcs[1][5]) + srcs[2][5]) / 3.0);
        let ints: Vec<Vec<i8>> = vec![vec![100, -3, 5], vec![100, 2, -7]];
        assert_eq!(run(&ints, HcclDataType::Int8, ReduceOp::Sum), vec![-56, -1, -2]);
        assert_eq!(run(&ints, HcclDataType::Int8, ReduceOp::Min), vec![100, -3, -7]);
        let u: Vec<Vec<u64>> = vec![vec![3, 9], vec![5, 2]];
        assert_eq!(run(&u, HcclDataType::Uint64, ReduceOp::Prod), vec![15, 18]);
        let h: Vec<Vec<f16>> = vec![vec![f16::from_f32(1.5); 4], vec![f16::from_f32(2.25); 4]];
        assert_eq!(run(&h, HcclDataType::Fp16, ReduceOp::Sum)[3].to_f32(), 3.75);
        let nan = vec![vec![1.0f64, f64::NAN], vec![f64::NAN, 2.0]];
        let r = run(&nan, HcclDataType::Fp64, ReduceOp::Max);
        assert!(r[0].is_nan() && r[1].is_nan());
    }
}
