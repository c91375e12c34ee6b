//! The register loops of the direct convolution (`direct.rs`), compiled for the GEMM
//! family's ISA path as a whole: the taps' fused multiply-adds, the bias and the fused
//! activation (the epilogue is the elementwise kernels' scalar formula, vectorised here by
//! the compiler: the same operations in the same order, so the same bits).
//!
//! Two register tilings of a chunk of `L` output columns (`L` = 16 on AVX-512, else 8):
//! * channel blocks (`MB` output channels of a group share each loaded input vector: a
//!   first layer's 32 channels × 27 taps), one output row at a time;
//! * one output channel per group (depthwise): [`ROWS`] output rows at a time, so the
//!   multiply-adds of a chunk form independent chains instead of one chain per chunk.
//!
//! Every output sums its taps in the packed order from zero either way.

use super::direct::MB;
use super::direct_dw as dw;
use super::epilogue::{Epilogue, Visit};
use crate::isa::Isa;
use std::marker::PhantomData;

/// Output rows per register tile of a one-channel-per-group convolution.
pub(super) const ROWS: usize = 4;

/// One band's output rows `rows` of every channel block, from the padded scratch `pad`.
pub(super) struct Rows<'a> {
    /// Scratch offset of each tap from a window's origin; `wpack` holds `mb` weights per tap
    /// per channel block.
    pub taps: &'a [usize],
    pub wpack: &'a [f32],
    pub pad: &'a [f32],
    pub rows: (usize, usize),
    /// Channels per block (`MB`, or 1) and output channels of the group.
    pub mb: usize,
    pub mg: usize,
    /// Scratch floats between two consecutive output rows' windows; column stride.
    pub row_step: usize,
    pub sw: usize,
    /// Output columns.
    pub ow: usize,
    pub bias: Option<(*const f32, isize)>,
    pub epi: Epilogue,
    /// Channel `m` at `out + m·os[0]`, rows `os[1]` apart, contiguous columns.
    pub out: (*mut f32, [isize; 2]),
    /// The kernel's (rows, columns) when input rows may feed several output rows from one
    /// load (`direct_dw.rs`: one channel, unit strides and row dilation).
    pub reuse: Option<(usize, usize)>,
}

/// Runs `job` compiled for `level` (the CPU's best at most). Each loop family is its own
/// ISA-compiled function (`Kind`): adding one must not change how another is compiled.
pub(super) fn run(level: Isa, job: Rows<'_>) {
    match (job.mb == 1 && job.sw == 1, job.reuse) {
        (true, Some((3, 3))) => dispatch::<dw::Rows3x3>(level, job),
        (true, Some((5, 5))) => dispatch::<dw::Rows5x5>(level, job),
        _ => dispatch::<Taps>(level, job),
    }
}

fn dispatch<K: Kind>(level: Isa, job: Rows<'_>) {
    #[cfg(target_arch = "x86_64")]
    {
        if level == Isa::Avx512 {
            if let Some(s) = pulp::x86::V4::try_new() {
                return s.vectorize(Job::<_, K> {
                    s,
                    job,
                    kind: PhantomData,
                });
            }
        }
        if level != Isa::Scalar {
            if let Some(s) = pulp::x86::V3::try_new() {
                return s.vectorize(Job::<_, K> {
                    s,
                    job,
                    kind: PhantomData,
                });
            }
        }
    }
    let _ = level;
    pulp::NullaryFnOnce::call(Job::<_, K> {
        s: Portable,
        job,
        kind: PhantomData,
    })
}

