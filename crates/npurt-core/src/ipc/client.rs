//! The importer's side: connect to the exporter's socket (named by the key), send the
//! secret, receive the memfd and map the pages that hold the exported range. The
//! connection is kept as the import's lease and closed (after the unmap) when the imported
//! buffer's last handle goes; the exporter then lets its memory go.

use super::key::Key;
use super::proto;
use super::sys;
use crate::error::{IpcError, Result};
use crate::memory::{DeviceBuffer, DeviceMemory};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// An open import: the connection to the exporter (its end tells the exporter) and a
/// pidfd of the exporter (for [`Lease::exporter_alive`]).
pub(crate) struct Lease {
    _conn: OwnedFd,
    exporter: u32,
    pidfd: Option<OwnedFd>,
}

impl Lease {
    /// False once the exporter's process exited (the memory stays mapped here).
    pub(crate) fn exporter_alive(&self) -> bool {
        match &self.pidfd {
            Some(p) => {
                let mut fds = [libc::pollfd {
                    fd: p.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                }];
                sys::poll(&mut fds, 0).map_or(true, |_| fds[0].revents & libc::POLLIN == 0)
            }
            None => sys::pid_alive(self.exporter),
        }
    }
}

fn exited(pid: u32) -> IpcError {
    IpcError::Stale {
        pid,
        reason: "exited (or never ran npurt's IPC server: a forged key)",
    }
}

/// Imports `key` onto `mem`'s device; every wait is bounded by `timeout`.
pub(crate) fn import(key: &str, mem: &Arc<DeviceMemory>, timeout: Duration) -> Result<DeviceBuffer> {
    let k = Key::parse(key)?;
    mem.check_alive()?;
    if !sys::pid_alive(k.pid) {
        return Err(exited(k.pid).into());
    }
    // The pidfd first: once connected, a later exit of this pid is the exporter's.
    let pidfd = sys::pidfd_open(k.pid);
    let name = Key::socket_name(k.pid, k.nonce, sys::getuid());
    let Some(conn) = sys::connect(&name, timeout)? else {
        return Err(if sys::pid_alive(k.pid) {
            IpcError::UnknownKey { pid: k.pid }
        } else {
            exited(k.pid)
        }
        .into());
    };
    sys::send(&conn, &proto::request(proto::OP_IMPORT, &k.secret), None)?;
    let mut buf = [0u8; proto::REPLY_MAX];
    let (n, fd) = match sys::recv(&conn, &mut buf) {
        Ok(r) => r,
        Err(IpcError::Os { errno, .. }) if errno == libc::EAGAIN || errno == libc::EWOULDBLOCK => {
            return Err(IpcError::Timeout {
                pid: k.pid,
                secs: timeout.as_secs_f64(),
            }
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    if n == 0 {
        return Err(exited(k.pid).into());
    }
    let g = proto::parse_reply(&buf[..n], k.pid)?;
    let Some(fd) = fd else {
        return Err(IpcError::Protocol {
            pid: k.pid,
            reason: "the reply carried no memory descriptor".into(),
        }
        .into());
    };
    let bad = |what: &str| IpcError::Protocol {
        pid: k.pid,
        reason: format!("the reply's {what} is out of range"),
    };
    let (off, len) = (g.map_offset as usize, g.map_len as usize);
    let (data, nbytes) = (g.data_offset as usize, g.nbytes as usize);
    if nbytes == 0 || data.checked_add(nbytes).is_none_or(|end| end > len) {
        return Err(bad("range").into());
    }
    // Checks the seals and the size, then maps; the descriptor closes after the map.
    let seg = npurt_mem::Segment::map_fd(fd.as_fd(), off, len)?;
    drop(fd);
    let lease = Lease {
        _conn: conn,
        exporter: k.pid,
        pidfd,
    };
    Ok(crate::memory::imported(mem, seg, data, nbytes, Box::new(lease)))
}
