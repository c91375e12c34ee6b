//! Few-tap 2-D convolution computed directly (a network's first layer: 3 input channels ×
//! 3×3 = 27 taps). On the GEMM path such a layer is a `M × 27` by `27 × P` product: the
//! depth is too short for the microkernel to reach its speed and the im2col copy is as
//! large as the work. Here a block of [`MB`] output channels × `L` output columns stays in
//! registers while every tap adds `w · x` (one fused multiply-add per output and tap).
//!
//! A unit is (image, group, band of output rows): the band's input rows are copied once
//! into a zero-padded scratch plane per input channel (so no tap needs a bounds test),
//! then each channel block and row of the band is computed, `L` columns at a time. Every
//! output sums its taps in (channel, kernel row, kernel column) order from zero, then adds
//! the bias and applies the epilogue: the order depends on the shapes only, and a fused
//! multiply-add rounds once on every ISA path, so results are bitwise identical for any
//! block count and ISA level.

use super::epilogue::Epilogue;
use super::Window;
use crate::isa::{self, Family, Isa};

/// Output channels per register block.
pub(super) const MB: usize = 8;
/// The widest column chunk (AVX-512's 16 f32 lanes): the padded rows cover its reads.
const L: usize = 16;
/// The largest tap count (`C/group · ΠK`) computed directly; deeper ones go to the GEMM.
pub(super) const MAX_TAPS: usize = 32;
/// Multiply-adds per band (about).
const BAND_WORK: usize = 1 << 15;

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
        }
    }

    /// Band `band` of image/group plane `x` (channel `c` at `x + c·xs[0]`, rows `xs[1]`,
    /// columns `xs[2]`) with the group's weights `w` (`[mg, cg·ΠK]`, strides `ws`) into
    /// `out` (channel `m` of the group at `out + m·os[0]`, rows `os[1]`, contiguous
    /// columns), the group's bias (`bias[m]`, None: 0).
    ///
    /// # Safety
    /// `x` must address the group's `cg × input` readable elements at its strides, `w` its
    /// `mg × cg·ΠK` readable weights, `out` the group's `mg × out` writable elements, no
    /// other thread accessing this band's rows meanwhile, overlapping neither `x`, `w` nor
    /// the bias; `bias` `mg` readable elements.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn band(
        &self,
        band: usize,
        (x, xs): (*const f32, [isize; 3]),
        (w, ws): (*const f32, [isize; 2]),
        bias: Option<(*const f32, isize)>,
        epi: Epilogue,
        (out, os): (*mut f32, [isize; 2]),
        scratch: &mut Vec<f32>,
    ) {
        let plane = self.rows * self.width;
        let ntaps = self.taps.len();
        let packed = self.blocks_m * ntaps * self.mb;
        if scratch.len() < self.cg * plane + packed {
            scratch.resize(self.cg * plane + packed, 0.0);
        }
        let (pad, wpack) = scratch[..self.cg * plane + packed].split_at_mut(self.cg * plane);
        // The weights as [channel block][tap][mb] (zero past the group's channels).
        wpack.fill(0.0);
        for m in 0..self.mg {
            for t in 0..ntaps {
                // SAFETY: row m < mg and column t < cg·ΠK of the group's weights (caller's
                // contract); w is only read.
                let v = unsafe { w.wrapping_offset(m as isize * ws[0] + t as isize * ws[1]).read() };
                wpack[((m / self.mb) * ntaps + t) * self.mb + m % self.mb] = v;
            }
        }
        let r0 = band * self.band;
        let r1 = (r0 + self.band).min(self.out[0]);
        let top = (r0 * self.strides[0]) as isize - self.pads[0] as isize;
        let left = self.pads[1];
        for c in 0..self.cg {
            for i in 0..self.rows {
                let dst = &mut pad[(c * self.rows + i) * self.width..][..self.width];
                let ih = top + i as isize;
                if ih < 0 || ih >= self.input[0] as isize {
                    dst.fill(0.0);
                    continue;
                }
                let left = left.min(self.width);
                let n = self.input[1].min(self.width - left);
                dst[..left].fill(0.0);
                dst[left + n..].fill(0.0);
                let src = x.wrapping_offset(c as isize * xs[0] + ih * xs[1]);
                for (j, d) in dst[left..left + n].iter_mut().enumerate() {
                    // SAFETY: channel c < cg, row ih and column j < W are inside the
                    // plane (the caller's contract); x is only read.
                    *d = unsafe { src.wrapping_offset(j as isize * xs[2]).read() };
                }
            }
        }
        self.rows_of((r0, r1), pad, wpack, bias, epi, (out, os));
    }

    /// Rows `r0..r1` of every channel block from the padded band `pad`.
    fn rows_of(
        &self,
        (r0, r1): (usize, usize),
        pad: &[f32],
        wpack: &[f32],
        bias: Option<(*const f32, isize)>,
        epi: Epilogue,
        (out, os): (*mut f32, [isize; 2]),
    ) {
        let ntaps = self.taps.len();
        let (sh, sw) = (self.strides[0], self.strides[1]);
        let ow = self.out[1];
        let simd = Simd::of(isa::path(Family::Gemm));
        let lanes = simd.lanes();
        let mut tile: Tile = [[0.0; 16]; MB];
        let bw = self.mb;
        for mb in 0..self.blocks_m {
            let wp = &wpack[mb * ntaps * bw..][..ntaps * bw];
            let mvalid = bw.min(self.mg - mb * bw);
            for r in r0..r1 {
                let row = (r - r0) * sh * self.width;
                let mut o0 = 0;
                while o0 < ow {
                    simd.chunk(&self.taps, wp, pad, (row + o0 * sw, sw), &mut tile);
                    let n = lanes.min(ow - o0);
                    for (m, acc) in tile.iter().enumerate().take(mvalid) {
                        let ch = mb * bw + m;
                        // SAFETY: channel ch < mg of the group's bias (caller's contract).
                        let b = bias.map(|(p, st)| unsafe { p.wrapping_offset(ch as isize * st).read() });
                        let dst = out.wrapping_offset(ch as isize * os[0] + r as isize * os[1] + o0 as isize);
                        // SAFETY: columns o0..o0+n of row r of channel ch are inside the
                        // group's output (contiguous columns), owned by this band.
                        let dst = unsafe { std::slice::from_raw_parts_mut(dst, n) };
                        epi.store(&acc[..n], b, dst);
                    }
                    o0 += lanes;
                }
            }
        }
    }
}