/// A family of the band's loops, compiled per lane type and epilogue formula.
pub(super) trait Kind {
    fn go<S: Lanes, F: Fn(f32) -> f32 + Copy>(s: S, job: &Rows<'_>, f: F);
}

/// Tap by tap: channel blocks, or rows of one channel.
struct Taps;

impl Kind for Taps {
    #[inline(always)]
    fn go<S: Lanes, F: Fn(f32) -> f32 + Copy>(s: S, job: &Rows<'_>, f: F) {
        match (job.mb == 1, job.sw == 1) {
            (true, true) => one_channel_rows::<S, F, true>(s, job, f),
            (true, false) => one_channel_rows::<S, F, false>(s, job, f),
            (false, true) => channel_blocks::<S, F, true>(s, job, f),
            (false, false) => channel_blocks::<S, F, false>(s, job, f),
        }
    }
}

/// A vector of `L` f32 lanes on one ISA level.
pub(super) trait Lanes: Copy {
    type V: Copy;
    const L: usize;
    fn zero(self) -> Self::V;
    fn splat(self, w: f32) -> Self::V;
    /// `x · w + acc`, rounded once.
    fn fma(self, x: Self::V, w: Self::V, acc: Self::V) -> Self::V;
    /// The `L` columns of `pad` from `p` at stride `sw` (`SW1`: `sw` is 1).
    ///
    /// # Safety
    /// `p + (L-1)·sw < pad.len()`.
    unsafe fn load<const SW1: bool>(self, pad: &[f32], p: usize, sw: usize) -> Self::V;
    /// The lanes, in the first `L` entries.
    fn spill(self, v: Self::V) -> [f32; 16];
}

/// `L` columns of `pad` from `p`, `sw` apart (`SW1`: `sw` is 1).
///
/// # Safety
/// `p + (L-1)·sw < pad.len()`.
#[inline(always)]
unsafe fn columns<const L: usize, const SW1: bool>(pad: &[f32], p: usize, sw: usize) -> [f32; L] {
    debug_assert!(p + (L - 1) * sw < pad.len());
    let src = pad.as_ptr().wrapping_add(p);
    if SW1 {
        // SAFETY: p + L - 1 < pad.len() (the caller's contract, sw = 1).
        unsafe { src.cast::<[f32; L]>().read_unaligned() }
    } else {
        // SAFETY: p + j·sw <= p + (L-1)·sw < pad.len() (the caller's contract).
        std::array::from_fn(|j| unsafe { src.add(j * sw).read() })
    }
}

#[inline(always)]
fn widen<const L: usize>(a: [f32; L]) -> [f32; 16] {
    let mut o = [0.0; 16];
    o[..L].copy_from_slice(&a);
    o
}

#[cfg(target_arch = "x86_64")]
impl Lanes for pulp::x86::V4 {
    type V = pulp::f32x16;
    const L: usize = 16;
    #[inline(always)]
    fn zero(self) -> Self::V {
        self.splat_f32x16(0.0)
    }
    #[inline(always)]
    fn splat(self, w: f32) -> Self::V {
        self.splat_f32x16(w)
    }
    #[inline(always)]
    fn fma(self, x: Self::V, w: Self::V, acc: Self::V) -> Self::V {
        self.mul_add_f32x16(x, w, acc)
    }
    #[inline(always)]
    unsafe fn load<const SW1: bool>(self, pad: &[f32], p: usize, sw: usize) -> Self::V {
        // SAFETY: the caller's contract.
        pulp::cast(unsafe { columns::<16, SW1>(pad, p, sw) })
    }
    #[inline(always)]
    fn spill(self, v: Self::V) -> [f32; 16] {
        pulp::cast(v)
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for pulp::x86::V3 {
    type V = pulp::f32x8;
    const L: usize = 8;
    #[inline(always)]
    fn zero(self) -> Self::V {
        self.splat_f32x8(0.0)
    }
    #[inline(always)]
    fn splat(self, w: f32) -> Self::V {
        self.splat_f32x8(w)
    }
    #[inline(always)]
    fn fma(self, x: Self::V, w: Self::V, acc: Self::V) -> Self::V {
        self.mul_add_f32x8(x, w, acc)
    }
    #[inline(always)]
    unsafe fn load<const SW1: bool>(self, pad: &[f32], p: usize, sw: usize) -> Self::V {
        // SAFETY: the caller's contract.
        pulp::cast(unsafe { columns::<8, SW1>(pad, p, sw) })
    }
    #[inline(always)]
    fn spill(self, v: Self::V) -> [f32; 16] {
        widen(pulp::cast::<_, [f32; 8]>(v))
    }
}

/// The portable level: 8 lanes, `mul_add` (rounds once, as the FMA instructions).
#[derive(Clone, Copy)]
struct Portable;

impl Lanes for Portable {
    type V = [f32; 8];
    const L: usize = 8;
    #[inline(always)]
    fn zero(self) -> Self::V {
        [0.0; 8]
    }
    #[inline(always)]
    fn splat(self, w: f32) -> Self::V {
        [w; 8]
    }
    #[inline(always)]
    fn fma(self, x: Self::V, w: Self::V, acc: Self::V) -> Self::V {
        std::array::from_fn(|j| x[j].mul_add(w[j], acc[j]))
    }
    #[inline(always)]
    unsafe fn load<const SW1: bool>(self, pad: &[f32], p: usize, sw: usize) -> Self::V {
        // SAFETY: the caller's contract.
        unsafe { columns::<8, SW1>(pad, p, sw) }
    }
    #[inline(always)]
    fn spill(self, v: Self::V) -> [f32; 16] {
        widen(v)
    }
}

struct Job<'a, S, K> {
    s: S,
    job: Rows<'a>,
    kind: PhantomData<K>,
}

impl<S: Lanes, K: Kind> pulp::NullaryFnOnce for Job<'_, S, K> {
    type Output = ();
    #[inline(always)]
    fn call(self) {
        let epi = self.job.epi;
        epi.with(self)
    }
}

/// The band's loops compiled once per epilogue formula `f` (no dispatch per chunk).
impl<S: Lanes, K: Kind> Visit for Job<'_, S, K> {
    type Out = ();
    #[inline(always)]
    fn go<F: Fn(f32) -> f32 + Copy>(self, f: F) {
        K::go(self.s, &self.job, f)
    }
}

