//! Few-tap 2-D convolution computed directly (a network's first layer: 3 input channels ×
//! 3×3 = 27 taps). On the GEMM path such a layer is a `M × 27` by `27 × P` product: the
//! depth is too short for the microkernel to reach its speed and the im2col copy is as
//! large as the work. Here a block of [`MB`] output channels × `L` output columns stays in
//! registers while every tap adds `w · x` (one fused multiply-add per output and tap).
//!
//! A unit is (image, group, band of output rows): the band's input rows are copied once
//! into a zero-padded scratch plane per input channel (so no tap needs a bounds test),
//! then each channel block and row of the band is computed, `L` columns at a time
//! (`direct_simd.rs`). The weights are packed once per block and group. Every
//! output sums its taps in (channel, kernel row, kernel column) order from zero, then adds
//! the bias and applies the epilogue: the order depends on the shapes only, and a fused
//! multiply-add rounds once on every ISA path, so results are bitwise identical for any
//! block count and ISA level.

use super::direct_simd as simd;
use super::epilogue::Epilogue;
use super::Window;
use crate::isa::{self, Family};

/// Output channels per register block.
pub(super) const MB: usize = 8;
/// The widest column chunk (AVX-512's 16 f32 lanes): the padded rows cover its reads.
const L: usize = 16;
/// The largest tap count (`C/group · ΠK`) computed directly; deeper ones go to the GEMM.
pub(super) const MAX_TAPS: usize = 32;
/// Multiply-adds per band (about).
const BAND_WORK: usize = 1 << 17;

/// The shape-only plan of a direct convolution: packed weights, the scratch layout and
/// the tap offsets into it.
pub(super) struct Direct {
    /// Channels per block: MB, or 1 for one channel per group.
    mb: usize,
    /// Scratch offset of each tap (channel, kernel row, kernel column) from a window's origin.
    taps: Vec<usize>,
    /// Output rows per band, bands per (image, group).
    pub band: usize,
    pub bands: usize,
    /// Scratch rows per channel plane and row length (covers every chunk's reads).
    rows: usize,
    width: usize,
    blocks_m: usize,
    mg: usize,
    cg: usize,
    out: [usize; 2],
    input: [usize; 2],
    strides: [usize; 2],
    pads: [usize; 2],
    /// One channel per group, unit strides and row dilation: the kernel's (rows, columns),
    /// whose input rows are loaded once for every output row they feed (`direct_dw.rs`).
    reuse: Option<(usize, usize)>,
}

/// True when a 2-D convolution with `taps` taps per output goes direct: few taps, or one
/// input and one output channel per group (depthwise: the GEMM would be a 1 × taps row).
pub(super) fn fits(spatial_rank: usize, taps: usize, depthwise: bool, pointwise: bool) -> bool {
    spatial_rank == 2 && (taps <= MAX_TAPS || depthwise) && !pointwise
}

impl Direct {
    /// The plan for `group` groups of `mg` output and `cg` input channels, input and
    /// output sizes (shapes only: the weights are read when a band runs, as every input).
    pub(super) fn new(win: &Window, (mg, cg): (usize, usize), input: [usize; 2], out: [usize; 2]) -> Direct {
        let (kh, kw) = (win.kernel[0], win.kernel[1]);
        let (sh, sw) = (win.strides[0], win.strides[1]);
        let (dh, dw) = (win.dilations[0], win.dilations[1]);
        let ntaps = cg * kh * kw;
        // One channel per group (depthwise): blocks of one channel, else of MB.
        let mb = if mg == 1 { 1 } else { MB };
        let blocks_m = mg.div_ceil(mb);
        let per_row = out[1] * mg * ntaps;
        let band = (BAND_WORK / per_row.max(1)).clamp(1, out[0].max(1));
        let bands = out[0].div_ceil(band);
        let rows = (band - 1) * sh + (kh - 1) * dh + 1;
        // Chunks of L columns cover the row, reading up to column (chunks·L - 1)·sw + (kw - 1)·dw.
        let width = (out[1].div_ceil(L) * L - 1) * sw + (kw - 1) * dw + 1;
        let mut taps = Vec::with_capacity(ntaps);
        for c in 0..cg {
            for a in 0..kh {
                for b in 0..kw {
                    taps.push((c * rows + a * dh) * width + b * dw);
                }
            }
        }
        Direct {
            mb,
            taps,
            band,
            bands,
            rows,
            width,
            blocks_m,
            mg,
            cg,
            out,
            input,
            strides: [sh, sw],
            pads: [win.pads[0], win.pads[1]],
            reuse: (cg == 1 && mb == 1 && sh == 1 && sw == 1 && dh == 1).then_some((kh, kw)),
        }
    }

    /// Floats of the packed weights ([`Direct::pack`]).
    pub(super) fn packed_len(&self) -> usize {
        self.blocks_m * self.taps.len() * self.mb
    }

