"""The package's layers point one way: an import graph built from the source, cycles and
forbidden directions fail (imports inside functions and under ``TYPE_CHECKING`` count: a
type-only import is a dependency all the same). No module reaches another's private names.

The layers, bottom to top (docs/ARCHITECTURE.md draws them):

    foundation  tunedsl (the lazy facade), errors, knobs, environ, warn (warn once), progress
    frontend    source → lexer → parser → expand → compile (pure; reads model.options)
    model       config, space, variant, keys, hints, options, settings, result, effort, hole
    engine      seams, search strategies, racing, bench, choose, driver (pure)
    store       paths, atomic writes, locks, warnings, records, record stores
    backends    the Triton/PyTorch boundary: compat, facts, compile, launch, measurers
    runtime     site, decide, api, dsl, macro (what user code calls)
    precompile  workloads, the precompile session, replay
    ways in     bytecode cache, import hook, IPython, progress
    cli         commands, the gallery
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "tunedsl"

# Layer of each top-level part of the package, and which layers each may import.
LAYER_OF = {
    "": "foundation",  # tunedsl/__init__.py
    "errors": "foundation",
    "knobs": "foundation",
    "environ": "foundation",
    "__main__": "cli",
    "frontend": "frontend",
    "model": "model",
    "engine": "engine",
    "store": "store",
    "backends": "backends",
    "runtime": "runtime",
    "precompile": "precompile",
    "bytecode": "ways_in",
    "activate": "ways_in",
    "ipython": "ways_in",
    "progress": "foundation",
    "warn": "foundation",
    "autointerp": "foundation",
    "cli": "cli",
    "gallery": "cli",
    "examples": "cli",
}
ORDER = [
    "foundation",
    "frontend",
    "model",
    "store",
    "ways_in",
    "engine",
    "backends",
    "runtime",
    "precompile",
    "cli",
]
# Extra rules beyond "only downwards": siblings that must not see each other.
FORBIDDEN = {
    ("engine", "frontend"),
    ("engine", "ways_in"),
    ("store", "frontend"),
    ("model", "frontend"),
}
# The one import the pure front end makes of the model: the names the macro accepts.
FRONTEND_MAY_IMPORT = {"tunedsl.model.options", "tunedsl.model.identity"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports_of(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tunedsl"))
        elif isinstance(node, ast.ImportFrom):
            target = import_target(node, module, path)
            if not target.startswith("tunedsl"):
                continue
            for alias in node.names:  # `from tunedsl.x import y` may name module y
                candidate = f"{target}.{alias.name}"
                found.add(candidate if module_exists(candidate) else target)
    found.discard(module)
    return found


def import_target(node: ast.ImportFrom, module: str, path: Path) -> str:
    """The absolute module a ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def module_exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (ROOT.parent / rel).with_suffix(".py").exists() or (
        ROOT.parent / rel / "__init__.py"
    ).exists()


def package_modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        if "examples" in path.relative_to(ROOT).parts:
            continue  # DSL scripts shipped as data (the gallery), not modules
        out[module_name(path)] = path
    return out


def graph() -> dict[str, set[str]]:
    return {
        module: {m for m in imports_of(path, module) if module_exists(m)}
        for module, path in package_modules().items()
    }


