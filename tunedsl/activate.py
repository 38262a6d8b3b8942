"""Import hook: ``import tunedsl.activate`` lets ``import`` load modules written in the DSL.

Design (chosen for the cost on ordinary modules, which must stay within a few percent):

- The hook replaces Python's own ``FileFinder`` path hook by an identical one whose ``.py``
  loader is ``DslSourceLoader``, a ``SourceFileLoader`` subclass. Finding, ``__pycache__``
  reading and validation stay Python's own code.
- ``source_to_code`` runs only when there is no valid ``__pycache__`` pyc. A source that does
  not contain both ``tunedsl`` and the word ``autotune`` is compiled exactly as Python would;
  otherwise a tunedsl cache hit is used as is (no front end import), and on a miss the front
  end's ``needs_expansion`` decides: a DSL module is expanded and stored in the
  content-addressed bytecode cache (``tunedsl.bytecode``).
- A DSL module's expanded code is never written to ``__pycache__`` (``set_data`` skips it),
  so every import of a DSL module goes through tunedsl's cache and is never served stale
  code; plain modules keep Python's fast pyc path.
- A pyc is never run for a file that is now a DSL module. Python trusts a pyc on the
  source's size and mtime (to the second; an mtime can also be set), so a plain module's pyc
  would run after the file was rewritten as a DSL module of the same size in the same
  second, and plain Python may have written one for a DSL module (imported without the
  hook). The source's text decides whenever the file changed at or after the time the pyc
  was written (its ``st_ctime``, which no one can set back, against the pyc's
  ``st_mtime``), or the pyc names ``tunedsl``. Both times come from the ``stat`` and the pyc
  read Python's path makes anyway, so an ordinary pyc costs no extra system call.
- Modules that a later meta path finder maps to files without ``sys.path`` (editable
  installs) get the same loader from ``_LaterFinders``.

Importing this module also turns Triton's interpreter on when the machine has no GPU driver
(``tunedsl.autointerp``; one notice on stderr), so DSL code imported afterwards runs on the
CPU instead of failing with "0 active drivers".
"""

from __future__ import annotations

import errno
import importlib.machinery
import os
import re
import stat
import sys
from collections.abc import Callable, Mapping
from types import CodeType
from typing import Any

__all__ = [
    "DslSourceLoader",
    "ScriptSourceLoader",
    "install",
    "installed",
    "read_scripts",
    "uninstall",
]

_HOOK_MARK = "_tunedsl_path_hook"


class DslSourceLoader(importlib.machinery.SourceFileLoader):
    """``SourceFileLoader`` that expands DSL modules and keeps their code out of __pycache__."""

    _expanded = False  # set per module by source_to_code; read by set_data
    _from_source = False
    _source_changed = 0.0  # the source's st_ctime, from path_stats
    _pyc_written = 0.0  # the pyc's st_mtime, from get_data

    def get_code(self, fullname: str) -> CodeType | None:
        self._expanded = False
        self._from_source = False
        self._pyc_written = 0.0
        code = super().get_code(fullname)
        if code is None or self._from_source or _is_tunedsl_itself(fullname):
            return code
        # Loaded from a pyc, which Python trusts on the source's size and mtime (to the
        # second, and an mtime can be set): it may hold the plain code of a file rewritten
        # since as a DSL module, or be one plain Python wrote for a DSL module. The source
        # decides, unless nothing changed the file since before the pyc was written (its
        # ctime, which no one can set back, is older) and the pyc does not name tunedsl:
        # an ordinary pyc costs no more than Python's own path. A pyc our loader wrote for
        # a plain module that uses tunedsl's API passes the text check without the front end.
        if self._source_changed < self._pyc_written and "tunedsl" not in code.co_names:
            return code
        path = self.get_filename(fullname)
        try:
            source = _read_file(path)
        except OSError:
            return code
        return (_may_use_macro(source) and self._dsl_code(source, path, -1)) or code

    def path_stats(self, path: str) -> Mapping[str, Any]:
        st = os.stat(path)
        self._source_changed = st.st_ctime
        return {"mtime": st.st_mtime, "size": st.st_size}

    def get_data(self, path: str) -> bytes:
        if not path.endswith(_PYC_SUFFIXES):
            return super().get_data(path)
        return _read_file(path, self)

    def source_to_code(  # type: ignore[override]
        self, data: Any, path: Any, *, _optimize: int = -1
    ) -> CodeType:
        self._from_source = True
        if isinstance(data, (bytes, bytearray, memoryview)) and not _is_tunedsl_itself(self.name):
            code = self._dsl_code(bytes(data), path, _optimize)
            if code is not None:
                return code
        return super().source_to_code(data, path, _optimize=_optimize)  # type: ignore[call-arg]

    def _dsl_code(self, source: bytes, path: str, optimize: int) -> CodeType | None:
        """The expanded code when ``source`` is a DSL module; None for plain Python."""
        if not _may_use_macro(source):
            return None
        from tunedsl import bytecode

        # An entry for exactly these bytes at this path is the right code (the cache only
        # holds what the front end compiled), and a hit spares importing the front end.
        code = bytecode.lookup(source, path, optimize=optimize)
        if code is not None:
            bytecode.stats.hits += 1
        else:
            from tunedsl.frontend.compile import needs_expansion

            if not needs_expansion(source):
                return None
            from tunedsl.errors import TunedslSyntaxError

            try:
                code = bytecode.compile_and_store(source, path, optimize=optimize)
            except TunedslSyntaxError as err:
                # The error names the user's file, line and column: the front end's frames
                # below this one add nothing (Python's own SyntaxError shows none either).
                raise err.with_traceback(None) from None
        self._expanded = True
        return code

    def set_data(self, path: str, data: Any, *, _mode: int = 0o666) -> None:
        if self._expanded:
            return  # DSL modules are cached by tunedsl.bytecode, never in __pycache__
        super().set_data(path, data, _mode=_mode)


