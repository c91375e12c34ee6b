//! Strided iteration shared by the kernels: several operands walked together over one
//! index space, dims collapsed where every operand allows it, visited as runs along the
//! innermost dim.

/// `N` operands over one shape, collapsed. Strides are in elements.
pub(crate) struct Strided<const N: usize> {
    shape: smallvec::SmallVec<[usize; 6]>,
    strides: smallvec::SmallVec<[[isize; N]; 6]>,
    numel: usize,
}

#[allow(clippy::needless_range_loop)] // indexing by dim and operand reads clearer here
impl<const N: usize> Strided<N> {
    /// Collapses `shape` (dims of size 1 dropped; adjacent dims merged when, for every
    /// operand, the outer stride equals inner stride × inner size).
    pub(crate) fn new(shape: &[usize], strides: [&[isize]; N]) -> Self {
        let numel: usize = shape.iter().product();
        let mut dims: smallvec::SmallVec<[(usize, [isize; N]); 6]> = smallvec::SmallVec::new();
        if numel > 0 {
            for d in 0..shape.len() {
                if shape[d] == 1 {
                    continue;
                }
                let s: [isize; N] = std::array::from_fn(|k| strides[k][d]);
                if let Some(last) = dims.last_mut() {
                    if (0..N).all(|k| last.1[k] == s[k] * shape[d] as isize) {
                        last.0 *= shape[d];
                        last.1 = s;
                        continue;
                    }
                }
                dims.push((shape[d], s));
            }
        }
        if dims.is_empty() {
            dims.push((numel.min(1), [0; N]));
        }
        Strided {
            shape: dims.iter().map(|d| d.0).collect(),
            strides: dims.iter().map(|d| d.1).collect(),
            numel,
        }
    }

    pub(crate) fn numel(&self) -> usize {
        self.numel
    }

    /// The collapsed dims: sizes and per-operand strides.
    pub(crate) fn dims(&self) -> (&[usize], &[[isize; N]]) {
        (&self.shape, &self.strides)
    }

    /// Strides of the innermost (collapsed) dim, per operand.
    pub(crate) fn inner_strides(&self) -> [isize; N] {
        *self.strides.last().expect("at least one dim")
    }

    /// Calls `f(offsets, len)` for each run of [`Strided::runs`].
    #[inline(always)]
    pub(crate) fn for_each_run(&self, start: usize, end: usize, mut f: impl FnMut([isize; N], usize)) {
        for (off, n) in self.runs(start, end) {
            f(off, n);
        }
    }

    /// The runs of the row-major flat range `[start, end)`: `(offsets, len)`, where
    /// `offsets[k]` is operand k's element offset of the run's first element; the run
    /// continues along the innermost dim with [`Strided::inner_strides`]. A loop over it
    /// keeps the per-run work in the caller's body (a closure may be compiled out of line,
    /// without the caller's `#[target_feature]`s).
    #[inline(always)]
    pub(crate) fn runs(&self, start: usize, end: usize) -> Runs<'_, N> {
        let end = end.min(self.numel);
        let nd = self.shape.len();
        let mut idx: smallvec::SmallVec<[usize; 6]> = smallvec::smallvec![0usize; nd];
        let mut off = [0isize; N];
        if start < end {
            let mut rem = start;
            for d in (0..nd).rev() {
                idx[d] = rem % self.shape[d];
                rem /= self.shape[d];
            }
            for d in 0..nd {
                for k in 0..N {
                    off[k] += idx[d] as isize * self.strides[d][k];
                }
            }
        }
        Runs {
            st: self,
            idx,
            off,
            pos: start,
            end,
        }
    }
}

/// Iterator of [`Strided::runs`].
pub(crate) struct Runs<'a, const N: usize> {
    st: &'a Strided<N>,
    idx: smallvec::SmallVec<[usize; 6]>,
    off: [isize; N],
    pos: usize,
    end: usize,
}

#[allow(clippy::needless_range_loop)]
impl<const N: usize> Iterator for Runs<'_, N> {
    type Item = ([isize; N], usize);

    #[inline(always)]
    fn next(&mut self) -> Option<([isize; N], usize)> {
        if self.pos >= self.end {
            return None;
        }
        // Plain slices, taken once per run (a small vector's every index tests whether it
        // spilled: that test per dim was most of a short run's cost).
        let (shape, strides) = (self.st.shape.as_slice(), self.st.strides.as_slice());
        let idx = self.idx.as_mut_slice();
        let nd = shape.len();
        let run = (shape[nd - 1] - idx[nd - 1]).min(self.end - self.pos);
        let cur = self.off;
        self.pos += run;
        if self.pos < self.end {
            // Advance by `run` along the inner dim, carrying into outer dims.
            let mut d = nd - 1;
            idx[d] += run;
            for k in 0..N {
                self.off[k] += run as isize * strides[d][k];
            }
            while idx[d] == shape[d] && d > 0 {
                for k in 0..N {
                    self.off[k] -= shape[d] as isize * strides[d][k];
                }
                idx[d] = 0;
                d -= 1;
                idx[d] += 1;
                for k in 0..N {
                    self.off[k] += strides[d][k];
                }
            }
        }
        Some((cur, run))
    }
}

