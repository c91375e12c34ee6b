//! What the ISA rule tells: the CPU model, the detected level, the cap and each family's
//! path ([`IsaReport`]), for the benches, the demo and `npurt.isa_info()`.

use super::{detected, level, path, Family, Isa};
use npurt_core::isa::{env_cap, forced};
use std::sync::OnceLock;

/// Where kernels run: the CPU model, the detected level, the cap and the path of each
/// family. Built by [`report`]; printed by the benches and the demo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsaReport {
    /// The CPU's brand string (x86 CPUID), else `/proc/cpuinfo`'s model name, else "unknown".
    pub cpu_model: String,
    pub detected: Isa,
    /// `NPURT_ISA` as given (`"auto"` when unset).
    pub requested: String,
    /// The parsed cap (`None`: auto, or an invalid value).
    pub cap: Option<Isa>,
    /// The test override, if set.
    pub forced: Option<Isa>,
    /// The active level (see [`level`]).
    pub level: Isa,
    /// `(family name, path)` for every [`Family`].
    pub paths: Vec<(&'static str, Isa)>,
    /// Set when `NPURT_ISA` was invalid and ignored.
    pub warning: Option<String>,
}

impl std::fmt::Display for IsaReport {
    /// One line: `CPU: <model>; ISA: avx512 (detected avx512, NPURT_ISA=auto); gemm=avx512 ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CPU: {}; ISA: {} (detected {}, NPURT_ISA={}",
            self.cpu_model, self.level, self.detected, self.requested
        )?;
        if let Some(c) = self.forced {
            write!(f, ", test override {c}")?;
        }
        f.write_str(");")?;
        for (name, p) in &self.paths {
            write!(f, " {name}={p}")?;
        }
        if let Some(w) = &self.warning {
            write!(f, " [{w}]")?;
        }
        Ok(())
    }
}

/// The current [`IsaReport`].
pub fn report() -> IsaReport {
    let env = env_cap();
    IsaReport {
        cpu_model: cpu_model().to_string(),
        detected: detected(),
        requested: env.raw.clone().unwrap_or_else(|| "auto".into()),
        cap: env.cap,
        forced: forced(),
        level: level(),
        paths: Family::ALL.iter().map(|&f| (f.name(), path(f))).collect(),
        warning: env.warning.clone(),
    }
}

/// The CPU's model name (cached).
pub fn cpu_model() -> &'static str {
    static MODEL: OnceLock<String> = OnceLock::new();
    MODEL.get_or_init(|| {
        brand_string()
            .or_else(proc_cpuinfo_model)
            .unwrap_or_else(|| "unknown".into())
    })
}

#[cfg(target_arch = "x86_64")]
fn brand_string() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    // CPUID is available on every x86-64 CPU; leaf 0x8000_0000 gives the highest
    // extended leaf, and the brand string is in leaves 0x8000_0002..=0x8000_0004.
    if __cpuid(0x8000_0000).eax < 0x8000_0004 {
        return None;
    }
    let mut bytes = Vec::with_capacity(48);
    for leaf in 0x8000_0002u32..=0x8000_0004 {
        let r = __cpuid(leaf);
        for w in [r.eax, r.ebx, r.ecx, r.edx] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
    }
    let s = String::from_utf8_lossy(&bytes);
    let s = s.trim_matches(char::from(0)).trim();
    (!s.is_empty()).then(|| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(not(target_arch = "x86_64"))]
fn brand_string() -> Option<String> {
    None
}

fn proc_cpuinfo_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name") || l.starts_with("Model"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}