class ScriptSourceLoader(DslSourceLoader):
    """The loader of a script imported by its path (``tunedsl precompile FILE``, ``sweep``):
    its code comes from its source (or tunedsl's bytecode cache), never from a pyc in
    ``__pycache__``, as ``python FILE`` runs a script. Beside a script in a shared directory
    (sticky, as ``/tmp``) that ``__pycache__`` may be another user's, and a pyc they put there
    matching the script's size and time would run instead of the script."""

    def get_data(self, path: str) -> bytes:
        if path.endswith(tuple(importlib.machinery.BYTECODE_SUFFIXES)):
            raise OSError(errno.ENOENT, "a script's pyc is never read", path)
        return super().get_data(path)

    def set_data(self, path: str, data: Any, *, _mode: int = 0o666) -> None:
        return  # nor written: nothing is made in a __pycache__ that may be another user's


#: Scripts imported by their path (``precompile/script_import.py``): module name -> file. A
#: process importing one again by its name (an isolated worker, a spawned child: given these,
#: ``read_scripts``) reads it as it was read here, from its source.
SCRIPTS: dict[str, str] = {}


class ScriptFinder:
    """Meta path finder, first where installed (``read_scripts``): a module of ``SCRIPTS`` is
    its file, read by ``ScriptSourceLoader``. Found through ``sys.path`` instead, it would be
    read from a pyc, which another user may have put beside a script in a shared directory."""

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
        file = SCRIPTS.get(fullname)
        if file is None:
            return None
        import importlib.util

        loader = ScriptSourceLoader(fullname, file)
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


def read_scripts(scripts: Mapping[str, str]) -> None:
    """Import the modules ``scripts`` names (name -> file) from their files' sources."""
    SCRIPTS.update(scripts)
    if scripts and ScriptFinder not in sys.meta_path:
        sys.meta_path.insert(0, ScriptFinder)


def _is_tunedsl_itself(fullname: str) -> bool:
    # tunedsl's own modules import from tunedsl but are plain Python; checking them would
    # also re-enter the front end while it is being imported.
    return fullname == "tunedsl" or fullname.startswith("tunedsl.")


# A macro call needs the word `autotune` somewhere (`autotune(...)`, `td.autotune(...)` or
# the import that renames it), so this pre-filter never hides a DSL module, and it keeps
# plain modules that merely use tunedsl's API (``autotune_launch``) off the front end.
_MACRO_WORD = re.compile(rb"\bautotune\b")


