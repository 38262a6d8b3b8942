"""What a module's source says about the values a ``prune=`` reads from the code around it.

At a script's or a notebook cell's top level the variables are the module's globals; a
function made there (a ``prune=`` lambda) that reads one the code rebinds later (a loop's
variable) sees a value that changes from call to call. The runtime asks this module which
names those are, seen from the line the top-level code runs now: a name bound at or after
that line (a ``for`` loop's target or a name bound in its body, a name given ``+=``, a name
bound again further down, a call of a function that rebinds it with ``global``, a dict or
object whose item or attribute is assigned, ``hp["n"] = n``), or bound
anywhere in a loop around that line. For a site written in the top-level code itself, a
binding further down in no loop around that line is not one of them: the site runs again
only as a loop around it does. A module constant, and a name whose every binding ran
before that line outside the loops around it (set up twice, ``SMALLEST = max(SMALLEST,
32)``, or an earlier loop's variable), are not. It also reads the ``prune=`` expression of
a macro or of an ``autotune_launch`` call: the variables it reads where it is evaluated
(``covering(n)`` makes a prune from the caller's ``n``), and what its scope assigns to a
name it reads (``keep = covering(n)``, then ``prune=keep``).
"""

from __future__ import annotations

import ast
import dis
import linecache
import types
from collections import Counter
from collections.abc import Mapping
from typing import Any

from tunedsl.frontend.compile import expand_to_ast
from tunedsl.frontend.scope_facts import constant_locals, own_nodes

__all__ = [
    "bound_at_top_level",
    "called_as",
    "chains_assigned_to_names_read",
    "chains_read_by_argument",
    "chains_read_by_option",
    "expanded_with",
    "rebound_at_top_level",
]

#: One binding: the name, the first and last line of its statement, and the line spans of
#: the loops around it (a ``for`` loop's target is inside its own loop).
Binding = tuple[str, int, int, tuple[tuple[int, int], ...]]

# filename -> (the linecache lines the answer was made from, the bindings, the expansion)
_SEEN: dict[str, tuple[list[str], list[Binding], ast.Module]] = {}

# filename -> the lines its code was expanded with after its own (``expanded_with``)
_APPENDED: dict[str, str] = {}


def expanded_with(filename: str, appended: str) -> None:
    """The code of ``filename`` was expanded with ``appended`` after its own lines: an
    IPython cell that calls the macro an earlier cell imported is expanded with that import
    added (``tunedsl/ipython.py``), and its text alone is no DSL module. Read so here too."""
    _APPENDED[filename] = appended
    _SEEN.pop(filename, None)


def rebound_at_top_level(filename: str, line: int, *, later: bool = True) -> dict[str, int]:
    """The names the top-level code of the module in ``filename``, running ``line`` now, may
    still bind as it runs on, each with a line that binds it. Empty where the source is not
    to be had or does not parse. ``later=False``: what runs at ``line`` runs again only as a
    loop around it does (a macro written in the top-level code itself, not in a function it
    calls), so a binding further down that is in no loop around ``line`` (a second phase's)
    comes after its last run and is left out."""
    found: dict[str, int] = {}
    for name, first, last, loops in _bindings(filename):
        around = any(start <= line <= end for start, end in loops)
        if around or (later and last >= line):
            found.setdefault(name, first)
    return found


def _bindings(filename: str) -> list[Binding]:
    return _read(filename)[1]


