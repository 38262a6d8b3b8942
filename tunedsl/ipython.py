"""IPython extension: ``%load_ext tunedsl`` lets notebook and console cells use the DSL.

IPython parses every cell with ``shell.compile.ast_parse(cell, filename=cell_name)`` and
registers the cell's text in ``linecache`` under that name first. The extension wraps that
one method: a cell that needs expansion is parsed by the front end's ``expand_to_ast``
instead, which keeps every node's line and column, so syntax errors and tracebacks point at
the cell's own lines.

Loading the extension also installs the import hook (``tunedsl.activate``), so cells can
import DSL modules, turns Triton's interpreter on when the machine has no GPU driver
(``tunedsl.autointerp``), and shows tunedsl's errors with the user's frames only.

Two things differ from a module:

- A later cell may call ``autotune`` imported by an earlier one. While the user namespace
  binds the macro (or the ``tunedsl`` module), the cell is expanded with those imports
  appended after its last line (line numbers of the cell stay as they are); the appended
  statements are dropped from the result, so the cell's last expression is still displayed.
- Every cell is its own "module" for the expander, which numbers sites from 0; all cells
  share one namespace, so a site name is renamed to one unique in the session, or a function
  defined in an earlier cell would call a later cell's site. Its hoisted statements (the
  runtime's import, the sites made) run once per parse of the cell, in that namespace:
  ``%timeit`` runs a parsed cell in a loop inside a function.
"""

from __future__ import annotations

import ast
import itertools
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

_SITE_NAME = re.compile(r"__tunedsl_site_\w*__")
_ORIGINAL = "_tunedsl_original_ast_parse"
_session_sites = itertools.count()


def _tunedsl_bindings(user_ns: dict[str, Any]) -> Iterator[str]:
    """Import statements that rebind the names the namespace gives to tunedsl's macro/module."""
    tunedsl_module = sys.modules.get("tunedsl")
    if tunedsl_module is None:
        return
    macro_module = sys.modules.get("tunedsl.runtime.macro")
    macro = getattr(macro_module, "autotune", None)
    for name, value in list(user_ns.items()):
        if not name.isidentifier() or name.startswith("_"):
            continue  # IPython's own history names (_, _i1, ...) are never macro aliases
        if value is tunedsl_module:
            yield f"import tunedsl as {name}"
        elif macro is not None and value is macro:
            yield f"from tunedsl import autotune as {name}"


class _RenameSites(ast.NodeTransformer):
    """Give each generated site name of one cell a name unique in the session."""

    def __init__(self, taken: dict[str, Any]) -> None:
        self.taken = taken
        self.mapping: dict[str, str] = {}

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if _SITE_NAME.fullmatch(node.id):
            new = self.mapping.get(node.id)
            if new is None:
                new = f"__tunedsl_site_{next(_session_sites)}__"
                while new in self.taken:
                    new = f"__tunedsl_site_{next(_session_sites)}__"
                self.mapping[node.id] = new
            node.id = new
        return node


def expand_cell(cell: str, filename: str, user_ns: dict[str, Any]) -> ast.Module | None:
    """The cell's expanded AST, or None when neither the cell nor the session uses tunedsl."""
    from tunedsl.frontend import rebinding
    from tunedsl.frontend.compile import expand_to_ast, needs_expansion

    imports = list(_tunedsl_bindings(user_ns))
    source = cell
    first_appended_line = 0
    if imports:
        body = cell if cell.endswith("\n") else cell + "\n"
        first_appended_line = body.count("\n") + 1
        source = body + "\n".join(imports) + "\n"
    elif not needs_expansion(cell):
        return None
    try:
        tree = expand_to_ast(source, filename)
    except SyntaxError as err:
        if imports and (err.lineno or 0) >= first_appended_line:
            # The cell ran into the appended lines (an unclosed bracket, say): let IPython
            # parse the cell alone, so the error is about the cell's own text.
            return None
        raise
    if imports:
        # The prune check reads the cell's source again, expanded as here.
        rebinding.expanded_with(filename, source[len(body) :])
        # Drop the appended imports again: they only told the expander what the names mean.
        appended = set(imports)
        tree.body = [
            node
            for node in tree.body
            if not (
                getattr(node, "lineno", 0) >= first_appended_line and ast.unparse(node) in appended
            )
        ]
    _RenameSites(user_ns).visit(tree)
    tree.body = [part for node in tree.body for part in _made_once(node)]
    return ast.fix_missing_locations(tree)


_RUNTIME = "__tunedsl_rt__"


def _made_once(node: ast.stmt) -> list[ast.stmt]:
    """A hoisted statement of the expansion (the runtime's import, a site made) as one that
    runs once for this parse of the cell. ``%timeit`` and ``%%timeit`` parse their code as a
    cell and run it in a loop inside a function: the site was made again, and its first
    call decided from the records, on every run, and that is what they timed. The names are
    the session's globals; at a cell's top level the ``global`` statement does nothing."""
    if isinstance(node, ast.Import) and [a.asname for a in node.names] == [_RUNTIME]:
        name = _RUNTIME
    elif (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and _SITE_NAME.fullmatch(node.targets[0].id)
    ):
        name = node.targets[0].id
    else:
        return [node]
    made = ast.Try(
        body=[ast.Expr(ast.Name(name, ast.Load()))],
        handlers=[ast.ExceptHandler(ast.Name("NameError", ast.Load()), None, [node])],
        orelse=[],
        finalbody=[],
    )
    return [ast.copy_location(ast.Global([name]), node), ast.copy_location(made, node)]


