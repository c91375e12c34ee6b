//! The counter-based generator behind npurt's random kernels: Philox4x32-10 (Salmon, Moraes,
//! Dror and Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11), written from the
//! published round function, and one [`Generator`] per device (torch's "default generator"
//! of each device).
//!
//! A generator's state is `(seed, offset)`: the seed is the 64-bit Philox key, the offset
//! the next unused 128-bit counter block. A launch [`reserve`](Generator::reserve)s the
//! blocks it needs under the generator's lock at launch time, so its draws depend only on
//! the seed and the launches queued before it on the host (never on how the executor
//! schedules them), and draws of different launches, on any streams, never overlap.

use crate::KernelArgError;
use npurt_core::error::DeviceError;
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// torch's default seed of a device generator (`initial_seed()` before any seeding).
pub const DEFAULT_SEED: u64 = 67_280_421_310_721;

/// Bytes of a generator state as `get_rng_state` returns it: the seed, then the offset
/// (both little-endian u64), the layout of torch's Philox (CUDA) generator state.
pub const STATE_BYTES: usize = 16;

#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a) * u64::from(b);
    ((p >> 32) as u32, p as u32)
}

#[inline(always)]
fn round(c: [u32; 4], k: [u32; 2]) -> [u32; 4] {
    let (hi0, lo0) = mulhilo(M0, c[0]);
    let (hi1, lo1) = mulhilo(M1, c[2]);
    [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
}

/// Philox4x32 with 10 rounds: four random words for one counter block under one key.
#[inline(always)]
pub fn philox4x32_10(mut c: [u32; 4], mut k: [u32; 2]) -> [u32; 4] {
    c = round(c, k);
    for _ in 1..10 {
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        c = round(c, k);
    }
    c
}

/// The four words of counter block `block` (a 128-bit counter) under `seed`.
#[inline(always)]
pub fn block_words(seed: u64, block: u128) -> [u32; 4] {
    let c = [
        block as u32,
        (block >> 32) as u32,
        (block >> 64) as u32,
        (block >> 96) as u32,
    ];
    philox4x32_10(c, [seed as u32, (seed >> 32) as u32])
}

/// A device's generator: `(seed, offset)` behind a lock.
#[derive(Debug)]
pub struct Generator {
    state: Mutex<(u64, u64)>,
}

impl Default for Generator {
    fn default() -> Self {
        Generator {
            state: Mutex::new((DEFAULT_SEED, 0)),
        }
    }
}

impl Generator {
    /// Seeds the generator and rewinds its offset (torch's `manual_seed`).
    pub fn manual_seed(&self, seed: u64) {
        *self.state.lock() = (seed, 0);
    }

    /// Seeds it from the operating system's randomness (torch's `seed()`); returns the seed.
    pub fn seed_random(&self) -> u64 {
        let seed = nondeterministic_seed();
        self.manual_seed(seed);
        seed
    }

    /// The current seed (torch's `initial_seed()`).
    pub fn initial_seed(&self) -> u64 {
        self.state.lock().0
    }

    /// The next unused counter block.
    pub fn offset(&self) -> u64 {
        self.state.lock().1
    }

    /// The state as bytes: seed then offset, little-endian (torch's 16-byte layout).
    pub fn get_state(&self) -> [u8; STATE_BYTES] {
        let (seed, offset) = *self.state.lock();
        let mut b = [0u8; STATE_BYTES];
        b[..8].copy_from_slice(&seed.to_le_bytes());
        b[8..].copy_from_slice(&offset.to_le_bytes());
        b
    }

    /// Restores a state from [`get_state`](Self::get_state)'s bytes.
    pub fn set_state(&self, bytes: &[u8]) -> Result<(), KernelArgError> {
        if bytes.len() != STATE_BYTES {
            return Err(KernelArgError::Invalid {
                op: "set_rng_state",
                detail: format!(
                    "an RNG state is {STATE_BYTES} bytes (seed and offset), got {}",
                    bytes.len()
                ),
            });
        }
        let word = |r: std::ops::Range<usize>| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[r]);
            u64::from_le_bytes(w)
        };
        *self.state.lock() = (word(0..8), word(8..16));
        Ok(())
    }

    /// Reserves `blocks` counter blocks: returns the seed and the first block. The offset
    /// wraps after 2^64 blocks (2^66 draws), as Philox's counter space allows.
    pub fn reserve(&self, blocks: u64) -> (u64, u64) {
        let mut st = self.state.lock();
        let first = st.1;
        st.1 = first.wrapping_add(blocks);
        (st.0, first)
    }
}

/// 64 bits from the OS's randomness: std's hasher keys are drawn from it per process, and
/// every `RandomState::new()` on a thread steps them, so two calls give different seeds.
fn nondeterministic_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(npurt_core::clock::now_ns() as u128);
    h.finish()
}

fn table() -> &'static Mutex<Vec<Arc<Generator>>> {
    static GENERATORS: OnceLock<Mutex<Vec<Arc<Generator>>>> = OnceLock::new();
    GENERATORS.get_or_init(|| Mutex::new(Vec::new()))
}

/// The generator of `device` (checked against the device count: `InvalidId`, ACL 107001).
/// Generators live for the process: a device reset keeps its generator's state, as torch's
/// default generators outlive their device's caches.
pub fn generator(device: i64) -> npurt_core::Result<Arc<Generator>> {
    let count = npurt_core::registry::device_count()?;
    if device < 0 || device >= i64::from(count) {
        return Err(DeviceError::InvalidId { id: device, count }.into());
    }
    let mut t = table().lock();
    while t.len() <= device as usize {
        t.push(Arc::new(Generator::default()));
    }
    Ok(t[device as usize].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_random123_known_answers() {
        // Random123's kat_vectors for philox4x32_10.
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn block_words_splits_the_counter_and_key() {
        let seed = 0x299f_31d0_a409_3822;
        let block = 0x0370_7344_1319_8a2e_85a3_08d3_243f_6a88u128;
        assert_eq!(block_words(seed, block)[0], 0xd16c_fe09);
    }

    #[test]
    fn state_round_trips_and_reservations_do_not_overlap() {
        let g = Generator::default();
        assert_eq!(g.initial_seed(), DEFAULT_SEED);
        g.manual_seed(42);
        assert_eq!(g.reserve(10), (42, 0));
        let saved = g.get_state();
        assert_eq!(g.reserve(5), (42, 10));
        assert_eq!(g.offset(), 15);
        g.set_state(&saved).unwrap();
        assert_eq!(g.reserve(1), (42, 10));
        assert!(g.set_state(&saved[..15]).is_err());
        g.manual_seed(7);
        assert_eq!((g.initial_seed(), g.offset()), (7, 0));
        let (a, b) = (g.seed_random(), g.seed_random());
        assert_ne!(a, b);
        assert_eq!(g.initial_seed(), b);
    }

    #[test]
    fn generators_are_per_device_and_checked() {
        let count = npurt_core::registry::device_count().unwrap() as i64;
        assert!(generator(count).is_err());
        assert!(generator(-1).is_err());
        let g = generator(0).unwrap();
        assert!(Arc::ptr_eq(&g, &generator(0).unwrap()));
    }
}
