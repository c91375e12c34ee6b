//! Per-thread "current" state: a stack of contexts (the top is current, which also names
//! the current device) and a stack of streams made current with `with stream:`.
//!
//! Entering a device or context pushes; leaving pops, also on an exception, so the previous
//! one is restored. A thread with nothing on its stack gets device 0's default context
//! lazily ([`current_context`]) — the Pythonic behaviour; [`current_context_strict`] gives
//! ACL's 107002 instead.

use crate::context::{Context, ContextInner};
use crate::error::{DeviceError, Result};
use crate::stream::{Stream, StreamInner};
use std::cell::RefCell;
use std::sync::Arc;

struct Entry {
    ctx: Arc<ContextInner>,
    implicit: bool,
}

thread_local! {
    static CTX: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    static STREAMS: RefCell<Vec<Arc<StreamInner>>> = const { RefCell::new(Vec::new()) };
}

/// Makes `ctx` current until the matching [`pop_context`].
pub fn push_context(ctx: &Context) {
    CTX.with(|c| {
        c.borrow_mut().push(Entry {
            ctx: ctx.0.clone(),
            implicit: false,
        })
    });
}

/// Restores the context that was current before the last [`push_context`].
pub fn pop_context() -> Option<Context> {
    CTX.with(|c| c.borrow_mut().pop().map(|e| Context(e.ctx)))
}

/// Replaces the current context (ACL `aclrtSetCurrentContext`): no stack growth.
pub fn set_current_context(ctx: &Context) {
    CTX.with(|c| {
        let mut v = c.borrow_mut();
        v.pop();
        v.push(Entry {
            ctx: ctx.0.clone(),
            implicit: false,
        });
    });
}

/// The current context, or an error if none is set (ACL semantics, 107002).
pub fn current_context_strict() -> Result<Context> {
    CTX.with(|c| c.borrow().last().map(|e| Context(e.ctx.clone())))
        .ok_or_else(|| DeviceError::NoContext.into())
        .and_then(|ctx| {
            ctx.0.check()?;
            Ok(ctx)
        })
}

/// The current context; device 0's default context if this thread never chose one.
#[inline]
pub fn current_context() -> Result<Context> {
    let top = CTX.with(|c| c.borrow().last().map(|e| (e.ctx.clone(), e.implicit)));
    match top {
        Some((ctx, _)) if ctx.is_alive() => Ok(Context(ctx)),
        Some((ctx, false)) => {
            ctx.check()?;
            Ok(Context(ctx))
        }
        Some((_, true)) | None => {
            let dev = crate::registry::use_device(0)?;
            let ctx = dev.default_context();
            CTX.with(|c| {
                let mut v = c.borrow_mut();
                if matches!(v.last(), Some(e) if e.implicit) {
                    v.pop();
                }
                if v.is_empty() {
                    v.push(Entry {
                        ctx: ctx.0.clone(),
                        implicit: true,
                    });
                }
            });
            Ok(ctx)
        }
    }
}

/// The memory limit of the thread's current context, if it has one and is on `device`.
#[inline]
pub(crate) fn quota_on(device: u32) -> Option<Arc<crate::memory::CtxQuota>> {
    CTX.with(|c| {
        let v = c.borrow();
        let e = v.last()?;
        if e.ctx.device != device {
            return None;
        }
        e.ctx.quota.get().cloned()
    })
}

/// The current device id.
pub fn current_device() -> Result<u32> {
    current_context().map(|c| c.device())
}

/// Makes `s` the current stream of its context until [`pop_stream`]. The stream's context
/// must be current (ACL 107003 otherwise).
pub fn push_stream(s: &Stream) -> Result<()> {
    s.0.check_usable()?;
    let ctx = current_context()?;
    if ctx.id() != s.context_id() {
        return Err(DeviceError::WrongDevice {
            what: "stream",
            owner: s.device(),
            current: ctx.device(),
        }
        .into());
    }
    STREAMS.with(|v| v.borrow_mut().push(s.0.clone()));
    Ok(())
}

/// Undoes the most recent [`push_stream`] of `s`.
pub fn pop_stream(s: &Stream) {
    STREAMS.with(|v| {
        let mut v = v.borrow_mut();
        if let Some(pos) = v.iter().rposition(|x| Arc::ptr_eq(x, &s.0)) {
            v.remove(pos);
        }
    });
}

/// Id of the innermost stream this thread made current on `device` (`None`: its default
/// stream). Creates nothing: for the memory hook.
pub(crate) fn peek_stream_id(device: u32) -> Option<u64> {
    STREAMS
        .try_with(|v| v.borrow().iter().rev().find(|s| s.dev.ordinal == device).map(|s| s.id))
        .ok()
        .flatten()
}

/// Id of the thread's current context if it is on `device` (creates nothing: for logs).
pub(crate) fn peek_context_id(device: u32) -> Option<u64> {
    CTX.try_with(|c| c.borrow().last().filter(|e| e.ctx.device == device).map(|e| e.ctx.id))
        .ok()
        .flatten()
}

/// The thread's current stream for the current context (its default stream if none).
#[inline]
pub fn current_stream() -> Result<Stream> {
    let ctx = current_context()?;
    let id = ctx.id();
    let found = STREAMS.with(|v| v.borrow().iter().rev().find(|s| s.ctx_id == id).cloned());
    match found {
        Some(s) => Ok(Stream(s)),
        None => ctx.default_stream(),
    }
}
