//! Accumulators: how each reduction starts, steps, merges two partial results and
//! finishes, in the order `kernel.rs` decides (the order never depends on the block count).

use crate::Elem;

/// A result to store: converted to the output dtype with numpy's cast rules.
#[derive(Clone, Copy)]
pub(super) enum Val {
    F(f64),
    I(i64),
}

impl Val {
    #[inline(always)]
    pub(super) fn to<O: Elem>(self) -> O {
        match self {
            Val::F(v) => O::from_f64(v),
            Val::I(v) => O::from_i64(v),
        }
    }
}

pub(super) trait Red<T: Elem>: Copy {
    type Acc: Copy;
    fn init(self) -> Self::Acc;
    fn step(self, a: Self::Acc, x: T, i: usize) -> Self::Acc;
    /// Merges two partial results (of any index sets: order-aware reducers compare indices).
    fn merge(self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    fn finish(self, a: Self::Acc, len: usize) -> Val;
    fn pack(a: Self::Acc) -> (u64, u64);
    fn unpack(p: (u64, u64)) -> Self::Acc;
}

#[derive(Clone, Copy)]
pub(super) struct SumF {
    pub(super) mean: bool,
}
impl<T: Elem> Red<T> for SumF {
    type Acc = f64;
    #[inline(always)]
    fn init(self) -> f64 {
        0.0
    }
    #[inline(always)]
    fn step(self, a: f64, x: T, _: usize) -> f64 {
        a + x.to_f64()
    }
    #[inline(always)]
    fn merge(self, a: f64, b: f64) -> f64 {
        a + b
    }
    fn finish(self, a: f64, len: usize) -> Val {
        Val::F(if self.mean { a / len as f64 } else { a })
    }
    fn pack(a: f64) -> (u64, u64) {
        (a.to_bits(), 0)
    }
    fn unpack(p: (u64, u64)) -> f64 {
        f64::from_bits(p.0)
    }
}

#[derive(Clone, Copy)]
pub(super) struct SumI {
    pub(super) mean: bool,
}
impl<T: Elem> Red<T> for SumI {
    type Acc = i64;
    #[inline(always)]
    fn init(self) -> i64 {
        0
    }
    #[inline(always)]
    fn step(self, a: i64, x: T, _: usize) -> i64 {
        a.wrapping_add(x.to_i64())
    }
    #[inline(always)]
    fn merge(self, a: i64, b: i64) -> i64 {
        a.wrapping_add(b)
    }
    fn finish(self, a: i64, len: usize) -> Val {
        if self.mean {
            Val::F(a as f64 / len as f64)
        } else {
            Val::I(a)
        }
    }
    fn pack(a: i64) -> (u64, u64) {
        (a as u64, 0)
    }
    fn unpack(p: (u64, u64)) -> i64 {
        p.0 as i64
    }
}

/// Max (`MAX = true`) or min over floats in f32, NaN propagating.
#[derive(Clone, Copy)]
pub(super) struct ExtF<const MAX: bool>;
impl<T: Elem, const MAX: bool> Red<T> for ExtF<MAX> {
    type Acc = f32;
    #[inline(always)]
    fn init(self) -> f32 {
        if MAX {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        }
    }
    #[inline(always)]
    fn step(self, a: f32, x: T, _: usize) -> f32 {
        <Self as Red<f32>>::merge(self, a, x.to_f32())
    }
    #[inline(always)]
    fn merge(self, a: f32, b: f32) -> f32 {
        let better = if MAX { b > a } else { b < a };
        if better || b.is_nan() {
            b
        } else {
            a
        }
    }
    fn finish(self, a: f32, _: usize) -> Val {
        Val::F(a as f64)
    }
    fn pack(a: f32) -> (u64, u64) {
        (a.to_bits() as u64, 0)
    }
    fn unpack(p: (u64, u64)) -> f32 {
        f32::from_bits(p.0 as u32)
    }
}

/// Max or min over integers (and bools) in i64.
#[derive(Clone, Copy)]
pub(super) struct ExtI<const MAX: bool>;
impl<T: Elem, const MAX: bool> Red<T> for ExtI<MAX> {
    type Acc = i64;
    #[inline(always)]
    fn init(self) -> i64 {
        if MAX {
            i64::MIN
        } else {
            i64::MAX
        }
    }
    #[inline(always)]
    fn step(self, a: i64, x: T, _: usize) -> i64 {
        <Self as Red<i64>>::merge(self, a, x.to_i64())
    }
    #[inline(always)]
    fn merge(self, a: i64, b: i64) -> i64 {
        if MAX {
            a.max(b)
        } else {
            a.min(b)
        }
    }
    fn finish(self, a: i64, _: usize) -> Val {
        Val::I(a)
    }
    fn pack(a: i64) -> (u64, u64) {
        (a as u64, 0)
    }
    fn unpack(p: (u64, u64)) -> i64 {
        p.0 as i64
    }
}

pub(super) const NO_INDEX: usize = usize::MAX;

/// Merges two (value, index) partials of an argmax: an empty one (`NO_INDEX`) yields to the
/// other; otherwise `b` replaces `a` when `b_wins(a, b)`.
#[inline(always)]
fn merge_arg<V: Copy>(a: (V, usize), b: (V, usize), b_wins: impl FnOnce((V, usize), (V, usize)) -> bool) -> (V, usize) {
    if a.1 == NO_INDEX || (b.1 != NO_INDEX && b_wins(a, b)) {
        b
    } else {
        a
    }
}

/// `b` holds a larger value, or the same value at an earlier index (the first maximum).
#[inline(always)]
fn greater_or_earlier<V: PartialOrd>(a: (V, usize), b: (V, usize)) -> bool {
    b.0 > a.0 || (b.0 == a.0 && b.1 < a.1)
}

/// Argmax over floats: (value, index); the first NaN wins, else the first maximum.
#[derive(Clone, Copy)]
pub(super) struct ArgF;
impl<T: Elem> Red<T> for ArgF {
    type Acc = (f32, usize);
    #[inline(always)]
    fn init(self) -> (f32, usize) {
        (f32::NEG_INFINITY, NO_INDEX)
    }
    #[inline(always)]
    fn step(self, a: (f32, usize), x: T, i: usize) -> (f32, usize) {
        <Self as Red<f32>>::merge(self, a, (x.to_f32(), i))
    }
    #[inline(always)]
    fn merge(self, a: (f32, usize), b: (f32, usize)) -> (f32, usize) {
        merge_arg(a, b, |a, b| match (a.0.is_nan(), b.0.is_nan()) {
            (true, true) => b.1 < a.1,
            (true, false) => false,
            (false, true) => true,
            (false, false) => greater_or_earlier(a, b),
        })
    }
    fn finish(self, a: (f32, usize), _: usize) -> Val {
        Val::I(a.1 as i64)
    }
    fn pack(a: (f32, usize)) -> (u64, u64) {
        (a.0.to_bits() as u64, a.1 as u64)
    }
    fn unpack(p: (u64, u64)) -> (f32, usize) {
        (f32::from_bits(p.0 as u32), p.1 as usize)
    }
}

/// Argmax over integers: the first maximum.
#[derive(Clone, Copy)]
pub(super) struct ArgI;
impl<T: Elem> Red<T> for ArgI {
    type Acc = (i64, usize);
    #[inline(always)]
    fn init(self) -> (i64, usize) {
        (i64::MIN, NO_INDEX)
    }
    #[inline(always)]
    fn step(self, a: (i64, usize), x: T, i: usize) -> (i64, usize) {
        <Self as Red<i64>>::merge(self, a, (x.to_i64(), i))
    }
    #[inline(always)]
    fn merge(self, a: (i64, usize), b: (i64, usize)) -> (i64, usize) {
        merge_arg(a, b, greater_or_earlier)
    }
    fn finish(self, a: (i64, usize), _: usize) -> Val {
        Val::I(a.1 as i64)
    }
    fn pack(a: (i64, usize)) -> (u64, u64) {
        (a.0 as u64, a.1 as u64)
    }
    fn unpack(p: (u64, u64)) -> (i64, usize) {
        (p.0 as i64, p.1 as usize)
    }
}
