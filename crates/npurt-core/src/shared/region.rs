//! The shared status region's bytes: a small file (mode 0600, in the 0700 per-user status
//! directory) that every process using a device maps `MAP_SHARED`. Everything in it is an
//! atomic, so processes read and update it without locks; the process table's rare
//! changes (attach, detach, reclaiming a dead process) happen under `flock` on the file,
//! which the kernel drops when a process dies, so a crash never leaves it locked.
//!
//! Layout (version 1, little-endian, `repr(C)`): a 128-byte [`Header`], [`MAX_PROCS`]
//! [`ProcSlot`]s of 128 bytes, [`MAX_EVENTS`] [`EventSlot`]s of 64 bytes.

use super::SharedError;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
// The crate's atomics: std's (whose layout the region has), loom's under the model checker.
use crate::sync::{AtomicU32, AtomicU64};
use std::time::{Duration, Instant};

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"npurtsh1");
pub(crate) const VERSION: u32 = 1;
pub(crate) const MAX_PROCS: usize = 64;
pub(crate) const MAX_EVENTS: usize = 512;
/// Longest process name kept (bytes).
pub(crate) const NAME_LEN: usize = 32;

#[repr(C)]
pub(crate) struct Header {
    pub(crate) magic: AtomicU64,
    pub(crate) version: AtomicU32,
    pub(crate) device: AtomicU32,
    /// The device capacity all attached processes agreed on (part of the file name).
    pub(crate) capacity: AtomicU64,
    /// Bytes reserved on the device by all processes (Σ of the slots' `reserved`).
    pub(crate) reserved: AtomicU64,
    _pad: [u64; 12],
}

/// One process using the device. `state` is [`FREE`] or [`LIVE`].
#[repr(C)]
pub(crate) struct ProcSlot {
    pub(crate) state: AtomicU32,
    pub(crate) pid: AtomicU32,
    /// `/proc/<pid>/stat` start time (clock ticks): tells a reused pid from the owner.
    pub(crate) start: AtomicU64,
    /// Bytes allocated to live buffers (block sizes): one relaxed add per malloc/free.
    pub(crate) allocated: AtomicU64,
    /// Bytes reserved (segments, memory pools, dedicated and shareable segments).
    pub(crate) reserved: AtomicU64,
    /// The process's quota (`set_per_process_memory_fraction`), 0 = none.
    pub(crate) quota: AtomicU64,
    /// Live user streams and events of the process (published by the status thread).
    pub(crate) streams: AtomicU64,
    pub(crate) events: AtomicU64,
    pub(crate) name: [AtomicU64; NAME_LEN / 8],
    _pad: [u64; 5],
}

pub(crate) const FREE: u32 = 0;
pub(crate) const LIVE: u32 = 1;
pub(crate) const CLOSED: u32 = 2;

/// One interprocess event (see `ipc_event.rs`). `state`: [`FREE`], [`LIVE`] (its producer
/// holds it) or [`CLOSED`] (the producer dropped it or died).
#[repr(C)]
pub(crate) struct EventSlot {
    pub(crate) state: AtomicU32,
    /// Bumped whenever the slot is handed out again: an old handle no longer matches.
    pub(crate) generation: AtomicU32,
    pub(crate) pid: AtomicU32,
    /// The futex word: bumped on every completion and on close (waiters sleep on it).
    pub(crate) seq: AtomicU32,
    pub(crate) start: AtomicU64,
    /// Random 64 bits in the handle: a guessed (slot, generation) does not open it.
    pub(crate) nonce: AtomicU64,
    /// Records made / the highest record whose work has completed.
    pub(crate) recorded: AtomicU64,
    pub(crate) completed: AtomicU64,
    /// Threads sleeping on `seq` (a completer skips the wake syscall when 0).
    pub(crate) waiters: AtomicU32,
    _pad: [u32; 3],
}

const PROCS_AT: usize = std::mem::size_of::<Header>();
const EVENTS_AT: usize = PROCS_AT + MAX_PROCS * std::mem::size_of::<ProcSlot>();
pub(crate) const LEN: usize = EVENTS_AT + MAX_EVENTS * std::mem::size_of::<EventSlot>();
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Header>() == 128);
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<ProcSlot>() == 128);
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<EventSlot>() == 64);

/// Slots outside any mapping, for the loom models (loom's atomics cannot live in a file).
#[cfg(loom)]
impl Header {
    pub(crate) fn for_model(capacity: u64) -> Self {
        Header {
            magic: AtomicU64::new(MAGIC),
            version: AtomicU32::new(VERSION),
            device: AtomicU32::new(0),
            capacity: AtomicU64::new(capacity),
            reserved: AtomicU64::new(0),
            _pad: [0; 12],
        }
    }
}