/// Every row of the band of a group with one output channel, [`ROWS`] at a time.
#[inline(always)]
fn one_channel_rows<S: Lanes, F: Fn(f32) -> f32 + Copy, const SW1: bool>(s: S, job: &Rows<'_>, f: F) {
    let (mut r, r1) = job.rows;
    while r + ROWS <= r1 {
        one_channel::<S, F, ROWS, SW1>(s, job, r, f);
        r += ROWS;
    }
    for r in r..r1 {
        one_channel::<S, F, 1, SW1>(s, job, r, f);
    }
}

/// The largest scratch offset a chunk of `chunks` column vectors at `base` reads (every
/// tap's last column), checked against the scratch once per chunk instead of per load.
#[inline(always)]
pub(super) fn check_reads<S: Lanes>(job: &Rows<'_>, base: usize, chunks: usize) {
    let last = base + job.taps.last().copied().unwrap_or(0) + (chunks * S::L - 1) * job.sw;
    assert!(last < job.pad.len(), "the padded band covers every read");
}

/// `R` output rows from `r` of a group with one output channel (weights: one per tap).
#[inline(always)]
fn one_channel<S: Lanes, F: Fn(f32) -> f32 + Copy, const R: usize, const SW1: bool>(
    s: S,
    job: &Rows<'_>,
    r: usize,
    f: F,
) {
    let base = (r - job.rows.0) * job.row_step;
    let wp = &job.wpack[..job.taps.len()];
    let b = job.bias(0);
    let mut o0 = 0;
    while o0 < job.ow {
        let at = base + o0 * job.sw;
        check_reads::<S>(job, at + (R - 1) * job.row_step, 1);
        let mut acc = [s.zero(); R];
        for (&off, &w) in job.taps.iter().zip(wp) {
            let w = s.splat(w);
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: row i's read is at most the last row's (checked above).
                *a = s.fma(
                    unsafe { s.load::<SW1>(job.pad, at + i * job.row_step + off, job.sw) },
                    w,
                    *a,
                );
            }
        }
        let n = S::L.min(job.ow - o0);
        for (i, &a) in acc.iter().enumerate() {
            put::<S, F>(job, &s.spill(a), b, (0, r + i, o0, n), f);
        }
        o0 += S::L;
    }
}

