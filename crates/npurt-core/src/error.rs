//! npurt's error model: one `thiserror` enum per concern, each variant carrying the
//! ACL (AscendCL) error code it corresponds to, and a crate-wide [`Error`] that wraps them.
//! Bindings map [`ErrorKind`] to their own exception types in one place.

use std::fmt;

/// An ACL runtime error code and its symbolic name (from `rt_error_codes.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclCode {
    pub code: u32,
    pub name: &'static str,
}

macro_rules! acl_codes {
    ($($id:ident = $code:literal),* $(,)?) => {
        impl AclCode {
            $(pub const $id: AclCode = AclCode { code: $code, name: concat!("ACL_ERROR_RT_", stringify!($id)) };)*
            /// Every runtime code (`rt_error_codes.h`) npurt knows: the one table the fronts
            /// (`npurt.exceptions`, `npurt.acl.constants`) read.
            pub const ALL: &'static [AclCode] = &[$(AclCode::$id),*];
        }
    };
}

acl_codes! {
    PARAM_INVALID = 107000,
    INVALID_DEVICEID = 107001,
    CONTEXT_NULL = 107002,
    STREAM_CONTEXT = 107003,
    EVENT_TIMESTAMP_INVALID = 107006,
    EVENT_TIMESTAMP_REVERSAL = 107007,
    STREAM_SUBSCRIBE = 107011,
    THREAD_SUBSCRIBE = 107012,
    STREAM_NO_CB_REG = 107015,
    INVALID_MEMORY_TYPE = 107016,
    INVALID_HANDLE = 107017,
    INVALID_MALLOC_TYPE = 107018,
    WAIT_TIMEOUT = 107019,
    TASK_TIMEOUT = 107020,
    STREAM_ABORT = 107023,
    FEATURE_NOT_SUPPORT = 207000,
    MEMORY_ALLOCATION = 207001,
    MEMORY_FREE = 207002,
    NO_EVENT_RESOURCE = 207007,
    NO_STREAM_RESOURCE = 207008,
    REPEATED_INIT = 207015,
    DEVICE_OOM = 207018,
    INTERNAL_ERROR = 507000,
    STREAM_TASK_FULL = 507002,
    EVENT_NOT_COMPLETE = 507006,
    REPORT_TIMEOUT = 507012,
    AICORE_TIMEOUT = 507014,
    AICORE_EXCEPTION = 507015,
    IPC_ERROR = 507022,
    STREAM_SYNC_TIMEOUT = 507046,
    EVENT_SYNC_TIMEOUT = 507047,
    DRV_INTERNAL_ERROR = 507899,
}

impl fmt::Display for AclCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.name)
    }
}

/// Coarse classes of errors; each binding maps these to one exception type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidValue,
    InvalidDevice,
    NoContext,
    WrongContext,
    InvalidHandle,
    Timeout,
    OutOfMemory,
    MemoryFree,
    TaskFailed,
    Aborted,
    NotSupported,
    Internal,
    /// The runtime cannot be used in this process (a forked child, or after shutdown).
    Unavailable,
    /// An event is not in a state the call needs (no timing, not recorded, not complete):
    /// torch raises RuntimeError for these.
    EventState,
    /// Cross-process sharing: memory ([`IpcError`]), interprocess events (a stale handle,
    /// the producing process gone: [`crate::shared::SharedError`]).
    Ipc,
    /// A collective failed ([`crate::collective::CollectiveError`], HCCL codes).
    Collective,
}

