//! The exporter's server: one thread per exporting process (started by the first export)
//! polling an abstract-namespace Unix socket, the connections of importers and a pidfd of
//! each importer. A request is checked against the registry with the peer's pid and uid
//! from `SO_PEERCRED` (never from the message); a granted import gets the memfd by
//! `SCM_RIGHTS` and its connection stays open as the lease. The lease ends when the
//! importer closes the connection, or its process dies (the kernel closes the socket; the
//! pidfd also fires, which covers a forked child that inherited the socket). Every poll
//! waits at most [`TICK_MS`]; each tick also sweeps the registry (keys whose memory the
//! exporter freed or dropped while nobody imported them).

use super::key::Key;
use super::proto;
use super::registry;
use super::sys;
use crate::error::IpcError;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Longest poll wait (and sweep period).
const TICK_MS: i32 = 100;
/// A connection that has not sent its request by then is dropped.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// Where this process's server listens.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Endpoint {
    pub pid: u32,
    pub nonce: u64,
}

static SERVER: OnceLock<Result<Endpoint, IpcError>> = OnceLock::new();

/// The running server's endpoint, starting it at the first call.
pub(crate) fn endpoint() -> Result<Endpoint, IpcError> {
    SERVER.get_or_init(start).clone()
}

fn start() -> Result<Endpoint, IpcError> {
    let pid = sys::getpid();
    let mut n = [0u8; 8];
    sys::random(&mut n)?;
    let nonce = u64::from_le_bytes(n);
    let listener = sys::listen(&Key::socket_name(pid, nonce, sys::getuid()))?;
    std::thread::Builder::new()
        .name("npurt-ipc".into())
        .spawn(move || serve(listener))
        .map_err(|e| IpcError::Os {
            op: "spawn the IPC server thread",
            errno: e.raw_os_error().unwrap_or(0),
        })?;
    Ok(Endpoint { pid, nonce })
}

enum State {
    AwaitRequest(Instant),
    Lease { secret: [u8; 16], pidfd: Option<OwnedFd> },
}

struct Conn {
    fd: OwnedFd,
    pid: u32,
    uid: u32,
    state: State,
}

fn serve(listener: OwnedFd) {
    let mut conns: Vec<Conn> = Vec::new();
    loop {
        let mut fds = vec![libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        for c in &conns {
            fds.push(libc::pollfd {
                fd: c.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
            let pidfd = match &c.state {
                State::Lease { pidfd: Some(p), .. } => p.as_raw_fd(),
                _ => -1, // poll ignores negative descriptors
            };
            fds.push(libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if sys::poll(&mut fds, TICK_MS).is_err() {
            std::thread::sleep(Duration::from_millis(TICK_MS as u64));
        }
        let mut keep = Vec::with_capacity(conns.len());
        for (i, mut c) in conns.drain(..).enumerate() {
            let (conn_ev, pid_ev) = (fds[1 + 2 * i].revents, fds[2 + 2 * i].revents);
            if step(&mut c, conn_ev, pid_ev) {
                keep.push(c);
            } else if let State::Lease { secret, .. } = &c.state {
                registry::with(|r| r.end_lease(secret));
            }
        }
        conns = keep;
        if fds[0].revents & libc::POLLIN != 0 {
            while let Ok(Some(fd)) = sys::accept(&listener) {
                if let Ok((pid, uid)) = sys::peer_cred(&fd) {
                    conns.push(Conn {
                        fd,
                        pid,
                        uid,
                        state: State::AwaitRequest(Instant::now()),
                    });
                }
            }
        }
        registry::with(|r| r.sweep());
    }
}

/// Handles one connection's events; `false` drops it (ending its lease, if any).
fn step(c: &mut Conn, conn_ev: i16, pid_ev: i16) -> bool {
    match &c.state {
        State::AwaitRequest(since) => {
            if conn_ev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) == 0 {
                return since.elapsed() < REQUEST_DEADLINE;
            }
            let mut buf = [0u8; 64];
            let Ok((n, _)) = sys::recv(&c.fd, &mut buf) else {
                return false;
            };
            let Some((op, secret)) = proto::parse_request(&buf[..n]) else {
                let e = IpcError::Protocol {
                    pid: sys::getpid(),
                    reason: "not an npurt IPC request".into(),
                };
                let _ = sys::send(&c.fd, &proto::reply_err(&e), None);
                return false;
            };
            if op != proto::OP_IMPORT {
                return false;
            }
            let key = Key {
                pid: sys::getpid(),
                nonce: 0,
                secret,
            };
            match registry::with(|r| r.grant(&key, c.pid, c.uid)) {
                Ok(g) => {
                    let ok = proto::reply_ok(&proto::Granted {
                        map_offset: g.region.map_offset as u64,
                        map_len: g.region.map_len as u64,
                        data_offset: g.region.data_offset as u64,
                        nbytes: g.nbytes as u64,
                        device: g.device,
                        hugetlb: g.region.page_kind == npurt_mem::PageKind::HugeTlb,
                    });
                    let pidfd = sys::pidfd_open(c.pid);
                    c.state = State::Lease { secret, pidfd };
                    // A failed send ends the lease right away (the importer gets an error).
                    sys::send(&c.fd, &ok, Some(g.region.fd.as_raw_fd())).is_ok()
                }
                Err(e) => {
                    let _ = sys::send(&c.fd, &proto::reply_err(&e), None);
                    false
                }
            }
        }
        State::Lease { .. } => {
            if pid_ev & libc::POLLIN != 0 {
                return false; // the importer's process exited
            }
            if conn_ev & (libc::POLLHUP | libc::POLLERR) != 0 {
                return false;
            }
            if conn_ev & libc::POLLIN != 0 {
                // EOF (the importer closed) or an unexpected message: either ends the lease.
                let mut buf = [0u8; 64];
                return matches!(
                    sys::recv(&c.fd, &mut buf),
                    Err(IpcError::Os {
                        errno: libc::EAGAIN,
                        ..
                    })
                );
            }
            true
        }
    }
}