    /// Floats of scratch a block needs: the packed weights, then the band's padded planes.
    pub(super) fn scratch_len(&self) -> usize {
        self.packed_len() + self.cg * self.rows * self.width
    }

    /// Packs the group's weights `w` (`[mg, cg·ΠK]`, strides `ws`) as
    /// `[channel block][tap][mb]` (zero past the group's channels) into `wpack`
    /// ([`Direct::packed_len`] floats): once per block and group, not per band.
    ///
    /// # Safety
    /// `w` must address the group's `mg × cg·ΠK` readable weights at its strides.
    pub(super) unsafe fn pack(&self, (w, ws): (*const f32, [isize; 2]), wpack: &mut [f32]) {
        let (ntaps, mb) = (self.taps.len(), self.mb);
        for (blk, dst) in wpack[..self.packed_len()].chunks_exact_mut(ntaps * mb).enumerate() {
            let m0 = blk * mb;
            let valid = mb.min(self.mg - m0);
            if valid < mb {
                dst.fill(0.0);
            }
            for i in 0..valid {
                let row = w.wrapping_offset((m0 + i) as isize * ws[0]);
                if ws[1] == 1 {
                    // SAFETY: row m0 + i < mg of the group's weights has cg·ΠK = ntaps
                    // contiguous readable entries (the caller's contract); w is only read.
                    let src = unsafe { std::slice::from_raw_parts(row, ntaps) };
                    for (d, &v) in dst.chunks_exact_mut(mb).zip(src) {
                        d[i] = v;
                    }
                } else {
                    for (t, d) in dst.chunks_exact_mut(mb).enumerate() {
                        // SAFETY: row m0 + i < mg and column t < cg·ΠK of the group's
                        // weights (the caller's contract); w is only read.
                        d[i] = unsafe { row.wrapping_offset(t as isize * ws[1]).read() };
                    }
                }
            }
        }
    }

    /// Band `band` of image/group plane `x` (channel `c` at `x + c·xs[0]`, rows `xs[1]`,
    /// columns `xs[2]`) with the group's packed weights `wpack` ([`Direct::pack`]) into
    /// `out` (channel `m` of the group at `out + m·os[0]`, rows `os[1]`, contiguous
    /// columns), the group's bias (`bias[m]`, None: 0); `pad` is scratch of at least
    /// `scratch_len() - packed_len()` floats whose padding columns are zero: zeroed once
    /// by the caller for all the bands it runs (a band writes only the image's columns, and
    /// whole rows above and below the image).
    ///
    /// # Safety
    /// `x` must address the group's `cg × input` readable elements at its strides, `out`
    /// the group's `mg × out` writable elements, no other thread accessing this band's rows
    /// meanwhile, overlapping neither `x`, the weights nor the bias; `bias` `mg` readable
    /// elements.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn band(
        &self,
        band: usize,
        (x, xs): (*const f32, [isize; 3]),
        wpack: &[f32],
        bias: Option<(*const f32, isize)>,
        epi: Epilogue,
        (out, os): (*mut f32, [isize; 2]),
        pad: &mut [f32],
    ) {
        let pad = &mut pad[..self.cg * self.rows * self.width];
        let r0 = band * self.band;
        let r1 = (r0 + self.band).min(self.out[0]);
        let top = (r0 * self.strides[0]) as isize - self.pads[0] as isize;
        let left = self.pads[1].min(self.width);
        let n = self.input[1].min(self.width - left);
        for c in 0..self.cg {
            for i in 0..self.rows {
                let dst = &mut pad[(c * self.rows + i) * self.width..][..self.width];
                let ih = top + i as isize;
                if ih < 0 || ih >= self.input[0] as isize {
                    dst.fill(0.0);
                    continue;
                }
                let src = x.wrapping_offset(c as isize * xs[0] + ih * xs[1]);
                if xs[2] == 1 {
                    // SAFETY: columns 0..n (n <= W) of row ih of channel c < cg are inside
                    // the plane and contiguous (the caller's contract); x is only read and
                    // does not overlap the scratch.
                    dst[left..left + n].copy_from_slice(unsafe { std::slice::from_raw_parts(src, n) });
                } else {
                    for (j, d) in dst[left..left + n].iter_mut().enumerate() {
                        // SAFETY: channel c < cg, row ih and column j < W are inside the
                        // plane (the caller's contract); x is only read.
                        *d = unsafe { src.wrapping_offset(j as isize * xs[2]).read() };
                    }
                }
            }
        }
        let job = simd::Rows {
            taps: &self.taps,
            wpack,
            pad,
            rows: (r0, r1),
            mb: self.mb,
            mg: self.mg,
            row_step: self.strides[0] * self.width,
            sw: self.strides[1],
            ow: self.out[1],
            bias,
            epi,
            out: (out, os),
            reuse: self.reuse,
        };
        simd::run(isa::path(Family::Gemm), job);
    }
}
