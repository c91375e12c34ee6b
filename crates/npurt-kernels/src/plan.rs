//! Block counts: how many blocks a launch is split into, from its work size and the
//! `cores` hint (the device's AI-core count). Small work runs as one block (inline on the
//! worker, no job); big work gets a few blocks per core so a busy core does not hold the
//! launch up.

/// Blocks per core for big launches.
pub const BLOCKS_PER_CORE: usize = 4;

/// Elements per block below which a memory-bound elementwise launch is not split.
pub const GRAIN_ELEMENTWISE: usize = 1 << 16;
/// Elements per block for elementwise ops with transcendental math.
pub const GRAIN_TRANSCENDENTAL: usize = 1 << 14;

/// `ceil(work / grain)` blocks, at most `BLOCKS_PER_CORE * cores`, at least 1.
pub fn blocks_for(work: usize, grain: usize, cores: u32) -> u32 {
    let cap = BLOCKS_PER_CORE * cores.max(1) as usize;
    work.div_ceil(grain.max(1)).clamp(1, cap) as u32
}
