//! The cursor both 2-D pooling loops (`pool2d.rs`) walk a block's output range with: row
//! segments of `[N, C, H, W]` in row-major order, no divisions per row.

use crate::TensorView;

/// The output row segments of a block's element range, a row at a time (no divisions per
/// row): both pooling loops walk `[s, e)` with it.
pub(super) struct RowCursor {
    shape: [usize; 3],
    flat: usize,
    n: usize,
    c: usize,
    oh: usize,
    ow0: usize,
}

/// Columns `ow0..ow1` of output row `(n, c, oh)`.
pub(super) struct RowSeg {
    pub n: usize,
    pub c: usize,
    pub oh: usize,
    pub ow0: usize,
    pub ow1: usize,
}

impl RowCursor {
    /// At output element `s` (row-major over `out`'s `[N, C, H, W]`).
    pub(super) fn new(out: &TensorView, s: usize) -> RowCursor {
        let (c_n, oh_n, ow_n) = (out.shape()[1], out.shape()[2], out.shape()[3]);
        let (plane, rem) = (s / (oh_n * ow_n).max(1), s % (oh_n * ow_n).max(1));
        RowCursor {
            shape: [c_n, oh_n, ow_n],
            flat: s,
            n: plane / c_n.max(1),
            c: plane % c_n.max(1),
            oh: rem / ow_n.max(1),
            ow0: rem % ow_n.max(1),
        }
    }

    /// The next segment before element `e`, if any.
    #[inline(always)]
    pub(super) fn next(&mut self, e: usize) -> Option<RowSeg> {
        if self.flat >= e {
            return None;
        }
        let [c_n, oh_n, ow_n] = self.shape;
        let seg = RowSeg {
            n: self.n,
            c: self.c,
            oh: self.oh,
            ow0: self.ow0,
            ow1: ow_n.min(self.ow0 + (e - self.flat)),
        };
        self.flat += seg.ow1 - seg.ow0;
        self.ow0 = 0;
        self.oh += 1;
        if self.oh == oh_n {
            self.oh = 0;
            self.c += 1;
            if self.c == c_n {
                self.c = 0;
                self.n += 1;
            }
        }
        Some(seg)
    }

    /// After a segment of a whole row `oh` (returned by [`RowCursor::next`]), takes the
    /// following whole rows of the same plane before `e` (at most those left in the plane)
    /// and returns their count.
    #[inline(always)]
    pub(super) fn whole_rows(&mut self, oh: usize, e: usize) -> usize {
        let [_, oh_n, ow_n] = self.shape;
        if self.oh != oh + 1 || ow_n == 0 {
            return 0;
        }
        let k = ((e - self.flat.min(e)) / ow_n).min(oh_n - self.oh);
        self.flat += k * ow_n;
        self.oh += k;
        if self.oh == oh_n {
            // Back to the next plane's first row, as `next` would have.
            self.oh = 0;
            self.c += 1;
            if self.c == self.shape[0] {
                self.c = 0;
                self.n += 1;
            }
        }
        k
    }
}
