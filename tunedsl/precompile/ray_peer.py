"""Who runs the Ray cluster a sweep joins, checked before ``ray.init`` sends it anything.

A joined cluster's actors run the sweep's tasks, and this process loads their answers with
``pickle``: whoever runs the cluster runs code as you and chooses your records. Another
local user can start one (``ray start --head``) on any port, and Ray's ``auto`` names the
cluster in ``ray_current_cluster`` of Ray's shared directory (``/tmp/ray``, open to every
user), whoever wrote it. So before a sweep joins a cluster:

- ``auto`` is resolved here, only from a ``ray_current_cluster`` that you own and no other
  user can write, in a directory chain another user cannot swap (``store.paths``' rule for
  a destination); Ray's fallback of any ``gcs_server`` process found running is never taken;
- the address (its host as Ray resolves it: ``localhost`` is this host's address) is
  connected to, and where this host's kernel lists the server end of that connection
  (``store.local_peer``), its user must be you, root or a system account. Nothing is sent on
  that connection, and ``ray.init`` is given the address that was checked.

A cluster on another host is not checked: it is the user's choice, and Ray's own token
authentication and TLS are what protect it. Where the kernel cannot say (no ``/proc``), nor
is one on this host.
"""

from __future__ import annotations

import contextlib
import importlib
import ipaddress
import os
import socket
import stat
from pathlib import Path

from tunedsl.errors import UsageError
from tunedsl.store.local_peer import describe_user, tcp_peer_uid, trusted_uid
from tunedsl.store.paths import redirected_destination

#: How long connecting to the cluster's address may take before the sweep gives up.
CONNECT_TIMEOUT_S = 10.0

_FIX = (
    "Start a cluster of your own (`ray start --head` as yourself) and pass its address "
    "(--ray HOST:PORT), or leave --ray and RAY_ADDRESS out to let the sweep start its own "
    "instance"
)


def checked_address(address: str, named: str) -> str:
    """The address to give ``ray.init`` for ``address`` (``named``: how the user gave it,
    for messages), once its cluster is known not to be another local user's; else a
    ``UsageError`` naming the address, who runs it and the fix, nothing sent to it."""
    if address == "auto":
        env = os.environ.get("RAY_ADDRESS", "").strip()
        # Ray's rule: RAY_ADDRESS stands for "auto"
        address = env if env and env != "auto" else _own_current_cluster(named)
    scheme, sep, rest = address.rpartition("://")
    host, port = _host_port(rest, named)
    if not sep:  # a GCS address: Ray joins "localhost" at this host's address
        host = _as_ray_resolves(host)
    ip = _check_server(host, port, named)
    if not sep and _as_ray_resolves(ip) != ip:
        ip = _check_server(_as_ray_resolves(ip), port, named)
    shown = f"[{ip}]" if ":" in ip else ip
    return f"{scheme}{sep}{shown}:{port}"


def _host_port(address: str, named: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    # (ASCII digits only: str.isdigit takes superscripts, which int() refuses)
    port_ok = port.isascii() and port.isdigit() and 0 < int(port) < 65536
    if not host or not port_ok or not _is_text(host):
        raise UsageError(
            f"sweep {named}: cannot join a Ray cluster ({address!r} is not HOST:PORT nor "
            "ray://HOST:PORT); start one (`ray start --head`) and name the address it prints, "
            "or leave --ray out for a local one"
        )
    return host, int(port)


def _is_text(host: str) -> bool:
    """Whether ``host`` is text a resolver can take: not bytes the command line could not
    decode (Python keeps them as lone surrogates, which Ray's own check cannot encode)."""
    try:
        host.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _as_ray_resolves(host: str) -> str:
    """``host`` as ``ray.init`` joins it (``localhost`` and the loopback names become this
    host's address)."""
    with contextlib.suppress(ImportError):
        services = importlib.import_module("ray._private.services")
        resolve = getattr(services, "resolve_ip_for_localhost", None)
        if resolve is not None:
            return str(resolve(host))
    return host


def _check_server(host: str, port: int, named: str) -> str:
    """The IP address ``host`` was reached at on ``port``, once the server there is known
    not to be another local user's (nothing is sent to it)."""
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except UnicodeError as err:  # a name the resolver cannot encode (an empty DNS label)
        raise UsageError(
            f"sweep {named}: cannot join a Ray cluster at {host}:{port} ({host!r} is no "
            f"valid host name: {err.__cause__ or err}); name the host the cluster runs on "
            "(its address as `ray start --head` prints it), or leave --ray out for a local one"
        ) from None
    except (OSError, ValueError) as err:  # (ValueError: a NUL in the name)
        raise UsageError(
            f"sweep {named}: cannot join a Ray cluster at {host}:{port} ({err}); start one "
            "(`ray start --head`) and name its address, or leave --ray out for a local one"
        ) from None
    with sock:
        ip = str(sock.getpeername()[0])
        uid = tcp_peer_uid(sock)
    with contextlib.suppress(ValueError):  # an IPv4 address mapped into IPv6
        mapped = ipaddress.IPv6Address(ip).ipv4_mapped
        ip = str(mapped) if mapped is not None else ip
    if uid is not None and not trusted_uid(uid):
        raise UsageError(
            f"sweep {named}: the Ray cluster at {ip}:{port} is run by {describe_user(uid)}, "
            "not by you, root or a system account: its actors would run your tasks and this "
            "process would load their answers, so that user would run code as you and choose "
            f"your records; nothing was sent to it. {_FIX}"
        )
    return ip


def _ray_dir() -> Path:
    """Ray's shared directory, where ``ray start`` names its cluster (``/tmp/ray``)."""
    with contextlib.suppress(ImportError):
        utils = importlib.import_module("ray._common.utils")
        default = getattr(utils, "get_default_ray_temp_dir", None)
        if default is not None:
            return Path(default())
    base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    return Path(base) / "ray"


def _own_current_cluster(named: str) -> str:
    """The address in Ray's ``ray_current_cluster`` where you wrote it and no other user
    could have; else a ``UsageError``."""
    directory = _ray_dir()
    path = directory / "ray_current_cluster"
    why = redirected_destination(directory)
    if why is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as err:
            why = f"{path} cannot be read ({err.strerror or err})"
        else:
            with open(fd, encoding="utf-8", errors="replace") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    why = f"{path} is not a regular file"
                elif st.st_uid != os.geteuid():
                    why = f"{path} was written by {describe_user(st.st_uid)}, not by you"
                elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                    why = f"{path} is writable by group or others"
                else:
                    found = f.read(4096).strip()
                    if found:
                        return found
                    why = f"{path} is empty"
    raise UsageError(
        f"sweep {named}: Ray joins the cluster that {path} names, and {why}; another user "
        f"could have chosen it, so nothing was sent to any cluster. {_FIX}"
    )
