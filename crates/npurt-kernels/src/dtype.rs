//! Element types: [`DType`] (the runtime tag) and [`Elem`] (the Rust type behind each tag).

use half::{bf16, f16};
use std::fmt;

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    I32,
    I64,
    I8,
    U8,
    /// One byte per element; zero is false, anything else true (kernels write 0 or 1).
    Bool,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 8] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::I8,
        DType::U8,
        DType::Bool,
    ];

    /// Bytes per element.
    pub const fn itemsize(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::I64 => 8,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// numpy's name (`"float32"`, `"bfloat16"`, `"bool"`...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// Parses numpy's name (and the short forms `f32`, `f16`, `bf16`, `i32`, `i64`, `i8`,
    /// `u8`).
    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "float32" | "f32" => DType::F32,
            "float16" | "f16" | "half" => DType::F16,
            "bfloat16" | "bf16" => DType::BF16,
            "int32" | "i32" => DType::I32,
            "int64" | "i64" => DType::I64,
            "int8" | "i8" => DType::I8,
            "uint8" | "u8" => DType::U8,
            "bool" | "bool_" => DType::Bool,
            _ => return None,
        })
    }

    /// A floating-point type (computed in f32).
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// A signed or unsigned integer type (computed in i64, wrapping like numpy).
    pub const fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64 | DType::I8 | DType::U8)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A bool element as stored: one byte, non-zero means true.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct Bool8(pub u8);

/// The Rust type of one [`DType`]'s elements, with the conversions the kernels compute
/// through: floats compute in `f32` (or `f64` for accumulations), integers in `i64`.
pub trait Elem: Copy + Send + Sync + PartialEq + fmt::Debug + 'static {
    const DTYPE: DType;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
    fn to_f64(self) -> f64;
    /// numpy's cast from a float: round to nearest for floats, truncate toward zero
    /// (saturating, NaN to 0) for integers, `v != 0` for bool.
    fn from_f64(v: f64) -> Self;
    fn to_i64(self) -> i64;
    /// numpy's cast from an integer: wrap to the width for integers, round for floats,
    /// `v != 0` for bool.
    fn from_i64(v: i64) -> Self;
    /// Converts to another element type with numpy's `astype` semantics.
    #[inline(always)]
    fn cast<U: Elem>(self) -> U {
        if Self::DTYPE.is_float() {
            if U::DTYPE == DType::F32 {
                U::from_f32(self.to_f32())
            } else {
                U::from_f64(self.to_f64())
            }
        } else {
            U::from_i64(self.to_i64())
        }
    }
}

impl Elem for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f32
    }
}

/// f16 and bf16: conversions through the `half` crate (same code, two types).
macro_rules! half_elem {
    ($t:ty, $d:expr) => {
        impl Elem for $t {
            const DTYPE: DType = $d;
            #[inline(always)]
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                <$t>::from_f64(v)
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                <$t>::to_f32(self) as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                <$t>::from_f64(v as f64)
            }
        }
    };
}
half_elem!(f16, DType::F16);
half_elem!(bf16, DType::BF16);

macro_rules! int_elem {
    ($t:ty, $d:expr) => {
        impl Elem for $t {
            const DTYPE: DType = $d;
            #[inline(always)]
            fn to_f32(self) -> f32 {
                self as f32
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}
int_elem!(i32, DType::I32);
int_elem!(i64, DType::I64);
int_elem!(i8, DType::I8);
int_elem!(u8, DType::U8);

impl Elem for Bool8 {
    const DTYPE: DType = DType::Bool;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        (self.0 != 0) as u8 as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        Bool8((v != 0.0) as u8)
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        (self.0 != 0) as u8 as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        Bool8((v != 0.0) as u8)
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        (self.0 != 0) as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        Bool8((v != 0) as u8)
    }
}

/// Like [`dispatch_dtype!`] for the float dtypes only; `$other` runs for the rest.
#[doc(hidden)]
#[macro_export]
macro_rules! dispatch_float {
    ($dt:expr, $T:ident => $body:expr, _ => $other:expr) => {
        match $dt {
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F16 => {
                type $T = $crate::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = $crate::half::bf16;
                $body
            }
            _ => $other,
        }
    };
}

/// Runs `$body` with `$T` bound to the Rust element type of `$dt`: the float arms are
/// [`dispatch_float!`]'s, so the dtype → type table is written once per family.
#[macro_export]
#[doc(hidden)]
macro_rules! dispatch_dtype {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            dt => $crate::dispatch_float!(dt, $T => $body, _ => match dt {
                $crate::DType::I32 => {
                    type $T = i32;
                    $body
                }
                $crate::DType::I64 => {
                    type $T = i64;
                    $body
                }
                $crate::DType::I8 => {
                    type $T = i8;
                    $body
                }
                $crate::DType::U8 => {
                    type $T = u8;
                    $body
                }
                $crate::DType::Bool => {
                    type $T = $crate::Bool8;
                    $body
                }
                $crate::DType::F32 | $crate::DType::F16 | $crate::DType::BF16 => unreachable!(),
            }),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert!(d.itemsize() >= 1);
        }
    }

    #[test]
    fn casts_follow_numpy() {
        assert_eq!((-2.7f32).cast::<i32>(), -2);
        assert_eq!(f32::NAN.cast::<i32>(), 0);
        assert_eq!(300i32.cast::<u8>(), 44);
        assert_eq!((-1i64).cast::<u8>(), 255);
        assert_eq!(0.5f32.cast::<Bool8>(), Bool8(1));
        assert_eq!(Bool8(7).cast::<f32>(), 1.0);
        assert_eq!(1.0f32.cast::<f16>(), f16::ONE);
        assert_eq!(f16::from_f32(2.5).cast::<bf16>(), bf16::from_f32(2.5));
        assert_eq!(16777217i64.cast::<f32>(), 16777216.0);
    }
}
