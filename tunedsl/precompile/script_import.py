"""Importing a workload script by path, as ``tunedsl precompile``, ``sweep`` and ``--replay`` do.

The script is imported as a module whose ``__name__`` is not ``"__main__"``, through the import
hook's loader. A file whose directory has an ``__init__.py`` is part of a package: imported under
its stem, its relative imports (``from .act import silu``) fail, so it is imported by its dotted
name from the package's root (the first directory up without ``__init__.py``, the root that
``model/identity.py`` names a site's file from).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from tunedsl.model.identity import package_root
from tunedsl.store import paths


def import_script(path: str | os.PathLike[str]) -> ModuleType:
    """Import a (DSL) script as a module whose ``__name__`` is not ``"__main__"``.

    Goes through the import hook's loader, so a DSL script is expanded (and its code taken
    from the bytecode cache); its own code never comes from a pyc (``ScriptSourceLoader``),
    here or in a process that imports it again by name (``activate.SCRIPTS``). Its directory
    is put on ``sys.path`` so it can import its neighbours. The module name is the file's
    stem, or a private name when that is taken; a file in a package is imported by its
    dotted name (below), so its relative imports work.
    """
    from tunedsl.activate import SCRIPTS, ScriptSourceLoader, install

    install()
    abspath = os.path.abspath(os.fspath(path))
    in_package = package_module(abspath)
    if in_package is not None:
        return in_package
    stem = os.path.splitext(os.path.basename(abspath))[0]
    name = stem
    if not stem.isidentifier() or stem in sys.modules:
        name = f"__tunedsl_precompile_{hashlib.sha256(abspath.encode()).hexdigest()[:12]}__"
    loader = ScriptSourceLoader(name, abspath)
    spec = importlib.util.spec_from_file_location(name, abspath, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    directory = os.path.dirname(abspath)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    SCRIPTS[name] = abspath  # imported by this name elsewhere (a worker): from this file
    return module


def package_module(abspath: str) -> ModuleType | None:
    """The module of ``abspath`` imported by its dotted name, or None: a file outside a
    package, a name that is not dotted identifiers, or a top package of that name already
    imported from elsewhere. The top package is loaded from its own ``__init__.py`` (no
    search of ``sys.path``, where another copy could come first); the packages below it and
    the module are found through their parents' ``__path__``, as ``import`` finds them. The
    package's root goes on ``sys.path``, as for ``python -m`` run from it. ImportError when
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
    if directory not in sys.path:
        sys.path.insert(0, directory)
    # Executed again on every call, as a script under its stem is (a sweep's long-lived
    # process imports a script again when the file changed): never the module imported before.
    sys.modules.pop(".".join(parts), None)
    module = importlib.import_module(".".join(parts))
    found = getattr(module, "__file__", None)
    return module if found is not None and os.path.realpath(found) == real else None
