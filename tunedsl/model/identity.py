"""A site's identity: the name its records are stored under (runtime layer, pure Python).

The identity is part of every record's digest, so it must survive edits that cannot
change what the site launches. ``file:line:col`` did not: an import added above a call
re-tuned every key. The default identity is

    <file>:<enclosing function's qualified name>:<kernel text>[#<ordinal>]

e.g. ``model.py:Attention.forward:flash_fwd`` (``<module>`` at module level). ``<file>``
comes from the file alone, never from how it was loaded (``__name__`` is ``__main__``
under ``tunedsl run`` and ``python -m``, the stem under ``precompile``, the dotted name
under ``import``): the path of the resolved file (symbolic links followed) relative to the
root of its package, the first directory up without ``__init__.py``. A script outside any
package is its base name (``mm.py``); ``models/attn/mm.py`` of package ``models`` is
``models/attn/mm.py`` wherever the project lives, so records shipped with a project move
with it. Two scripts of one name in two directories outside packages share the name; their
records still differ by kernel (its qualified name and source hash are in the digest).

The ordinal counts earlier macros with the same kernel text in the same function (``#1``
for the second), so two launches of one kernel in one function stay apart. ``name=``
replaces the whole identity. A macro moved to another function, or a renamed function or
file, is a new site (``tunedsl cache gc`` removes the old records once unused for 30 days).

The front end knows the enclosing function; it passes ``scope=`` and ``ordinal=`` to
``make_site``, which declares them here before building the ``Site``. The plain API
(``autotune_launch``) has no expander: its scope is found by parsing the caller's file
with ``ast`` (plain Python; a file that uses the macro too is parsed by the front end, which
the runtime installs here with ``use_dsl_parser``), and its ordinal counts the ``autotune_launch`` calls before it
in that function (on earlier lines, and left of it on a line that holds several). A call
inserted above another so takes the other's identity; what keeps it from the other's
records is the launch text in their digest (the DSL's ``blocks=`` and ``$`` arguments, the
plain call's ``grid=``, ``args=``, ``kwargs=`` and ``key=``), which the runtime reads from
the spans this file index keeps of each call's arguments (``call_arguments``).

Older records are migrated on first use (``runtime/legacy_records.py``): those of
tunedsl 0.1 (identity ``file:line:col`` or ``name=``, every tool version in the digest)
and those keyed by the kernel's module name (identity ``<base name>:<scope>:<kernel>``).
``previous_ids`` gives a site's older identities.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from tunedsl.warn import warn_once

LEGACY = "legacy"
MODULE_SCOPE = "<module>"

_lock = threading.Lock()
# (filename, line, col) -> (scope, ordinal), declared by make_site before Site() runs.
_declared: dict[tuple[str, int, int], tuple[str, int]] = {}


class _Names(NamedTuple):
    legacy: str  # tunedsl 0.1: file:line:col (or name=)
    by_base_name: str  # keyed by module name: <base name>:<scope>:<kernel>[#n] (or name=)
    location: str  # "/abs/file.py:line:col" with a 1-based col


_sites: dict[str, _Names] = {}


def file_identity(filename: str) -> str:
    """The part of an identity naming ``filename``: its resolved path relative to its
    package root (``pkg/sub/mm.py``), its base name outside packages; a name that is not
    a file path (``<string>``, ``?``) is its base name."""
    if os.path.isabs(filename):  # the usual case: asked on every new key, worked out once
        return _absolute_file_identity(filename)
    return _file_identity(filename)


@functools.lru_cache(maxsize=256)
def _absolute_file_identity(filename: str) -> str:
    return _file_identity(filename)


#: IPython's name of a cell: the number of its run, then a hash of its text.
_IPYTHON_CELL = re.compile(r"<ipython-input-\d+-(\w+)>")


def is_ipython_cell(filename: str) -> bool:
    """Whether ``filename`` is IPython's name of a cell (each cell run has its own)."""
    return _IPYTHON_CELL.fullmatch(filename) is not None


def code_digest(code: Any) -> str:
    """A digest of what a code object does (its bytecode, names and constants, nested
    functions included), the same in every process of one Python: it names a site called
    from code that has no file to parse (a statement typed at ``python -i``)."""
    import hashlib

    digest = hashlib.sha256()

    def walk(c: Any) -> None:
        digest.update(c.co_code)
        digest.update(repr((c.co_name, c.co_names, c.co_varnames, c.co_freevars)).encode())
        for const in c.co_consts:
            if hasattr(const, "co_code"):
                walk(const)
            elif isinstance(const, frozenset):  # its order follows the hash seed
                digest.update(repr(sorted(map(repr, const))).encode())
            else:
                digest.update(repr(const).encode())

    walk(code)
    return digest.hexdigest()[:16]