#[cfg(loom)]
impl ProcSlot {
    pub(crate) fn for_model() -> Self {
        let z = || AtomicU64::new(0);
        ProcSlot {
            state: AtomicU32::new(FREE),
            pid: AtomicU32::new(0),
            start: z(),
            allocated: z(),
            reserved: z(),
            quota: z(),
            streams: z(),
            events: z(),
            name: std::array::from_fn(|_| z()),
            _pad: [0; 5],
        }
    }
}

#[cfg(loom)]
impl EventSlot {
    pub(crate) fn for_model() -> Self {
        let z = || AtomicU32::new(0);
        EventSlot {
            state: AtomicU32::new(LIVE),
            generation: z(),
            pid: z(),
            seq: z(),
            start: AtomicU64::new(0),
            nonce: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            waiters: z(),
            _pad: [0; 3],
        }
    }
}

/// A mapped region file.
pub(crate) struct Region {
    file: File,
    base: NonNull<u8>,
}

// SAFETY: the mapping is plain shared memory that holds only atomics; every access goes
// through `&AtomicXX` references, so sharing the handle between threads is sound.
unsafe impl Send for Region {}
// SAFETY: see `Send`.
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `base..base+LEN` is the mapping made in `map`; the region is being
        // dropped, so no reference into it outlives this.
        unsafe { libc::munmap(self.base.as_ptr().cast(), LEN) };
    }
}

impl Region {
    /// Maps `file` (sized to [`LEN`] by the caller, under the lock).
    pub(crate) fn map(file: File) -> Result<Region, SharedError> {
        // SAFETY: a fresh shared mapping of a file we opened read-write, with a null hint:
        // it aliases no Rust object; failure is reported as MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(SharedError::os("mmap"));
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| SharedError::os("mmap"))?;
        Ok(Region { file, base })
    }

    fn at<T>(&self, offset: usize) -> &T {
        debug_assert!(offset + std::mem::size_of::<T>() <= LEN);
        // SAFETY: offsets come from the layout constants (in bounds, 8-byte aligned within
        // a page-aligned mapping); `T` is a repr(C) struct of atomics, valid for any bit
        // pattern (a fresh file is zeros), and the mapping lives as long as `self`.
        unsafe { &*self.base.as_ptr().add(offset).cast::<T>() }
    }

    pub(crate) fn header(&self) -> &Header {
        self.at(0)
    }

    pub(crate) fn proc(&self, i: usize) -> &ProcSlot {
        assert!(i < MAX_PROCS);
        self.at(PROCS_AT + i * std::mem::size_of::<ProcSlot>())
    }

    pub(crate) fn event(&self, i: usize) -> &EventSlot {
        assert!(i < MAX_EVENTS);
        self.at(EVENTS_AT + i * std::mem::size_of::<EventSlot>())
    }

    /// Takes the file's exclusive lock (for process-table changes), waiting at most 2 s:
    /// a stopped process holding it must not hang everyone else.
    pub(crate) fn lock(&self) -> Result<FileLock<'_>, SharedError> {
        lock_file(&self.file).map(|()| FileLock(&self.file))
    }
}

/// Held while the process table changes; unlocks on drop.
pub(crate) struct FileLock<'a>(&'a File);

impl<'a> FileLock<'a> {
    /// Takes over a lock already held on the region's file (taken before it was mapped).
    pub(crate) fn adopt(r: &'a Region) -> FileLock<'a> {
        FileLock(&r.file)
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        // SAFETY: flock on an fd we own; unlocking cannot affect memory safety.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// `flock(LOCK_EX)` with a 2 s timeout (non-blocking attempts with short sleeps).
pub(crate) fn lock_file(file: &File) -> Result<(), SharedError> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        // SAFETY: flock on an fd we own; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) && err.raw_os_error() != Some(libc::EINTR) {
            return Err(SharedError::Os {
                op: "flock",
                errno: err.raw_os_error().unwrap_or(0),
            });
        }
        if Instant::now() >= deadline {
            return Err(SharedError::LockTimeout);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Packs a name into the slot's words (NUL-padded, cut at [`NAME_LEN`] bytes).
pub(crate) fn store_name(slot: &ProcSlot, name: &str) {
    let mut bytes = [0u8; NAME_LEN];
    let mut n = name.len().min(NAME_LEN);
    while !name.is_char_boundary(n) {
        n -= 1;
    }
    bytes[..n].copy_from_slice(&name.as_bytes()[..n]);
    for (i, w) in slot.name.iter().enumerate() {
        let word: [u8; 8] = bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes");
        w.store(u64::from_le_bytes(word), std::sync::atomic::Ordering::Relaxed);
    }
}

/// The slot's name.
pub(crate) fn load_name(slot: &ProcSlot) -> String {
    let mut bytes = Vec::with_capacity(NAME_LEN);
    for w in &slot.name {
        bytes.extend_from_slice(&w.load(std::sync::atomic::Ordering::Relaxed).to_le_bytes());
    }
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
