"""Expander layer: the checks of one macro call before it is rewritten (``expand.py``).

Each mistake the text shows (an unknown or repeated keyword, a missing ``space=`` or
``blocks=``, a launch that is not a kernel call, a ``$name`` where it cannot be, a field the
space lacks, an empty axis, a part that would mean something else inside a generated
lambda) is a ``TunedslSyntaxError`` at the user's line and column, with the fix.
"""

from __future__ import annotations

import ast
import keyword
import re

from tunedsl.frontend.parser import DECORATOR_HINT, DECORATOR_MESSAGE, MacroArg, MacroCall
from tunedsl.frontend.source import SourceText
from tunedsl.model.options import (
    GRID_HINT,
    HINT_NAMES,
    MACRO_KEYWORDS,
    did_you_mean,
    hint_value_problem,
    option_choice_problem,
    triton_counterpart,
    unknown_field,
)

# Inside the generated lambdas these would mean something else than where the user wrote them.
_CHANGES_MEANING_IN_A_LAMBDA: dict[type, str] = {
    ast.Yield: "`yield`",
    ast.YieldFrom: "`yield from`",
    ast.Await: "`await`",
    ast.NamedExpr: "`:=`",
}


class MacroChecks:
    """The checks of one macro call; ``expand._MacroExpander`` rewrites on top of them."""

    def __init__(self, src: SourceText, macro: MacroCall) -> None:
        self.src = src
        self.macro = macro
        self.callee_span = (macro.start, macro.callee_end)

    def _error(self, message: str, start: int, end: int | None = None, hint: str | None = None):
        return self.src.error(message, start, end, hint)

    def _classify(self) -> tuple[dict[str, MacroArg], MacroArg]:
        keywords: dict[str, MacroArg] = {}
        launches: list[MacroArg] = []
        for arg in self.macro.args:
            if arg.keyword is None:
                launches.append(arg)
                continue
            name = arg.keyword
            name_end = arg.start + len(name)
            self._check_keyword_value(arg)
            if name not in MACRO_KEYWORDS:
                close = did_you_mean(name, MACRO_KEYWORDS)
                hint = (GRID_HINT if name == "grid" else triton_counterpart(name)) or (
                    f"did you mean `{close}=`?"
                    if close
                    else "autotune(...) accepts: " + ", ".join(MACRO_KEYWORDS)
                )
                raise self._error(
                    f"unknown keyword `{name}=` in autotune(...)", arg.start, name_end, hint
                )
            if name in keywords:
                raise self._error(
                    f"keyword argument repeated: `{name}=`",
                    arg.start,
                    name_end,
                    hint="give each keyword of autotune(...) once",
                )
            keywords[name] = arg
        launch_hint = "pass the kernel launch as the one positional argument, e.g. `vadd(a, b, n, TILE=$tile)`"
        if not launches:
            if self.src.text[: self.callee_span[0]].rstrip().endswith("@"):
                raise self._error(DECORATOR_MESSAGE, *self.callee_span, hint=DECORATOR_HINT)
            raise self._error(
                "autotune(...) needs the kernel launch as its positional argument",
                *self.callee_span,
                hint=launch_hint,
            )
        if len(launches) > 1:
            second = launches[1]
            raise self._error(
                "autotune(...) takes exactly one positional argument (the kernel launch); "
                "this is a second one",
                second.value_start,
                second.value_end,
                hint="launch one kernel per autotune(...) call",
            )
        self._check_triton_launch(launches[0])
        for required, example in (
            ("space", "space=dict(tile=[256, 512])"),
            ("blocks", "blocks=cdiv(n, $tile)"),
        ):
            if required not in keywords:
                raise self._error(
                    f"autotune(...) needs `{required}=`",
                    *self.callee_span,
                    hint=f"add e.g. `{example}`",
                )
        launch = launches[0]
        if not isinstance(launch.node, ast.Call):
            raise self._error(
                "the positional argument of autotune(...) must be a call of the kernel",
                launch.value_start,
                launch.value_end,
                hint=launch_hint,
            )
        kernel = launch.node.func
        while isinstance(kernel, (ast.Attribute, ast.Subscript)):
            kernel = kernel.value
        if not isinstance(kernel, ast.Name):
            func = launch.node.func
            raise self._error(
                "the kernel of the launch must be a name, an attribute or a subscript",
                self.src.offset(func.lineno, func.col_offset),
                self.src.offset(func.end_lineno or func.lineno, func.end_col_offset or 0),
                hint="like `vadd(...)`, `kernels.vadd(...)` or `table[i](...)`: "
                "bind a computed kernel to a name first",
            )
        return keywords, launch

    def _check_triton_launch(self, launch: MacroArg) -> None:
        """Triton's launch form, ``kernel[grid](args)``, whose grid goes in ``blocks=`` here
        (a kernel picked from a table, ``table[i](args)``, is a launch as written)."""
        node = launch.node
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)):
            return
        grid = node.func.slice
        start = self.src.offset(grid.lineno, grid.col_offset)
        end = self.src.offset(grid.end_lineno or grid.lineno, grid.end_col_offset or 0)
        # A grid, as no table's key is: a lambda, or a tuple holding a `$` field
        # (`kernels[a.dtype, "rm"]` and `kernels[(m, n)]` pick a kernel from a table)
        sized = any(start <= p.start < end for p in launch.placeholders)
        if not (isinstance(grid, ast.Lambda) or (isinstance(grid, ast.Tuple) and sized)):
            return
        kernel = self.src.text[
            launch.value_start : self.src.offset(
                node.func.value.end_lineno or 0, node.func.value.end_col_offset or 0
            )
        ]
        raise self._error(
            "Triton's `kernel[grid](...)` launch: in autotune(...) the grid is `blocks=`",
            start,
            end,
            hint=f"write `blocks={self.src.text[start:end]}, {kernel}(...)`, the launch "
            "without the brackets",
        )

    def _check_keyword_value(self, arg: MacroArg) -> None:
        """What a list element may be but a keyword argument's value may not (the parser
        reads the arguments as a list), as Python says."""
        node, name = arg.node, arg.keyword
        if isinstance(node, ast.Starred):
            raise self._error(
                f"`{name}=` cannot take an unpacked (`*`) value",
                arg.value_start,
                arg.value_end,
                hint=f"write `{name}=(...)` with the value itself",
            )
        if (
            isinstance(node, ast.NamedExpr)
            and self.src.offset(node.lineno, node.col_offset) == arg.value_start
        ):
            raise self._error(
                f"`:=` needs parentheses as the value of `{name}=`",
                arg.value_start,
                arg.value_end,
                hint=f"write `{name}=({self.src.text[arg.value_start : arg.value_end]})`",
            )

    def _check_placement(self, keywords: dict[str, MacroArg], launch: MacroArg) -> None:
        for name, arg in keywords.items():
            if name != "blocks" and arg.placeholders:
                ph = arg.placeholders[0]
                raise self._error(
                    f"`${ph.name}` is not allowed in `{name}=`",
                    ph.start,
                    ph.end,
                    hint="a configuration field can only be used in blocks= and in the "
                    "kernel launch's arguments",
                )
        assert isinstance(launch.node, ast.Call)
        func = launch.node.func
        func_end = self.src.offset(func.end_lineno or func.lineno, func.end_col_offset or 0)
        for ph in launch.placeholders:
            if ph.start < func_end:
                raise self._error(
                    f"`${ph.name}` is not allowed in the kernel expression",
                    ph.start,
                    ph.end,
                    hint="the kernel is chosen once per call; use `$name` in its arguments",
                )

    def _check_literal_space(
        self, node: ast.expr, space: ast.expr | None, fields: list[str], pruned: bool
    ) -> None:
        """What the first call would refuse of a literal ``space=`` (``node``; ``space``, its
        literal form): its field names, the fields `$name`s read, the configurations of a
        list space, empty axes, and launch-hint values (left to the runtime under
        ``prune=``, which may drop such a configuration first)."""
        self._check_field_names(node)
        self._check_fields(fields)
        self._check_every_configuration(space)
        self._check_empty_axes(node)
        if not pruned:
            self._check_hint_fields(node)

    def _check_field_names(self, space: ast.expr) -> None:
        """Every field of a literal space has a name a `$name` can read (the runtime refuses
        the others on the first call)."""
        for name, node in _space_fields(space):
            if name != "?" and (not name.isidentifier() or name.startswith("_")):
                raise self._error(
                    f"space= field `{name}` cannot be read by a `$name`: a field name is an "
                    "identifier that does not start with `_`",
                    self.src.offset(node.lineno, node.col_offset),
                    self.src.offset(node.end_lineno or node.lineno, node.end_col_offset or 0),
                    f"rename it, e.g. `{_readable_name(name)}`",
                )

    def _check_static_hint(self, name: str, arg: MacroArg, literal: ast.expr) -> None:
        """A literal static hint the runtime would refuse on the first call, refused here
        with the runtime's message (``num_warps=[2, 4]``, ``num_warps=3``)."""
        try:
            value = ast.literal_eval(literal)
        except (ValueError, TypeError, SyntaxError, RecursionError):  # left to the runtime
            return
        problem = None if value is None else hint_value_problem(name, value, static=True)
        if problem is not None:
            raise self._error(problem, arg.value_start, arg.value_end)

    def _check_fields(self, fields: list[str]) -> None:
        for ph in self.macro.placeholders:
            if ph.name not in fields:
                message, hint = unknown_field(ph.name, fields)
                raise self._error(message, ph.start, ph.end, hint)

    def _check_every_configuration(self, space: ast.expr | None) -> None:
        """In a literal list space, every configuration has each field a `$name` reads (the
        first call would name the one that lacks it; the module is rejected here instead)."""
        if not isinstance(space, ast.List):
            return
        for ph in self.macro.placeholders:
            for d in space.elts:
                assert isinstance(d, ast.Dict)
                items = [
                    (str(k.value), v)
                    for k, v in zip(d.keys, d.values, strict=True)
                    if isinstance(k, ast.Constant)
                ]
                if ph.name not in (name for name, _ in items):
                    shown = ", ".join(f"{name}={ast.unparse(v)}" for name, v in items)
                    raise self._error(
                        f"`${ph.name}` is not a field of every configuration: "
                        f"Config({shown}) has none",
                        ph.start,
                        ph.end,
                        hint=f"give every configuration of the list space a `{ph.name}`",
                    )

    def _check_empty_axes(self, space: ast.expr) -> None:
        """An axis with no values makes a space of no configuration: say so where it is."""
        for name, _, value in _space_items(space):
            if isinstance(value, (ast.List, ast.Tuple)) and not value.elts:
                raise self._error(
                    f"space= field `{name}` has no values, so the space has no configuration",
                    self.src.offset(value.lineno, value.col_offset),
                    self.src.offset(value.end_lineno or value.lineno, value.end_col_offset or 0),
                    hint=f"give `{name}` at least one value, or remove the field",
                )

    def _check_option(self, name: str, arg: MacroArg, literal: ast.expr) -> None:
        """A literal option naming a choice the runtime would refuse on the first call
        (``capture="defualt"``), refused here with the runtime's message."""
        try:
            value = ast.literal_eval(literal)
        except (ValueError, TypeError, SyntaxError, RecursionError):  # left to the runtime
            return
        problem = option_choice_problem(name, value) if value else None  # empty: the default
        if problem is not None:
            raise self._error(problem, arg.value_start, arg.value_end)

    def _check_hint_fields(self, space: ast.expr) -> None:
        """A value of a literal space's launch-hint field that the runtime would refuse on
        the first call (``num_warps=[3, 4]``), refused here with the runtime's message."""
        for name, _, value in _space_items(space):
            if name not in HINT_NAMES:
                continue
            if isinstance(space, ast.List):
                nodes = [value]
            elif isinstance(value, (ast.List, ast.Tuple)):
                nodes = value.elts
            else:
                continue  # not an axis: the runtime names it
            for node in nodes:
                try:
                    given = ast.literal_eval(node)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    continue
                problem = None if given is None else hint_value_problem(name, given, False)
                if problem is not None:
                    raise self._error(
                        problem,
                        self.src.offset(node.lineno, node.col_offset),
                        self.src.offset(node.end_lineno or node.lineno, node.end_col_offset or 0),
                    )

    def _check_unread_fields(self, space: ast.expr) -> None:
        """A field of a literal space that no `$name` reads and that is not a launch hint
        changes nothing that is launched: each of its values would tune the same kernel (a
        field of one value is harmless, unless its name is a misspelled hint)."""
        read = {ph.name for ph in self.macro.placeholders} | set(HINT_NAMES)
        values: dict[str, set[str]] = {}
        for name, _, value in _space_items(space):
            axis = isinstance(value, (ast.List, ast.Tuple)) and not isinstance(space, ast.List)
            values.setdefault(name, set()).update(
                ast.dump(v)
                for v in (value.elts if axis else [value])  # type: ignore[attr-defined]
            )
        for name, node in _space_fields(space):
            close = did_you_mean(name, HINT_NAMES)
            if name in read or (len(values[name]) < 2 and not close):  # one value: tuned once
                continue
            hint = (
                f"did you mean the launch hint `{close}`?"
                if close
                else f"pass it to the kernel (e.g. `{name.upper()}=${name}` in the launch) "
                "or remove the field"
                if not keyword.iskeyword(name)
                else f"`${name}` cannot read a field named like a Python keyword: rename it "
                f"(e.g. `{_readable_name(name)}`) and pass it to the kernel, or remove it"
            )
            effect = (
                "each of its values would tune the same kernel again"
                if len(values[name]) > 1
                else "it changes nothing"
            )
            raise self._error(
                f"space= field `{name}` is read by nothing in the launch: no `${name}` in "
                f"blocks= or the kernel's arguments, and it is not a launch hint, so {effect}",
                self.src.offset(node.lineno, node.col_offset),
                self.src.offset(node.end_lineno or node.lineno, node.end_col_offset or 0),
                hint,
            )

    def _check_deferred(self, part: ast.expr, where: str, when: str) -> None:
        """Parts that run later inside a generated lambda (the `$`-dependent ones in
        ``bind``, the non-literal ones in the lazy thunk) must mean the same there:
        ``yield``, ``await``, ``:=`` and argument-less ``super()`` would not."""
        for node in ast.walk(part):
            what = _CHANGES_MEANING_IN_A_LAMBDA.get(type(node))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "super"
                and not node.args
            ):
                what = "argument-less `super()`"
            if what is not None and isinstance(node, ast.expr):
                start = self.src.offset(node.lineno, node.col_offset)
                end = self.src.offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
                raise self._error(
                    f"{what} cannot be used in {where}",
                    start,
                    end,
                    hint=f"that expression is evaluated {when}: compute the value before "
                    "autotune(...) and pass the variable",
                )

    def _starred_error(self, node: ast.AST) -> Exception:
        start = self.src.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.src.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return self._error(
            "an unpacked (`*`/`**`) launch argument cannot use `$name`",
            start,
            end,
            hint="pass the `$`-dependent argument on its own",
        )


def _space_items(space: ast.expr) -> list[tuple[str, ast.expr | ast.keyword, ast.expr]]:
    """(field name, the node naming it, its value) of each field a space display spells."""
    dicts = space.elts if isinstance(space, ast.List) else [space]
    out: list[tuple[str, ast.expr | ast.keyword, ast.expr]] = []
    for d in dicts:
        if isinstance(d, ast.Dict):
            for k, v in zip(d.keys, d.values, strict=True):
                if k is not None:
                    name = str(k.value) if isinstance(k, ast.Constant) else "?"
                    out.append((name, k, v))
        elif isinstance(d, ast.Call):
            out.extend((kw.arg or "?", kw, kw.value) for kw in d.keywords)
    return out


def _space_fields(space: ast.expr) -> list[tuple[str, ast.expr | ast.keyword]]:
    return [(name, node) for name, node, _ in _space_items(space)]


def _readable_name(name: str) -> str:
    """A field name like ``name`` that ``$`` can read: ``block-size`` -> ``block_size``."""
    fixed = re.sub(r"\W", "_", name).strip("_") or "field"
    fixed = "f_" + fixed if fixed[0].isdigit() else fixed
    return fixed + "_" if keyword.iskeyword(fixed) else fixed