def _read(filename: str) -> tuple[list[str], list[Binding], ast.Module]:
    lines = linecache.getlines(filename)
    seen = _SEEN.get(filename)
    if seen is not None and seen[0] is lines:
        return seen
    source = "".join(lines)
    appended = _APPENDED.get(filename)
    if appended is not None and lines:
        source = (source if source.endswith("\n") else source + "\n") + appended
    try:
        tree = expand_to_ast(source, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the DSL's errors too
        tree = ast.Module(body=[], type_ignores=[])
    _SEEN[filename] = (lines, _bindings_of(tree), tree)
    return _SEEN[filename]


def bound_at_top_level(tree: ast.Module, namespace: Mapping[str, Any] | None = None) -> set[str]:
    """The names the top-level code of the module ``tree`` binds as it runs (an IPython cell
    about to run), also through the functions it defines that rebind a global, and through
    the functions of ``namespace`` it calls by name that do (``configure(64)`` of an earlier
    cell's ``def configure(n): global size; size = n``)."""
    found = {name for name, _, _, _ in _bindings_of(tree)}
    if not namespace:
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            code = getattr(namespace.get(node.func.id), "__code__", None)
            if isinstance(code, types.CodeType):
                found |= _globals_stored(code)
    return found


def _globals_stored(code: types.CodeType) -> set[str]:
    """The globals ``code`` (and the code nested in it) binds or deletes."""
    found = {
        str(op.argval)
        for op in dis.get_instructions(code)
        if op.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _globals_stored(const)
    return found


def _bindings_of(tree: ast.Module) -> list[Binding]:
    found: list[Binding] = []
    writers = _global_writers(tree)
    called: Counter[str] = Counter()
    _scan_block(tree.body, (), found, writers, called)
    named = Counter(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in writers)
    for function, names in writers.items():
        if named[function] > called[function]:  # called from a function, or passed on
            found += [(name, line, _ANY, ((0, _ANY),)) for name, line in names.items()]
    return found


#: A chain read from a variable: its name, then ``(".", attr)`` or ``("[]", constant)`` steps.
Chain = tuple[Any, ...]


def chains_read_by_option(
    filename: str, span: tuple[int, int, int, int], option: str
) -> set[Chain]:
    """The variables (with the attributes and constant items read from them: ``self.live``,
    ``hp["n"]``) that the expression of the ``option=`` keyword of a macro or of a call
    (``autotune_launch``) reads where it is evaluated, outside the bodies of the lambdas it
    makes (a lambda's defaults included). ``span`` (first line, last line, first column, last
    column) lies around the expression: the positions of the code that evaluates the
    macro's options, or of the call. Empty where the source is not to be had."""
    found = _option_value(filename, span, option)
    if not found:
        return set()
    tree, value = found
    fixed = constant_locals(_scope_around(tree, (value.lineno, value.col_offset)))
    return {c for c in _chains(value) if c[0] not in fixed}


def chains_assigned_to_names_read(
    filename: str, span: tuple[int, int, int, int], option: str
) -> dict[str, set[Chain]]:
    """For each bare name the ``option=`` expression reads (as ``chains_read_by_option``
    finds it), what the scope around it assigns to that name, read as the expression reads
    it: a prune made a line before the call (``keep = at_most(limit)``, then ``prune=keep``)
    holds what it was made from."""
    found = _option_value(filename, span, option)
    if not found:
        return {}
    tree, value = found
    start = (value.lineno, value.col_offset)
    made = _made_before(tree, start, {c[0] for c in _chains(value) if len(c) == 1})
    fixed = constant_locals(_scope_around(tree, start))
    return {name: {c for c in chains if c[0] not in fixed} for name, chains in made.items()}


def chains_read_by_argument(
    filename: str, span: tuple[int, int, int, int], position: int | None, name: str
) -> set[Chain] | None:
    """What the call at ``span`` passes for the parameter ``name`` reads, as
    ``chains_read_by_option`` reads an option: the keyword ``name=``, else the positional
    argument at ``position`` (None: only a keyword names it), with what a name passed is
    made from. None where the call is not found or the argument cannot be told (``*args``
    or ``**kwargs`` in the call), and an empty set where the parameter takes its default."""
    tree = _read(filename)[2]
    node = _call_at(tree, span)
    if node is None:
        return None
    for keyword in node.keywords:
        if keyword.arg == name:
            return _argument_chains(tree, keyword.value)
    if position is None or any(k.arg is None for k in node.keywords):
        return None
    if any(isinstance(a, ast.Starred) for a in node.args[: position + 1]):
        return None
    if position >= len(node.args):
        return set()
    return _argument_chains(tree, node.args[position])


def called_as(filename: str, span: tuple[int, int, int, int]) -> tuple[str, ...] | None:
    """How the call at ``span`` names what it calls: ``("name", f)`` for ``f(...)``,
    ``("attribute", o, m)`` for ``o.m(...)``, ``("super", m)`` for ``super().m(...)``; None
    for any other form (``a.b.m(...)``, ``f()(...)``) or where the call is not found."""
    node = _call_at(_read(filename)[2], span)
    func = node.func if node is not None else None
    if isinstance(func, ast.Name):
        return ("name", func.id)
    if not isinstance(func, ast.Attribute):
        return None
    base = func.value
    if isinstance(base, ast.Name):
        return ("attribute", base.id, func.attr)
    supered = isinstance(base, ast.Call) and ast.unparse(base.func) == "super"
    return ("super", func.attr) if supered else None


def _call_at(tree: ast.Module, span: tuple[int, int, int, int]) -> ast.Call | None:
    first, last, col, end_col = span
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (
            node.lineno, node.col_offset, node.end_lineno, node.end_col_offset
        ) == (first, col, last, end_col):  # fmt: skip
            return node
    return None


def _argument_chains(tree: ast.Module, expr: ast.expr) -> set[Chain]:
    """What the argument ``expr`` reads, and, for a name its scope assigns (``keep =
    covering(n)``, then ``topk(x, keep)``), what that is made from; constant locals left out."""
    chains = _chains(expr)
    if isinstance(expr, ast.Name):
        made = _made_before(tree, (expr.lineno, expr.col_offset), {expr.id})
        chains = chains.union(*made.values())
    fixed = constant_locals(_scope_around(tree, (expr.lineno, expr.col_offset)))
    return {c for c in chains if c[0] not in fixed}


def _option_value(
    filename: str, span: tuple[int, int, int, int], option: str
) -> tuple[ast.Module, ast.expr] | None:
    """The module and the expression of the ``option=`` keyword inside ``span``."""
    first, last, col, end_col = span
    tree = _read(filename)[2]
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):  # the DSL thunk's {"prune": ...}
            pairs = [(k.value, v) for k, v in zip(node.keys, node.values, strict=True)
                     if isinstance(k, ast.Constant)]  # fmt: skip
        elif isinstance(node, ast.Call):  # autotune_launch(..., prune=...)
            pairs = [(k.arg, k.value) for k in node.keywords]
        else:
            continue
        for name, value in pairs:
            if name != option:
                continue
            start = (value.lineno, value.col_offset)
            end = (value.end_lineno or value.lineno, value.end_col_offset or 0)
            if (first, col) <= start and end <= (last, end_col):
                return tree, value
    return None


def _made_before(tree: ast.Module, at: tuple[int, int], names: set[str]) -> dict[str, set[Chain]]:
    """What the scope around ``at`` assigns to each of ``names``, as chains."""
    out: dict[str, set[Chain]] = {}
    for node in own_nodes(_scope_around(tree, at)) if names else ():
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in names:
                out.setdefault(target.id, set()).update(_chains(value))
    return out


def _scope_around(tree: ast.Module, at: tuple[int, int]) -> ast.AST:
    """The innermost function whose body holds the position ``at``, else the module."""
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
            inner = (node.lineno, node.col_offset) <= at <= end
            if inner and (scope is tree or node.lineno >= getattr(scope, "lineno", 0)):
                scope = node
    return scope


def _chains(expr: ast.expr) -> set[Chain]:
    out: set[Chain] = set()
    todo: list[ast.AST] = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Lambda):  # its body runs later: only its defaults run here
            todo.extend([*node.args.defaults, *(d for d in node.args.kw_defaults if d)])
            continue
        steps: list[Any] = []
        indices: list[ast.AST] = []
        base: ast.AST = node
        while isinstance(base, (ast.Attribute, ast.Subscript)):
            if isinstance(base, ast.Attribute):
                steps.append((".", base.attr))
            elif isinstance(base.slice, ast.Constant):
                steps.append(("[]", base.slice.value))
            else:
                steps = []  # `hp[i]`: only what the variable holds is known
                indices.append(base.slice)
            base = base.value
        if isinstance(base, ast.Name):
            if isinstance(base.ctx, ast.Load):
                out.add((base.id, *reversed(steps)))
            todo.extend(indices)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