def _file_identity(filename: str) -> str:
    if not filename or filename.startswith("<") or not os.path.isfile(filename):
        cell = _IPYTHON_CELL.fullmatch(filename)
        if cell:  # named by its text, not by when it ran: run again, it is the same site
            return f"<ipython-input-{cell.group(1)}>"
        return os.path.basename(filename)
    path = os.path.realpath(filename)
    _, packages = package_root(path)
    return "/".join([*packages, os.path.basename(path)])


def package_root(path: str) -> tuple[str, list[str]]:
    """For a file ``path``: the directory above its outermost package (the directories
    from there down to the file's each hold an ``__init__.py``), and the names of those
    packages, outermost first (none for a file outside a package)."""
    packages: list[str] = []
    directory = os.path.dirname(path)
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        packages.insert(0, os.path.basename(directory))
        directory = parent
    return directory, packages


def module_names(filename: str) -> tuple[str, ...]:
    """The names a module loaded from ``filename`` can have had: the dotted name from its
    package root, the stem, and what ``tunedsl precompile`` names a taken stem."""
    import hashlib

    dotted = file_identity(filename).removesuffix(".py").replace("/", ".")
    stem = os.path.splitext(os.path.basename(filename))[0]
    abspath = os.path.abspath(filename)
    private = f"__tunedsl_precompile_{hashlib.sha256(abspath.encode()).hexdigest()[:12]}__"
    return tuple(dict.fromkeys((dotted, stem, private)))


def declare(filename: str, line: int, col: int, scope: str, ordinal: int) -> None:
    """The expander's facts about the macro at ``filename:line:col`` (0-based col)."""
    with _lock:
        _declared[(filename, line, col)] = (scope, ordinal)


def site_id(filename: str, line: int, col: int, kernel_text: str, name: Any) -> str:
    """The identity of the site at ``filename:line:col`` (0-based col) launching
    ``kernel_text``; ``name`` (a string given as ``name=``) replaces it."""
    if isinstance(name, str):
        ident = by_base_name = name  # the file's scope is not needed: never parsed
    else:
        with _lock:
            declared = _declared.get((filename, line, col))
        scope, ordinal = declared or _scope_from_file(filename, line, kernel_text)
        tail = f":{scope}:{kernel_text}" + (f"#{ordinal}" if ordinal else "")
        ident = file_identity(filename) + tail
        by_base_name = os.path.basename(filename) + tail
    # 0.1 named a site by name= too, but keyed every tool version: its records migrate.
    legacy = name if isinstance(name, str) else legacy_id(filename, line, col)
    with _lock:
        _sites[ident] = _Names(legacy, by_base_name, f"{filename}:{line}:{col + 1}")
    return ident


def renamed(current: str, name: str, first: bool, label: str) -> str:
    """The identity a computed ``name=`` gives a site: the first value it takes (``first``:
    this is it). A site is one macro call whatever its name says, and a call whose key is
    decided never evaluates ``name=`` again, so a later value that differs (``f"layer{i}"``)
    cannot name the calls apart: one warning, and the site keeps its name."""
    if first:
        return name
    warn_once(
        f"renamed:{label}",
        f"{label}: name= gave {name!r} here but {current!r} on the site's first call; one "
        f"autotune(...) call is one site with one name, so this call is decided as "
        f"{current!r} (and calls of a key already decided never read name= again). Give "
        "name= one value, and put what differs between calls in key= (autotune_launch "
        "makes one site per name=)",
        UserWarning,
        stacklevel="user",
    )
    return current


def legacy_id(filename: str, line: int, col: int) -> str:
    """The identity before 0.2: ``base name:line:col`` (0-based col)."""
    return f"{os.path.basename(filename)}:{line}:{col}"


def location(ident: str) -> str:
    """``/abs/file.py:line:col`` (1-based col) of the site called ``ident`` in this process."""
    with _lock:
        names = _sites.get(ident)
    return names.location if names else ""


def scope_of(tree: ast.Module, line: int) -> str:
    """The qualified name of the innermost function or class around ``line``."""
    return _scope_in(_defs(tree.body), line)


# A function or class: (name, first line, last line, the functions and classes of its body).
_Def = tuple[str, int, int, tuple["_Def", ...]]


def _defs(body: list[ast.stmt]) -> tuple[_Def, ...]:
    return tuple(
        (node.name, node.lineno, node.end_lineno or node.lineno, _defs(node.body))
        for node in body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    )


def _scope_in(defs: tuple[_Def, ...], line: int) -> str:
    parts: list[str] = []
    while True:
        for name, first, last, inner in defs:
            if first <= line <= last:
                parts.append(name)
                defs = inner
                break
        else:
            return ".".join(parts) or MODULE_SCOPE


# An argument of a call and its span: (its keyword, ``**`` for a mapping unpacked, or the
# index of a positional argument after the first; line, col, end line, end col).
Argument = tuple[str, int, int, int, int]


class _FileIndex(NamedTuple):
    defs: tuple[_Def, ...]
    # (callee name, line, col, end line, end col) of every call in the file
    calls: tuple[tuple[str, int, int, int, int], ...]
    arguments: tuple[tuple[Argument, ...], ...]  # of each call, in the order of ``calls``


