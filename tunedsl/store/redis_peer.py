"""Who runs the Redis server at the other end of a connection, checked before anything is sent.

A password proves the client to the server, never the server to the client: another local
user who listens first on the socket path or port that ``TUNEDSL_REDIS_URL`` names would get
the password and choose every launch. So where the server runs on this host (a ``unix://``
socket, or a TCP connection whose server end this host's kernel lists), its user must be you,
root or a system account (a uid below the system's ``UID_MIN``, where services such as
Debian's ``redis-server`` run); any other user's server is refused before the first byte,
password included, goes out. The answer comes from the kernel for the connected socket
itself (``SO_PEERCRED``; ``/proc/net/tcp`` and ``tcp6``), so nothing can be swapped between
the check and its use. A server on another host is the network's to vouch for (``rediss://``
with its certificate checked). Where the kernel cannot say (no ``/proc``: not Linux), a unix
socket's file owner is used and a TCP server is not checked.

Each request's whole reply must also come within a few reply timeouts: a server that sends
a byte at a time, each within the timeout, cannot hold a launch for longer.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

from tunedsl.store.local_peer import describe_user, tcp_peer_uid, trusted_uid


class UntrustedServer(Exception):
    """The server is run by a user who is not you, root or a system account."""


def _unix_peer_uid(sock: socket.socket, path: str) -> int:
    so_peercred = getattr(socket, "SO_PEERCRED", None)
    if so_peercred is not None:
        raw = sock.getsockopt(socket.SOL_SOCKET, so_peercred, struct.calcsize("3i"))
        return int(struct.unpack("3i", raw)[1])
    return os.stat(path).st_uid


def check_server(sock: socket.socket, unix_path: str | None = None) -> None:
    """Raise ``UntrustedServer`` where the server ``sock`` is connected to runs on this host
    under a user who is not you, root or a system account."""
    if unix_path is not None:
        uid: int | None = _unix_peer_uid(sock, unix_path)
    elif sock.family in (socket.AF_INET, socket.AF_INET6):
        uid = tcp_peer_uid(sock)
    else:
        uid = None
    if uid is None or trusted_uid(uid):
        return
    raise UntrustedServer(
        f"its server is run by {describe_user(uid)}, not by you, root or a system account: another "
        "user's server could choose your launches and would receive the password, so nothing "
        "was sent to it; run the server as yourself or as a service, or reach a shared one "
        "over rediss:// with its certificate checked"
    )


#: A request's whole reply must come within this many reply timeouts.
REPLY_TIMEOUTS_PER_REQUEST = 4


class _Deadline:
    """A connected socket whose reads give up once the request sent last has waited
    ``limit_s`` for its reply, however the reply trickles in (a poll without waiting is
    answered as the socket answers it)."""

    def __init__(self, sock: socket.socket, limit_s: float) -> None:
        self._sock = sock
        self._limit_s = limit_s
        self._timeout: float | None = sock.gettimeout()
        self._deadline: float | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout
        self._sock.settimeout(timeout)

    def gettimeout(self) -> float | None:
        return self._timeout

    def sendall(self, data: Any, *flags: int) -> None:
        self._deadline = time.monotonic() + self._limit_s
        self._sock.sendall(data, *flags)

    def _bounded(self) -> None:
        if self._deadline is None or self._timeout == 0:
            return
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the reply took too long")
        self._sock.settimeout(left if self._timeout is None else min(self._timeout, left))

    def recv(self, size: int, *flags: int) -> bytes:
        self._bounded()
        return self._sock.recv(size, *flags)

    def recv_into(self, buffer: Any, *args: int) -> int:
        self._bounded()
        return self._sock.recv_into(buffer, *args)


def connection_class(url: str) -> Any:
    """The redis-py connection class for ``url``: ``check_server`` on each new connection
    before redis-py sends anything (``rediss://``: left to its certificate check), and
    replies within their deadline."""
    from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection

    if url.startswith("rediss://"):  # the certificate vouches for the server

        class DeadlineSSLConnection(SSLConnection):
            def _connect(self) -> Any:
                return _deadline(super()._connect(), self.socket_timeout)

        return DeadlineSSLConnection

    class CheckedConnection(Connection):
        def _connect(self) -> Any:
            return _checked(super()._connect(), None, self.socket_timeout)

    class CheckedUnixConnection(UnixDomainSocketConnection):
        def _connect(self) -> Any:
            return _checked(super()._connect(), self.path, self.socket_timeout)

    return CheckedUnixConnection if url.startswith("unix://") else CheckedConnection


def _checked(sock: socket.socket, path: str | None, timeout: Any) -> _Deadline:
    try:
        check_server(sock, path)
    except BaseException:
        sock.close()
        raise
    return _deadline(sock, timeout)


def _deadline(sock: Any, timeout: Any) -> _Deadline:
    per_reply = timeout if isinstance(timeout, (int, float)) and timeout > 0 else 0.5
    return _Deadline(sock, per_reply * REPLY_TIMEOUTS_PER_REQUEST)
