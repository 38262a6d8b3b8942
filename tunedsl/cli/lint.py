"""``tunedsl lint FILE...``: run ruff on DSL scripts, with findings at the original positions.

``$name`` is not Python, so ruff (and editors) reject a DSL file outright. This command
gives ruff a length-preserving rewrite of each file instead, built from the front end's own
scan (so it finds exactly the macro calls the expander does):

- ``$name`` becomes ``_name`` (the front end's rewrite before ``ast.parse``);
- inside each macro call, each ``keyword=`` is blanked, so ``autotune(space=S, blocks=B,
  k(...))`` reads ``autotune(      S,        B, k(...))``: every value stays where it was
  and is used, and the launch is no longer a positional argument after keywords.

Every character keeps its line and column, so ruff's findings are reported where they are
in the user's file. Findings that only the rewrite causes are dropped: an undefined name
``_name`` at a placeholder, and anything that starts inside a blanked ``keyword=``. Plain
Python files are linted as they are. A DSL module is also expanded, as ``tunedsl expand
--check`` does, so a mistake only the expansion sees (a ``$name`` the space lacks, a missing
launch, a bad ``blocks=``) is reported with its place and hint; a DSL module that does not
parse gets Python's syntax error alone, and ruff never sees its raw ``$name`` text. Exit status: 0 clean, 1 findings or a DSL syntax error,
2 when ruff is missing or a file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

DESCRIPTION = (
    "Run ruff on DSL scripts: ruff sees a length-preserving rewrite of each file (`$name` -> "
    "`_name`, macro keywords blanked), and its findings are reported at the file's own lines "
    "and columns. ruff's own configuration (pyproject.toml, ruff.toml) applies."
)


#: tunedsl's own finding: ``blocks=`` floor-divides by a configuration field. A warning
#: (the exit status stays as ruff's findings make it): a user may mean it.
FLOOR_GRID = "TDS001"


@dataclass(frozen=True)
class LintText:
    """The text ruff checks, and the places where a finding is the rewrite's, not the user's."""

    text: str
    placeholders: frozenset[tuple[int, int]]  # (line, 1-based column) of each `$`
    blanked: tuple[tuple[int, int], ...]  # character offsets [start, end) blanked
    line_starts: tuple[int, ...]  # character offset of each line (the front end's map)
    # tunedsl's own warnings: (line, 1-based column, message)
    warnings: tuple[tuple[int, int, str], ...] = ()


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "lint", help="run ruff on DSL scripts at their own positions", description=DESCRIPTION
    )
    parser.add_argument("files", metavar="FILE", nargs="+", help="DSL (or plain Python) files")
    return parser


def lint_text(source: bytes, filename: str) -> LintText | None:
    """The rewrite of a DSL module (None for plain Python: ruff checks it as it is)."""
    from tunedsl.frontend.compile import scan_if_dsl
    from tunedsl.frontend.parser import (
        assign_placeholders,
        find_macros,
        find_placeholders,
    )
    from tunedsl.frontend.source import SourceText

    scanned = scan_if_dsl(source, filename)
    if scanned is None:
        return None
    text, lexed, bindings = scanned
    src = SourceText(text, filename)
    if lexed.trouble is not None:
        return None  # not even tokenizable: lint_file reports Python's syntax error
    macros = find_macros(src, lexed.tokens, lexed.pairs, bindings)
    placeholders = find_placeholders(src, lexed.tokens)
    assign_placeholders(src, lexed.tokens, lexed.pairs, macros, placeholders)
    chars = list(text)
    for ph in placeholders:
        chars[ph.start] = "_"
    blanked = []
    for macro in macros:
        for arg in macro.args:
            if arg.keyword is not None:
                for i in range(arg.start, arg.value_start):
                    if chars[i] not in "\r\n":
                        chars[i] = " "
                blanked.append((arg.start, arg.value_start))
    rewritten = "".join(chars)
    return LintText(
        rewritten,
        frozenset(_ruff_position(src.line_col(ph.start)) for ph in placeholders),
        tuple(blanked),
        tuple(src.line_starts),
        tuple(w for macro in macros for w in _floor_grids(src, rewritten, macro)),
    )


def _floor_grids(src: Any, rewritten: str, macro: Any) -> list[tuple[int, int, str]]:
    """``blocks=`` terms ``a // b`` (or ``int(a / b)``, ``math.floor(a / b)``) with a
    ``$field`` in ``a`` or ``b``: ``n // $tile`` launches too few programs when ``n`` is not
    a multiple of the tile (the last, partial tile is never computed, which only ``verify=``
    would catch); ``cdiv(n, $tile)`` rounds up."""
    import ast

    from tunedsl.frontend.parser import parse_expression_at

    out: list[tuple[int, int, str]] = []
    for arg in macro.args:
        if arg.keyword != "blocks" or not arg.placeholders:
            continue
        fields = {src.byte_col(ph.start): ph.name for ph in arg.placeholders}
        try:
            node = parse_expression_at(src, rewritten, arg.value_start, arg.value_end)
        except SyntaxError:
            continue  # the expansion reports it
        parents = {id(child): up for up in ast.walk(node) for child in ast.iter_child_nodes(up)}
        for term in ast.walk(node):
            if not isinstance(term, ast.expr):
                continue
            div = _truncated_division(term)
            floor = isinstance(term, ast.BinOp) and isinstance(term.op, ast.FloorDiv)
            if div is None and not (floor and not _rounds_up(term, parents.get(id(term)))):
                continue
            quotient: Any = div or term  # an ast.BinOp either way
            used = [
                fields[(name.lineno, name.col_offset)]
                for name in ast.walk(term)
                if isinstance(name, ast.Name) and (name.lineno, name.col_offset) in fields
            ]
            if not used:
                continue
            count = quotient.left  # `(n - 1) // $t`: `(n - 1) // $t + 1` short of its `+ 1`
            if isinstance(count, ast.BinOp) and isinstance(count.op, ast.Sub) \
                    and isinstance(count.right, ast.Constant) and count.right.value == 1:  # fmt: skip
                count = count.left
            whole, left, right, covered = (
                " ".join((ast.get_source_segment(src.text, part) or "").split())
                for part in (term, quotient.left, quotient.right, count)
            )
            line, col = term.lineno, src.char_col(term.lineno, term.col_offset) + 1
            what = (
                f"uses `//` on the configuration field ${used[0]}: `{whole}` rounds down"
                if div is None
                else f"truncates a division with the configuration field ${used[0]}: "
                f"`{whole}` rounds down as {left} // {right} does"
            )
            out.append(
                (
                    line,
                    col,
                    f"{FLOOR_GRID} warning: blocks= {what}, so when {left} is not a multiple "
                    f"of {right} the last, partial block is never launched; use "
                    f"cdiv({covered}, {right}) (or add `# noqa: {FLOOR_GRID}` where the floor "
                    "is meant)",
                )
            )
    return out


def _truncated_division(node: Any) -> Any:
    """The true division ``a / b`` that ``node`` rounds down, ``int(a / b)``,
    ``math.floor(a / b)`` or ``math.trunc(a / b)`` (also with ``floor`` or ``trunc``
    imported by name), else None: each is ``a // b`` for the sizes of a grid."""
    import ast

    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return None
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    arg = node.args[0]
    truncates = name in ("floor", "trunc") or (name == "int" and isinstance(func, ast.Name))
    if truncates and isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Div):
        return arg
    return None