#: A line past every line of a module.
_ANY = 1 << 30


def _global_writers(tree: ast.Module) -> dict[str, dict[str, int]]:
    """The module's functions that rebind its globals (``global LIVE; LIVE = n``) or change
    one in place (``HP["n"] = n`` where ``HP`` is no local of theirs), each with those
    names and the line of their ``global`` statement or of the change."""
    out: dict[str, dict[str, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = {
                n: g.lineno for g in ast.walk(node) if isinstance(g, ast.Global) for n in g.names
            }
            local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            for inner in ast.walk(node):
                if isinstance(inner, ast.stmt) and inner is not node:
                    local.update(n for n in _bound_by(inner) if n not in names)
                if isinstance(inner, (ast.For, ast.AsyncFor, ast.comprehension)):
                    local.update(n for n in _names_stored(inner.target) if n not in names)
            for inner in ast.walk(node):
                if isinstance(inner, ast.stmt) and inner is not node:
                    for name, line in _changed_in_place(inner).items():
                        if name not in local:
                            names.setdefault(name, line)
            if names:
                out[node.name] = names
    return out


def _scan_block(
    block: list[ast.stmt],
    loops: tuple[tuple[int, int], ...],
    found: list[Binding],
    writers: dict[str, dict[str, int]],
    called: Counter[str],
) -> None:
    """Adds to ``found`` the names ``block`` binds (``loops``: the loops around it), also
    through a call of one of ``writers`` (counted in ``called``)."""
    for stmt in block:
        end = stmt.end_lineno or stmt.lineno
        body = getattr(stmt, "body", None)
        # a compound statement binds in its header (`with ... as f:`), before its body runs
        last = max(stmt.lineno, body[0].lineno - 1) if isinstance(body, list) and body else end
        for name in {**_bound_by(stmt), **_walrus_in(stmt), **_changed_in_place(stmt)}:
            if not name.startswith("__tunedsl_"):  # the expansion's own, hoisted names
                found.append((name, stmt.lineno, last, loops))
        for function in _calls_in(stmt, writers):
            called[function] += 1
            found += [(name, stmt.lineno, last, loops) for name in writers[function]]
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # their bodies are scopes of their own
        inner_loops = loops
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            inner_loops = (*loops, (stmt.lineno, end))
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            for name in _names_stored(stmt.target):
                found.append((name, stmt.lineno, end, inner_loops))
        if isinstance(stmt, ast.While):  # `while (batch := next(it, None)) is not None:`
            for name in _walrus_in(stmt):
                found.append((name, stmt.lineno, end, inner_loops))
        for inner, repeats in _blocks_of(stmt):
            _scan_block(inner, inner_loops if repeats else loops, found, writers, called)


def _blocks_of(stmt: ast.stmt) -> list[tuple[list[ast.stmt], bool]]:
    """The statement blocks ``stmt`` holds, each with whether it runs repeatedly."""
    loop = isinstance(stmt, (ast.For, ast.AsyncFor, ast.While))
    out = []
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block:
            out.append((block, loop and field == "body"))
    for part in [*getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]:
        out.append((part.body, False))
    return out


def _bound_by(stmt: ast.stmt) -> dict[str, int]:
    """The names one statement binds in its own scope (not in the blocks it holds)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name: stmt.lineno}
    if isinstance(stmt, ast.Assign):
        targets: list[ast.expr] = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0]: stmt.lineno for a in stmt.names}
    else:
        targets = []
    out: dict[str, int] = {}
    for target in targets:
        out.update(_names_stored(target))
    return out


#: The methods of dicts, lists and sets that change them in place.
_MUTATORS = frozenset(
    {"update", "setdefault", "pop", "popitem", "clear", "append", "extend", "insert",
     "remove", "add", "discard", "sort", "reverse", "__setitem__", "__delitem__"}
)  # fmt: skip


def _changed_in_place(stmt: ast.stmt) -> dict[str, int]:
    """The names whose value ``stmt`` itself changes without binding them: an item or
    attribute assigned or deleted (``hp["n"] = n``, ``hp.n += 1``, ``del hp["n"]``), or a
    dict's, list's or set's own method that changes it called (``hp.update(n=n)``). A
    prune reading ``hp["n"]`` sees another value after such a statement, as after a
    rebinding of ``hp``."""
    if isinstance(stmt, ast.Assign):
        targets: list[ast.expr] = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = stmt.targets if isinstance(stmt, ast.Delete) else [stmt.target]
    elif (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr in _MUTATORS
    ):
        targets = [stmt.value.func]
    else:
        return {}
    out: dict[str, int] = {}
    for target in targets:
        for node in ast.walk(target):  # `a, hp["n"] = ...` too
            if isinstance(node, (ast.Subscript, ast.Attribute)):
                base = node.value
                while isinstance(base, (ast.Subscript, ast.Attribute)):
                    base = base.value
                if isinstance(base, ast.Name):
                    out.setdefault(base.id, stmt.lineno)
    return out


def _walrus_in(stmt: ast.stmt) -> dict[str, int]:
    """The names ``:=`` binds in ``stmt``'s own expressions (not in the blocks it holds, nor
    in a function or lambda it makes: a comprehension's binds in this scope)."""
    return {
        node.target.id: node.lineno
        for node in _own_expressions(stmt)
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name)
    }


def _calls_in(stmt: ast.stmt, writers: dict[str, dict[str, int]]) -> list[str]:
    """The functions of ``writers`` that ``stmt``'s own expressions call by name."""
    return [
        node.func.id
        for node in _own_expressions(stmt)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in writers
    ]  # fmt: skip


def _own_expressions(stmt: ast.stmt) -> list[ast.AST]:
    """The nodes of ``stmt``'s own expressions: not of the blocks it holds, nor of the
    functions and lambdas it makes."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    todo: list[ast.AST] = []
    for field, value in ast.iter_fields(stmt):
        if field not in ("body", "orelse", "finalbody", "handlers", "cases"):
            parts = value if isinstance(value, list) else [value]
            todo.extend(part for part in parts if isinstance(part, ast.AST))
    out = []
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _names_stored(target: ast.expr) -> dict[str, int]:
    return {
        n.id: n.lineno
        for n in ast.walk(target)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
