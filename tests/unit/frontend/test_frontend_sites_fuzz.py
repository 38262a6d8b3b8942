"""Property tests over whole scripts (``scripts_with_sites.py``): sites embedded in varied
Python expand without touching anything around them.

- a valid script expands (no exception at all), and an invalid one raises only
  ``TunedslSyntaxError``;
- outside its sites the expanded module is the user's, node for node and position for
  position (compared with the script whose sites are replaced by a plain call), and the
  compiled code has the same line numbers; inside them every name stands where the user
  wrote it, and ``$name`` becomes ``<cfg>.name`` at the ``$``;
- an error carries the file, line and column of the mistake, and its caret stands under it
  on a terminal (tabs, wide and combining characters before it included);
- expanding is deterministic, and expanding the expanded text changes nothing.
"""

from __future__ import annotations

import ast
import re
import types
import unicodedata
import warnings

from hypothesis import HealthCheck, given, settings
from scripts_with_sites import Script, reference_text, scripts

from tunedsl.errors import TunedslSyntaxError
from tunedsl.frontend.compile import compile_source, expand_source, expand_to_ast

SETTINGS = settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FILENAME = "/home/me/kern é.py"
SITE_CALL = "SITE"


def _mark_sites(tree: ast.Module, is_site) -> ast.Module:  # type: ignore[no-untyped-def]
    """``tree`` with every site call replaced by a ``SITE`` name at the same position."""

    class Marker(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if is_site(node.func):
                return ast.copy_location(ast.Name(id=SITE_CALL, ctx=ast.Load()), node)
            return self.generic_visit(node)

    return Marker().visit(tree)


def _is_reference_site(func: ast.expr) -> bool:
    return isinstance(func, ast.Name) and func.id.startswith("_S_")


def _is_expanded_site(func: ast.expr) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "launch"
        and isinstance(func.value, ast.Name)
        and func.value.id.startswith("__tunedsl_site_")
    )


def _without_prologue(tree: ast.Module) -> ast.Module:
    def generated(stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Import):
            return stmt.names[0].name == "tunedsl.runtime.dsl"
        return (
            isinstance(stmt, ast.Assign)
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id.startswith("__tunedsl_site_")
        )

    tree.body = [stmt for stmt in tree.body if not generated(stmt)]
    return tree


def _written(lines: list[bytes], node: ast.expr) -> str:
    """The user's text at ``node``'s position (one line), as Python reads a name (NFKC)."""
    assert node.lineno == node.end_lineno
    text = lines[node.lineno - 1][node.col_offset : node.end_col_offset].decode()
    return unicodedata.normalize("NFKC", text)


def _is_cfg(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id.startswith("__tunedsl_cfg_")


def _lines_by_code(code: types.CodeType, skip: set[int]) -> dict[str, set[int]]:
    """Qualified name -> the line numbers of its instructions outside ``skip``."""
    found: dict[str, set[int]] = {}
    stack = [code]
    while stack:
        c = stack.pop()
        lines = {line for _, _, line in c.co_lines() if line is not None and line not in skip}
        if lines:
            found.setdefault(getattr(c, "co_qualname", c.co_name), set()).update(lines)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return found


def _site_lines(script: Script) -> set[int]:
    lines: set[int] = set()
    for start, end in script.sites:
        first = _line_of(script.text, start)
        lines.update(range(first, _line_of(script.text, end) + 1))
    return lines


def _line_of(text: str, offset: int) -> int:
    before = text[:offset]
    return before.count("\n") + before.count("\r") - before.count("\r\n") + 1


@SETTINGS
@given(scripts())
def test_sites_expand_and_leave_everything_around_them_as_written(script: Script) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        expanded = expand_to_ast(script.data, FILENAME)
        reference = ast.parse(reference_text(script), FILENAME)
    # Inside the sites too: every name is where the user wrote it, and `$name` became
    # `<cfg>.name` at the `$` (a traceback's caret stands under the user's text).
    lines = [line.encode() for line in re.split("\r\n|\r|\n", script.text)]
    for node in ast.walk(expanded):
        if isinstance(node, ast.Name) and not node.id.startswith("__tunedsl_"):
            assert _written(lines, node) == node.id
        elif isinstance(node, ast.Attribute) and _is_cfg(node.value):
            assert _written(lines, node) == "$" + node.attr

    mine = _mark_sites(_without_prologue(expanded), _is_expanded_site)
    theirs = _mark_sites(reference, _is_reference_site)
    assert ast.dump(mine, include_attributes=True) == ast.dump(theirs, include_attributes=True)

    # The compiled code runs the user's lines: the same lines per function outside the sites.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        code = compile_source(script.data, FILENAME)
        plain = compile(reference_text(script), FILENAME, "exec", dont_inherit=True)
    skip = _site_lines(script)
    assert _lines_by_code(code, skip) == _lines_by_code(plain, skip)
    assert code.co_filename == FILENAME


@SETTINGS
@given(scripts())
def test_expanding_is_deterministic_and_idempotent(script: Script) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        once = expand_source(script.data, FILENAME)
        assert expand_source(script.data, FILENAME) == once
        assert expand_source(once, FILENAME) == once
        compile(once, FILENAME, "exec", dont_inherit=True)


def display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: tabs to the next multiple of 8, East Asian wide
    characters two, combining marks none."""
    col = 0
    for ch in text:
        if ch == "\t":
            col += 8 - col % 8
        elif unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        elif unicodedata.east_asian_width(ch) in ("W", "F"):
            col += 2
        else:
            col += 1
    return col


@SETTINGS
@given(scripts(error=True))
def test_errors_name_the_place_and_put_the_caret_under_it(script: Script) -> None:
    start, end = next((s, e) for s, e in script.sites if "$tq" in script.text[s:e])
    offset = script.text.index("$tq", start, end)
    line = _line_of(script.text, offset)
    line_start = max(script.text.rfind("\n", 0, offset), script.text.rfind("\r", 0, offset)) + 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            compile_source(script.data, FILENAME)
    except TunedslSyntaxError as err:
        error = err
    else:
        raise AssertionError("a script reading `$tq` compiled")
    assert (error.filename, error.lineno, error.col) == (FILENAME, line, offset - line_start)
    rendered = error.render().splitlines()
    assert rendered[0].startswith(f"{FILENAME}:{line}:{offset - line_start + 1}: error: ")
    source_line, caret = rendered[1], rendered[2]
    assert source_line[4:] == script.text[line_start:].splitlines()[0]
    assert display_width(caret[: caret.index("^")]) == display_width(
        source_line[: 4 + offset - line_start]
    )
    assert caret.strip(" \t") == "^^^"
