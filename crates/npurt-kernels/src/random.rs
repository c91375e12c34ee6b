//! Random kernels: uniform and normal draws into float arrays from a device's Philox
//! [`Generator`](crate::philox::Generator).
//!
//! Element `i` of a launch takes word `i % 4` of counter block `first + i / 4`
//! ([`block_words`]); normals take a Box–Muller pair from words `(0, 1)` and `(2, 3)`. A
//! launch of `n` elements reserves `ceil(n / 4)` blocks when it is built (at launch time),
//! so its values depend only on the seed and the offset it reserved — never on the block
//! count, the cores or the order the executor runs launches in.
//!
//! Uniform draws use as many random bits as the dtype's significand holds (24 for float32,
//! 11 for float16, 8 for bfloat16), so `[0, 1)` is exact in every dtype; `low + (high -
//! low) * u` is computed in f64 and rounded once to the dtype (as any float kernel, a value
//! just below `high` may round to `high`). Normals are computed in f64 from 32-bit uniforms
//! (`u1` in `(0, 1]`, so no `log(0)`), then rounded once.

use crate::elementwise::split_aligned;
use crate::philox::{block_words, Generator};
use crate::plan::{blocks_for, GRAIN_ELEMENTWISE, GRAIN_TRANSCENDENTAL};
use crate::{DType, Elem, KernelArgError, Launch, TensorView};
use half::{bf16, f16};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::Arc;

/// What a random kernel draws.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// Uniform on `[low, high)` (torch's `uniform_`, `rand` is `0, 1`).
    Uniform { low: f64, high: f64 },
    /// Normal with `mean` and standard deviation `std` (torch's `normal_`, `randn` is `0, 1`).
    Normal { mean: f64, std: f64 },
}

impl Distribution {
    pub const fn name(&self) -> &'static str {
        match self {
            Distribution::Uniform { .. } => "uniform",
            Distribution::Normal { .. } => "normal",
        }
    }

    fn check(&self) -> Result<(), KernelArgError> {
        let op = self.name();
        let bad = |detail: String| Err(KernelArgError::Invalid { op, detail });
        match *self {
            Distribution::Uniform { low, high } => {
                if !low.is_finite() || !high.is_finite() {
                    return bad(format!("low and high must be finite, got {low} and {high}"));
                }
                if low > high {
                    return bad(format!("expects low <= high, got low={low} > high={high}"));
                }
            }
            Distribution::Normal { mean, std } => {
                if !mean.is_finite() || !std.is_finite() {
                    return bad(format!("mean and std must be finite, got {mean} and {std}"));
                }
                if std < 0.0 {
                    return bad(format!("expects std >= 0.0, got {std}"));
                }
            }
        }
        Ok(())
    }
}

/// Counter blocks a launch of `numel` elements reserves (four words per block).
pub const fn blocks_needed(numel: usize) -> u64 {
    numel.div_ceil(4) as u64
}

struct RandomKernel {
    dist: Distribution,
    seed: u64,
    first: u64,
    out: TensorView,
}

/// Fills `out` (a contiguous float32/float16/bfloat16 view) with draws from `dist`,
/// reserving its counter blocks from `gen` now. Checks everything before reserving, so a
/// rejected call leaves the generator as it was.
pub fn random(dist: Distribution, gen: &Generator, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    check_out(&dist, out)?;
    crate::replay::taint("random draws (a replay would repeat the generator offsets reserved here)");
    let (seed, first) = gen.reserve(blocks_needed(out.numel()));
    Ok(random_at(dist, seed, first, out, cores))
}

/// [`random`] at an explicit `(seed, first block)`: what a launch that reserved them runs.
pub fn random_with_state(
    dist: Distribution,
    seed: u64,
    first: u64,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    check_out(&dist, out)?;
    Ok(random_at(dist, seed, first, out, cores))
}