def _make_ast_parse(shell: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    def ast_parse(source: str, filename: str = "<unknown>", symbol: str = "exec") -> Any:
        if symbol == "exec" and isinstance(source, str):
            tree = expand_cell(source, filename, shell.user_ns)
            if tree is not None:
                return tree
        return original(source, filename, symbol)

    setattr(ast_parse, _ORIGINAL, original)
    return ast_parse


def _user_frames_only(
    shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None
) -> None:
    """IPython's custom handler for tunedsl's ``UsageError``, ``TuningError`` and
    ``TunedslSyntaxError``: the traceback without tunedsl's frames (IPython hides
    ``__tracebackhide__`` frames except the last, which here was always tunedsl's), so it
    ends at the cell's ``autotune(...)`` line, as under ``tunedsl run``. ``python -X dev``
    keeps every frame."""
    from tunedsl.warn import is_internal, without_frames

    if issubclass(etype, SyntaxError):
        # IPython shows a syntax error as the line and caret it names, after the frames of
        # the exception being handled (the cells' calls that led to a site's `$NAME` check,
        # a space computed at the call); none where it comes from parsing a cell.
        if not sys.flags.dev_mode:
            own = _ipython_dir()
            tb = without_frames(tb, lambda f: is_internal(f) or os.path.abspath(f).startswith(own))
            value.with_traceback(tb)
        shell.showtraceback((etype, value, tb), running_compiled_code=tb is not None)
        return
    if not sys.flags.dev_mode:
        tb = without_frames(tb)
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)


def _ipython_dir() -> str:
    """IPython's package directory (its frames run a cell, as tunedsl's run a site)."""
    ipython = sys.modules.get("IPython")
    where = getattr(ipython, "__file__", None)
    return os.path.dirname(os.path.abspath(where)) + os.sep if where else "\0"


def _errors() -> tuple[type, ...]:
    from tunedsl.errors import TunedslSyntaxError, TuningError, UsageError

    return (UsageError, TuningError, TunedslSyntaxError)


class _ForgetRedefined(ast.NodeTransformer):
    """Before each cell's code runs (after ``pre_run_cell``, where ``%autoreload`` reloads
    edited modules): sites forget the kernels whose helpers or globals were redefined since
    the last cell, and the decisions their computed settings made from a global rebound
    since or that the cell binds (``size = 16`` before its call, or a call of a function
    that rebinds it). The cell is left as it is; a process with no site pays nothing."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    def visit(self, node: ast.AST) -> ast.AST:
        redefined = sys.modules.get("tunedsl.runtime.redefined")
        if redefined is not None:
            from tunedsl.frontend.rebinding import bound_at_top_level

            try:
                bound: Any = (
                    bound_at_top_level(node, self.shell.user_ns)
                    if isinstance(node, ast.Module)
                    else set()
                )
            except Exception:  # IPython would drop a transformer that raises: bind every name
                bound = _EveryName()
            redefined.forget_redefined(bound)
        return node


class _EveryName:
    """The names a cell binds where its code could not be read: any name."""

    def __contains__(self, name: object) -> bool:
        return True


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tunedsl``: expand cells that use the DSL (idempotent)."""
    from tunedsl.autointerp import enable_if_no_gpu

    enable_if_no_gpu("%load_ext tunedsl")
    # Cells may import DSL modules too: the import hook (idempotent) expands them.
    from tunedsl import activate

    activate.install()
    if not any(isinstance(t, _ForgetRedefined) for t in ipython.ast_transformers):
        ipython.ast_transformers.append(_ForgetRedefined(ipython))
    if not getattr(ipython, "custom_exceptions", ()):  # never replace the user's handler
        ipython.set_custom_exc(_errors(), _user_frames_only)
    compiler = ipython.compile
    if hasattr(compiler.ast_parse, _ORIGINAL):
        return
    compiler.ast_parse = _make_ast_parse(ipython, compiler.ast_parse)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext tunedsl``: cells are plain Python again."""
    ipython.ast_transformers[:] = [
        t for t in ipython.ast_transformers if not isinstance(t, _ForgetRedefined)
    ]
    if getattr(ipython, "custom_exceptions", ()) == _errors():
        ipython.set_custom_exc((), None)
    compiler = ipython.compile
    original = getattr(compiler.ast_parse, _ORIGINAL, None)
    if original is None:
        return
    if "ast_parse" in vars(compiler):
        del compiler.ast_parse  # back to the class's method
    if getattr(compiler.ast_parse, _ORIGINAL, None) is not None:  # pragma: no cover
        compiler.ast_parse = original
