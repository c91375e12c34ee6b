//! One checker's switch-dependent state: what memcheck, racecheck, synccheck and initcheck
//! each keep between [`enable`](super::enable) and disabling, and the memory-hook
//! subscription of those that watch blocks. [`Tool::with`] is the one way a hook reaches the
//! state: `None` when the checker is off or not started.

use crate::memory::events::{self, MemObserver, MemSubscription};
use parking_lot::{Mutex, MutexGuard};
use std::sync::Arc;

/// A checker's state `S`, present while it runs, and its optional memory-hook subscription.
pub(super) struct Tool<S> {
    /// The tool bit(s) [`Tool::with`] requires.
    bits: u8,
    state: Mutex<Option<S>>,
    sub: Mutex<Option<MemSubscription>>,
}

impl<S> Tool<S> {
    /// A stopped checker reached when any of `bits` is enabled.
    pub(super) const fn new(bits: u8) -> Self {
        Self {
            bits,
            state: Mutex::new(None),
            sub: Mutex::new(None),
        }
    }

    /// Builds the state with `make` unless it is there, and subscribes `observer` (if
    /// given) to the memory hook unless already subscribed.
    pub(super) fn start(&self, make: impl FnOnce() -> S, observer: Option<fn() -> Arc<dyn MemObserver>>) {
        self.state.lock().get_or_insert_with(make);
        if let Some(observer) = observer {
            let mut sub = self.sub.lock();
            if sub.is_none() {
                *sub = Some(events::subscribe(observer()));
            }
        }
    }

    /// Unsubscribes (first: no hook call finds the state half gone) and hands the state
    /// back, for the checker to release what it holds.
    pub(super) fn stop(&self) -> Option<S> {
        self.sub.lock().take();
        self.state.lock().take()
    }

    /// Runs `f` on the state when the checker is enabled and started.
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> Option<R> {
        if !super::enabled(self.bits) {
            return None;
        }
        self.state.lock().as_mut().map(f)
    }

    /// The state's lock, whatever the switches say (reports, the quarantine's release).
    pub(super) fn lock(&self) -> MutexGuard<'_, Option<S>> {
        self.state.lock()
    }

    /// The state's lock if free now (the fault handler must not wait).
    pub(super) fn try_lock(&self) -> Option<MutexGuard<'_, Option<S>>> {
        self.state.try_lock()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{enable, tests::SERIAL, INITCHECK, RACECHECK};
    use super::*;

    #[test]
    fn with_needs_the_bit_and_a_started_state() {
        let _g = SERIAL.lock();
        static T: Tool<u32> = Tool::new(RACECHECK);
        enable(RACECHECK);
        assert!(T.with(|n| *n).is_none(), "not started: no state");
        T.start(|| 7, None);
        T.start(|| 9, None);
        assert_eq!(T.with(|n| *n), Some(7), "a second start keeps the state");
        enable(INITCHECK);
        assert_eq!(T.with(|n| *n), None, "another tool's bit does not reach it");
        assert_eq!(*T.lock(), Some(7), "the lock does, whatever the switches");
        enable(RACECHECK);
        assert_eq!(T.stop(), Some(7));
        assert!(T.with(|n| *n).is_none() && T.lock().is_none());
        enable(0);
    }
}
