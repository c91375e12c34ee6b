//! [`IpcError`]: why exporting or importing device memory across processes failed. Every
//! variant is ACL's `ACL_ERROR_RT_IPC_ERROR` (507022); the bindings pick a class per
//! variant (`npurt.IpcPermissionError`, `npurt.IpcStaleKeyError`...).

use crate::error::AclCode;

/// Cross-process memory sharing errors (see [`crate::ipc`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum IpcError {
    #[error(
        "device memory at {addr:#x} is not shareable: only memory from the shareable pool can be exported; \
         allocate it with npurt.malloc(n, shareable=True) / npurt.empty(shape, shareable=True) / \
         npurt.MemPool(size, shareable=True), or set NPURT_IPC_SHAREABLE=1 (npurt.set_ipc_shareable(True)) \
         before allocating so that every allocation (acl.rt.malloc included) is shareable"
    )]
    NotShareable { addr: usize },
    #[error("invalid IPC key {key:?}: {reason} (a forged or corrupted key; keys come from ipc_export / ipc_mem_get_export_key)")]
    MalformedKey { key: String, reason: &'static str },
    #[error(
        "unknown IPC key: exporter process {pid} never issued it (a forged key), or it was closed or freed long ago"
    )]
    UnknownKey { pid: u32 },
    #[error(
        "process {pid} may not import this key: it is not on the whitelist of exporter process {exporter} \
         (the exporter must list it: ipc_export(pids=[...]) / acl.rt.ipc_mem_set_import_pid, or export an \
         open key with ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION / open=True)"
    )]
    NotPermitted { pid: u32, exporter: u32 },
    #[error("stale IPC key: exporter process {pid} {reason}")]
    Stale { pid: u32, reason: &'static str },
    #[error("IPC key closed: exporter process {pid} closed it (ipc_mem_close); it can no longer be imported")]
    Closed { pid: u32 },
    #[error("this process (pid {pid}) did not export the key, so it cannot {op} it")]
    NotExporter { pid: u32, op: &'static str },
    #[error("invalid pid {pid} for an IPC whitelist: pids are positive process ids")]
    BadPid { pid: i64 },
    #[error("IPC import from exporter process {pid} timed out after {secs:.1}s")]
    Timeout { pid: u32, secs: f64 },
    #[error("IPC protocol error with process {pid}: {reason}")]
    Protocol { pid: u32, reason: String },
    #[error("IPC {op} failed: {}", std::io::Error::from_raw_os_error(*errno))]
    Os { op: &'static str, errno: i32 },
}

impl IpcError {
    /// Always `ACL_ERROR_RT_IPC_ERROR` (507022).
    pub fn code(&self) -> AclCode {
        AclCode::IPC_ERROR
    }

    /// `errno` of the last failed system call, as an [`IpcError::Os`].
    pub(crate) fn last_os(op: &'static str) -> Self {
        IpcError::Os {
            op,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }
}