/// Every row of the band, `MB` output channels at a time: two column vectors per tap
/// where the row has them (16 independent accumulators hide the multiply-add latency;
/// AVX-512 has the registers for them), then one.
#[inline(always)]
fn channel_blocks<S: Lanes, F: Fn(f32) -> f32 + Copy, const SW1: bool>(s: S, job: &Rows<'_>, f: F) {
    let ntaps = job.taps.len();
    let wide = S::L == 16;
    for mb in 0..job.mg.div_ceil(MB) {
        let wp = &job.wpack[mb * ntaps * MB..][..ntaps * MB];
        let mvalid = MB.min(job.mg - mb * MB);
        let bias: [Option<f32>; MB] = std::array::from_fn(|m| job.bias((mb * MB + m).min(job.mg - 1)));
        for r in job.rows.0..job.rows.1 {
            let base = (r - job.rows.0) * job.row_step;
            let mut o0 = 0;
            while wide && o0 + 2 * S::L <= job.ow {
                chunk::<S, F, 2, SW1>(s, job, wp, (mb, mvalid, &bias), (base, r, o0), f);
                o0 += 2 * S::L;
            }
            while o0 < job.ow {
                chunk::<S, F, 1, SW1>(s, job, wp, (mb, mvalid, &bias), (base, r, o0), f);
                o0 += S::L;
            }
        }
    }
}

/// `C` column vectors from output column `o0` of row `r` for channel block `mb`.
#[inline(always)]
fn chunk<S: Lanes, F: Fn(f32) -> f32 + Copy, const C: usize, const SW1: bool>(
    s: S,
    job: &Rows<'_>,
    wp: &[f32],
    (mb, mvalid, bias): (usize, usize, &[Option<f32>; MB]),
    (base, r, o0): (usize, usize, usize),
    f: F,
) {
    let at = base + o0 * job.sw;
    check_reads::<S>(job, at, C);
    let mut acc = [[s.zero(); MB]; C];
    for (&off, w) in job.taps.iter().zip(wp.chunks_exact(MB)) {
        // SAFETY: every column vector's read is inside the scratch (checked above).
        let v: [S::V; C] =
            std::array::from_fn(|c| unsafe { s.load::<SW1>(job.pad, at + off + c * S::L * job.sw, job.sw) });
        for (m, &w) in w.iter().enumerate() {
            let w = s.splat(w);
            for c in 0..C {
                acc[c][m] = s.fma(v[c], w, acc[c][m]);
            }
        }
    }
    for (c, acc) in acc.iter().enumerate() {
        let oc = o0 + c * S::L;
        let n = S::L.min(job.ow - oc);
        for m in 0..MB {
            if m < mvalid {
                put::<S, F>(job, &s.spill(acc[m]), bias[m], (mb * MB + m, r, oc, n), f);
            }
        }
    }
}

impl Rows<'_> {
    /// Channel `ch`'s bias (None: no bias input).
    #[inline(always)]
    pub(super) fn bias(&self, ch: usize) -> Option<f32> {
        // SAFETY: channel ch < mg of the group's bias (the band's contract).
        self.bias
            .map(|(p, st)| unsafe { p.wrapping_offset(ch as isize * st).read() })
    }
}

/// Stores the first `n` lanes of `acc` to channel `ch`, row `r`, columns `o0..o0+n` as
/// `f(acc + b)` (`f(acc)` without a bias: adding 0 would turn -0 into +0). A whole
/// vector (`n` = `S::L`) is a loop of constant length, compiled as vector operations.
#[inline(always)]
pub(super) fn put<S: Lanes, F: Fn(f32) -> f32 + Copy>(
    job: &Rows<'_>,
    acc: &[f32; 16],
    b: Option<f32>,
    (ch, r, o0, n): (usize, usize, usize, usize),
    f: F,
) {
    let (out, os) = job.out;
    let dst = out.wrapping_offset(ch as isize * os[0] + r as isize * os[1] + o0 as isize);
    let n = if n == S::L { S::L } else { n };
    // SAFETY: columns o0..o0+n (n <= S::L) of row r of channel ch are inside the group's
    // output (contiguous columns), owned by this band; out overlaps no input (the band's
    // contract).
    let dst = unsafe { std::slice::from_raw_parts_mut(dst, n) };
    match b {
        Some(b) => {
            for (o, &a) in dst.iter_mut().zip(acc) {
                *o = f(a + b);
            }
        }
        None => {
            for (o, &a) in dst.iter_mut().zip(acc) {
                *o = f(a);
            }
        }
    }
}