/// Copies `bytes` bytes between non-overlapping ranges with a plain 32-byte-chunk loop.
///
/// Not `ptr::copy_nonoverlapping`: glibc's memcpy (`rep movsb` on this class of AMD CPU)
/// runs at ~2.5 GB/s instead of ~40 for 4 KiB-256 KiB copies whose destination is a few
/// bytes past the source modulo 4 KiB, which tensors allocated side by side often are.
///
/// # Safety
/// `src..src+bytes` readable, `dst..dst+bytes` writable, not overlapping.
#[inline]
pub(crate) unsafe fn copy_bytes(dst: *mut u8, src: *const u8, bytes: usize) {
    let mut i = 0;
    while i + 32 <= bytes {
        // SAFETY: i + 32 <= bytes (contract).
        unsafe {
            dst.add(i)
                .cast::<[u64; 4]>()
                .write_unaligned(src.add(i).cast::<[u64; 4]>().read_unaligned())
        };
        i += 32;
    }
    while i < bytes {
        // SAFETY: i < bytes (contract).
        unsafe { dst.add(i).write(src.add(i).read()) };
        i += 1;
    }
}

/// Copies `n` strided elements (`so`, `sx` element strides).
///
/// # Safety
/// The `n` strided elements of `o` are writable, of `x` readable, and the two sets do not
/// overlap.
#[inline(always)]
pub(crate) unsafe fn copy_run<T: Copy>(o: *mut T, so: isize, x: *const T, sx: isize, n: usize) {
    if so == 1 && sx == 1 {
        // SAFETY: contract; contiguous runs.
        unsafe { copy_bytes(o.cast(), x.cast(), n * std::mem::size_of::<T>()) }
    } else if so == 1 && sx == 0 {
        // SAFETY: contract; a broadcast source.
        unsafe { std::slice::from_raw_parts_mut(o, n).fill(x.read()) }
    } else {
        for i in 0..n as isize {
            // SAFETY: contract.
            unsafe { o.offset(i * so).write(x.offset(i * sx).read()) }
        }
    }
}

/// Runs `$body` with `$T` an unsigned integer type of `$size` bytes (1, 2, 4 or 8).
macro_rules! by_size {
    ($size:expr, $T:ident => $body:expr) => {
        match $size {
            1 => {
                type $T = u8;
                $body
            }
            2 => {
                type $T = u16;
                $body
            }
            4 => {
                type $T = u32;
                $body
            }
            _ => {
                type $T = u64;
                $body
            }
        }
    };
}
pub(crate) use by_size;

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(shape: &[usize], strides: &[isize], start: usize, end: usize) -> Vec<isize> {
        let s = Strided::new(shape, [strides]);
        let inner = s.inner_strides()[0];
        let mut out = vec![];
        s.for_each_run(start, end, |off, len| {
            for i in 0..len {
                out.push(off[0] + i as isize * inner);
            }
        });
        out
    }

    fn naive(shape: &[usize], strides: &[isize]) -> Vec<isize> {
        let n: usize = shape.iter().product();
        (0..n)
            .map(|mut i| {
                let mut off = 0;
                for d in (0..shape.len()).rev() {
                    off += (i % shape[d]) as isize * strides[d];
                    i /= shape[d];
                }
                off
            })
            .collect()
    }

    #[test]
    fn copy_bytes_copies_every_length() {
        let src: Vec<u8> = (0..200u8).collect();
        for len in 0..100 {
            for off in 0..5 {
                let mut dst = vec![0xAAu8; 200];
                // SAFETY: both ranges are within their vectors and distinct.
                unsafe { copy_bytes(dst.as_mut_ptr().add(off), src.as_ptr().add(3), len) };
                assert_eq!(&dst[off..off + len], &src[3..3 + len]);
                assert!(dst[..off].iter().chain(&dst[off + len..]).all(|&b| b == 0xAA));
            }
        }
    }

    #[test]
    fn runs_visit_every_offset_in_order() {
        let cases: &[(&[usize], &[isize])] = &[
            (&[2, 3, 4], &[12, 4, 1]),
            (&[2, 3, 4], &[1, 2, 6]),
            (&[3, 1, 5], &[5, 99, -1]),
            (&[4, 6], &[0, 1]),
            (&[], &[]),
            (&[0, 3], &[3, 1]),
            (&[5, 2, 3], &[6, 3, 1]),
            (&[2, 2, 2, 2], &[-8, 4, 2, -1]),
        ];
        for &(shape, strides) in cases {
            let all = naive(shape, strides);
            for start in 0..=all.len() {
                for end in start..=all.len() {
                    assert_eq!(
                        offsets(shape, strides, start, end),
                        all[start..end],
                        "{shape:?} {strides:?} {start}..{end}"
                    );
                }
            }
        }
    }
}