fn check_out(dist: &Distribution, out: &TensorView) -> Result<(), KernelArgError> {
    let op = dist.name();
    if !out.dtype().is_float() {
        return Err(KernelArgError::UnsupportedDType {
            op,
            dtype: out.dtype(),
            hint: " (random draws are float32, float16 or bfloat16)",
        });
    }
    if !out.is_contiguous() {
        return Err(KernelArgError::NotContiguous {
            op,
            shape: out.shape().to_vec(),
            strides: out.strides().to_vec(),
        });
    }
    dist.check()
}

fn random_at(dist: Distribution, seed: u64, first: u64, out: &TensorView, cores: u32) -> Launch {
    let grain = match dist {
        Distribution::Uniform { .. } => GRAIN_ELEMENTWISE,
        Distribution::Normal { .. } => GRAIN_TRANSCENDENTAL,
    };
    let blocks = blocks_for(out.numel(), grain, cores);
    let k = RandomKernel {
        dist,
        seed,
        first,
        out: out.clone(),
    };
    (Arc::new(k), blocks)
}

/// The top `bits` of `x` as a float in `[0, 1)`, exact in a significand of `bits` bits.
#[inline(always)]
fn unit(x: u32, bits: u32) -> f64 {
    f64::from(x >> (32 - bits)) * (-(bits as f64)).exp2()
}

/// A Box–Muller pair of standard normals from two words.
#[inline(always)]
fn box_muller(a: u32, b: u32) -> (f64, f64) {
    const TWO_POW_M32: f64 = 1.0 / 4_294_967_296.0;
    let u1 = (f64::from(a) + 1.0) * TWO_POW_M32; // (0, 1]
    let u2 = f64::from(b) * TWO_POW_M32; // [0, 1)
    let r = (-2.0 * u1.ln()).sqrt();
    let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
    (r * c, r * s)
}

/// Significand bits of a float dtype (random bits a uniform draw can hold exactly).
const fn significand_bits(d: DType) -> u32 {
    match d {
        DType::F16 => 11,
        DType::BF16 => 8,
        _ => 24,
    }
}

impl RandomKernel {
    /// The four values of counter block `j` of this launch.
    #[inline(always)]
    fn values(&self, j: u64, bits: u32) -> [f64; 4] {
        let w = block_words(self.seed, u128::from(self.first) + u128::from(j));
        match self.dist {
            Distribution::Uniform { low, high } => {
                let span = high - low;
                w.map(|x| low + span * unit(x, bits))
            }
            Distribution::Normal { mean, std } => {
                let (z0, z1) = box_muller(w[0], w[1]);
                let (z2, z3) = box_muller(w[2], w[3]);
                [z0, z1, z2, z3].map(|z| mean + std * z)
            }
        }
    }

    fn fill<T: Elem>(&self, s: usize, e: usize) {
        let bits = significand_bits(T::DTYPE);
        let p = self.out.ptr::<T>();
        let mut i = s;
        while i < e {
            let v = self.values((i / 4) as u64, bits);
            for (k, &x) in v.iter().enumerate().take(e - i) {
                // SAFETY: `out` is contiguous (checked at launch) with `numel` elements at
                // `p`, valid for writes while the kernel holds the view (TensorView's
                // contract); `i + k < e <= numel`, and blocks write disjoint ranges.
                unsafe { p.add(i + k).write(T::from_f64(x)) };
            }
            i += 4;
        }
    }
}

