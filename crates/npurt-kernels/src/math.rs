//! Branch-free f32 math that the compiler can vectorise (the std functions call libm one
//! element at a time). Accuracy is stated per function and checked by the tests against
//! f64 references. Constants are kept as published (some round to fewer f32 digits).
#![allow(clippy::excessive_precision)]

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding it rounds an f32 of magnitude < 2^22 to an integer (ties to even).
const ROUND_MAGIC: f32 = 12_582_912.0;

/// e^x, within 2 ulp of the exact value for normal results (Cephes' polynomial); overflows
/// to +inf above ~88.72, underflows to 0 below ~-103.9 (subnormals rounded), NaN in NaN out.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let xc = x.clamp(-104.0, 89.0);
    let t = xc * LOG2E + ROUND_MAGIC;
    let n = t - ROUND_MAGIC;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1)
        * r
        + 5.000_000_1e-1;
    let y = p * (r * r) + r + 1.0;
    // 2^ni as two normal factors, so results near the ends of the range round once.
    let h = ni >> 1;
    let s1 = f32::from_bits(((h + 127) << 23) as u32);
    let s2 = f32::from_bits(((ni - h + 127) << 23) as u32);
    let res = y * s1 * s2;
    if x.is_nan() {
        x
    } else {
        res
    }
}

/// ln(x), within 2 ulp (Cephes' `logf` polynomial; subnormals handled); -inf at ±0, NaN
/// below 0 and for NaN, +inf at +inf.
#[inline(always)]
pub fn log(x: f32) -> f32 {
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x }; // 2^23
    let bits = xs.to_bits() as i32;
    let e0 = ((bits >> 23) & 0xff) - 127 - if sub { 23 } else { 0 };
    let m = f32::from_bits(((bits & 0x007f_ffff) | 0x3f80_0000) as u32); // [1, 2)
    let big = m > std::f32::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = (e0 + big as i32) as f32;
    let f = m - 1.0;
    let z = f * f;
    let mut y = 7.037_683_6e-2f32;
    y = y * f - 1.151_461_1e-1;
    y = y * f + 1.167_699_9e-1;
    y = y * f - 1.242_014_1e-1;
    y = y * f + 1.424_932_3e-1;
    y = y * f - 1.666_805_8e-1;
    y = y * f + 2.000_071_5e-1;
    y = y * f - 2.499_999_4e-1;
    y = y * f + 3.333_333_1e-1;
    y = y * f * z;
    y += -2.121_944_4e-4 * e;
    y += -0.5 * z;
    let r = f + y + 0.693_359_4 * e;
    if x == f32::INFINITY {
        x
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x < 0.0 || x.is_nan() {
        f32::NAN
    } else {
        r
    }
}

/// 1 / (1 + e^-x).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// x * sigmoid(x).
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// tanh(x) as a [13/6] rational approximation on [-7.9988, 7.9988] (Eigen's
/// `generic_fast_tanh_float`), x itself for |x| < 4e-4; within 8 ulp (absolute error
/// < 5e-7, largest near |x| = 6).
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let c = x.clamp(-7.998_811_7, 7.998_811_7);
    let x2 = c * c;
    let mut p = -2.760_768_5e-16f32;
    p = p * x2 + 2.000_187_9e-13;
    p = p * x2 + -8.604_671_5e-11;
    p = p * x2 + 5.122_297e-8;
    p = p * x2 + 1.485_722_4e-5;
    p = p * x2 + 6.372_619_3e-4;
    p = p * x2 + 4.893_524_6e-3;
    p *= c;
    let mut q = 1.198_258_4e-6f32;
    q = q * x2 + 1.185_347_1e-4;
    q = q * x2 + 2.268_434_6e-3;
    q = q * x2 + 4.893_525e-3;
    let r = p / q;
    if x.abs() < 4e-4 {
        x
    } else {
        r
    }
}

