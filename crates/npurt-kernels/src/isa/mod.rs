//! The kernel families' paths over the ISA rule of `npurt_core::isa` (re-exported here:
//! the detected level, the `NPURT_ISA` cap, the test override, [`level`]): each
//! [`Family`] has a best path (the highest level it has code for, kept only where it
//! measured faster); the path it runs is `min(level, best)` ([`path`], one relaxed atomic
//! load once initialised).

mod report;

pub use npurt_core::isa::{available, detected, force, level, Isa};
pub use report::{cpu_model, report, IsaReport};

/// The kernel families, each with its own best path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// f32/f16/bf16 matmul and gemm tiles (the `gemm` crate's microkernels).
    Gemm,
    /// unary, binary, axpy.
    Elementwise,
    /// cast, copy (between dtypes), fill.
    Cast,
    /// softmax, log_softmax.
    Softmax,
    /// layer_norm, rms_norm.
    Norm,
    /// sum, mean, max, min, argmax.
    Reduce,
    /// The collectives' rank-order fold (`npurt_core`'s `collective/reduce.rs`, which runs
    /// at [`level`]: the same as this family's path).
    Collective,
}

impl Family {
    pub const ALL: [Family; 7] = [
        Family::Gemm,
        Family::Elementwise,
        Family::Cast,
        Family::Softmax,
        Family::Norm,
        Family::Reduce,
        Family::Collective,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Family::Gemm => "gemm",
            Family::Elementwise => "elementwise",
            Family::Cast => "cast",
            Family::Softmax => "softmax",
            Family::Norm => "norm",
            Family::Reduce => "reduce",
            Family::Collective => "collective",
        }
    }

    /// The highest path the family runs (AVX-512 only where it measured faster; see the
    /// crate README). Inside a family a few kernels stop lower where that measured faster:
    /// float→int casts run AVX2; max/min/argmax and column-wise sums run the portable code.
    pub const fn best(self) -> Isa {
        match self {
            Family::Gemm
            | Family::Elementwise
            | Family::Cast
            | Family::Softmax
            | Family::Reduce
            | Family::Collective => Isa::Avx512,
            // AVX-512 measured slower than AVX2 for f32 rows (faster for f16/bf16).
            Family::Norm => Isa::Avx2,
        }
    }
}

/// Calls `$k.$method::<$T, ...>($args, ...)` (generics given with their bounds) compiled for `$level` (an
/// [`Isa`] no higher than [`level`], usually `path(family)`): the
/// AVX-512 and AVX2 copies are the same Rust code under `#[target_feature]` (so the method
/// and everything it calls must be `#[inline(always)]` to be compiled for the level). The
/// compiler never fuses a multiply and an add on its own, so every copy gives the same
/// bits as the portable one (tested).
macro_rules! isa_call {
    ($level:expr, $K:ty, $k:expr, $method:ident::<$($T:ident: $B:path),+>($($a:ident: $t:ty),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
            unsafe fn v4<$($T: $B),+>(k: &$K, $($a: $t),*) {
                k.$method::<$($T),+>($($a),*)
            }
            #[target_feature(enable = "avx2,fma")]
            unsafe fn v3<$($T: $B),+>(k: &$K, $($a: $t),*) {
                k.$method::<$($T),+>($($a),*)
            }
            match $level {
                // SAFETY: the level never exceeds the detected one (caller), so the CPU has the
                // features each copy is compiled for.
                $crate::isa::Isa::Avx512 => unsafe { v4::<$($T),+>($k, $($a),*) },
                // SAFETY: as above.
                $crate::isa::Isa::Avx2 => unsafe { v3::<$($T),+>($k, $($a),*) },
                $crate::isa::Isa::Scalar => $k.$method::<$($T),+>($($a),*),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _: $crate::isa::Isa = $level;
            $k.$method::<$($T),+>($($a),*)
        }
    }};
}
pub(crate) use isa_call;

/// Runs `op` compiled for `level` through pulp's SIMD types (V4: 16 f32 lanes, V3: 8, else
/// pulp's scalar type): the one place pulp-based kernels turn a path into a SIMD type. A
/// level the CPU lacks (only under a wrong caller) runs the scalar copy.
#[inline]
pub(crate) fn vectorize<Op: pulp::WithSimd>(level: Isa, op: Op) -> Op::Output {
    #[cfg(target_arch = "x86_64")]
    match level {
        Isa::Avx512 => {
            if let Some(s) = pulp::x86::V4::try_new() {
                return pulp::Simd::vectorize(s, op);
            }
        }
        Isa::Avx2 => {
            if let Some(s) = pulp::x86::V3::try_new() {
                return pulp::Simd::vectorize(s, op);
            }
        }
        Isa::Scalar => {}
    }
    op.with_simd(pulp::Scalar::new())
}

/// The path `family` runs now: `min(level(), family.best())`.
#[inline]
pub fn path(family: Family) -> Isa {
    level().min(family.best())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_families_capped() {
        assert!(Isa::Scalar < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
        for f in Family::ALL {
            assert!(path(f) <= f.best() && path(f) <= level());
        }
        assert!(level() <= detected());
        assert_eq!(available().last().copied(), Some(detected()));
    }

    #[test]
    fn report_names_the_cpu_and_every_family() {
        let r = report();
        assert!(!r.cpu_model.is_empty());
        assert_eq!(r.paths.len(), Family::ALL.len());
        let line = r.to_string();
        assert!(line.contains("gemm=") && line.contains(&r.cpu_model), "{line}");
    }
}