/// The SIMD level of the chunk loop: the GEMM family's path (AVX-512: 16 lanes, AVX2 and
/// FMA: 8, else the portable loop over 8).
#[derive(Clone, Copy)]
enum Simd {
    #[cfg(target_arch = "x86_64")]
    V4(pulp::x86::V4),
    #[cfg(target_arch = "x86_64")]
    V3(pulp::x86::V3),
    Portable,
}

impl Simd {
    fn of(level: Isa) -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            if level == Isa::Avx512 {
                if let Some(s) = pulp::x86::V4::try_new() {
                    return Simd::V4(s);
                }
            }
            if level != Isa::Scalar {
                if let Some(s) = pulp::x86::V3::try_new() {
                    return Simd::V3(s);
                }
            }
        }
        let _ = level;
        Simd::Portable
    }

    fn lanes(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Simd::V4(_) => 16,
            _ => 8,
        }
    }

    /// `tile[m][j] = Σ_t fma(pad[base + taps[t] + j·sw], wp[t·M + m])` for `m < M`
    /// (`M` = `wp.len() / taps.len()`: 1 or MB), `j < lanes`.
    #[inline]
    fn chunk(self, taps: &[usize], wp: &[f32], pad: &[f32], (base, sw): (usize, usize), tile: &mut Tile) {
        macro_rules! go {
            ($m:literal) => {
                match self {
                    #[cfg(target_arch = "x86_64")]
                    Simd::V4(s) => s.vectorize(Chunk16::<$m> {
                        s,
                        taps,
                        wp,
                        pad,
                        base,
                        sw,
                        tile,
                    }),
                    #[cfg(target_arch = "x86_64")]
                    Simd::V3(s) => s.vectorize(Chunk8::<$m> {
                        s,
                        taps,
                        wp,
                        pad,
                        base,
                        sw,
                        tile,
                    }),
                    Simd::Portable => portable::<$m>(taps, wp, pad, (base, sw), tile),
                }
            };
        }
        if wp.len() == taps.len() {
            go!(1)
        } else {
            go!(8)
        }
    }
}

/// The accumulators of one chunk: `MB` channels × up to 16 columns.
type Tile = [[f32; 16]; MB];

/// The L input columns of tap offset `p` (stride `sw`).
#[inline(always)]
fn columns<const L: usize>(pad: &[f32], p: usize, sw: usize) -> [f32; L] {
    if sw == 1 {
        pad[p..p + L].try_into().expect("L columns")
    } else {
        let src = &pad[p..p + (L - 1) * sw + 1];
        std::array::from_fn(|j| src[j * sw])
    }
}

/// The portable chunk (`mul_add` rounds once, as the FMA instructions of the SIMD copies).
fn portable<const M: usize>(taps: &[usize], wp: &[f32], pad: &[f32], (base, sw): (usize, usize), tile: &mut Tile) {
    let mut acc = [[0.0f32; 8]; M];
    for (t, &off) in taps.iter().enumerate() {
        let v = columns::<8>(pad, base + off, sw);
        for (m, a) in acc.iter_mut().enumerate() {
            let w = wp[t * M + m];
            for (a, &x) in a.iter_mut().zip(&v) {
                *a = x.mul_add(w, *a);
            }
        }
    }
    for (t, a) in tile.iter_mut().zip(&acc) {
        t[..8].copy_from_slice(a);
    }
}

macro_rules! simd_chunk {
    ($name:ident, $token:ty, $vec:ident, $lanes:expr, $splat:ident, $fma:ident) => {
        #[cfg(target_arch = "x86_64")]
        struct $name<'a, const M: usize> {
            s: $token,
            taps: &'a [usize],
            wp: &'a [f32],
            pad: &'a [f32],
            base: usize,
            sw: usize,
            tile: &'a mut Tile,
        }

        #[cfg(target_arch = "x86_64")]
        impl<const M: usize> pulp::NullaryFnOnce for $name<'_, M> {
            type Output = ();
            #[inline(always)]
            fn call(self) {
                let s = self.s;
                let mut acc = [s.$splat(0.0); M];
                for (t, &off) in self.taps.iter().enumerate() {
                    let v: pulp::$vec = pulp::cast(columns::<$lanes>(self.pad, self.base + off, self.sw));
                    let w: [f32; M] = self.wp[t * M..t * M + M].try_into().expect("M weights per tap");
                    for (a, &w) in acc.iter_mut().zip(&w) {
                        *a = s.$fma(v, s.$splat(w), *a);
                    }
                }
                for (t, a) in self.tile.iter_mut().zip(&acc) {
                    t[..$lanes].copy_from_slice(&pulp::cast::<pulp::$vec, [f32; $lanes]>(*a));
                }
            }
        }
    };
}

simd_chunk!(Chunk16, pulp::x86::V4, f32x16, 16, splat_f32x16, mul_add_f32x16);
simd_chunk!(Chunk8, pulp::x86::V3, f32x8, 8, splat_f32x8, mul_add_f32x8);
