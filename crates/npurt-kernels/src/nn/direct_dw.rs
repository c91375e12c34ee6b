//! The register loop of a one-channel-per-group (depthwise) direct convolution with unit
//! strides and row dilation and a `KH × KW` kernel known at compile time (3×3, 5×5).
//!
//! `direct_simd::one_channel` loads every tap's input vector for every output row: `KH·KW`
//! loads per row and column chunk, most of them split across cache lines (the taps are one
//! column apart). Here a tile of [`ROWS`] output rows walks its `ROWS + KH - 1` input rows
//! once: each input row's `KW` column vectors are loaded once and multiplied into every
//! output row of the tile they feed (kernel row `a` of output row `i - a`), so a 3×3 tile
//! of 4 rows takes 18 loads instead of 36. The weights stay in registers for the band.
//!
//! Each output still sums its taps from zero in (kernel row, kernel column) order: for
//! output row `q` the input rows `q + a` come in ascending `a`, each row's columns in
//! ascending `b`. The same operations in the same order as `one_channel`: the same bits.

use super::direct_simd::{check_reads, put, Kind, Lanes, Rows, ROWS};

/// The 3×3 loops (`direct_simd::run` picks them).
pub(super) struct Rows3x3;
/// The 5×5 loops.
pub(super) struct Rows5x5;

impl Kind for Rows3x3 {
    #[inline(always)]
    fn go<S: Lanes, F: Fn(f32) -> f32 + Copy>(s: S, job: &Rows<'_>, f: F) {
        rows::<S, F, 3, 3>(s, job, f)
    }
}

impl Kind for Rows5x5 {
    #[inline(always)]
    fn go<S: Lanes, F: Fn(f32) -> f32 + Copy>(s: S, job: &Rows<'_>, f: F) {
        rows::<S, F, 5, 5>(s, job, f)
    }
}

/// Every row of the band, [`ROWS`] at a time, then one at a time.
#[inline(always)]
fn rows<S: Lanes, F: Fn(f32) -> f32 + Copy, const KH: usize, const KW: usize>(s: S, job: &Rows<'_>, f: F) {
    debug_assert_eq!(job.taps.len(), KH * KW);
    // Plain loops: `array::from_fn` is not inlined into the ISA-compiled body (its
    // closure would call the vector intrinsics out of line).
    let (mut w, mut cols) = ([[s.zero(); KW]; KH], [0usize; KW]);
    for (a, row) in w.iter_mut().enumerate() {
        for (b, v) in row.iter_mut().enumerate() {
            *v = s.splat(job.wpack[a * KW + b]);
        }
    }
    // Tap (a, b) is at a·width + cols[b] (the taps list: kernel rows `width` apart).
    cols.copy_from_slice(&job.taps[..KW]);
    let (mut r, r1) = job.rows;
    while r + ROWS <= r1 {
        tile::<S, F, ROWS, KH, KW>(s, job, (&w, &cols), r, f);
        r += ROWS;
    }
    for r in r..r1 {
        tile::<S, F, 1, KH, KW>(s, job, (&w, &cols), r, f);
    }
}

/// `R` output rows from `r`, every column chunk.
#[inline(always)]
fn tile<S: Lanes, F: Fn(f32) -> f32 + Copy, const R: usize, const KH: usize, const KW: usize>(
    s: S,
    job: &Rows<'_>,
    (w, cols): (&[[S::V; KW]; KH], &[usize; KW]),
    r: usize,
    f: F,
) {
    let width = job.row_step; // unit row stride: one scratch row per output row
    let base = (r - job.rows.0) * width;
    let b = job.bias(0);
    let mut o0 = 0;
    while o0 < job.ow {
        let at = base + o0;
        // The last read: input row R-1+KH-1, column offset cols[KW-1], L lanes.
        check_reads::<S>(job, at + (R - 1) * width, 1);
        let mut acc = [s.zero(); R];
        for i in 0..R + KH - 1 {
            for (bcol, &off) in cols.iter().enumerate() {
                // SAFETY: input row i < R + KH - 1 at column offset off is at most the
                // last read checked above (taps: (KH-1)·width + cols[KW-1]).
                let v = unsafe { s.load::<true>(job.pad, at + i * width + off, 1) };
                for (a, wa) in w.iter().enumerate() {
                    // Kernel row a feeds output row i - a when that row is in the tile.
                    if a <= i && i - a < R {
                        acc[i - a] = s.fma(v, wa[bcol], acc[i - a]);
                    }
                }
            }
        }
        let n = S::L.min(job.ow - o0);
        for (q, &a) in acc.iter().enumerate() {
            put::<S, F>(job, &s.spill(a), b, (0, r + q, o0, n), f);
        }
        o0 += S::L;
    }
}
