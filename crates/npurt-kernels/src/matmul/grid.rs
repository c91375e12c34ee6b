//! The shape-determined tile grid of a matmul launch: never depends on the block count or
//! core count, so every output element is always computed by the same `gemm` call.

/// Flops below which a tile is not split further (≈ 0.1-0.2 ms on one core).
pub(crate) const MIN_TILE_FLOPS: usize = 16 << 20;
/// Tiles of one launch at most.
const MAX_TILES: usize = 8;
/// Tiles are at least this many rows/columns (except a dimension smaller than it).
const MIN_TILE_DIM: usize = 64;
/// Tile boundaries are multiples of this.
const TILE_ALIGN: usize = 16;

/// The work of a launch, `2·B·M·N·max(K, 1)` (saturating).
pub(crate) fn flops(batch: usize, m: usize, n: usize, k: usize) -> usize {
    2usize
        .saturating_mul(batch)
        .saturating_mul(m)
        .saturating_mul(n)
        .saturating_mul(k.max(1))
}

/// The shape-determined tile grid.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grid {
    batch: usize,
    m: usize,
    n: usize,
    tm: usize,
    tn: usize,
}

impl Grid {
    pub(super) fn plan(batch: usize, m: usize, n: usize, k: usize) -> Grid {
        let target = (flops(batch, m, n, k) / MIN_TILE_FLOPS).clamp(1, MAX_TILES);
        let mut best = (1, 1);
        if batch > 0 && batch < target && m * n > 0 {
            let per = target / batch;
            let max_tm = (m / MIN_TILE_DIM).max(1);
            let max_tn = (n / MIN_TILE_DIM).max(1);
            let mut best_cost = usize::MAX;
            // Most tiles (up to `per`), then least packing: each tile packs its rows of
            // op(a) and its columns of op(b), K deep.
            for tm in 1..=per.min(max_tm) {
                let tn = (per / tm).min(max_tn);
                let tiles = tm * tn;
                let cost = tn * m + tm * n;
                let better = tiles > best.0 * best.1 || (tiles == best.0 * best.1 && cost < best_cost);
                if better {
                    best = (tm, tn);
                    best_cost = cost;
                }
            }
        }
        Grid {
            batch,
            m,
            n,
            tm: best.0,
            tn: best.1,
        }
    }

    pub(super) fn units(&self) -> usize {
        self.batch * self.tm * self.tn
    }

    fn bound(len: usize, parts: usize, i: usize) -> usize {
        if i >= parts {
            return len;
        }
        (i * len / parts).next_multiple_of(TILE_ALIGN).min(len)
    }

    /// (batch, rows, cols) of unit `u`.
    pub(super) fn tile(&self, u: usize) -> (usize, (usize, usize), (usize, usize)) {
        let per = self.tm * self.tn;
        let (bi, t) = (u / per, u % per);
        let (i, j) = (t / self.tn, t % self.tn);
        (
            bi,
            (Self::bound(self.m, self.tm, i), Self::bound(self.m, self.tm, i + 1)),
            (Self::bound(self.n, self.tn, j), Self::bound(self.n, self.tn, j + 1)),
        )
    }
}
