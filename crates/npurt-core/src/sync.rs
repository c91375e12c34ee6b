//! A thin shim over the synchronisation primitives used by the lock-free parts
//! (task queue, stream timeline, worker notifier), so that `RUSTFLAGS="--cfg loom"`
//! swaps them for loom's model-checked versions.
//!
//! Only the hand-written lock-free code goes through this module; everything else uses
//! std / parking_lot directly.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

/// `parking_lot::Mutex` with loom's `lock()` signature (no poisoning).
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

#[cfg(not(loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

#[cfg(not(loom))]
impl<T> Mutex<T> {
    pub(crate) const fn new(v: T) -> Self {
        Self(parking_lot::const_mutex(v))
    }
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock()
    }
}

/// Lock helper that hides loom's `LockResult`.
#[cfg(loom)]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap()
}
#[cfg(not(loom))]
#[inline]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock()
}

/// `UnsafeCell` with loom's closure-based access API.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(v: T) -> Self {
        Self(std::cell::UnsafeCell::new(v))
    }
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Hint for a spin-wait loop (a loom yield point under the model checker).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
