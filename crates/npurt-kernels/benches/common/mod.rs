//! Helpers the kernel benches share: deterministic inputs and views of host tensors.

use npurt_kernels::{HostTensor, TensorView};

/// A tensor of `shape` filled with values in [-1, 1) from an xorshift stream seeded by `seed`.
pub fn filled(shape: &[usize], seed: u32) -> HostTensor {
    let n: usize = shape.iter().product();
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    let data: Vec<f32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect();
    HostTensor::from_slice(&data, shape)
}

/// A view of `t` for a launch.
pub fn v(t: &HostTensor) -> TensorView {
    // SAFETY: the benches run one kernel at a time and keep the tensors alive past their
    // launches.
    unsafe { t.view() }
}
