"""Who runs the server at the other end of a TCP connection, where it runs on this host.

A server another local user runs on a port you connect to can answer as it likes (a Redis
server chooses your launches, a Ray cluster runs code in your process through the objects it
returns), so a client of such a server asks the kernel who runs it before sending anything:
the server end of the connected socket is a row of this host's ``/proc/net/tcp`` or ``tcp6``
with its owner's uid. Trusted: you, root, or a system account (a uid below the system's
``UID_MIN``, where services such as Debian's ``redis-server`` run). A server on another host
is not in the table (``tcp_peer_uid`` says None), nor is anything where there is no ``/proc``
(not Linux). Used by ``store/redis_peer.py`` and ``precompile/ray_peer.py``.

Also whether a group is yours alone (``private_group``): a directory writable by such a
group is as closed to other users as one writable by you alone (``store/paths.py``).
"""

from __future__ import annotations

import os
import pwd
import socket
import sys
from collections.abc import Iterator

_DEFAULT_UID_MIN = 1000  # login.defs' default: accounts below it are the system's


def _uid_min() -> int:
    try:
        with open("/etc/login.defs", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "UID_MIN" and parts[1].isdigit():
                    return int(parts[1])
    except OSError:
        pass
    return _DEFAULT_UID_MIN


def trusted_uid(uid: int) -> bool:
    """You, root, or a system account."""
    return uid in (os.geteuid(), 0) or uid < _uid_min()


def describe_user(uid: int) -> str:
    """``name (uid N)``, or ``uid N`` where the account has no name."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def private_group(gid: int) -> bool:
    """Whether the group ``gid`` is this user's alone, as the user-private group that
    ``useradd``/``adduser`` make for each user (under ``umask 002`` its directories are
    ``775``): this user is in it (as primary group, or listed), no other user is listed in
    it, and no other user has it as primary group. False where the user or the group is
    unknown, or where Python has no ``pwd`` and ``grp`` (Windows)."""
    try:
        import grp

        me = pwd.getpwuid(os.getuid())
        group = grp.getgrgid(gid)
        others = [u.pw_name for u in pwd.getpwall() if u.pw_gid == gid and u.pw_uid != me.pw_uid]
    except (ImportError, KeyError, OSError):
        return False
    listed = set(group.gr_mem)
    return (me.pw_gid == gid or me.pw_name in listed) and listed <= {me.pw_name} and not others


def _address(hex_text: str) -> bytes:
    """An address as ``/proc/net/tcp`` prints it (32-bit words in the host's order)."""
    words = [hex_text[i : i + 8] for i in range(0, len(hex_text), 8)]
    raw = b"".join(int(w, 16).to_bytes(4, sys.byteorder) for w in words)
    if len(raw) == 16 and raw[:12] == b"\0" * 10 + b"\xff\xff":  # IPv4 mapped into IPv6
        return raw[12:]
    return raw


def _endpoint(family: int, name: tuple) -> tuple[bytes, int]:  # type: ignore[type-arg]
    raw = socket.inet_pton(family, name[0])
    if len(raw) == 16 and raw[:12] == b"\0" * 10 + b"\xff\xff":
        raw = raw[12:]
    return raw, int(name[1])


def _tcp_rows() -> Iterator[tuple[tuple[bytes, int], tuple[bytes, int], int]]:
    """This host's TCP sockets: (local end, remote end, uid)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            try:
                (local_ip, local_port), (remote_ip, remote_port) = (
                    field.split(":") for field in fields[1:3]
                )
                yield (
                    (_address(local_ip), int(local_port, 16)),
                    (_address(remote_ip), int(remote_port, 16)),
                    int(fields[7]),
                )
            except (ValueError, IndexError):
                continue


def tcp_peer_uid(sock: socket.socket) -> int | None:
    """The uid of the socket at the other end of the connected ``sock`` where it is on this
    host; None where it is not (another host), or the kernel cannot say."""
    ours = _endpoint(sock.family, sock.getsockname())
    theirs = _endpoint(sock.family, sock.getpeername())
    for local, remote, uid in _tcp_rows():
        if local == theirs and remote == ours:
            return uid
    return None
