"""The Ray instance a sweep runs on (``sweep --ray ADDRESS``, ``RAY_ADDRESS``, or its own).

With an address (``auto`` included), the cluster there is joined only where it is not
another local user's (``ray_peer``: checked before ``ray.init`` sends it anything; ``auto``
only from a ``ray_current_cluster`` of your own). Without one (or with ``local``), a sweep
starts a local instance of its own. It never joins the cluster
that Ray's shared directory names (``/tmp/ray/ray_current_cluster``, written by whoever ran
``ray start`` there last, another user included), as ``ray.init()`` without an address
would: that cluster's actors would run the tasks, and this process would load their pickled
answers. The instance keeps its sockets and session files in a directory inside a
private scratch directory: Ray opens the directory it is given to every user (mode 0777, as
it does its shared one), and the private directory above keeps others out of it. Its
processes end with the sweep, killed or not (``ray_reaper``), and so does the directory.

``ray.init`` takes SIGTERM for itself: a Python handler that exits, then a handler in Ray's C++
core that dumps a stack and aborts (status 134; nothing of the sweep written, its actors left
to the reaper). While the instance lasts, SIGTERM is handled as Ctrl-C instead (``Terminated``:
the actors stop, the finished tasks' records are written, status 143), or by the program's own
handler where it had one; after the sweep, the handler it had is put back. SIGTERM while
``ray.init`` starts the instance (taken by its Python handler, which exits, or whose exit
Python dropped) is ``Terminated`` too, and the reaper ends what Ray had started. In any other
thread Ray sets no handler, and none is put back: a sweep runs there as in the main thread.
``ray.init`` never runs with the working directory on the Ray workers' import path
(``_off_the_import_path``), and what importing and starting Ray set in this process is put
back after the sweep (``process_settings_kept``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tunedsl.environ import environ_set
from tunedsl.errors import Terminated, UsageError
from tunedsl.precompile.ray_peer import checked_address
from tunedsl.precompile.ray_reaper import start_reaper, stop_reaper
from tunedsl.precompile.sigterm import (
    interrupt_as_terminated,
    noting_sigterm,
    take_sigterm,
    takes_as_interrupt,
)
from tunedsl.store.scratch import scratch_dir

#: The scratch directory of a sweep's own Ray instance (``scratch.scratch_dir``).
RAY_SCRATCH_PREFIX = "tunedsl-ray-"


#: The length of Ray's longest socket path below the directory it is given (its plasma
#: store's: ``/session_<date>_<time>_<microseconds>_<pid>/sockets/plasma_store``), and
#: the most a socket's path may be (``AF_UNIX``, Linux).
_RAY_SOCKET_TAIL = len("/session_2026-11-28_01-12-14_683018_4194304/sockets/plasma_store")
_MAX_SOCKET_PATH = 107


def _check_socket_room(directory: Path) -> None:
    """A ``UsageError`` naming ``TMPDIR`` where Ray's sockets below ``directory`` would have
    paths too long for a socket (Ray raised its ``OSError`` from inside ``ray.init``)."""
    room = _MAX_SOCKET_PATH - _RAY_SOCKET_TAIL
    if len(os.fsencode(str(directory))) > room:
        import tempfile

        raise UsageError(
            f"sweep: Ray's local instance keeps its sockets in TMPDIR={tempfile.gettempdir()}, "
            f"and their paths there would pass the {_MAX_SOCKET_PATH} bytes a socket's path "
            f"may have: set TMPDIR to a directory of your own with a shorter path (at most "
            f"{room - len(str(directory)) + len(tempfile.gettempdir())} characters), or "
            "pass --no-ray"
        )


class _DriverPaths(list):  # type: ignore[type-arg]
    """Ray's ``JobConfig._py_driver_sys_path``: the directories ``ray.init`` puts on every Ray
    worker's import path, before the installed packages (the driver script's, and the
    working directory it runs in), less the working directory."""

    def extend(self, paths: Iterable[str]) -> None:
        here = os.path.abspath(os.curdir)
        super().extend(path for path in paths if path != here)


def _off_the_import_path(
    ray: Any, address: str | None, options: dict[str, Any]
) -> contextlib.AbstractContextManager[None]:
    """Within (``ray.init``): the working directory kept off the Ray workers' import path.
    ``ray.init`` puts it there, before the installed packages: run from a shared directory
    (``/tmp``, a project open to a group), a ``tunedsl/`` or ``torch/`` another user planted
    there ran as this user in every actor. The job configuration given ``ray.init`` (in
    ``options``) keeps every other directory but that one; with a Ray whose configuration
    holds them otherwise, or where the working directory was removed, ``/`` is the working
    directory while ``ray.init`` runs (the whole process's). A Ray client (``ray://``) sends
    no directory of this machine."""
    if address is not None and "://" in address:
        return contextlib.nullcontext()
    job_config = getattr(getattr(ray, "job_config", None), "JobConfig", None)
    try:
        os.getcwd()
        config = job_config() if job_config is not None else None
    except OSError:  # removed: Ray's own os.getcwd() would fail
        config = None
    paths = getattr(config, "_py_driver_sys_path", None)
    if type(paths) is not list or paths:
        return _from_root()
    config._py_driver_sys_path = _DriverPaths()  # type: ignore[union-attr]
    options["job_config"] = config
    return contextlib.nullcontext()


@contextlib.contextmanager
def _from_root() -> Iterator[None]:
    """Within: ``/`` as the working directory (``_off_the_import_path``)."""
    try:
        here: str | None = os.getcwd()
    except OSError:  # removed: nothing to come back to
        here = None
    os.chdir("/")
    try:
        yield
    finally:
        if here is not None:
            os.chdir(here)


#: The token of the instances this process starts: one for the process, as Ray's token loader
#: keeps the first it reads for the life of the process.
_TOKEN: list[str] = []


@contextlib.contextmanager
def _own_token(ray: Any) -> Iterator[None]:
    """Within: a token of the instance's own in the environment (``RAY_AUTH_TOKEN``, which
    Ray reads before any file), where its processes, started from this one, find it. Ray
    otherwise writes one to ``~/.ray/auth_token``, readable by every user who can enter the
    home directory (mode 0644 in a 0755 ``~/.ray``): with it, anyone could join the
    instance (it listens on every interface) and run code as this user."""
    import secrets

    if not _TOKEN:
        _TOKEN.append(secrets.token_hex(32))
    raylet = getattr(ray, "_raylet", None)
    loader = getattr(raylet, "AuthenticationTokenLoader", None)
    # Ray turns token mode on for a new local instance by setting RAY_AUTH_MODE in this
    # process for good: a cluster joined after the sweep (one of your own, started without
    # a token) was then refused for want of a token. The mode is set here and put back after.
    config = getattr(raylet, "Config", None)
    values = {"RAY_AUTH_TOKEN": _TOKEN[0], "RAY_AUTH_TOKEN_PATH": None, "RAY_AUTH_MODE": "token"}
    try:
        with environ_set(values):
            _reread(loader, config)  # Ray 2.5x: a token or mode read before is forgotten
            yield
    finally:
        _reread(loader, config)


def _reread(loader: Any, config: Any) -> None:
    """Ray's cached token and mode read again from the environment (where Ray has them)."""
    if loader is not None:
        loader.instance().reset_cache()
    if config is not None and hasattr(config, "initialize"):
        config.initialize("")


