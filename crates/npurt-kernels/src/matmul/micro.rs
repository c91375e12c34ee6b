//! One single-threaded f32 `gemm` call on the ISA path of [`Family::Gemm`].
//!
//! At the CPU's own AVX-512 level the `gemm` crate dispatches itself (its `x86-v4`
//! feature: AVX-512 microkernels when the CPU has AVX-512F, which our AVX-512 level
//! implies). Below it (`NPURT_ISA=avx2|scalar`, the test override, or a CPU without
//! AVX-512) the crate's generic driver is called directly with the microkernel table of
//! the chosen level (`gemm-f32`'s public `microkernel::{fma, scalar}::f32` tables, the
//! ones the crate's own dispatch would use on such a CPU).
//!
//! The paths accumulate in different orders (different register tiles and FMA use), so
//! their results differ by rounding (see the crate README's Accuracy); one path is
//! bitwise deterministic for any block count.

use crate::isa::{self, Family, Isa};

/// `dst = s·dst + t·lhs@rhs` on an `m×n` tile, depth `k` (`dst` read only when
/// `read_dst`); each matrix is `(pointer, row stride, column stride)` in elements.
///
/// # Safety
/// The three strided matrices must be valid (dst for writes) for their `m×k`, `k×n`, `m×n`
/// extents, and dst must overlap neither lhs nor rhs.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_f32(
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs, dst_cs): (*mut f32, isize, isize),
    read_dst: bool,
    s: f32,
    (lhs, lhs_rs, lhs_cs): (*const f32, isize, isize),
    (rhs, rhs_rs, rhs_cs): (*const f32, isize, isize),
    t: f32,
) {
    /// The crate's generic driver with the microkernel table `$ukr` (`$n` lanes).
    macro_rules! basic {
        ($simd:expr, $ukr:path, $n:expr) => {{
            use $ukr as u;
            // SAFETY: forwarded to the caller; the microkernels need exactly the features
            // `$simd` was created for (its constructor checked them).
            unsafe {
                gemm_common::gemm::gemm_basic_generic::<
                    _,
                    f32,
                    { $n },
                    { u::MR_DIV_N * $n },
                    { u::NR },
                    { u::MR_DIV_N },
                    { u::H_M },
                    { u::H_N },
                >(
                    $simd,
                    m,
                    n,
                    k,
                    dst,
                    dst_cs,
                    dst_rs,
                    read_dst,
                    lhs,
                    lhs_cs,
                    lhs_rs,
                    rhs,
                    rhs_cs,
                    rhs_rs,
                    s,
                    t,
                    false,
                    false,
                    false,
                    |a, b, c| a * b + c,
                    &u::UKR,
                    &u::H_UKR,
                    false,
                    gemm_common::Parallelism::None,
                )
            }
        }};
    }
    match isa::path(Family::Gemm) {
        // SAFETY: forwarded to the caller.
        Isa::Avx512 => unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst,
                dst_cs,
                dst_rs,
                read_dst,
                lhs,
                lhs_cs,
                lhs_rs,
                rhs,
                rhs_cs,
                rhs_rs,
                s,
                t,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            let simd = gemm_common::simd::V3::try_new().expect("the AVX2 level implies AVX2 and FMA");
            basic!(simd, gemm_f32::microkernel::fma::f32, 8)
        }
        _ => basic!(gemm_common::simd::Scalar, gemm_f32::microkernel::scalar::f32, 1),
    }
}