/// Device, configuration and context errors.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DeviceError {
    #[error("invalid device id {id}: {count} device(s) are visible (ids 0..{count})")]
    InvalidId { id: i64, count: u32 },
    #[error("device {0} was reset; objects created on it can no longer be used")]
    Reset(u32),
    #[error("context {0} was destroyed")]
    ContextDestroyed(u64),
    #[error("no device or context is set on this thread (call set_device or enter a Device)")]
    NoContext,
    #[error("{what} belongs to device {owner}, but the current device is {current}")]
    WrongDevice {
        what: &'static str,
        owner: u32,
        current: u32,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("the runtime is already initialised; configure() must be called before the first device is used")]
    AlreadyInitialized,
    #[error("cannot {0} from a runtime thread (a kernel, copy or host callback); it would deadlock")]
    RuntimeThread(&'static str),
    #[error("device {device}: failed to start worker threads: {reason}")]
    Spawn { device: u32, reason: String },
    #[error("synchronize on device {device} timed out after {secs:.3}s")]
    SyncTimeout { device: u32, secs: f64 },
    #[error("cannot use npurt in a forked child process: the runtime's threads do not survive fork(); start worker processes with the 'spawn' method (multiprocessing.get_context('spawn'))")]
    Forked,
    #[error("npurt was shut down at interpreter exit (its devices were torn down); it can no longer be used in this process")]
    ShutDown,
}

impl DeviceError {
    pub fn code(&self) -> AclCode {
        match self {
            Self::InvalidId { .. } => AclCode::INVALID_DEVICEID,
            Self::Reset(_) | Self::ContextDestroyed(_) => AclCode::INVALID_HANDLE,
            Self::NoContext => AclCode::CONTEXT_NULL,
            Self::WrongDevice { .. } => AclCode::STREAM_CONTEXT,
            Self::Config(_) | Self::RuntimeThread(_) => AclCode::PARAM_INVALID,
            Self::AlreadyInitialized => AclCode::REPEATED_INIT,
            Self::Spawn { .. } => AclCode::INTERNAL_ERROR,
            Self::SyncTimeout { .. } => AclCode::STREAM_SYNC_TIMEOUT,
            Self::Forked | Self::ShutDown => AclCode::INTERNAL_ERROR,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidId { .. } => ErrorKind::InvalidDevice,
            Self::Reset(_) | Self::ContextDestroyed(_) => ErrorKind::InvalidHandle,
            Self::NoContext => ErrorKind::NoContext,
            Self::WrongDevice { .. } => ErrorKind::WrongContext,
            Self::Config(_) | Self::RuntimeThread(_) => ErrorKind::InvalidValue,
            Self::AlreadyInitialized => ErrorKind::InvalidValue,
            Self::Spawn { .. } => ErrorKind::Internal,
            Self::SyncTimeout { .. } => ErrorKind::Timeout,
            Self::Forked | Self::ShutDown => ErrorKind::Unavailable,
        }
    }

    /// The error for using a device that is no longer running: [`Forked`](Self::Forked) in
    /// a forked child (whose devices all look reset), else [`Reset`](Self::Reset).
    #[cold]
    pub fn gone(device: u32) -> Self {
        if crate::lifecycle::forked() {
            Self::Forked
        } else {
            Self::Reset(device)
        }
    }
}

/// Stream errors, including the sticky error a failed task leaves on its stream.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StreamError {
    #[error("stream priority {0} is out of range: ACL priorities are 0 (highest) to 7 (lowest)")]
    Priority(i64),
    #[error("stream {0} was destroyed")]
    Destroyed(u64),
    #[error("stream {0} was force-destroyed; its queued work was dropped")]
    Aborted(u64),
    #[error("synchronize on stream {stream} timed out after {secs:.3}s")]
    SyncTimeout { stream: u64, secs: f64 },
    #[error("stream {stream}: {source}{launched_at}")]
    TaskFailed {
        stream: u64,
        source: TaskError,
        /// Where the failing task was launched, when call sites were captured.
        launched_at: LaunchSite,
    },
    #[error("a stream cannot wait on itself")]
    SelfWait,
}

impl StreamError {
    pub fn code(&self) -> AclCode {
        match self {
            Self::Priority(_) | Self::SelfWait => AclCode::PARAM_INVALID,
            Self::Destroyed(_) => AclCode::INVALID_HANDLE,
            Self::Aborted(_) => AclCode::STREAM_ABORT,
            Self::SyncTimeout { .. } => AclCode::STREAM_SYNC_TIMEOUT,
            Self::TaskFailed { source, .. } => source.code(),
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Priority(_) | Self::SelfWait => ErrorKind::InvalidValue,
            Self::Destroyed(_) => ErrorKind::InvalidHandle,
            Self::Aborted(_) => ErrorKind::Aborted,
            Self::SyncTimeout { .. } => ErrorKind::Timeout,
            Self::TaskFailed { .. } => ErrorKind::TaskFailed,
        }
    }
}

