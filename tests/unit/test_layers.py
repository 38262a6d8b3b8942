"""The package's layers point one way: an import graph built from the source, cycles and
forbidden directions fail (imports inside functions count, ``TYPE_CHECKING`` ones do not).

The layers, bottom to top (docs/ARCHITECTURE.md draws them):

    foundation  tunedsl (the lazy facade), errors, knobs, warn (warn once), progress
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


def is_type_checking_block(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )


def imports_of(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if is_type_checking_block(node):
            skip.update(id(n) for n in ast.walk(node))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tunedsl"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if not target.startswith("tunedsl"):
                continue
            for alias in node.names:  # `from tunedsl.x import y` may name module y
                candidate = f"{target}.{alias.name}"
                found.add(candidate if module_exists(candidate) else target)
    found.discard(module)
    return found


def module_exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (ROOT.parent / rel).with_suffix(".py").exists() or (
        ROOT.parent / rel / "__init__.py"
    ).exists()


def graph() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        if "examples" in path.relative_to(ROOT).parts:
            continue  # DSL scripts shipped as data (the gallery), not modules
        module = module_name(path)
        out[module] = {m for m in imports_of(path, module) if module_exists(m)}
    return out


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


def test_the_graph_is_really_read() -> None:
    # Guard against a scanner that finds nothing: known edges must be present.
    edges = graph()
    assert "tunedsl.model.config" in edges["tunedsl.model.space"]
    assert any(t.startswith("tunedsl.backends") for t in edges["tunedsl.runtime.site"])