impl Kernel for RandomKernel {
    fn name(&self) -> &str {
        self.dist.name()
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        // Ranges start at multiples of 4 elements: every block starts at a counter block.
        let (s, e) = split_aligned(blk, self.out.numel(), 64);
        if s < e {
            match self.out.dtype() {
                DType::F16 => self.fill::<f16>(s, e),
                DType::BF16 => self.fill::<bf16>(s, e),
                _ => self.fill::<f32>(s, e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run_inline, HostTensor};

    fn draw(dist: Distribution, dtype: DType, n: usize, seed: u64, first: u64, blocks: Option<u32>) -> Vec<f64> {
        let t = HostTensor::zeros(dtype, &[n]);
        {
            // SAFETY: only this kernel uses the tensor, inline on this thread.
            let v = unsafe { t.view() };
            let (k, b) = random_with_state(dist, seed, first, &v, 4).unwrap();
            run_inline(&*k, blocks.unwrap_or(b), true).unwrap();
        }
        t.to_f64_vec()
    }

    const U01: Distribution = Distribution::Uniform { low: 0.0, high: 1.0 };
    const N01: Distribution = Distribution::Normal { mean: 0.0, std: 1.0 };

    #[test]
    fn values_do_not_depend_on_the_block_count() {
        for dist in [U01, N01] {
            let one = draw(dist, DType::F32, 100_003, 5, 0, Some(1));
            for b in [2, 7, 16] {
                assert_eq!(one, draw(dist, DType::F32, 100_003, 5, 0, Some(b)));
            }
        }
    }

    #[test]
    fn a_launch_is_a_window_on_the_counter_stream() {
        // Two launches reserving blocks back to back give the draws of one long launch.
        let long = draw(U01, DType::F32, 40, 9, 3, None);
        let (a, b) = (
            draw(U01, DType::F32, 20, 9, 3, None),
            draw(U01, DType::F32, 20, 9, 8, None),
        );
        assert_eq!([a, b].concat(), long);
        let first = long[0] as f32;
        let w = block_words(9, 3);
        assert_eq!(first, (w[0] >> 8) as f32 / (1u32 << 24) as f32);
        assert_ne!(draw(U01, DType::F32, 40, 10, 3, None), long);
    }

    #[test]
    fn uniform_is_in_range_in_every_dtype() {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let v = draw(U01, dt, 50_000, 1, 0, None);
            assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "{dt}");
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            assert!((mean - 0.5).abs() < 0.01, "{dt}: mean {mean}");
            let u = draw(Distribution::Uniform { low: -3.0, high: 5.0 }, dt, 10_000, 2, 0, None);
            assert!(u.iter().all(|&x| (-3.0..=5.0).contains(&x)));
        }
    }

    #[test]
    fn normal_moments() {
        let v = draw(
            Distribution::Normal { mean: 2.0, std: 3.0 },
            DType::F32,
            200_000,
            3,
            0,
            None,
        );
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        // Standard errors: 3/sqrt(n) ≈ 0.0067 for the mean, ≈ 0.028 for the variance of 9.
        assert!((mean - 2.0).abs() < 0.04, "mean {mean}");
        assert!((var - 9.0).abs() < 0.2, "var {var}");
    }

    #[test]
    fn bad_arguments_are_rejected_before_reserving() {
        let g = Generator::default();
        let f = HostTensor::zeros(DType::F32, &[4, 4]);
        let i = HostTensor::zeros(DType::I32, &[4]);
        // SAFETY: the views are never launched.
        let (fv, iv) = unsafe { (f.view(), i.view()) };
        let bad = [
            random(U01, &g, &iv, 1).err(),
            random(U01, &g, &fv.transpose(0, 1).unwrap(), 1).err(),
            random(Distribution::Uniform { low: 1.0, high: 0.0 }, &g, &fv, 1).err(),
            random(
                Distribution::Uniform {
                    low: 0.0,
                    high: f64::NAN,
                },
                &g,
                &fv,
                1,
            )
            .err(),
            random(Distribution::Normal { mean: 0.0, std: -1.0 }, &g, &fv, 1).err(),
            random(
                Distribution::Normal {
                    mean: f64::INFINITY,
                    std: 1.0,
                },
                &g,
                &fv,
                1,
            )
            .err(),
        ];
        assert!(matches!(bad[0], Some(KernelArgError::UnsupportedDType { .. })));
        assert!(matches!(bad[1], Some(KernelArgError::NotContiguous { .. })));
        assert!(bad[2..]
            .iter()
            .all(|e| matches!(e, Some(KernelArgError::Invalid { .. }))));
        assert_eq!(g.offset(), 0);
        assert!(random(U01, &g, &fv, 1).is_ok());
        assert_eq!(g.offset(), 4);
    }
}