/// The call site of a failed task's launch (`file:line`), when it was captured; displays
/// as ` (launched at file:line)` or nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchSite(pub Option<std::sync::Arc<str>>);

impl std::fmt::Display for LaunchSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(s) => write!(f, " (launched at {s})"),
            None => Ok(()),
        }
    }
}

/// Why a task failed on a worker, a copy engine or the callback thread.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TaskError {
    #[error("kernel '{kernel}' failed in block {block}/{blocks}: {message}")]
    Kernel {
        kernel: String,
        block: u32,
        blocks: u32,
        message: String,
    },
    #[error("kernel '{kernel}' panicked in block {block}: {message}")]
    Panic {
        kernel: String,
        block: u32,
        message: String,
    },
    #[error("host callback failed: {0}")]
    HostCallback(String),
    #[error("copy failed: {0}")]
    Copy(String),
    #[error("wait on an event timed out after {secs:.3}s")]
    WaitTimeout { secs: f64 },
    #[error("wait on an interprocess event failed: {0}")]
    Ipc(crate::shared::SharedError),
    #[error(transparent)]
    Collective(crate::collective::CollectiveError),
}

impl TaskError {
    pub fn code(&self) -> AclCode {
        match self {
            Self::Kernel { .. } | Self::Panic { .. } => AclCode::AICORE_EXCEPTION,
            Self::HostCallback(_) => AclCode::INTERNAL_ERROR,
            Self::Copy(_) => AclCode::DRV_INTERNAL_ERROR,
            Self::WaitTimeout { .. } => AclCode::WAIT_TIMEOUT,
            Self::Ipc(e) => e.code(),
            Self::Collective(_) => AclCode::INTERNAL_ERROR,
        }
    }
}

/// Event errors.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EventError {
    #[error("elapsed_time needs events created with timing enabled")]
    TimingDisabled,
    #[error("elapsed_time needs both events recorded")]
    NotRecorded,
    #[error("elapsed_time needs both events completed; call synchronize() first")]
    NotComplete,
    #[error("synchronize on event timed out after {secs:.3}s")]
    SyncTimeout { secs: f64 },
}

impl EventError {
    pub fn code(&self) -> AclCode {
        match self {
            Self::TimingDisabled | Self::NotRecorded => AclCode::EVENT_TIMESTAMP_INVALID,
            Self::NotComplete => AclCode::EVENT_NOT_COMPLETE,
            Self::SyncTimeout { .. } => AclCode::EVENT_SYNC_TIMEOUT,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::SyncTimeout { .. } => ErrorKind::Timeout,
            Self::TimingDisabled | Self::NotRecorded | Self::NotComplete => ErrorKind::EventState,
        }
    }
}

/// Memory errors come from `npurt-mem`.
pub use npurt_mem::MemError;

pub use crate::ipc_error::IpcError;

/// Misuse of a buffer handle, a memory pool, or a copy's sizes (the checks `npurt-core`
/// does before any byte is touched).
#[derive(Debug, Clone, thiserror::Error)]
pub enum BufferError {
    #[error("{what} at {addr:#x} was freed; it can no longer be used")]
    Freed { what: &'static str, addr: usize },
    #[error("memory pool {id} was destroyed; it can no longer allocate")]
    PoolDestroyed { id: u64 },
    #[error("{op}: {nbytes} bytes at offset {offset} exceed the {side} ({capacity} bytes)")]
    OutOfRange {
        op: &'static str,
        side: &'static str,
        nbytes: usize,
        offset: usize,
        capacity: usize,
    },
    #[error("{op}: the byte count must be > 0")]
    ZeroSize { op: &'static str },
}

impl BufferError {
    pub fn code(&self) -> AclCode {
        match self {
            Self::Freed { .. } | Self::PoolDestroyed { .. } => AclCode::INVALID_HANDLE,
            Self::OutOfRange { .. } | Self::ZeroSize { .. } => AclCode::PARAM_INVALID,
        }
    }
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Freed { .. } | Self::PoolDestroyed { .. } => ErrorKind::InvalidHandle,
            Self::OutOfRange { .. } | Self::ZeroSize { .. } => ErrorKind::InvalidValue,
        }
    }
}