def _check_auth(ray: Any) -> None:
    """A ``UsageError`` where the local instance would take no token: its processes listen on
    every interface, and anyone who reaches them could run code as this user."""
    mode = os.environ.get("RAY_AUTH_MODE", "").strip().lower()
    if mode == "disabled":
        raise UsageError(
            "sweep: RAY_AUTH_MODE=disabled, and Ray's local instance listens on every network "
            "interface: without its token anyone who reaches it runs code as you. Unset "
            "RAY_AUTH_MODE, or pass --no-ray (or --ray ADDRESS, a cluster of your own)"
        )
    if getattr(getattr(ray, "_raylet", None), "AuthenticationTokenLoader", None) is None:
        raise UsageError(
            f"sweep: Ray {getattr(ray, '__version__', '?')} has no token authentication, and "
            "its local instance listens on every network interface: anyone who reaches it "
            "would run code as you. Install a newer Ray (pip install -U ray), or pass "
            "--no-ray (or --ray ADDRESS, a cluster of your own)"
        )


#: The variables importing Ray and ``ray.init`` set in this process for good (Ray's debugger as
#: ``breakpoint()``, here and in every process started after; its usage reporting; its client
#: mode). ``RAY_AUTH_MODE`` is ``_own_token``'s.
_RAY_SETS = ("PYTHONBREAKPOINT", "RAY_USAGE_STATS_ENABLED", "RAY_CLIENT_MODE")