def _rounds_up(div: Any, parent: Any) -> bool:
    """Whether the floor division ``div`` is one of the round-up idioms: ``(a + d - 1) // d``
    (in any order of its terms), ``-(-a // d)`` and ``(a - 1) // d + 1``."""
    import ast

    def terms(node: Any, sign: int = 1) -> list[tuple[int, str]]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            right = sign if isinstance(node.op, ast.Add) else -sign
            return terms(node.left, sign) + terms(node.right, right)
        return [(sign, ast.dump(node))]

    one = ast.dump(ast.Constant(1))
    numerator = terms(div.left)
    divisor = ast.dump(div.right)
    if (1, divisor) in numerator and (
        (-1, one) in numerator  # `(a + d - 1) // d`, also `(hi - lo + d - 1) // d`
        or all(sign > 0 for sign, term in numerator if term != divisor)  # `(a + d) // d`
    ):  # (the second: a block more where d divides a, never fewer)
        return True
    negated = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)
    if negated and isinstance(div.left, ast.UnaryOp) and isinstance(div.left.op, ast.USub):
        return True
    plus_one = (
        isinstance(parent, ast.BinOp)
        and isinstance(parent.op, ast.Add)
        and parent.left is div
        and ast.dump(parent.right) == one
    )
    return plus_one and (-1, one) in numerator


def _binds_macro(source: bytes) -> bool:
    """Whether ``source``, its undecodable bytes replaced, is a DSL module."""
    from tunedsl.frontend.compile import scan_if_dsl

    try:
        return scan_if_dsl(source.decode("utf-8", "replace")) is not None
    except Exception:  # not even that scans: ruff reports what it finds
        return False


def _ruff_position(line_col: tuple[int, int]) -> tuple[int, int]:
    return line_col[0], line_col[1] + 1  # ruff's columns are 1-based


def _offset(rewrite: LintText, line: int, column: int) -> int:
    if not 1 <= line <= len(rewrite.line_starts):
        return -1
    return rewrite.line_starts[line - 1] + column - 1