/// erf(x) as a [13/8] rational approximation on [-4, 4] (Eigen's
/// `generic_fast_erf_float`), ±1 beyond; absolute error < 5e-7.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let c = x.clamp(-4.0, 4.0);
    let x2 = c * c;
    let mut p = -2.726_142_3e-10f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 + -2.101_024e-6;
    p = p * x2 + -5.692_506_4e-5;
    p = p * x2 + -7.349_906_3e-4;
    p = p * x2 + -2.954_600_5e-3;
    p = p * x2 + -1.609_603_3e-2;
    p *= c;
    let mut q = -1.456_607_2e-5f32;
    q = q * x2 + -2.133_740_6e-4;
    q = q * x2 + -1.682_827e-3;
    q = q * x2 + -7.373_329_2e-3;
    q = q * x2 + -1.426_473_9e-2;
    p / q
}

/// GELU with the exact (erf) form: x/2 * (1 + erf(x/√2)) (PyTorch's default).
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU with the tanh approximation: x/2 * (1 + tanh(√(2/π)(x + 0.044715x³))), computed as
/// x * sigmoid(2u), which is the same function.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // sqrt(2/pi)
    let u = K * (x + 0.044_715 * x * x * x);
    x / (1.0 + exp(-2.0 * u))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f64) -> f64 {
        let b32 = b as f32;
        if a == b32 || (a.is_nan() && b.is_nan()) {
            return 0.0;
        }
        let ulp = (f32::from_bits(b32.abs().to_bits() + 1) - b32.abs()) as f64;
        ((a as f64) - b).abs() / ulp
    }

    fn sweep(lo: f32, hi: f32, n: usize) -> impl Iterator<Item = f32> {
        (0..=n).map(move |i| lo + (hi - lo) * (i as f32 / n as f32))
    }

    #[test]
    fn exp_is_accurate() {
        let mut worst = 0.0f64;
        for x in sweep(-87.0, 88.7, 200_000) {
            worst = worst.max(ulps(exp(x), (x as f64).exp()));
        }
        assert!(worst <= 2.0, "exp worst {worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(1000.0), f32::INFINITY);
        assert_eq!(exp(-1000.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
        let sub = exp(-100.0) as f64;
        assert!((sub - (-100f64).exp()).abs() < 2e-45);
    }

    #[test]
    fn log_is_accurate() {
        let mut worst = 0.0f64;
        for i in 0..=400_000u32 {
            // Log-spaced over the whole positive range, subnormals included.
            let x = 2f32.powf(-149.0 + 277.0 * (i as f32 / 400_000.0));
            worst = worst.max(ulps(log(x), (x as f64).ln()));
        }
        for x in sweep(0.5, 2.0, 100_000) {
            worst = worst.max(ulps(log(x), (x as f64).ln()));
        }
        assert!(worst <= 2.0, "log worst {worst} ulp");
        assert_eq!(log(1.0), 0.0);
        assert_eq!(log(0.0), f32::NEG_INFINITY);
        assert_eq!(log(-0.0), f32::NEG_INFINITY);
        assert_eq!(log(f32::INFINITY), f32::INFINITY);
        assert!(log(-1.0).is_nan() && log(f32::NAN).is_nan() && log(f32::NEG_INFINITY).is_nan());
    }

    #[test]
    fn tanh_is_accurate() {
        let mut worst = 0.0f64;
        for x in sweep(-10.0, 10.0, 200_000) {
            worst = worst.max(ulps(tanh(x), (x as f64).tanh()));
        }
        assert!(worst <= 8.0, "tanh worst {worst} ulp");
        assert_eq!(tanh(1e-6), 1e-6);
        assert!(tanh(f32::NAN).is_nan());
    }

    #[test]
    fn erf_is_accurate() {
        let mut worst = 0.0f64;
        for x in sweep(-5.0, 5.0, 200_000) {
            let e = (erf(x) as f64 - libm::erf(x as f64)).abs();
            worst = worst.max(e);
        }
        assert!(worst <= 5e-7, "erf worst abs error {worst}");
    }

    #[test]
    fn sigmoid_and_gelu_edges() {
        assert_eq!(sigmoid(-200.0), 0.0);
        assert_eq!(sigmoid(200.0), 1.0);
        assert_eq!(silu(-200.0), -0.0);
        assert_eq!(gelu_tanh(-200.0), -0.0);
        assert_eq!(gelu_tanh(200.0), 200.0);
        assert_eq!(gelu_erf(200.0), 200.0);
        assert_eq!(gelu_erf(-200.0), -0.0);
    }
}