@contextlib.contextmanager
def process_settings_kept() -> Iterator[None]:
    """Within: Ray imported and started (``import ray``, ``ray_instance``); after, the
    process's own settings put back: the variables of ``_RAY_SETS``, ``faulthandler``
    (``ray.init`` enables it) and ``sys.excepthook`` (importing Ray replaces it). Where the
    program had Ray going before, Ray's are what it had, and stay."""
    import faulthandler
    import sys

    hook = sys.excepthook
    faults = faulthandler.is_enabled()
    try:
        with environ_set({name: os.environ.get(name) for name in _RAY_SETS}):
            yield
    finally:
        if sys.excepthook is not hook and _is_rays(sys.excepthook):
            sys.excepthook = hook
        if not faults:
            faulthandler.disable()


def _is_rays(fn: Any) -> bool:
    return str(getattr(fn, "__module__", None)).partition(".")[0] == "ray"


@contextlib.contextmanager
def ray_instance(ray: Any, address: str | None, env: dict[str, str]) -> Iterator[Path | None]:
    """Within: Ray joined at ``address`` (else ``RAY_ADDRESS``), or a local instance started
    for the sweep (its private scratch directory is yielded: the actors' directories go
    there, ``child_scratch_dir``), or the instance this process had already (None is
    yielded, as for a joined one); ``env``: the variables of the actors' processes."""
    if ray.is_initialized():
        yield None
        return
    named = f"--ray {address}" if address else f"RAY_ADDRESS={os.environ.get('RAY_ADDRESS')}"
    address = (address or os.environ.get("RAY_ADDRESS") or "").strip() or None
    if address == "local":  # Ray's name for a new local instance: the sweep's own, as without
        address = None
    if address is not None:  # never another local user's cluster (``ray_peer``)
        address = checked_address(address, named)
    with contextlib.ExitStack() as stack:
        if address is None:
            _check_auth(ray)
            stack.enter_context(_own_token(ray))
        options: dict[str, Any] = {"address": address or "local"}
        private = None
        if address is None:
            private = stack.enter_context(scratch_dir(RAY_SCRATCH_PREFIX))
            # Ray opens it to all: one level down (a short name: Ray's sockets are below it,
            # and a socket's path is at most 107 bytes)
            _check_socket_room(private / "r")
            options["_temp_dir"] = str(private / "r")
            # No dashboard: its HTTP job API is one more way in, and a sweep reads nothing there
            options["include_dashboard"] = False
            # Before Ray starts anything: a Ctrl-C inside ray.init leaves no process either.
            stack.callback(stop_reaper, start_reaper(private / "r", RAY_SCRATCH_PREFIX))
        sigterm = signal.getsignal(signal.SIGTERM)
        # ray.init sets its own, also where it fails: in the main thread only, where alone
        # Python sets handlers (elsewhere signal.signal raises, and Ray sets none).
        if sigterm is not None and threading.current_thread() is threading.main_thread():
            stack.callback(signal.signal, signal.SIGTERM, sigterm)
        try:
            with _off_the_import_path(ray, address, options), noting_sigterm() as arrived:
                ray.init(runtime_env={"env_vars": env}, log_to_driver=False, **options)
                got = arrived() and takes_as_interrupt(sigterm)
        except SystemExit as err:  # ray.init's own SIGTERM handler: sys.exit(SIGTERM)
            if err.code == signal.SIGTERM and takes_as_interrupt(sigterm):
                signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once, as the interrupt's
                raise Terminated("SIGTERM") from None  # what Ray started goes with the reaper
            raise
        except (ConnectionError, ValueError) as err:  # no cluster there, or no address
            raise UsageError(
                f"sweep --ray {address}: cannot join a Ray cluster ({err}); start one "
                "(`ray start --head`) and name its address, or leave --ray out for a local one"
            ) from None
        terminated = take_sigterm(stack, sigterm)  # put back after ray.shutdown
        stack.callback(ray.shutdown)  # before its directory is removed
        if got:  # ray.init's handler took it, and Python dropped its exit (a fork's callback)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once, as the interrupt's
            raise Terminated("SIGTERM")
        with interrupt_as_terminated(terminated):
            yield private
