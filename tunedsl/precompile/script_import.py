"""Importing a workload script by path, as ``tunedsl precompile``, ``sweep`` and ``--replay`` do.

The script is imported as a module whose ``__name__`` is not ``"__main__"``, through the import
hook's loader, under a private name (never its stem, which could be a module of the user's).
A file whose directory has an ``__init__.py`` is part of a package: imported under a name of its
own, its relative imports (``from .act import silu``) fail, so it is imported by its dotted
name from the package's root (the first directory up without ``__init__.py``, the root that
``model/identity.py`` names a site's file from). The script's directory (a package's root) is
on ``sys.path`` only while the script is imported, or its functions are called within
:func:`script_on_path`: the importing process's own imports never find its neighbours.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from tunedsl.model.identity import package_root
from tunedsl.store import paths


def import_script(path: str | os.PathLike[str]) -> ModuleType:
    """Import a (DSL) script as a module whose ``__name__`` is not ``"__main__"``.

    Goes through the import hook's loader, so a DSL script is expanded (and its code taken
    from the bytecode cache); its own code never comes from a pyc (``ScriptSourceLoader``),
    here or in a process that imports it again by name (``activate.SCRIPTS``). Its directory
    is first on ``sys.path`` while it is imported, so it can import its neighbours, and taken
    off again after (where it was not there before), so this process's own imports never
    find the script's neighbours (a ``config.py`` beside it): call its functions within
    :func:`script_on_path` where they import a neighbour when called. The module name is a
    private one (``__tunedsl_precompile_<digest>__``), which no module of the user's has; a
    file in a package is imported by its dotted name (below), so its relative imports work.
    """
    from tunedsl.activate import SCRIPTS, ScriptSourceLoader, install

    install()
    abspath = os.path.abspath(os.fspath(path))
    in_package = package_module(abspath)
    if in_package is not None:
        return in_package
    # Never the stem: a script named `config.py` or `utils.py` would be what the caller's own
    # `import config` finds. (``identity.module_names`` knows this name.)
    name = f"__tunedsl_precompile_{hashlib.sha256(abspath.encode()).hexdigest()[:12]}__"
    loader = ScriptSourceLoader(name, abspath)
    spec = importlib.util.spec_from_file_location(name, abspath, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    directory = os.path.dirname(abspath)
    _directories[abspath] = directory
    sys.modules[name] = module
    try:
        with on_path(directory):
            loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    SCRIPTS[name] = abspath  # imported by this name elsewhere (a worker): from this file
    _scripts_in_spawned_children()
    return module


def package_module(abspath: str) -> ModuleType | None:
    """The module of ``abspath`` imported by its dotted name, or None: a file outside a
    package, a name that is not dotted identifiers, or a top package of that name already
    imported from elsewhere. The top package is loaded from its own ``__init__.py`` (no
    search of ``sys.path``, where another copy could come first); the packages below it and
    the module are found through their parents' ``__path__``, as ``import`` finds them. The
    package's root is on ``sys.path`` while it is imported, as for ``python -m`` run from it
    (:func:`on_path`). ImportError when
    an ``__init__.py`` on the way, the root or a package's directory is open to others'
    writes (:func:`paths.untrusted_place`), before anything of the package runs."""
    real = os.path.realpath(abspath)
    directory, packages = package_root(real)
    parts = [*packages, os.path.splitext(os.path.basename(real))[0]]
    if len(parts) == 1 or not all(part.isidentifier() for part in parts):
        return None
    for depth in range(1, len(parts)):  # each package's __init__.py runs: trusted as the file
        init = os.path.join(directory, *parts[:depth], "__init__.py")
        why = paths.untrusted_source(init)
        if why is not None:
            raise ImportError(
                f"{abspath} not imported: it is a module of a package, and {why}, so that "
                "package's code is not trusted; close it to others' writes (chown, chmod go-w)"
            )
    # The package's root goes first on sys.path, and each package's directory is where its
    # modules are found: one another user can write to (even sticky: /tmp) is where they put
    # `torch.py`, or a package directory that shadows a module of the same name.
    for depth in range(len(parts)):
        place = os.path.join(directory, *parts[:depth])
        why = paths.untrusted_place(Path(place))
        if why is not None:
            what = f"whose root {place} would go on sys.path" if depth == 0 else f"in {place}"
            raise ImportError(
                f"{abspath} not imported: it is a module of a package {what}, and {why}, so "
                "a module another user puts there would be imported in place of yours; move "
                "the package into a directory closed to writes by others"
            )
    top = os.path.join(directory, parts[0])
    loaded = sys.modules.get(parts[0])
    if loaded is None:
        init = os.path.join(top, "__init__.py")
        spec = importlib.util.spec_from_file_location(
            parts[0], init, submodule_search_locations=[top]
        )
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[parts[0]] = loaded
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            sys.modules.pop(parts[0], None)
            raise
    elif [os.path.realpath(p) for p in getattr(loaded, "__path__", ())] != [top]:
        return None
    # Executed again on every call, as a script under its stem is (a sweep's long-lived
    # process imports a script again when the file changed): never the module imported before.
    sys.modules.pop(".".join(parts), None)
    with on_path(directory):
        module = importlib.import_module(".".join(parts))
    found = getattr(module, "__file__", None)
    if found is None or os.path.realpath(found) != real:
        return None
    _directories[abspath] = directory
    return module


#: The directory :func:`import_script` put on ``sys.path`` for a script (its own, or its
#: package's root), by the script's absolute path: :func:`script_on_path` puts it back.
_directories: dict[str, str] = {}
#: Directories :func:`on_path` put on ``sys.path``, each with how many hold it there now
#: (two sweeps in two threads, one script): the last to leave takes it off.
_holds: dict[str, int] = {}
_holds_lock = threading.Lock()


@contextlib.contextmanager
def on_path(directory: str) -> Iterator[None]:
    """Within: ``directory`` on ``sys.path``, first where it was not on it; after, taken off
    again where this put it there, so the process's own imports go on finding what they found
    before (its own ``config.py``, not a script's neighbour of that name). An entry of the
    process's own is left as it is."""
    with _holds_lock:
        held = _holds.get(directory, 0)
        mine = held > 0 or directory not in sys.path
        if mine:
            _holds[directory] = held + 1
            if not held:
                sys.path.insert(0, directory)
    try:
        yield
    finally:
        if mine:
            with _holds_lock:
                left = _holds.pop(directory) - 1
                if left:
                    _holds[directory] = left
                elif directory in sys.path:  # (the script may have taken it off itself)
                    sys.path.remove(directory)


def script_on_path(path: str | os.PathLike[str]) -> contextlib.AbstractContextManager[None]:
    """Within: the directory :func:`import_script` puts on ``sys.path`` for ``path`` is on it
    again, for calls of the script's functions that import its neighbours when they run (a
    workload's ``import helpers``); after, it is taken off again (:func:`on_path`)."""
    abspath = os.path.abspath(os.fspath(path))
    return on_path(_directories.get(abspath, os.path.dirname(abspath)))


class _ScriptsInChild:
    """Unpickled first in a child started with ``spawn`` or ``forkserver`` (a workload's
    ``multiprocessing`` pool): there, the scripts imported here by path are imported by
    their private names from their files (an object of the script pickles by that name),
    through the import hook, and the same goes on to the child's own children."""

    def __init__(self, scripts: dict[str, str]) -> None:
        self.scripts = scripts

    def __reduce__(self) -> tuple[Any, tuple[dict[str, str]]]:
        return _read_scripts_in_child, (self.scripts,)


def _read_scripts_in_child(scripts: dict[str, str]) -> None:
    from tunedsl.activate import install, read_scripts

    install()
    read_scripts(scripts)
    _scripts_in_spawned_children()


def _scripts_in_spawned_children() -> None:
    """From now on, a spawned child's preparation data carries the scripts imported by path
    (``activate.SCRIPTS``): named privately, they are found by no search of ``sys.path``
    there (as a script under its stem was). Once: not where spawn's is already this."""
    import multiprocessing.spawn as spawn

    from tunedsl.activate import SCRIPTS

    original = spawn.get_preparation_data
    if getattr(original, "tunedsl_scripts", False):
        return

    def get_preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        if SCRIPTS:  # a key the child does not know is ignored: only unpickled
            data["tunedsl_scripts"] = _ScriptsInChild(dict(SCRIPTS))
        return data

    get_preparation_data.tunedsl_scripts = True  # type: ignore[attr-defined]
    spawn.get_preparation_data = get_preparation_data  # type: ignore[assignment]