# -- private names -----------------------------------------------------------------------------
# A name starting with "_" (not a dunder) is its module's own: another module that reads it
# (`from tunedsl.x import _name`, `obj._name` where `_name` is defined in another tunedsl module
# and not in the reader) depends on what its owner may change freely. `self._x` and `cls._x` are
# the class's own. Each exception says why it is one.
ALLOWED_PRIVATE = {
    # The C extension module built at install; native.py is the one place that loads it.
    ("tunedsl.runtime.native", "_native_fused"),
}
# The parts of this package share their private helpers: together they are the one place
# that reaches Triton's private names (their own privates are Triton's, not tunedsl's).
PRIVATE_SHARED_BY = ("tunedsl.backends.compat",)


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_names_defined(tree: ast.AST) -> set[str]:
    """The private names a module defines: its private functions, classes and variables,
    the private attributes its code sets on ``self``/``cls``, and its ``__slots__``."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            out.add(node.attr)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            out.update(
                c.value
                for c in ast.walk(node.value)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
    return {name for name in out if is_private(name)}


def private_reaches(modules: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    """Every place a module reads another tunedsl module's private name."""
    defined = {module: private_names_defined(tree) for module, (_, tree) in modules.items()}
    owners: dict[str, set[str]] = {}
    for module, names in defined.items():
        for name in names:
            owners.setdefault(name, set()).add(module)

    def shared(a: str, b: str) -> bool:
        return any(a.startswith(p) and b.startswith(p) for p in PRIVATE_SHARED_BY)

    found: list[str] = []
    for module, (path, tree) in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = import_target(node, module, path)
                if not source.startswith("tunedsl") or source == module:
                    continue
                for alias in node.names:
                    name = alias.name
                    if (
                        is_private(name)
                        and (module, name) not in ALLOWED_PRIVATE
                        and not shared(module, source)
                    ):
                        found.append(f"{path}:{node.lineno}: from {source} import {name}")
            elif isinstance(node, ast.Attribute) and is_private(node.attr):
                name = node.attr
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    continue
                if name in defined[module] or (module, name) in ALLOWED_PRIVATE:
                    continue
                others = {o for o in owners.get(name, ()) if not shared(module, o)}
                if others:
                    found.append(
                        f"{path}:{node.lineno}: {ast.unparse(node)} "
                        f"(private to {', '.join(sorted(others))})"
                    )
    return sorted(found)


def parsed_package() -> dict[str, tuple[Path, ast.Module]]:
    return {
        module: (path, ast.parse(path.read_text(encoding="utf-8")))
        for module, path in package_modules().items()
    }


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt == "tunedsl" or node == "tunedsl":
                continue  # the facade resolves names lazily, by string
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_every_part_has_a_layer() -> None:
    parts = {part_of(m) for m in graph()}
    assert parts <= set(LAYER_OF), f"give these a layer in LAYER_OF: {parts - set(LAYER_OF)}"


def test_no_import_cycle() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_layers_point_down() -> None:
    wrong = []
    for module, targets in graph().items():
        if module == "tunedsl":
            continue
        src = LAYER_OF[part_of(module)]
        for target in targets:
            dst = LAYER_OF[part_of(target)]
            if src == "frontend" and dst == "model" and target in FRONTEND_MAY_IMPORT:
                continue
            if ORDER.index(dst) > ORDER.index(src) or (src, dst) in FORBIDDEN:
                wrong.append(f"{module} ({src}) imports {target} ({dst})")
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(wrong))


def test_no_module_reaches_another_modules_private_names() -> None:
    found = private_reaches(parsed_package())
    assert not found, (
        "private names read from another module (make the name public, or give the owner a "
        "public method):\n" + "\n".join(found)
    )


def test_the_private_name_check_finds_what_it_should(tmp_path: Path) -> None:
    # Guard against a check that finds nothing: a two-module package with every case.
    owner = "class Table:\n    def __init__(self):\n        self._rows = {}\n_helper = 1\n"
    reader = (
        "from tunedsl.fake.owner import Table, _helper\n"
        "class Mine:\n    def __init__(self):\n        self._own = 0\n"
        "    def peek(self, t: Table, other: 'Mine'):\n"
        "        return t._rows, other._own, self._rows, t.__dict__\n"
    )
    modules = {
        "tunedsl.fake.owner": (tmp_path / "owner.py", ast.parse(owner)),
        "tunedsl.fake.reader": (tmp_path / "reader.py", ast.parse(reader)),
    }
    found = private_reaches(modules)
    assert found == [
        f"{tmp_path / 'reader.py'}:1: from tunedsl.fake.owner import _helper",
        f"{tmp_path / 'reader.py'}:6: t._rows (private to tunedsl.fake.owner)",
    ], found


def test_the_graph_is_really_read() -> None:
    # Guard against a scanner that finds nothing: known edges must be present.
    edges = graph()
    assert "tunedsl.model.config" in edges["tunedsl.model.space"]
    assert any(t.startswith("tunedsl.backends") for t in edges["tunedsl.runtime.site"])


def test_type_only_imports_count(tmp_path: Path) -> None:
    typed = tmp_path / "typed.py"
    typed.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from tunedsl.model.config import Config\n"
    )
    assert imports_of(typed, "tunedsl.fake.typed") == {"tunedsl.model.config"}
