"""Starting a child Python process whose imports come only from this process's path.

``python -c`` and ``python -m`` put the working directory first on the child's import path:
run from a shared directory (``/tmp``, a project scratch directory), the child imports
whatever another user planted there (a ``tunedsl/`` or ``torch/`` package) before the real
one. A child started by :func:`python_argv` first replaces its path with
:func:`child_import_path`, before anything is imported. Pure Python.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The child's first statement: argv[1] says how many path entries follow; they replace
# sys.path, and are removed from argv before the code runs.
_SET_PATH = (
    "import sys; n = int(sys.argv[1]); sys.path[:] = sys.argv[2:2 + n]; "
    "del sys.argv[1:2 + n]; del n\n"
)


def child_import_path() -> list[str]:
    """This process's import path as a child process (a measurement worker, a GPU process
    of a sweep) is to have it, the working directory never on it.

    ``""`` on ``sys.path`` (``python -c``, a REPL, a notebook) is the working directory at
    each import, which may be a shared one by now (a session that moved into ``/tmp``), and
    in a child whatever it runs in: in its place come the directories this process did
    import top-level modules from through it (a kernel's module, in a session started in
    the project's directory). A relative entry becomes the directory Python resolved it to
    at its first use here. Each only where no other user could have put a file in it
    (:func:`tunedsl.store.paths.untrusted_place`: it and the directories above are this
    user's or root's, and it is closed to writes by group and others, sticky or not, a group
    of this user's alone being no other user); the others are left out
    (:func:`path_left_out` says which)."""
    path: list[str] = []
    for entry, places in _places():
        path.extend(p for p in places if p not in path and (entry == p or _trusted(p)))
    return path


def path_left_out() -> str:
    """A sentence naming the directories :func:`child_import_path` left out and why (a
    module imported from there is missing in the child), or ""."""
    left = [
        why
        for entry, places in _places()
        for why in (_untrusted(p) for p in places if p != entry)
        if why is not None
    ]
    if not left:
        return ""
    return (
        "the child process's import path leaves out the directories that modules were "
        f'imported from through the working directory ("" on sys.path), as another user '
        f"could put modules there: {'; '.join(dict.fromkeys(left))}; keep your modules in a "
        "directory of your own, or put that directory on sys.path by its absolute name "
        "where you trust everyone who can write it"
    )


def _places() -> list[tuple[str, list[str]]]:
    """Each entry of ``sys.path`` with the directories it stands for: an absolute one
    itself; a relative one the directory its cached finder searches (none before its first
    use); ``""`` those of :func:`_imported_through_cwd`."""
    if all(os.path.isabs(p) for p in sys.path):
        return [(p, [p]) for p in sys.path]
    places: list[tuple[str, list[str]]] = []
    for entry in sys.path:
        if os.path.isabs(entry) or not entry:
            places.append((entry, [entry] if entry else []))  # "": filled in below
        else:
            where = getattr(sys.path_importer_cache.get(entry), "path", None)
            if isinstance(where, str) and os.path.isabs(where):
                places.append((entry, [os.path.normpath(where)]))
            else:
                places.append((entry, []))
    through_cwd = _imported_through_cwd({p for e, found in places if e for p in found})
    return [(e, found if e else through_cwd) for e, found in places]


def _imported_through_cwd(named: set[str]) -> list[str]:
    """The directories, in import order, that top-level modules now loaded were found in
    through ``""``: searched as a path entry (Python's finder for it is cached) and none of
    ``named`` (the directories the other entries stand for)."""
    named = {os.path.normpath(p) for p in named}
    searched = set()
    for key, finder in list(sys.path_importer_cache.items()):
        place = getattr(finder, "path", key) if finder is not None else None
        if isinstance(place, str) and os.path.isabs(place):
            searched.add(os.path.normpath(place))
    found: list[str] = []
    for name, module in list(sys.modules.items()):
        if "." in name or name == "__main__":
            continue
        for directory in _found_in(module):
            if directory in searched and directory not in named and directory not in found:
                found.append(directory)
    return found


def _found_in(module: object) -> list[str]:
    """The directories of ``sys.path`` a top-level module's spec says it was found in."""
    spec = getattr(module, "__spec__", None)
    if spec is None:
        return []
    origin = spec.origin if spec.has_location else None
    if isinstance(origin, str) and os.path.isabs(origin):
        parent = os.path.dirname(origin)
        if spec.submodule_search_locations is not None:  # a package: __init__ in its dir
            parent = os.path.dirname(parent)
        return [os.path.normpath(parent)]
    if origin is None and spec.submodule_search_locations is not None:  # a namespace
        try:
            portions = list(spec.submodule_search_locations)
        except Exception:
            return []
        return [os.path.normpath(os.path.dirname(p)) for p in portions if os.path.isabs(p)]
    return []


def _untrusted(directory: str) -> str | None:
    if not os.path.isdir(directory):
        return f"{directory} is no directory now"
    from tunedsl.store.paths import untrusted_place

    return untrusted_place(Path(directory))


def _trusted(directory: str) -> bool:
    return _untrusted(directory) is None


def python_argv(code: str, *args: str) -> list[str]:
    """The command running ``code`` (as ``python -c``) with ``args`` in ``sys.argv[1:]``,
    in a child whose import path is :func:`child_import_path`."""
    path = child_import_path()
    return [sys.executable, "-c", _SET_PATH + code, str(len(path)), *path, *args]


def module_argv(module: str, *args: str) -> list[str]:
    """``python -m module args...`` with this process's import path (:func:`python_argv`)."""
    return python_argv(
        f"import runpy; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)",
        *args,
    )