def _keep(finding: dict[str, Any], rewrite: LintText) -> bool:
    loc = finding.get("location") or {}
    line, col = int(loc.get("row", 0)), int(loc.get("column", 0))
    code = finding.get("code") or ""
    if code == "F821" and (line, col) in rewrite.placeholders:
        return False  # `_name` is our spelling of `$name`
    at = _offset(rewrite, line, col)
    return not any(start <= at < end for start, end in rewrite.blanked)


def _ruff() -> list[str] | None:
    exe = shutil.which("ruff")
    if exe is None:
        beside = os.path.join(os.path.dirname(sys.executable), "ruff")
        exe = beside if os.path.exists(beside) else None
    return [exe] if exe else None


def lint_file(ruff: list[str], path: str) -> tuple[list[str], int]:
    """ruff's findings for one file as ``file:line:col: CODE message`` lines, and a status."""
    from tunedsl.errors import TunedslSyntaxError
    from tunedsl.frontend.source import describe_syntax_error, read_source, unreadable_reason

    try:
        source = read_source(path)  # a FIFO or a device is refused, never waited on
    except OSError as err:
        reason = unreadable_reason(path, err, command="tunedsl lint")
        return [f"tunedsl lint: error: cannot open {path!r}: {reason}"], 2
    try:
        rewrite = lint_text(source, os.path.abspath(path))
    except TunedslSyntaxError as err:
        return [err.render()], 1
    except SyntaxError as err:  # bytes that do not decode
        if _binds_macro(source):  # a DSL module: `import` and `expand` fail with this error
            return describe_syntax_error(err, path, source).splitlines(), 1
        rewrite = None  # plain Python (compile() accepts a bad byte in a comment): ruff checks it
    if rewrite is not None or _binds_macro(source):  # a DSL module (None: it does not scan)
        from tunedsl.frontend.compile import compile_source

        try:  # the checks of the expansion itself: what `tunedsl expand --check` rejects
            compile_source(source, os.path.abspath(path))
        except TunedslSyntaxError as err:
            return [err.render()], 1
        except SyntaxError as err:  # Python's own error, alone: no rule runs on raw DSL text
            return describe_syntax_error(err, path, source).splitlines(), 1
    text = rewrite.text if rewrite is not None else source.decode("utf-8", "replace")
    # ruff finds the project's configuration from the file's place: a relative name (`k.py`
    # from a subfolder) would fall back to its defaults. Findings keep the path as typed.
    named = os.path.abspath(path)
    proc = subprocess.run(
        [*ruff, "check", "--output-format", "json", "--stdin-filename", named, "-"],
        input=text.encode("utf-8"),
        capture_output=True,
    )
    try:
        findings = json.loads(proc.stdout.decode("utf-8") or "[]")
    except ValueError:
        message = proc.stderr.decode("utf-8", "replace").strip() or "no output"
        return [f"tunedsl lint: error: ruff failed on {path}: {message}"], 2
    lines = [
        f"{path}:{line}:{col}: {message}"
        for line, col, message in (rewrite.warnings if rewrite is not None else ())
        if rewrite is not None and not _noqa(rewrite, line, FLOOR_GRID)
    ]
    warnings = len(lines)
    for finding in findings:
        if rewrite is not None and not _keep(finding, rewrite):
            continue
        loc = finding.get("location") or {}
        code = finding.get("code") or "syntax-error"
        lines.append(f"{path}:{loc.get('row')}:{loc.get('column')}: {code} {finding['message']}")
    return lines, 1 if len(lines) > warnings else 0


_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?", re.I)


def _noqa(rewrite: LintText, line: int, code: str) -> bool:
    """Whether ``line`` says ``# noqa`` (bare, or naming ``code``), as ruff reads it."""
    start = rewrite.line_starts[line - 1]
    end = rewrite.line_starts[line] if line < len(rewrite.line_starts) else len(rewrite.text)
    found = _NOQA.search(rewrite.text, start, end)
    if found is None:
        return False
    codes = found.group("codes")
    return codes is None or code in {c.strip().upper() for c in codes.split(",")}


def main(args: argparse.Namespace) -> int:
    from tunedsl.frontend.source import read_source, unreadable_reason

    status, readable = 0, []
    for path in args.files:  # input that cannot be read is named first, ruff or not
        try:
            read_source(path)
        except OSError as err:
            reason = unreadable_reason(path, err, command="tunedsl lint")
            print(f"tunedsl lint: error: cannot open {path!r}: {reason}", file=sys.stderr)
            status = 2
        else:
            readable.append(path)
    if not readable:
        return status
    ruff = _ruff()
    if ruff is None:
        print(
            "tunedsl lint: error: ruff is not installed; install it (`pip install ruff`) and "
            "run `tunedsl lint` again",
            file=sys.stderr,
        )
        return 2
    for path in readable:
        lines, code = lint_file(ruff, path)
        for line in lines:
            print(line, file=sys.stderr if code == 2 else sys.stdout)
        status = max(status, code)
    return status