# Parses a file that Python cannot (a DSL module: `$name`), positions the user's. The front
# end can, and this layer may not import it: the runtime installs it (``use_dsl_parser``).
_dsl_parser: Callable[[str, str], ast.Module] | None = None


def use_dsl_parser(parse: Callable[[str, str], ast.Module]) -> None:
    """Parse files that use the macro with ``parse(source, filename)`` (the front end's)."""
    global _dsl_parser
    _dsl_parser = parse


@functools.lru_cache(maxsize=16)
def _index(source: str, filename: str) -> _FileIndex:
    """The functions, classes and calls of one file's text: parsed once per process
    for all the plain-API sites of a file (keyed by the text, so an edited file is
    parsed again)."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError:
        if _dsl_parser is None:
            raise
        tree = _dsl_parser(source, filename)  # a DSL module, with the user's positions
    nodes = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    calls = tuple((_callee_name(node.func), *_span(node)) for node in nodes)
    return _FileIndex(_defs(tree.body), calls, tuple(map(_arguments, nodes)))


def _span(node: ast.expr) -> tuple[int, int, int, int]:
    return (node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0)


def _arguments(call: ast.Call) -> tuple[Argument, ...]:
    positional = [(str(i), *_span(arg)) for i, arg in enumerate(call.args) if i]
    named = [(kw.arg or "**", *_span(kw.value)) for kw in call.keywords]
    return tuple(positional + named)


def _file_index(filename: str) -> _FileIndex | None:
    read = _read_file(filename)
    return read[1] if read else None


def _read_file(filename: str) -> tuple[str, _FileIndex] | None:
    """The text of ``filename`` and its index; None when it cannot be read or parsed."""
    try:
        with open(filename, encoding="utf-8") as fh:
            source = fh.read()
        return source, _index(source, filename)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError):
        return None


def _scope_from_file(filename: str, line: int, kernel_text: str) -> tuple[str, int]:
    """(scope, ordinal) of a call at ``line`` of a plain Python file; when the file cannot
    be read or parsed, the line stands in for the scope (the old behaviour)."""
    index = _file_index(filename)
    if index is None:
        return f"line {line}", 0
    scope = _scope_in(index.defs, line)
    callee = kernel_text.rpartition(".")[2]
    earlier = sum(
        1
        for name, start, *_ in index.calls
        if name == callee and start < line and _scope_in(index.defs, start) == scope
    )
    return scope, earlier


def calls_on_line(filename: str, line: int, callee: str) -> int:
    """How many calls of a function named ``callee`` start on ``line`` of ``filename``
    (0 when the file cannot be read or parsed)."""
    index = _file_index(filename)
    if index is None:
        return 0
    return sum(1 for name, start, *_ in index.calls if name == callee and start == line)


def declare_call(filename: str, line: int, end: tuple[int, int], callee: str) -> int:
    """Declare the identity of the call of ``callee`` at ``line`` of a plain Python file
    that ends at ``end`` (line, col), one of several such calls on that line, and return
    its 0-based column. Its ordinal counts the calls of the scope on earlier lines (as for
    a call alone on its line) and those on this line left of it, so each call is its own
    site; -1 when no call of the file ends there."""
    index = _file_index(filename)
    here = [c for c in index.calls if c[0] == callee and (c[3], c[4]) == end] if index else []
    if index is None or not here or here[0][1] != line:
        return -1
    col = here[0][2]
    scope, ordinal = _scope_from_file(filename, line, callee)
    ordinal += sum(
        1
        for name, start, start_col, *_ in index.calls
        if name == callee and start == line and start_col < col
    )
    declare(filename, line, col, scope, ordinal)
    return col


def call_arguments(
    filename: str, callee: str, line: int, end: tuple[int, int] | None
) -> tuple[str, tuple[Argument, ...]] | None:
    """The text of ``filename`` and the arguments of its call of ``callee`` that ends at
    ``end`` (line, col: where Python's positions of the calling instruction say it ends),
    or, where Python gives no positions, the one such call that starts on ``line``; None
    when the file cannot be read or parsed (a name like ``<stdin>``: no file), or no one
    call of the file is found there."""
    read = None if filename.startswith("<") else _read_file(filename)
    if read is None:
        return None
    source, index = read
    found = [
        i
        for i, (name, start, _, *last) in enumerate(index.calls)
        if name == callee and (tuple(last) == end if end is not None else start == line)
    ]
    return (source, index.arguments[found[0]]) if len(found) == 1 else None


def _callee_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def previous_ids(ident: str) -> tuple[str, str]:
    """The older identities of the site now called ``ident``: (keyed by module name,
    tunedsl 0.1's ``file:line:col``); empty strings for a site this process has not built."""
    with _lock:
        names = _sites.get(ident)
    return (names.by_base_name, names.legacy) if names else ("", "")
