//! The process-wide registry of virtual devices and ACL's reference-counted lifetime:
//! every `set_device` adds a reference, every `reset_device` drops one, and the device is
//! torn down (pending work finished, streams/events/contexts released, threads joined) when
//! the last one goes. The Pythonic front also holds one *implicit* reference per device that
//! was used without an explicit `set_device` (as CUDA/torch initialise lazily); it is
//! released by `reset_device` or at process exit ([`shutdown`]).

use crate::config::Config;
use crate::device::{Device, DeviceProps, LeakReport};
use crate::error::{DeviceError, Result};
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};

struct SlotState {
    refs: usize,
    implicit: bool,
    dev: Option<Arc<Device>>,
}

struct Slot {
    props: DeviceProps,
    state: Mutex<SlotState>,
}

struct Runtime {
    config: Config,
    slots: Vec<Slot>,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static PENDING: Mutex<Option<Config>> = Mutex::new(None);

/// Sets the configuration; only before the first device is used (calling it again with the
/// same settings is harmless).
pub fn configure(cfg: Config) -> Result<()> {
    cfg.validate()?;
    let mut pending = PENDING.lock();
    if let Some(rt) = RUNTIME.get() {
        return if rt.config == cfg {
            Ok(())
        } else {
            Err(DeviceError::AlreadyInitialized.into())
        };
    }
    *pending = Some(cfg);
    Ok(())
}

/// The configuration in force (initialising the runtime if needed).
pub fn config() -> Result<Config> {
    Ok(runtime()?.config.clone())
}

/// Whether the runtime has been initialised (configure() is then too late).
pub fn is_initialized() -> bool {
    RUNTIME.get().is_some()
}

fn runtime() -> Result<&'static Runtime> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let pending = PENDING.lock();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let config = match pending.clone() {
        Some(c) => c,
        None => Config::from_env()?,
    };
    let slots = config
        .visible()
        .into_iter()
        .enumerate()
        .map(|(logical, physical)| Slot {
            props: DeviceProps::new(logical as u32, physical, &config),
            state: Mutex::new(SlotState {
                refs: 0,
                implicit: false,
                dev: None,
            }),
        })
        .collect();
    crate::lifecycle::install_fork_handler();
    crate::fault::from_env()?;
    let _ = RUNTIME.set(Runtime { config, slots });
    drop(pending);
    Ok(RUNTIME.get().expect("runtime was just set"))
}

/// Number of visible devices.
pub fn device_count() -> Result<u32> {
    Ok(runtime()?.slots.len() as u32)
}

fn slot(id: i64) -> Result<&'static Slot> {
    let rt = runtime()?;
    let count = rt.slots.len() as u32;
    usize::try_from(id)
        .ok()
        .and_then(|i| rt.slots.get(i))
        .ok_or_else(|| DeviceError::InvalidId { id, count }.into())
}

/// Properties of device `id` (does not activate it).
pub fn device_props(id: i64) -> Result<DeviceProps> {
    Ok(slot(id)?.props.clone())
}

fn activate(slot: &Slot, st: &mut SlotState) -> Result<Arc<Device>> {
    if crate::lifecycle::forked() {
        return Err(DeviceError::Forked.into());
    }
    if let Some(d) = &st.dev {
        return Ok(d.clone());
    }
    if crate::lifecycle::is_shut_down() {
        return Err(DeviceError::ShutDown.into());
    }
    let cfg = &runtime()?.config;
    crate::logging::init();
    let d = Device::start(slot.props.clone(), cfg)?;
    log::info!(
        "device {} started: {} AI cores, {} workers, {} B of memory",
        slot.props.ordinal,
        slot.props.aicore_num,
        cfg.worker_threads,
        cfg.device_memory
    );
    st.dev = Some(d.clone());
    Ok(d)
}

/// ACL `aclrtSetDevice`: adds a reference, starting the device on the first one.
pub fn set_device(id: i64) -> Result<Arc<Device>> {
    let slot = slot(id)?;
    let mut st = slot.state.lock();
    let d = activate(slot, &mut st)?;
    st.refs += 1;
    log::info!("set device {id} (references: {})", st.refs);
    Ok(d)
}