/// Every error the runtime returns.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Stream(#[from] StreamError),
    #[error(transparent)]
    Event(#[from] EventError),
    #[error(transparent)]
    Mem(#[from] std::sync::Arc<MemError>),
    #[error(transparent)]
    Buffer(#[from] BufferError),
    #[error(transparent)]
    Ipc(#[from] IpcError),
    #[error(transparent)]
    Shared(#[from] crate::shared::SharedError),
    #[error(transparent)]
    Collective(#[from] crate::collective::CollectiveError),
    #[error(transparent)]
    Sanitizer(#[from] crate::sanitizer::SanitizerError),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl From<MemError> for Error {
    fn from(e: MemError) -> Self {
        Error::Mem(std::sync::Arc::new(e))
    }
}

impl Error {
    /// The ACL error code and name.
    pub fn acl(&self) -> AclCode {
        match self {
            Error::Device(e) => e.code(),
            Error::Stream(e) => e.code(),
            Error::Event(e) => e.code(),
            Error::Mem(e) => AclCode {
                code: e.code(),
                name: e.name(),
            },
            Error::Buffer(e) => e.code(),
            Error::Ipc(e) => e.code(),
            Error::Shared(e) => e.code(),
            Error::Collective(_) => AclCode::INTERNAL_ERROR,
            Error::Sanitizer(e) => e.code(),
            Error::InvalidArgument(_) => AclCode::PARAM_INVALID,
        }
    }

    /// The class of error, for bindings.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Device(e) => e.kind(),
            Error::Stream(e) => e.kind(),
            Error::Event(e) => e.kind(),
            Error::Mem(e) => match e.code() {
                207001 => ErrorKind::OutOfMemory,
                207002 => ErrorKind::MemoryFree,
                107000 => ErrorKind::InvalidValue,
                _ => ErrorKind::Internal,
            },
            Error::Buffer(e) => e.kind(),
            Error::Ipc(_) => ErrorKind::Ipc,
            Error::Shared(e) => e.kind(),
            Error::Collective(_) => ErrorKind::Collective,
            Error::Sanitizer(_) | Error::InvalidArgument(_) => ErrorKind::InvalidValue,
        }
    }

    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_acl() {
        let e: Error = StreamError::Priority(9).into();
        assert_eq!(e.acl().code, 107000);
        assert_eq!(e.acl().name, "ACL_ERROR_RT_PARAM_INVALID");
        assert_eq!(e.kind(), ErrorKind::InvalidValue);
        let e: Error = DeviceError::InvalidId { id: 5, count: 2 }.into();
        assert_eq!(e.acl().code, 107001);
        assert!(e.to_string().contains("invalid device id 5"));
        let e: Error = StreamError::SyncTimeout { stream: 1, secs: 0.5 }.into();
        assert_eq!((e.acl().code, e.kind()), (507046, ErrorKind::Timeout));
        let e: Error = EventError::SyncTimeout { secs: 0.1 }.into();
        assert_eq!(e.acl().name, "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT");
        let t = TaskError::Kernel {
            kernel: "k".into(),
            block: 1,
            blocks: 2,
            message: "boom".into(),
        };
        let e: Error = StreamError::TaskFailed {
            stream: 3,
            source: t,
            launched_at: LaunchSite(Some("x.py:3".into())),
        }
        .into();
        assert!(e.to_string().ends_with("(launched at x.py:3)"), "{e}");
        assert_eq!((e.acl().code, e.kind()), (507015, ErrorKind::TaskFailed));
    }
}
