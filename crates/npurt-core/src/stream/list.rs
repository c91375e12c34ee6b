//! A context's user streams. The context owns the list; each of its streams holds a `Weak`
//! to it, so destroying or releasing a stream takes it off without reaching up into the
//! context (the stream layer stays below the context layer).

use super::{count_user_streams, StreamInner};
use parking_lot::Mutex;
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct StreamList {
    streams: Mutex<Vec<Arc<StreamInner>>>,
    /// Released streams whose queued work has not finished yet: device and context
    /// synchronisation and teardown still wait for them.
    draining: Mutex<Vec<Arc<StreamInner>>>,
}

impl StreamList {
    /// Registers a new user stream.
    pub(crate) fn push(&self, s: Arc<StreamInner>) {
        self.streams.lock().push(s);
        count_user_streams(1);
    }

    /// Unregisters a destroyed or released stream; one with queued work is kept on the
    /// draining list until that work is done.
    pub(crate) fn forget(&self, s: &Arc<StreamInner>) {
        let mut v = self.streams.lock();
        let before = v.len();
        v.retain(|x| !Arc::ptr_eq(x, s));
        count_user_streams(v.len() as isize - before as isize);
        drop(v);
        let mut d = self.draining.lock();
        d.retain(|x| x.timeline.completed() < x.queue.tail());
        if s.timeline.completed() < s.queue.tail() {
            d.push(s.clone());
        }
    }

    /// The registered user streams.
    pub(crate) fn user(&self) -> Vec<Arc<StreamInner>> {
        self.streams.lock().clone()
    }

    /// Registered and draining streams: every stream whose work a synchronize waits for.
    pub(crate) fn all(&self) -> Vec<Arc<StreamInner>> {
        let mut all = self.user();
        all.extend(self.draining.lock().iter().cloned());
        all
    }

    /// User streams still registered (not destroyed).
    pub(crate) fn len(&self) -> usize {
        self.streams.lock().len()
    }

    /// Drops the draining streams whose work is done.
    pub(crate) fn prune_draining(&self) {
        self.draining.lock().retain(|x| x.timeline.completed() < x.queue.tail());
    }

    /// Empties the list (context teardown), returning the registered streams and the
    /// released ones still draining (a forced teardown aborts those too).
    pub(crate) fn take(&self) -> Vec<Arc<StreamInner>> {
        let mut streams = std::mem::take(&mut *self.streams.lock());
        count_user_streams(-(streams.len() as isize));
        streams.append(&mut self.draining.lock());
        streams
    }
}