/// Takes the process's implicit reference on device `id` (once) and returns it active.
pub fn use_device(id: i64) -> Result<Arc<Device>> {
    let slot = slot(id)?;
    let mut st = slot.state.lock();
    let d = activate(slot, &mut st)?;
    if !st.implicit {
        st.implicit = true;
        st.refs += 1;
    }
    Ok(d)
}

/// The active runtime of device `id`; if none holds it, takes the implicit reference.
pub fn active_or_use(id: i64) -> Result<Arc<Device>> {
    match active_device(id)? {
        Some(d) => Ok(d),
        None => use_device(id),
    }
}

/// The active runtime of device `id`, if any reference holds it.
pub fn active_device(id: i64) -> Result<Option<Arc<Device>>> {
    Ok(slot(id)?.state.lock().dev.clone())
}

/// ACL `aclrtResetDevice`: drops a reference (the implicit one if no explicit is left);
/// tears the device down when none are left. Returns the leak report of a teardown.
pub fn reset_device(id: i64) -> Result<Option<LeakReport>> {
    release(id, false)
}

/// The active device `id` if a [`reset_device`] now would drop its last reference (and so
/// tear it down, waiting for its work); bindings wait for that work first, interruptibly.
pub fn last_reference(id: i64) -> Result<Option<Arc<Device>>> {
    let st = slot(id)?.state.lock();
    Ok(st.dev.clone().filter(|_| st.refs <= 1))
}

/// ACL `aclrtResetDeviceForce`: tears the device down whatever its reference count, dropping
/// queued work.
pub fn reset_device_force(id: i64) -> Result<Option<LeakReport>> {
    release(id, true)
}

fn release(id: i64, force: bool) -> Result<Option<LeakReport>> {
    let slot = slot(id)?;
    let dev = {
        let mut st = slot.state.lock();
        if st.dev.is_none() {
            return Ok(None); // nothing to release (ACL returns success too)
        }
        if force {
            st.refs = 0;
        } else {
            st.refs = st.refs.saturating_sub(1);
            if st.refs < usize::from(st.implicit) {
                st.implicit = false;
            }
        }
        log::info!(
            "reset device {id}{} (references left: {})",
            if force { " (forced)" } else { "" },
            st.refs
        );
        if st.refs > 0 {
            return Ok(None);
        }
        st.implicit = false;
        st.dev.take()
    };
    let Some(d) = dev else { return Ok(None) };
    if crate::sanitizer::on() {
        crate::sanitizer::memcheck::device_reset(id as u32);
    }
    if crate::lifecycle::forked() {
        return Ok(None); // the parent's device: nothing of it runs here, leave it alone
    }
    if crate::thread_role::is_runtime_thread() {
        // A teardown joins the runtime threads, possibly this one: hand it to a helper
        // thread (the last reset came from a host callback or a kernel).
        std::thread::Builder::new()
            .name(format!("npurt-teardown-{id}"))
            .spawn(move || {
                let _report = d.teardown(force); // nobody to warn from a runtime thread
            })
            .map_err(|e| DeviceError::Spawn {
                device: id as u32,
                reason: e.to_string(),
            })?;
        return Ok(None);
    }
    Ok(Some(d.teardown(force)))
}

/// Reference count of device `id` (for tests and diagnostics).
pub fn device_refs(id: i64) -> Result<usize> {
    Ok(slot(id)?.state.lock().refs)
}

/// Tears every active device down (process exit). Returns the non-empty leak reports.
/// Later uses of the runtime are [`DeviceError::ShutDown`] errors (no device starts again).
pub fn shutdown() -> Vec<LeakReport> {
    crate::lifecycle::mark_shut_down();
    let Some(rt) = RUNTIME.get() else { return Vec::new() };
    if crate::lifecycle::forked() {
        return Vec::new(); // a forked child: the devices are the parent's
    }
    let mut reports = Vec::new();
    for slot in &rt.slots {
        let dev = {
            let mut st = slot.state.lock();
            st.refs = 0;
            st.implicit = false;
            st.dev.take()
        };
        if let Some(d) = dev {
            let r = d.teardown(false);
            if !r.is_empty() {
                reports.push(r);
            }
        }
    }
    reports
}
