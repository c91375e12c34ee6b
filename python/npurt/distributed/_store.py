"""Bootstrap stores (torch's ``TCPStore`` / ``FileStore`` shape, minimal): a key-value
table the ranks of a new group use once, to exchange pids and the communicator key.
``get`` waits for the key until the store's timeout (then CollectiveTimeoutError)."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from typing import Dict, Optional, Tuple
from urllib.parse import urlparse

from ._backend import collective_error

__all__ = ["TCPStore", "FileStore", "store_from_url"]


def _timeout_error(what: str, secs: float, rank: int) -> BaseException:
    return collective_error("timeout", f"init_process_group waiting for {what}", 0, [], f"{secs}", rank)


def _send(sock: socket.socket, *parts: bytes) -> None:
    sock.sendall(b"".join(struct.pack("!I", len(p)) + p for p in parts))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("store connection closed")
        out += chunk
    return out


def _recv(sock: socket.socket) -> bytes:
    (n,) = struct.unpack("!I", _recv_exact(sock, 4))
    return _recv_exact(sock, n)


class TCPStore:
    """Rank 0 (``is_master``) serves the table on ``host:port``; every rank is a client."""

    def __init__(self, host: str, port: int, is_master: bool, timeout: float, rank: int = 0) -> None:
        self.timeout, self.rank = timeout, rank
        self._data: Dict[str, bytes] = {}
        self._cv = threading.Condition()
        self._server: Optional[socket.socket] = None
        if is_master:
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind((host, port))
            port = srv.getsockname()[1]  # port 0: the one the kernel picked
            srv.listen(64)
            self._server = srv
            threading.Thread(target=self._serve, name="npurt-store", daemon=True).start()
        self._addr: Tuple[str, int] = (host, port)
        self._sock = self._connect()
        self._lock = threading.Lock()

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                s = socket.create_connection(self._addr, timeout=max(0.1, deadline - time.monotonic()))
                s.settimeout(None)
                return s
            except OSError:
                if time.monotonic() >= deadline:
                    raise _timeout_error(f"the store at {self._addr[0]}:{self._addr[1]}", self.timeout, self.rank) from None
                time.sleep(0.05)

    def _serve(self) -> None:
        assert self._server is not None
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        try:
            while True:
                op = _recv(conn)
                key = _recv(conn).decode()
                if op == b"S":
                    val = _recv(conn)
                    with self._cv:
                        self._data[key] = val
                        self._cv.notify_all()
                    _send(conn, b"ok")
                else:
                    with self._cv:
                        self._cv.wait_for(lambda k=key: k in self._data)
                        val = self._data[key]
                    _send(conn, val)
        except (OSError, ConnectionError, struct.error):
            conn.close()

    def set(self, key: str, value: str) -> None:
        with self._lock:
            _send(self._sock, b"S", key.encode(), value.encode())
            _recv(self._sock)

    def get(self, key: str) -> str:
        with self._lock:
            self._sock.settimeout(self.timeout)
            try:
                _send(self._sock, b"G", key.encode())
                return _recv(self._sock).decode()
            except socket.timeout:
                self._sock.close()
                self._sock = self._connect()
                raise _timeout_error(repr(key), self.timeout, self.rank) from None
            finally:
                self._sock.settimeout(None)

    def close(self) -> None:
        self._sock.close()
        if self._server is not None:
            self._server.close()


class FileStore:
    """A directory: one file per key, written atomically (rename)."""

    def __init__(self, path: str, timeout: float, rank: int = 0) -> None:
        self.path, self.timeout, self.rank = path, timeout, rank
        os.makedirs(path, mode=0o700, exist_ok=True)

    def _file(self, key: str) -> str:
        return os.path.join(self.path, key.replace("/", "__"))

    def set(self, key: str, value: str) -> None:
        tmp = f"{self._file(key)}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(value)
        os.replace(tmp, self._file(key))

    def get(self, key: str) -> str:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                with open(self._file(key)) as f:
                    return f.read()
            except FileNotFoundError:
                if time.monotonic() >= deadline:
                    raise _timeout_error(repr(key), self.timeout, self.rank) from None
                time.sleep(0.01)

    def close(self) -> None:
        pass


def store_from_url(url: str, rank: int, timeout: float):
    """``env://`` (MASTER_ADDR / MASTER_PORT), ``tcp://host:port`` or ``file:///dir``."""
    if url.startswith("env://"):
        host = os.environ.get("MASTER_ADDR", "127.0.0.1")
        port = int(os.environ.get("MASTER_PORT", "29500"))
        return TCPStore(host, port, rank == 0, timeout, rank)
    u = urlparse(url)
    if u.scheme == "tcp":
        return TCPStore(u.hostname or "127.0.0.1", int(u.port or 29500), rank == 0, timeout, rank)
    if u.scheme == "file":
        return FileStore(u.path, timeout, rank)
    raise ValueError(f"init_method {url!r}: use env://, tcp://host:port or file:///path")
