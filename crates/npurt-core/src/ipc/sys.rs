//! The system calls of cross-process sharing, each wrapped once: random bytes, an
//! abstract-namespace `SOCK_SEQPACKET` Unix socket (no file anywhere), the peer's
//! credentials from the kernel (`SO_PEERCRED`), descriptor passing (`SCM_RIGHTS`),
//! `pidfd_open` and `poll`.

use crate::error::IpcError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

type Res<T> = std::result::Result<T, IpcError>;

/// Fills `buf` from the kernel's CSPRNG (`getrandom`, blocking until it is seeded).
pub(crate) fn random(buf: &mut [u8]) -> Res<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a valid writable buffer of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(IpcError::last_os("getrandom"));
        }
        done += n as usize;
    }
    Ok(())
}

pub(crate) fn getpid() -> u32 {
    std::process::id()
}

pub(crate) fn getuid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// True if process `pid` exists (`kill(pid, 0)`; EPERM means it exists).
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(p, 0) == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) }
}

fn sockaddr(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // Abstract namespace: sun_path[0] = 0, then the name (not NUL-terminated).
    let bytes = name.as_bytes();
    let n = bytes.len().min(sa.sun_path.len() - 1);
    for (d, s) in sa.sun_path[1..=n].iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + n;
    (sa, len as libc::socklen_t)
}

fn seqpacket(nonblock: bool) -> Res<OwnedFd> {
    let ty = libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | if nonblock { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket() returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_UNIX, ty, 0) };
    if fd < 0 {
        return Err(IpcError::last_os("socket"));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A listening socket bound to the abstract name `name` (non-blocking).
pub(crate) fn listen(name: &str) -> Res<OwnedFd> {
    let fd = seqpacket(true)?;
    let (sa, len) = sockaddr(name);
    // SAFETY: `sa` is a valid sockaddr_un of `len` bytes.
    if unsafe { libc::bind(fd.as_raw_fd(), (&sa as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(IpcError::last_os("bind"));
    }
    // SAFETY: listen on our own bound socket.
    if unsafe { libc::listen(fd.as_raw_fd(), 128) } != 0 {
        return Err(IpcError::last_os("listen"));
    }
    Ok(fd)
}

/// Accepts one pending connection (`None` when there is none).
pub(crate) fn accept(listener: &OwnedFd) -> Res<Option<OwnedFd>> {
    // SAFETY: accept4 with null address pointers returns a new descriptor or -1.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if fd < 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ECONNABORTED) => Ok(None),
            _ => Err(IpcError::last_os("accept")),
        };
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Connects to the abstract name `name` (blocking I/O with `timeout` per operation).
/// `Ok(None)`: nobody listens there.
pub(crate) fn connect(name: &str, timeout: Duration) -> Res<Option<OwnedFd>> {
    let fd = seqpacket(false)?;
    let tv = libc::timeval {
        tv_sec: timeout.as_secs().min(1 << 30) as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: `tv` is a valid timeval of the size given.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(IpcError::last_os("setsockopt"));
        }
    }
    let (sa, len) = sockaddr(name);
    // SAFETY: `sa` is a valid sockaddr_un of `len` bytes.
    if unsafe { libc::connect(fd.as_raw_fd(), (&sa as *const libc::sockaddr_un).cast(), len) } != 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ECONNREFUSED) | Some(libc::ENOENT) => Ok(None),
            _ => Err(IpcError::last_os("connect")),
        };
    }
    Ok(Some(fd))
}

/// The peer's (pid, uid), as the kernel recorded them when it connected.
pub(crate) fn peer_cred(fd: &OwnedFd) -> Res<(u32, u32)> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred`/`len` are valid out-parameters of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(IpcError::last_os("getsockopt(SO_PEERCRED)"));
    }
    Ok((cred.pid as u32, cred.uid))
}

/// Sends one message, with `pass` as an `SCM_RIGHTS` descriptor if given.
pub(crate) fn send(fd: &OwnedFd, data: &[u8], pass: Option<RawFd>) -> Res<()> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // u64 array: aligned room for one cmsg carrying one int.
    let mut cbuf = [0u64; 4];
    // SAFETY: msghdr is plain data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(p) = pass {
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: msg_control points to `space` ≤ 32 writable, aligned bytes, so the first
        // header and its data (one int) lie inside the buffer.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), p);
        }
    }
    // SAFETY: `msg` describes valid buffers that outlive the call.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(IpcError::last_os("sendmsg"));
    }
    Ok(())
}

/// Receives one message into `buf`: (bytes, descriptor passed with it). 0 bytes = the
/// peer closed the connection.
pub(crate) fn recv(fd: &OwnedFd, buf: &mut [u8]) -> Res<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: `msg` describes valid writable buffers that outlive the call.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(IpcError::last_os("recvmsg"));
    }
    let mut passed = None;
    // SAFETY: walking the control headers the kernel filled in, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let raw = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
                // The kernel installed a new descriptor for us: we own it (extra ones,
                // which a well-behaved peer never sends, would leak; take the first).
                if passed.is_none() {
                    passed = Some(OwnedFd::from_raw_fd(raw));
                } else {
                    libc::close(raw);
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, passed))
}

/// A pidfd of `pid` (readable once the process exited); `None` if unavailable.
pub(crate) fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open(pid, 0) returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `poll` over `fds` for up to `timeout_ms`; returns how many are ready (EINTR: 0).
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> Res<usize> {
    // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(IpcError::last_os("poll"));
    }
    Ok(n as usize)
}
