"""Expander layer: check each parsed macro call (``checks.py``) and rewrite it per the
expansion contract.

The shape emitted here is normative (docs/ARCHITECTURE.md, "The expansion contract"): a
prologue import of ``tunedsl.runtime.dsl``, one hoisted ``make_site(...)`` per macro with
the literal parts, and in place of the macro one call of the site. Every generated node
carries the line and column of the user's text it stands for.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass

from tunedsl.frontend.checks import MacroChecks
from tunedsl.frontend.launch_text import launch_text
from tunedsl.frontend.literals import literal_of, literal_space
from tunedsl.frontend.nodes import (
    Span,
    arguments,
    at,
    const,
    dict_display,
    load,
    node_span,
    span_of,
)
from tunedsl.frontend.parser import MacroArg, MacroCall, ParsedModule, Placeholder
from tunedsl.frontend.source import SourceText
from tunedsl.frontend.space_reads import check_read_per_call, read_per_call
from tunedsl.model.identity import MODULE_SCOPE, scope_of
from tunedsl.model.options import HINT_NAMES, OPTION_NAMES

RUNTIME_MODULE = "tunedsl.runtime.dsl"
MAX_BLOCK_DIMS = 3


@dataclass(frozen=True)
class GeneratedNames:
    """Hygienic names: ``__tunedsl_<what>_<n><tag>__`` with a tag no user name clashes with."""

    tag: str

    @property
    def runtime(self) -> str:
        return f"__tunedsl_rt{self.tag}__"

    def site(self, n: int) -> str:
        return f"__tunedsl_site_{n}{self.tag}__"

    def cfg(self, n: int) -> str:
        return f"__tunedsl_cfg_{n}{self.tag}__"

    @classmethod
    def avoiding(cls, user_names: frozenset[str], count: int) -> GeneratedNames:
        candidate = 0
        while True:
            names = cls("" if candidate == 0 else f"_{candidate}")
            mine = {names.runtime} | {names.site(n) for n in range(count)}
            mine |= {names.cfg(n) for n in range(count)}
            if not mine & user_names:
                return names
            candidate += 1


def expand_module(src: SourceText, parsed: ParsedModule) -> ast.Module:
    """The module with every macro call rewritten and the sites hoisted into a prologue."""
    module = parsed.module
    if not parsed.macros:
        return module
    names = GeneratedNames.avoiding(parsed.names, len(parsed.macros))
    dict_is_builtin = not parsed.dict_rebound
    sites: list[ast.stmt] = []
    replacements: dict[Span, ast.expr] = {}
    # The site's identity (model/identity.py): enclosing scope, and the ordinal among
    # the scope's macros launching the same kernel text. Computed before any rewriting.
    scopes = [scope_of(module, src.line_col(m.start)[0]) for m in parsed.macros]
    ordinals: dict[tuple[str, str], int] = {}
    for n, macro in enumerate(parsed.macros):
        expander = _MacroExpander(src, macro, names, n, dict_is_builtin)
        expander.scope, expander.ordinals, expander.module = scopes[n], ordinals, module
        site, call = expander.expand()
        sites.append(site)
        replacements[span_of(src, macro.start, macro.end)] = call
    _replace_macros(module, replacements)

    first = span_of(src, parsed.macros[0].start, parsed.macros[0].callee_end)
    runtime_import = at(
        ast.Import(names=[ast.alias(name=RUNTIME_MODULE, asname=names.runtime)]), first
    )
    body = module.body
    insert_at = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            insert_at = 1  # after the docstring
    while (
        insert_at < len(body)
        and isinstance(body[insert_at], ast.ImportFrom)
        and body[insert_at].module == "__future__"  # type: ignore[attr-defined]
    ):
        insert_at += 1
    body[insert_at:insert_at] = [runtime_import, *sites]
    return module


def _replace_macros(module: ast.Module, replacements: dict[Span, ast.expr]) -> None:
    """Put each site call where the parser left the blanked ``autotune()`` call. Only
    descends into nodes whose lines contain a macro: the cost follows the macros."""
    lines = sorted({span[0] for span in replacements})

    def has_macro(node: ast.AST) -> bool:
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return True
        decorators = getattr(node, "decorator_list", None)
        if decorators:  # a def's line is after its decorators'
            lineno = min(lineno, *(d.lineno for d in decorators))
        k = bisect.bisect_left(lines, lineno)
        return k < len(lines) and lines[k] <= (getattr(node, "end_lineno", None) or lineno)

    placed = 0

    def replaced(node: ast.AST) -> ast.AST:
        nonlocal placed
        if isinstance(node, ast.Call):
            key = (node.lineno, node.col_offset, node.end_lineno or 0, node.end_col_offset or 0)
            if key in replacements:
                placed += 1
                return replacements[key]
        return node

    # Iterative, so deep expressions do not overflow the interpreter's stack.
    stack: list[ast.AST] = [module]
    while stack:
        node = stack.pop()
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST) and has_macro(item):
                        new = value[i] = replaced(item)
                        if new is item:
                            stack.append(item)
            elif isinstance(value, ast.AST) and has_macro(value):
                new = replaced(value)
                setattr(node, name, new)
                if new is value:
                    stack.append(value)
    if placed != len(replacements):  # pragma: no cover - would be a front-end bug
        raise AssertionError(f"placed {placed} of {len(replacements)} macro calls")


class _MacroExpander(MacroChecks):
    """Checks (``checks.py``) and rewrites one macro call."""

    def __init__(
        self, src: SourceText, macro: MacroCall, names: GeneratedNames, n: int, dict_ok: bool
    ) -> None:
        super().__init__(src, macro)
        self.names, self.n, self.dict_ok = names, n, dict_ok
        self.span = span_of(src, macro.start, macro.end)
        self.scope = MODULE_SCOPE
        self.module = ast.Module(body=[], type_ignores=[])  # its module, for what space= reads
        self.ordinals: dict[tuple[str, str], int] = {}
        self.launch_text = ""  # what the launch does per configuration (``_call`` sets it)

    # -- rewrite --------------------------------------------------------------------------

    def expand(self) -> tuple[ast.stmt, ast.expr]:
        keywords, launch = self._classify()
        self._check_placement(keywords, launch)
        space_arg = keywords["space"]
        space_literal, fields = literal_space(space_arg.node, self.dict_ok)  # type: ignore[arg-type]
        if fields is not None:
            node: ast.expr = space_arg.node  # type: ignore[assignment]
            self._check_literal_space(node, space_literal, fields, "prune" in keywords)

        static_hints: list[tuple[str, ast.expr]] = []
        lazy_hints: list[tuple[str, ast.expr]] = []
        options: list[tuple[str, ast.expr]] = []
        lazy_options: list[tuple[str, ast.expr]] = []
        for name, arg in keywords.items():
            assert arg.node is not None
            if name in HINT_NAMES:
                if fields is not None and name in fields:
                    raise self._error(
                        f"`{name}=` is given both as a static hint and as a field of `space=`",
                        arg.start,
                        arg.start + len(name),
                        hint=f"remove `{name}=` here or the `{name}` field from space=",
                    )
                literal = literal_of(arg.node, self.dict_ok)
                if literal:
                    self._check_static_hint(name, arg, literal)
                (static_hints if literal else lazy_hints).append((name, literal or arg.node))
            elif name in OPTION_NAMES:
                literal = literal_of(arg.node, self.dict_ok)
                if literal:
                    self._check_option(name, arg, literal)
                (options if literal else lazy_options).append((name, literal or arg.node))

        blocks = self._blocks(keywords["blocks"])
        if fields is not None:  # after the hint and blocks= checks: those say more
            self._check_unread_fields(space_arg.node)  # type: ignore[arg-type]
        call = self._call(
            launch,
            blocks,
            keywords.get("key"),
            None if space_literal is not None else space_arg.node,
            lazy_hints,
            lazy_options,
        )
        line = self.src.line_col(self.macro.start)[0]  # a space, a check that may differ per call
        space = space_literal is None and read_per_call(self.module, line, space_arg.node)  # type: ignore[arg-type]
        verify = check_read_per_call(self.module, line, dict(lazy_options).get("verify"))
        per_call = {"space": space, "verify": verify}
        site = self._site(launch, space_literal, static_hints, options, "key" in keywords, per_call)
        return site, call

    def _blocks(self, arg: MacroArg) -> ast.expr:
        node = arg.node
        assert node is not None
        message = "blocks= must be an int or a tuple of one to three ints"
        if isinstance(node, ast.Lambda):
            raise self._error(
                "blocks= takes the grid itself, not a function of the launch's meta-parameters "
                "(Triton's `grid=lambda meta: ...` idiom)",
                arg.value_start,
                arg.value_end,
                hint="write the grid with configuration fields: e.g. blocks=cdiv(n, $tile) "
                "instead of lambda meta: (triton.cdiv(n, meta['TILE']),)",
            )
        if isinstance(node, ast.List):  # a list is one value to Triton: never a grid
            inner = ", ".join(ast.get_source_segment(self.src.text, e) or "..." for e in node.elts)
            raise self._error(
                f"{message}; this is a list",
                arg.value_start,
                arg.value_end,
                hint=f"write the grid as a tuple: blocks=({inner}{',' if len(node.elts) == 1 else ''})",
            )
        if isinstance(node, ast.Tuple) and any(
            isinstance(e, (ast.Tuple, ast.List)) for e in node.elts
        ):
            raise self._error(
                f"{message}; this tuple nests another tuple",
                arg.value_start,
                arg.value_end,
                hint="a launch grid is flat: (x, y, z), e.g. blocks=(cdiv(m, $bm), cdiv(n, $bn))",
            )
        if isinstance(node, ast.Tuple):
            if not 1 <= len(node.elts) <= MAX_BLOCK_DIMS or any(
                isinstance(e, ast.Starred) for e in node.elts
            ):
                raise self._error(
                    f"{message}; this tuple has {len(node.elts)} elements"
                    if not any(isinstance(e, ast.Starred) for e in node.elts)
                    else f"{message}; `*` unpacking is not allowed here",
                    arg.value_start,
                    arg.value_end,
                    hint="a launch grid has one to three dimensions: (x,), (x, y) or (x, y, z)",
                )
            return node
        if isinstance(node, ast.Constant) and (type(node.value) is not int or node.value < 0):
            raise self._error(
                message, arg.value_start, arg.value_end, hint="e.g. blocks=cdiv(n, $tile)"
            )
        return at(ast.Tuple(elts=[node], ctx=ast.Load()), node_span(node))

    def _site(
        self,
        launch: MacroArg,
        space: ast.expr | None,
        static_hints: list[tuple[str, ast.expr]],
        options: list[tuple[str, ast.expr]],
        has_key: bool,
        per_call: dict[str, bool],
    ) -> ast.stmt:
        src = self.src
        macro = self.macro
        line, col = src.line_col(macro.start)
        end_line, end_col = src.line_col(macro.end)
        assert isinstance(launch.node, ast.Call)
        func = launch.node.func
        kernel_text = src.text[
            src.offset(func.lineno, func.col_offset) : src.offset(
                func.end_lineno or func.lineno, func.end_col_offset or 0
            )
        ]
        placeholders: list[ast.expr] = [
            ast.Tuple(elts=[const(ph.name), *map(const, src.line_col(ph.start))], ctx=ast.Load())
            for ph in macro.placeholders
        ]
        ordinal = self.ordinals.get((self.scope, kernel_text), 0)
        self.ordinals[(self.scope, kernel_text)] = ordinal + 1
        keywords = {
            "filename": const(src.filename),
            "line": const(line),
            "col": const(col),
            "end_line": const(end_line),
            "end_col": const(end_col),
            "kernel_text": const(kernel_text),
            "scope": const(self.scope),
            "ordinal": const(ordinal),
            "space": space if space is not None else const(None),
            "static_hints": dict_display(static_hints),
            "options": dict_display(options),
            "placeholders": ast.Tuple(elts=placeholders, ctx=ast.Load()),
            "has_key": const(has_key),
            **{f"{what}_per_call": const(True) for what, read in per_call.items() if read},
            "launch": const(self.launch_text),
        }
        make_site = ast.Call(
            func=ast.Attribute(value=load(self.names.runtime), attr="make_site", ctx=ast.Load()),
            args=[],
            keywords=[ast.keyword(arg=k, value=v) for k, v in keywords.items()],
        )
        target = ast.Name(id=self.names.site(self.n), ctx=ast.Store())
        return at(ast.Assign(targets=[target], value=make_site), self.span)

    def _call(
        self,
        launch: MacroArg,
        blocks: ast.expr,
        key: MacroArg | None,
        lazy_space: ast.expr | None,
        lazy_hints: list[tuple[str, ast.expr]],
        lazy_options: list[tuple[str, ast.expr]],
    ) -> ast.expr:
        call = launch.node
        assert isinstance(call, ast.Call)
        cfg = self.names.cfg(self.n)
        subst = _Substitute(self.src, self.macro.placeholders, cfg)

        args: list[ast.expr] = []
        holes: list[ast.expr] = []
        per_config: list[tuple[str, ast.expr]] = []  # (argument, its expression using $)
        for i, arg in enumerate(call.args):
            new = subst.visit_counting(arg)
            if new is None:
                args.append(arg)
            elif isinstance(arg, ast.Starred):
                raise self._starred_error(arg)
            else:
                hole = ast.Attribute(value=load(self.names.runtime), attr="HOLE", ctx=ast.Load())
                args.append(at(hole, node_span(arg)))
                holes.append(new)
                per_config.append((str(i), arg))
        static_kw: list[tuple[str | None, ast.expr]] = []
        dynamic_kw: list[tuple[str | None, ast.expr]] = []
        seen: set[str] = set()
        for kw in call.keywords:
            if kw.arg is not None and kw.arg in seen:  # Python's own check, lost in a dict
                raise self.src.python_error(
                    SyntaxError(
                        f"keyword argument repeated: {kw.arg}",
                        (
                            self.src.filename,
                            kw.lineno,
                            kw.col_offset + 1,
                            None,
                            kw.end_lineno,
                            (kw.end_col_offset or 0) + 1,
                        ),
                    ),
                    byte_columns=True,
                )
            if kw.arg is not None:
                seen.add(kw.arg)
            new = subst.visit_counting(kw.value)
            if new is None:
                static_kw.append((kw.arg, kw.value))
            elif kw.arg is None:
                raise self._starred_error(kw)
            else:
                dynamic_kw.append((kw.arg, new))
                per_config.append((kw.arg, kw.value))
        blocks = subst.visit(blocks)
        subst.check_all_found(self._error)
        # key= too: it names the bucket a record was measured for, so an edited key= (a
        # value that now means other sizes) is never decided by the old buckets' records.
        keyed = [("key", key.node)] if key is not None and key.node is not None else []
        self.launch_text = launch_text(self.src, [*per_config, ("blocks", blocks), *keyed])
        for part in [*holes, *(value for _, value in dynamic_kw), blocks]:
            self._check_deferred(part, "an expression that uses `$name`", "once per configuration")
        lazy_parts = [("space=", lazy_space)] if lazy_space is not None else []
        lazy_parts += [(f"{name}=", value) for name, value in (*lazy_hints, *lazy_options)]
        for name, value in lazy_parts:
            self._check_deferred(value, f"`{name}`", "when the site tunes, not at the call")

        launch_span = node_span(call)
        bind = ast.Lambda(
            args=arguments([cfg]),
            body=ast.Tuple(
                elts=[
                    at(ast.Tuple(elts=holes, ctx=ast.Load()), launch_span),
                    at(dict_display(dynamic_kw), launch_span),
                    blocks,
                ],
                ctx=ast.Load(),
            ),
        )
        if lazy_space is None and not lazy_hints and not lazy_options:
            lazy: ast.expr = const(None)
        else:
            lazy = ast.Lambda(
                args=arguments([]),
                body=ast.Tuple(
                    elts=[
                        lazy_space or const(None),
                        dict_display(lazy_hints),
                        dict_display(lazy_options),
                    ],
                    ctx=ast.Load(),
                ),
            )
        site_call = ast.Call(
            # site.launch, not site(...): an instance attribute the site points at its
            # fastest callable (runtime/site.py), so a repeated call enters no Python frame.
            # Placed on the macro's first line: Python reports a method call at its
            # attribute, and tracebacks must name the line the macro starts on.
            func=at(
                ast.Attribute(value=load(self.names.site(self.n)), attr="launch", ctx=ast.Load()),
                (self.span[0], self.span[1], self.span[0], self.span[1]),
            ),
            args=[
                call.func,
                at(ast.Tuple(elts=args, ctx=ast.Load()), launch_span),
                at(dict_display(static_kw), launch_span),
                bind,
                key.node if key is not None and key.node is not None else const(None),
                lazy,
            ],
            keywords=[],
        )
        return at(site_call, self.span)


class _Substitute:
    """``_name`` at a recorded ``$name`` position -> ``<cfg>.name``, keeping the position.

    Iterative, so an expression as deep as Python's own parser accepts does not overflow
    the interpreter's stack here.
    """

    def __init__(self, src: SourceText, placeholders: list[Placeholder], cfg: str) -> None:
        self.cfg = cfg
        self.src = src
        self.pending: dict[tuple[int, int], Placeholder] = {
            src.byte_col(ph.start): ph for ph in placeholders
        }
        self.count = 0

    def visit_counting(self, node: ast.expr) -> ast.expr | None:
        """The node with its placeholders replaced, or None when it has none."""
        before = self.count
        new = self.visit(node)
        return new if self.count != before else None

    def visit(self, root: ast.expr) -> ast.expr:
        if isinstance(root, ast.Name):
            return self.visit_Name(root)
        stack: list[ast.AST] = [root]
        while stack:
            node = stack.pop()
            for name, value in ast.iter_fields(node):
                if isinstance(value, list):
                    for i, item in enumerate(value):
                        if isinstance(item, ast.Name):
                            value[i] = self.visit_Name(item)
                        elif isinstance(item, ast.AST):
                            stack.append(item)
                elif isinstance(value, ast.Name):
                    setattr(node, name, self.visit_Name(value))
                elif isinstance(value, ast.AST):
                    stack.append(value)
        return root

    def visit_Name(self, node: ast.Name) -> ast.expr:
        ph = self.pending.get((node.lineno, node.col_offset))
        if ph is None or node.id != "_" + ph.name:
            return node
        if not isinstance(node.ctx, ast.Load):
            raise self.src.error(
                f"`${ph.name}` is a configuration field and cannot be assigned to",
                ph.start,
                ph.end,
            )
        del self.pending[(node.lineno, node.col_offset)]
        self.count += 1
        cfg = ast.copy_location(ast.Name(id=self.cfg, ctx=ast.Load()), node)
        return ast.copy_location(ast.Attribute(value=cfg, attr=ph.name, ctx=ast.Load()), node)

    def check_all_found(self, error) -> None:  # type: ignore[no-untyped-def]
        for ph in self.pending.values():
            raise error(
                f"`${ph.name}` can only be used as a value here",
                ph.start,
                ph.end,
                hint="`$name` reads a field of the configuration being tried, like a variable",
            )
