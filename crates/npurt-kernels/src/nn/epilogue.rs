//! What a convolution applies to each output after its bias: the activation a model's
//! `Conv → Relu` (or `LeakyRelu`, `Clip`, `HardSigmoid`, `HardSwish`) pair computes, fused
//! into the pass that writes the output (onnxruntime's `FusedConv`).
//!
//! Each variant calls the elementwise kernels' own function (`elementwise::activation`,
//! `unary`), so a fused convolution's result is bitwise the unfused convolution followed
//! by the activation kernel. The names and parameters are ONNX's (one owner: [`parse`]).
//!
//! [`parse`]: Epilogue::parse

use crate::elementwise::formulas as f;
use crate::KernelArgError;

/// Code generic over an epilogue's formula ([`Epilogue::with`]).
pub(super) trait Visit {
    type Out;
    fn go<F: Fn(f32) -> f32 + Copy>(self, f: F) -> Self::Out;
}

/// The activation applied to `conv + bias`, elementwise.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Epilogue {
    #[default]
    None,
    /// `max(0, x)` (NaN passes through).
    Relu,
    /// `x < 0 ? alpha·x : x`.
    LeakyRelu { alpha: f32 },
    /// `min(max(x, lo), hi)` (±infinity: that side open).
    Clip { lo: f32, hi: f32 },
    /// `max(0, min(1, alpha·x + beta))`.
    HardSigmoid { alpha: f32, beta: f32 },
    /// `x · max(0, min(1, x/6 + 1/2))`.
    HardSwish,
}

impl Epilogue {
    /// The epilogue named `name` (ONNX's op names in snake case: `relu`, `leaky_relu`
    /// `[alpha]`, `clip` `[lo, hi]`, `hard_sigmoid` `[alpha, beta]`, `hard_swish`) with its
    /// parameters (ONNX's defaults when omitted: alpha 0.01; clip open; 0.2, 0.5).
    pub fn parse(name: &str, params: &[f32]) -> Result<Epilogue, KernelArgError> {
        let want = |n: usize| -> Result<(), KernelArgError> {
            if params.len() > n {
                return Err(KernelArgError::Invalid {
                    op: "conv",
                    detail: format!("activation {name:?} takes at most {n} parameters, got {}", params.len()),
                });
            }
            Ok(())
        };
        let p = |i: usize, d: f32| params.get(i).copied().unwrap_or(d);
        let e = match name {
            "none" => {
                want(0)?;
                Epilogue::None
            }
            "relu" => {
                want(0)?;
                Epilogue::Relu
            }
            "leaky_relu" => {
                want(1)?;
                Epilogue::LeakyRelu { alpha: p(0, 0.01) }
            }
            "clip" => {
                want(2)?;
                Epilogue::Clip {
                    lo: p(0, f32::NEG_INFINITY),
                    hi: p(1, f32::INFINITY),
                }
            }
            "hard_sigmoid" => {
                want(2)?;
                Epilogue::HardSigmoid {
                    alpha: p(0, 0.2),
                    beta: p(1, 0.5),
                }
            }
            "hard_swish" => {
                want(0)?;
                Epilogue::HardSwish
            }
            _ => {
                return Err(KernelArgError::Invalid {
                    op: "conv",
                    detail: format!("unknown activation {name:?} (relu, leaky_relu, clip, hard_sigmoid, hard_swish)"),
                })
            }
        };
        if let Epilogue::Clip { lo, hi } = e {
            if lo.is_nan() || hi.is_nan() {
                return Err(KernelArgError::Invalid {
                    op: "conv",
                    detail: format!("clip bounds must not be NaN, got [{lo}, {hi}]"),
                });
            }
        }
        Ok(e)
    }

    /// Calls `visit` with this epilogue as a plain function (the one mapping from variant
    /// to formula): a loop written in `visit` is compiled once per variant, with the
    /// formula inlined and no dispatch per element or per call.
    #[inline(always)]
    pub(super) fn with<V: Visit>(self, visit: V) -> V::Out {
        match self {
            Epilogue::None => visit.go(|v| v),
            Epilogue::Relu => visit.go(f::relu),
            Epilogue::LeakyRelu { alpha } => visit.go(move |v| f::leaky_relu(alpha, v)),
            Epilogue::Clip { lo, hi } => visit.go(move |v| f::clip(lo, hi, v)),
            Epilogue::HardSigmoid { alpha, beta } => visit.go(move |v| f::hard_sigmoid(alpha, beta, v)),
            Epilogue::HardSwish => visit.go(f::hard_swish),
        }
    }

    /// `self(v)`.
    #[inline(always)]
    pub fn apply(self, v: f32) -> f32 {
        struct One(f32);
        impl Visit for One {
            type Out = f32;
            #[inline(always)]
            fn go<F: Fn(f32) -> f32 + Copy>(self, f: F) -> f32 {
                f(self.0)
            }
        }
        self.with(One(v))
    }
}

#[cfg(test)]
mod tests {
    use super::Epilogue;

    #[test]
    fn names_parameters_and_defaults() {
        assert_eq!(Epilogue::parse("relu", &[]).unwrap(), Epilogue::Relu);
        assert_eq!(
            Epilogue::parse("leaky_relu", &[]).unwrap(),
            Epilogue::LeakyRelu { alpha: 0.01 }
        );
        assert_eq!(
            Epilogue::parse("clip", &[0.0, 6.0]).unwrap(),
            Epilogue::Clip { lo: 0.0, hi: 6.0 }
        );
        assert_eq!(
            Epilogue::parse("hard_sigmoid", &[]).unwrap(),
            Epilogue::HardSigmoid { alpha: 0.2, beta: 0.5 }
        );
        assert!(Epilogue::parse("relu", &[1.0]).is_err());
        assert!(Epilogue::parse("gelu", &[]).is_err());
        assert!(Epilogue::parse("clip", &[f32::NAN]).is_err());
    }

    #[test]
    fn values() {
        let relu6 = Epilogue::Clip { lo: 0.0, hi: 6.0 };
        assert_eq!(relu6.apply(7.5), 6.0);
        assert_eq!(relu6.apply(-1.0), 0.0);
        assert!(Epilogue::Relu.apply(f32::NAN).is_nan());
        assert_eq!(Epilogue::Relu.apply(-2.0), 0.0);
        assert_eq!(Epilogue::HardSwish.apply(3.0), 3.0);
        assert_eq!(Epilogue::HardSwish.apply(-3.0), 0.0);
        assert_eq!(Epilogue::LeakyRelu { alpha: 0.5 }.apply(-2.0), -1.0);
        assert_eq!(Epilogue::HardSigmoid { alpha: 0.2, beta: 0.5 }.apply(0.0), 0.5);
    }
}
