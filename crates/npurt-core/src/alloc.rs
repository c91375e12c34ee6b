//! The context-aware allocation fronts, above `memory/`: they find the current context or
//! a device in the registry, then call the memory layer ([`memory::malloc_charged`],
//! [`memory::resolve_in`]), which knows neither.

use crate::current;
use crate::error::Result;
use crate::memory::{self, DeviceBuffer, DeviceMemory, PagePolicy, Resolved};
use crate::registry;
use std::sync::Arc;

/// The memory of the current device (starting device 0 lazily, like every other call).
pub fn current_memory() -> Result<Arc<DeviceMemory>> {
    Ok(current::current_context()?.0.mem.clone())
}

/// The memory of device `id`, taking the process's implicit reference if it is not active.
pub fn device_memory(id: i64) -> Result<Arc<DeviceMemory>> {
    Ok(registry::active_or_use(id)?.memory().clone())
}

/// The memory of device `id` if the device is active (statistics of an inactive device
/// are all zero; asking should not start it).
pub fn active_memory(id: i64) -> Result<Option<Arc<DeviceMemory>>> {
    Ok(registry::active_device(id)?.map(|d| d.memory().clone()))
}

/// Allocates `nbytes` on the current device (`aclrtMalloc`; contents unspecified).
///
/// Sizes follow the caching allocator (torch_npu's, whose segments come from
/// `aclrtMallocAlign32`): blocks are `nbytes` rounded up to 512 bytes, with no extra
/// 32-byte pad, so `malloc(1 MiB)` takes exactly 1 MiB and stays in the small pool.
/// ACL's padded rule is [`npurt_mem::acl_malloc`] (`npurt.acl`'s `malloc` pads with it).
///
/// Policies as ACL: `HugeFirst` (huge pages where the kernel gives them, else normal),
/// `HugeOnly` (207001 when no huge pages can be had), `NormalOnly`. Inside
/// [`MemPool::enter`](crate::memory::MemPool::enter) the allocation comes from that pool whatever the policy. Zero or
/// absurd sizes are typed errors; a request the device cannot hold is OutOfMemory (207001)
/// with the pool's explanation.
///
/// The current context's memory limit ([`Context::set_memory_limit`](crate::Context::set_memory_limit))
/// applies.
#[inline]
pub fn malloc(nbytes: usize, policy: PagePolicy) -> Result<DeviceBuffer> {
    malloc_ex(nbytes, policy, None)
}

/// [`malloc`] that says whether the memory must be shareable with other processes
/// (`None`: the process default, [`memory::shareable_default`]).
#[inline]
pub fn malloc_ex(nbytes: usize, policy: PagePolicy, shareable: Option<bool>) -> Result<DeviceBuffer> {
    let ctx = current::current_context()?;
    memory::malloc_charged(ctx.0.quota.get(), &ctx.0.mem, nbytes, policy, shareable)
}

/// [`malloc`] for a `device=` argument: none, or the current context's device, allocates
/// through the current context (its memory limit applies); another device allocates on that
/// device's memory (starting it if needed) outside any context's limit.
pub fn malloc_for(device: Option<i64>, nbytes: usize, policy: PagePolicy) -> Result<DeviceBuffer> {
    malloc_for_ex(device, nbytes, policy, None)
}

/// [`malloc_for`] with [`malloc_ex`]'s `shareable`.
pub fn malloc_for_ex(
    device: Option<i64>,
    nbytes: usize,
    policy: PagePolicy,
    shareable: Option<bool>,
) -> Result<DeviceBuffer> {
    match device {
        None => malloc_ex(nbytes, policy, shareable),
        Some(id) if current::current_context_strict().ok().map(|c| c.device() as i64) == Some(id) => {
            malloc_ex(nbytes, policy, shareable)
        }
        Some(id) => memory::malloc_on_ex(&device_memory(id)?, nbytes, policy, shareable),
    }
}

/// Validates a raw device pointer (e.g. from an `aclrt*`-style API): `[addr, addr+nbytes)`
/// must lie inside one live allocation on device `device`. Unknown, freed or out-of-range
/// addresses are typed errors (107000), an inactive or reset device 107017.
pub fn resolve(device: i64, addr: usize, nbytes: usize) -> Result<Resolved> {
    let Some(mem) = active_memory(device)? else {
        return Err(crate::error::DeviceError::Reset(device as u32).into());
    };
    memory::resolve_in(&mem, addr, nbytes)
}

/// What a raw address points into, for the raw-pointer fronts (`npurt.acl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Located {
    /// Inside the live allocation `[base, base + size)` of active device `device`.
    Device { device: u32, base: usize, size: usize },
    /// Inside the live pinned host allocation `[base, base + size)`.
    Pinned { base: usize, size: usize },
}

/// The live allocation containing `addr`: on any active device (its caching pool, its
/// `MemPool`s, dedicated segments), else in pinned host memory. The one owner of the
/// interior-pointer rule: the fronts keep their handles by base address and ask this.
pub fn locate(addr: usize) -> Option<Located> {
    let n = registry::device_count().ok()?;
    for id in 0..n as i64 {
        if let Ok(Some(mem)) = active_memory(id) {
            if let Ok(r) = memory::resolve_in(&mem, addr, 1) {
                return Some(Located::Device {
                    device: id as u32,
                    base: r.base,
                    size: r.size,
                });
            }
        }
    }
    memory::pinned_pool().lookup(addr).map(|p| Located::Pinned {
        base: p.base,
        size: p.size,
    })
}

/// True if `addr` lies in memory a running device holds (a live allocation, or a freed
/// block still cached by a pool): raw-pointer APIs must never take it for host memory.
/// Memory given back to the OS (`empty_cache`, reset) is no longer mapped at all.
pub fn owns_address(addr: usize) -> bool {
    let Ok(n) = crate::registry::device_count() else {
        return false;
    };
    (0..n as i64).any(|id| match active_memory(id) {
        Ok(Some(mem)) => {
            mem.pool.owns(addr)
                || mem.pools().iter().any(|p| p.pool.owns(addr))
                || mem.find_dedicated(addr).is_some()
                || mem.share.pool().is_some_and(|p| p.owns(addr))
                || mem.share.imported_at(addr).is_some()
        }
        _ => false,
    })
}
