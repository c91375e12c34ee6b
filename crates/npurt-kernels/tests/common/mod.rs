//! Shared test helpers: a seeded RNG, host tensors with their f64 contents, logical reads of
//! strided views, and a runner that executes every kernel with several block counts in
//! both orders and checks the results are bitwise identical.
#![allow(dead_code)]

use npurt_kernels::{DType, HostTensor, KernelArgError, Launch, TensorView};

/// xorshift64*: deterministic, seedable.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub fn f(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f()
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }
}

/// Random values suitable for `dtype` in [lo, hi] (integers: rounded; bool: 0/1).
pub fn random_values(rng: &mut Rng, dtype: DType, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n)
        .map(|_| match dtype {
            DType::Bool => rng.int(0, 1) as f64,
            d if d.is_int() => rng.int(lo as i64, hi as i64) as f64,
            _ => rng.range(lo, hi),
        })
        .collect()
}

/// A host tensor of random values, and its contents as f64 (after rounding to the dtype).
pub fn random(rng: &mut Rng, dtype: DType, shape: &[usize], lo: f64, hi: f64) -> (HostTensor, Vec<f64>) {
    let n = shape.iter().product();
    let t = HostTensor::from_f64(dtype, &random_values(rng, dtype, n, lo, hi), shape);
    let d = t.to_f64_vec();
    (t, d)
}

/// A row-major view of a host tensor.
pub fn v(t: &HostTensor) -> TensorView {
    // SAFETY: the tests run kernels one at a time on the test thread, so no two kernels
    // access a tensor concurrently.
    unsafe { t.view() }
}

/// The logical (row-major) contents of `view`, a view derived from `base` (a row-major view
/// of a tensor whose contents are `data`).
pub fn logical(data: &[f64], base: &TensorView, view: &TensorView) -> Vec<f64> {
    let item = base.dtype().itemsize() as isize;
    let off0 = (view.addr() as isize - base.addr() as isize) / item;
    let n = view.numel();
    (0..n)
        .map(|mut i| {
            let mut off = off0;
            for d in (0..view.ndim()).rev() {
                off += (i % view.shape()[d]) as isize * view.strides()[d];
                i /= view.shape()[d];
            }
            data[off as usize]
        })
        .collect()
}

/// (block count, reverse order) variants every kernel is run with; `None` = the suggested
/// count.
pub const VARIANTS: [(Option<u32>, bool); 5] = [
    (None, false),
    (None, true),
    (Some(1), false),
    (Some(3), true),
    (Some(7), false),
];

/// Runs the kernel built by `mk` with each of [`VARIANTS`] (block counts 1, 3, 7 and the
/// suggested one; blocks in index order or in reverse), presetting `out`'s buffer to
/// `sentinel` each time; checks all runs leave bitwise identical buffers and returns the
/// buffer's contents (as f64).
pub fn run_all(out: &HostTensor, sentinel: f64, mk: impl Fn() -> Result<Launch, KernelArgError>) -> Vec<f64> {
    let mut first: Option<(Vec<u64>, Vec<f64>)> = None;
    let (_, suggested) = mk().expect("kernel arguments are valid");
    for (blocks, reverse) in VARIANTS {
        let blocks = blocks.unwrap_or(suggested);
        out.write_f64(&vec![sentinel; out.numel()]);
        let (k, _) = mk().expect("kernel arguments are valid");
        npurt_kernels::run_inline(k.as_ref(), blocks, reverse).expect("no fault");
        drop(k);
        let vals = out.to_f64_vec();
        let bits: Vec<u64> = vals.iter().map(|x| x.to_bits()).collect();
        match &first {
            None => first = Some((bits, vals)),
            Some((b, _)) => {
                assert!(
                    *b == bits,
                    "results differ with {blocks} blocks (reverse: {reverse}) from the first run"
                )
            }
        }
    }
    first.unwrap().1
}

/// Runs once with the suggested block count, without presetting (for in-place tests).
pub fn run_once(mk: impl FnOnce() -> Result<Launch, KernelArgError>) {
    let (k, blocks) = mk().expect("kernel arguments are valid");
    npurt_kernels::run_inline(k.as_ref(), blocks, false).expect("no fault");
}

/// Relative/absolute closeness with NaN == NaN and equal infinities.
pub fn close(got: f64, want: f64, rtol: f64, atol: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    if got.is_infinite() || want.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= atol + rtol * want.abs()
}

pub fn assert_close(got: &[f64], want: &[f64], rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            close(g, w, rtol, atol),
            "{what}: element {i}: got {g}, want {w} (rtol {rtol}, atol {atol})"
        );
    }
}

/// Rounds an f64 reference to what storing it in `dtype` gives.
pub fn round_to(dtype: DType, x: f64) -> f64 {
    use npurt_kernels::Elem;
    npurt_kernels::dispatch_dtype!(dtype, T => T::from_f64(x).to_f64())
}

/// Tolerances for a computed float result (not exact arithmetic): f32 a few ulp of the
/// f64 reference, f16 two ulp (2^-9 relative), bf16 two ulp (2^-6 relative).
pub fn tol(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F32 => (2e-6, 1e-6),
        DType::F16 => (2.0 * 2f64.powi(-10), 1e-3),
        DType::BF16 => (2.0 * 2f64.powi(-7), 1e-2),
        _ => (0.0, 0.0),
    }
}

/// Row-major strides of a shape (as isize).
pub fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The value of `data` (row-major `shape`) at the broadcast of output index `idx` (of
/// `out_shape`), numpy's rules.
pub fn bcast_get(data: &[f64], shape: &[usize], out_shape: &[usize], flat: usize) -> f64 {
    let lead = out_shape.len() - shape.len();
    let st = strides_of(shape);
    let ost = strides_of(out_shape);
    let mut off = 0;
    for d in 0..out_shape.len() {
        let i = (flat / ost[d]) % out_shape[d].max(1);
        if d >= lead {
            let dd = d - lead;
            if shape[dd] != 1 {
                off += i * st[dd];
            }
        }
    }
    data[off]
}

/// All shapes' product.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}
