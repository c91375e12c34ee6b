//! The ISA rule: which instruction-set level npurt's SIMD code runs, chosen at run time
//! (never at compile time: one build runs on any x86-64 CPU). Owned here, the lowest
//! crate with SIMD code (the collectives' fold, `collective/reduce.rs`); the kernel
//! library re-exports it and adds its families' paths (`npurt_kernels::isa`).
//!
//! * Detected level: [`Isa::Avx512`] when the CPU has AVX-512 F, BW, VL and DQ plus AVX2
//!   and FMA; [`Isa::Avx2`] with AVX2 and FMA; else [`Isa::Scalar`] (baseline x86-64, SSE2;
//!   every non-x86 target).
//! * Cap: `NPURT_ISA=auto|avx512|avx2|scalar` (read once, at first use). A level above
//!   the CPU's caps to what the CPU has. An invalid value is a *logged fallback*: one line
//!   on stderr and `auto`, and the kernels' report carries the warning (so a bench header
//!   shows it).
//! * Test override ([`force`]): caps further, for tests that run every path in one
//!   process.
//!
//! The active level is one relaxed atomic load on the hot paths ([`level`]).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// An instruction-set level, ordered: `Scalar < Avx2 < Avx512`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Isa {
    /// Baseline code (x86-64: SSE2), what the compiler targets by default.
    Scalar = 0,
    /// AVX2 + FMA.
    Avx2 = 1,
    /// AVX-512 F/BW/VL/DQ + AVX2 + FMA.
    Avx512 = 2,
}

impl Isa {
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Avx2, Isa::Avx512];

    /// `"scalar"`, `"avx2"` or `"avx512"` (the `NPURT_ISA` spelling).
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Parses an `NPURT_ISA` value: `Some(None)` for `auto` (or empty), `Some(Some(level))`
    /// for a level name (case-insensitive, surrounding blanks ignored), `None` if invalid.
    pub fn parse_cap(s: &str) -> Option<Option<Isa>> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Some(None),
            "avx512" => Some(Some(Isa::Avx512)),
            "avx2" => Some(Some(Isa::Avx2)),
            "scalar" => Some(Some(Isa::Scalar)),
            _ => None,
        }
    }

    fn from_u8(v: u8) -> Isa {
        match v {
            2 => Isa::Avx512,
            1 => Isa::Avx2,
            _ => Isa::Scalar,
        }
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the CPU supports (std caches the feature detection; this caches the rule).
pub fn detected() -> Isa {
    static DETECTED: OnceLock<Isa> = OnceLock::new();
    *DETECTED.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let v3 = has!("avx2") && has!("fma");
            if v3 && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq") {
                return Isa::Avx512;
            }
            if v3 {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    })
}

/// `NPURT_ISA` as read at first use.
pub struct EnvCap {
    /// The raw value (`None`: unset).
    pub raw: Option<String>,
    /// The parsed cap (`None`: auto).
    pub cap: Option<Isa>,
    /// Set when the value was invalid (and ignored).
    pub warning: Option<String>,
}

/// `NPURT_ISA` as read at first use (the raw value, the parsed cap, the warning).
pub fn env_cap() -> &'static EnvCap {
    static ENV: OnceLock<EnvCap> = OnceLock::new();
    ENV.get_or_init(|| {
        let raw = std::env::var("NPURT_ISA").ok();
        let (cap, warning) = match raw.as_deref().map(Isa::parse_cap) {
            None => (None, None),
            Some(Some(cap)) => (cap, None),
            Some(None) => {
                let w = format!(
                    "NPURT_ISA={:?} is not one of auto, avx512, avx2, scalar; using auto",
                    raw.as_deref().unwrap_or_default()
                );
                eprintln!("npurt: {w}");
                (None, Some(w))
            }
        };
        EnvCap { raw, cap, warning }
    })
}

/// The level from the CPU and `NPURT_ISA` (no test override).
fn base_level() -> Isa {
    let d = detected();
    env_cap().cap.map_or(d, |c| c.min(d))
}

const UNSET: u8 = u8::MAX;
/// The active level (`base_level`, further capped by [`force`]), or `UNSET`.
static ACTIVE: AtomicU8 = AtomicU8::new(UNSET);
/// The test override (`UNSET`: none).
static FORCED: AtomicU8 = AtomicU8::new(UNSET);

#[cold]
#[inline(never)]
fn init_level() -> Isa {
    let forced = FORCED.load(Ordering::Relaxed);
    let mut l = base_level();
    if forced != UNSET {
        l = l.min(Isa::from_u8(forced));
    }
    ACTIVE.store(l as u8, Ordering::Relaxed);
    l
}

/// The active level: the CPU's, capped by `NPURT_ISA` and the test override. One relaxed
/// load once initialised.
#[inline]
pub fn level() -> Isa {
    match ACTIVE.load(Ordering::Relaxed) {
        UNSET => init_level(),
        v => Isa::from_u8(v),
    }
}

/// Test override: caps the level at `cap` (`None` removes the override). Kernels running
/// concurrently may see either level (each block reads it once), so tests that change it
/// serialise themselves and compare results only after their launches completed.
#[doc(hidden)]
pub fn force(cap: Option<Isa>) {
    FORCED.store(cap.map_or(UNSET, |c| c as u8), Ordering::Relaxed);
    let l = cap.map_or(base_level(), |c| base_level().min(c));
    ACTIVE.store(l as u8, Ordering::Relaxed);
}

/// The levels this CPU can run (every level up to the detected one): what tests sweep.
pub fn available() -> Vec<Isa> {
    Isa::ALL.into_iter().filter(|&l| l <= detected()).collect()
}

/// The test override, if set.
pub fn forced() -> Option<Isa> {
    match FORCED.load(Ordering::Relaxed) {
        UNSET => None,
        v => Some(Isa::from_u8(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_cap_accepts_the_documented_values() {
        let (a5, a2, sc) = (Some(Some(Isa::Avx512)), Some(Some(Isa::Avx2)), Some(Some(Isa::Scalar)));
        let cases = [
            ("auto", Some(None)),
            ("", Some(None)),
            (" AVX512 ", a5),
            ("avx2", a2),
            ("scalar", sc),
        ];
        for (text, want) in cases.into_iter().chain([("avx-512", None), ("sse", None)]) {
            assert_eq!(Isa::parse_cap(text), want, "{text:?}");
        }
    }

    #[test]
    fn levels_are_ordered_and_capped_by_the_cpu() {
        assert!(Isa::Scalar < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
        assert!(level() <= detected());
        assert_eq!(available().last().copied(), Some(detected()));
    }
}