def _read_file(path: str, pyc_of: DslSourceLoader | None = None) -> bytes:
    """A file's bytes with the fewest calls (a pyc is read on every import); ``pyc_of``
    gets the file's mtime. OSError for what is not a regular file (a FIFO would block)."""
    fd = os.open(path, _READ_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if pyc_of is not None:
            pyc_of._pyc_written = st.st_mtime
        data = os.read(fd, st.st_size + 1)
        while len(data) != st.st_size:  # it grew, or a short read: read to its end
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data += chunk
        return data
    finally:
        os.close(fd)


_PYC_SUFFIXES = tuple(importlib.machinery.BYTECODE_SUFFIXES)
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def _may_use_macro(source: bytes) -> bool:
    return b"tunedsl" in source and _MACRO_WORD.search(source) is not None


def _make_path_hook() -> Callable[[str], Any]:
    loaders: list[tuple[type, list[str]]] = [
        (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
        (DslSourceLoader, importlib.machinery.SOURCE_SUFFIXES),
        (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
    ]
    hook = importlib.machinery.FileFinder.path_hook(*loaders)
    setattr(hook, _HOOK_MARK, True)
    return hook


def _is_our_hook(hook: object) -> bool:
    return bool(getattr(hook, _HOOK_MARK, False))


def _is_default_file_hook(hook: object) -> bool:
    return "FileFinder" in getattr(hook, "__qualname__", "") and not _is_our_hook(hook)


def _swap_file_finder_loaders(old: type, new: type) -> None:
    """Give the finders already made for sys.path entries the ``new`` ``.py`` loader.

    Swapping the loader in place keeps each finder's cached directory listing, which is
    costly to rebuild for large directories such as the standard library's (dropping the
    finders made the next imports of plain modules about 10% slower). A finder whose
    private ``_loaders`` does not have the expected shape is dropped instead, so the next
    import builds a new one from the current hooks (zip and other finders are kept).
    """
    for entry, finder in list(sys.path_importer_cache.items()):
        if not isinstance(finder, importlib.machinery.FileFinder):
            continue
        loaders = getattr(finder, "_loaders", None)
        if isinstance(loaders, list) and all(
            isinstance(item, tuple) and len(item) == 2 for item in loaders
        ):
            finder._loaders = [  # type: ignore[attr-defined]
                (suffix, new if loader is old else loader) for suffix, loader in loaders
            ]
        else:
            del sys.path_importer_cache[entry]


class _LaterFinders:
    """Meta path finder placed just after ``PathFinder``: it asks the finders after it itself
    and hands their plain ``.py`` specs our loader.

    Some finders map module names to files without ``sys.path`` (setuptools' editable
    installs do, for the top-level modules of a project), so the path hook never sees those
    modules. Sitting after ``PathFinder``, this costs nothing for modules found on sys.path.
    """

    _tunedsl_meta_finder = True

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
        try:
            later = sys.meta_path[sys.meta_path.index(cls) + 1 :]
        except ValueError:
            return None
        for finder in later:
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is None:
                continue
            if (
                type(spec.loader) is importlib.machinery.SourceFileLoader
                and spec.origin
                and not _is_tunedsl_itself(fullname)
            ):
                spec.loader = DslSourceLoader(fullname, spec.origin)
            return spec
        return None


def installed() -> bool:
    return any(_is_our_hook(hook) for hook in sys.path_hooks)


def install() -> None:
    """Install the hook (idempotent): later imports of DSL modules are expanded."""
    if installed():
        return
    position = next(
        (i for i, hook in enumerate(sys.path_hooks) if _is_default_file_hook(hook)),
        len(sys.path_hooks),
    )
    sys.path_hooks.insert(position, _make_path_hook())
    _swap_file_finder_loaders(importlib.machinery.SourceFileLoader, DslSourceLoader)
    if _LaterFinders not in sys.meta_path:
        after = next(
            (i + 1 for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
            len(sys.meta_path),
        )
        sys.meta_path.insert(after, _LaterFinders)


def uninstall() -> None:
    """Remove the hook; modules imported already stay as they are."""
    if not installed():
        return
    sys.path_hooks[:] = [hook for hook in sys.path_hooks if not _is_our_hook(hook)]
    _swap_file_finder_loaders(DslSourceLoader, importlib.machinery.SourceFileLoader)
    while _LaterFinders in sys.meta_path:
        sys.meta_path.remove(_LaterFinders)


install()


def _interpret_without_gpu() -> None:
    from tunedsl.autointerp import enable_if_no_gpu

    enable_if_no_gpu("the import hook")


_interpret_without_gpu()
