"""``%load_ext tunedsl`` in a real IPython shell."""

from __future__ import annotations

import ast
import sys

import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell

from tunedsl import ipython as extension


@pytest.fixture
def shell():
    sh = InteractiveShell.instance()
    sh.reset()  # a clean namespace: no tunedsl bindings left by another test
    sh.run_line_magic("load_ext", "tunedsl")
    yield sh
    sh.run_line_magic("unload_ext", "tunedsl")
    sh.reset()


@pytest.fixture
def expansions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The source of every cell the front end expanded."""
    import tunedsl.frontend.compile as frontend

    seen: list[str] = []
    real = frontend.expand_to_ast

    def recording(source, filename="<string>"):
        seen.append(source)
        return real(source, filename)

    monkeypatch.setattr(frontend, "expand_to_ast", recording)
    return seen


def test_plain_cells_are_untouched(shell, expansions) -> None:
    result = shell.run_cell("x = 20\nx + 22")
    assert result.success and result.result == 42
    assert expansions == []


def test_dsl_cell_is_expanded_and_displays_its_value(shell, expansions) -> None:
    result = shell.run_cell("from tunedsl import autotune, cdiv\ncdiv(1000, 256)")
    assert result.success, result.error_in_exec
    assert result.result == 4  # the last expression is still displayed
    assert len(expansions) == 1


def test_later_cells_of_a_session_that_bound_the_macro_are_expanded(shell, expansions) -> None:
    shell.run_cell("from tunedsl import autotune as tune")
    result = shell.run_cell("y = 3\ny * 2")  # no import here: the session bound `tune`
    assert result.success and result.result == 6
    assert len(expansions) == 2
    assert expansions[1].startswith("y = 3\ny * 2\n")
    assert "from tunedsl import autotune as tune" in expansions[1]


def test_appended_imports_do_not_reach_the_cell(shell) -> None:
    import tunedsl.runtime.macro

    tree = extension.expand_cell("a = 1\na", "<cell>", {"at": tunedsl.runtime.macro.autotune})
    assert tree is not None
    assert [type(node).__name__ for node in tree.body][-1] == "Expr"  # `a` stays last
    assert "import" not in ast.unparse(tree)


def test_runtime_error_points_at_the_cells_line(shell) -> None:
    result = shell.run_cell("from tunedsl import autotune\n\nvalue = 1\nvalue / 0\n")
    err = result.error_in_exec
    assert isinstance(err, ZeroDivisionError)
    tb = err.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_lineno == 4


def test_syntax_error_points_at_the_cells_line(shell) -> None:
    result = shell.run_cell("from tunedsl import autotune\nok = 1\nbad = (\n")
    err = result.error_before_exec
    assert isinstance(err, SyntaxError)
    assert err.lineno == 3


def test_site_names_are_unique_across_cells() -> None:
    cell = "__tunedsl_site_0__ = make()\ndef f():\n    return __tunedsl_site_0__()\n"
    first = extension._RenameSites({}).visit(ast.parse(cell))
    second = extension._RenameSites({}).visit(ast.parse(cell))
    names_first = {n.id for n in ast.walk(first) if isinstance(n, ast.Name)}
    names_second = {n.id for n in ast.walk(second) if isinstance(n, ast.Name)}
    site_first = {n for n in names_first if n.startswith("__tunedsl_site_")}
    site_second = {n for n in names_second if n.startswith("__tunedsl_site_")}
    assert len(site_first) == len(site_second) == 1  # both uses renamed consistently
    assert site_first != site_second


def test_unload_restores_plain_parsing(shell, expansions) -> None:
    shell.run_line_magic("unload_ext", "tunedsl")
    result = shell.run_cell("from tunedsl import autotune\n1 + 1")
    assert result.result == 2
    assert expansions == []
    shell.run_line_magic("load_ext", "tunedsl")  # the fixture unloads it again


DSL_CELL = (
    "from tunedsl import autotune, cdiv\n"
    "def add(a, n):\n"
    "    return autotune(space=dict(tile=[1, 2]), blocks=cdiv(n, $tile), k(a, T=$tile))\n"
)


BAD_LINE = "autotune(space=dict(tile=[1]), blocks=(1,), k(T=$tyle))"


def test_dsl_error_in_a_cell_points_at_the_cell(shell) -> None:
    result = shell.run_cell(f"from tunedsl import autotune\nok = 1\n{BAD_LINE}\n")
    err = result.error_before_exec
    from tunedsl.errors import TunedslSyntaxError

    assert isinstance(err, TunedslSyntaxError)
    assert (err.lineno, err.col) == (3, BAD_LINE.index("$tyle"))
    assert "did you mean `$tile`?" in (err.hint or "")


def test_each_cell_gets_its_own_site_names() -> None:
    first = extension.expand_cell(DSL_CELL, "<cell-1>", {})
    second = extension.expand_cell(DSL_CELL, "<cell-2>", {})
    sites = [
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and "__tunedsl_site_" in n.id}
        for tree in (first, second)
    ]
    assert len(sites[0]) == len(sites[1]) == 1
    assert sites[0] != sites[1]


def test_macro_bound_by_an_earlier_cell_is_expanded() -> None:
    import tunedsl.runtime.macro

    cell = "def add(a, n):\n    return tune(space=dict(t=[1]), blocks=(1,), k(a, T=$t))\n"
    tree = extension.expand_cell(cell, "<cell>", {"tune": tunedsl.runtime.macro.autotune})
    text = ast.unparse(tree)
    # The only `$` left is in the site's launch text (a string the record digest covers).
    launch = "launch='T=$t; blocks=(1,)'"
    assert "make_site(" in text and launch in text and "$" not in text.replace(launch, "")
    assert "from tunedsl import autotune as tune" not in text
    assert extension.expand_cell(cell, "<cell>", {}) is None  # no binding: left to Python


def test_unclosed_bracket_in_a_session_cell_is_reported_on_the_cell(shell) -> None:
    shell.run_cell("from tunedsl import autotune")
    result = shell.run_cell("x = (\n")  # the appended imports must not take the blame
    err = result.error_before_exec
    assert isinstance(err, SyntaxError)
    assert err.lineno == 1
    assert "never closed" in str(err)


def test_functions_of_two_cells_keep_their_own_sites(shell) -> None:
    first = shell.run_cell(DSL_CELL)
    assert first.success, first.error_in_exec or first.error_before_exec
    shell.run_cell("add_first = add")
    second = shell.run_cell(DSL_CELL)  # same text again: the expander numbers sites from 0
    assert second.success, second.error_in_exec or second.error_before_exec

    def site_of(function) -> str:
        (name,) = [n for n in function.__code__.co_names if n.startswith("__tunedsl_site_")]
        return name

    ns = shell.user_ns
    first_site, second_site = site_of(ns["add_first"]), site_of(ns["add"])
    assert first_site != second_site
    assert ns[first_site] is not ns[second_site]  # both sites are alive in the namespace


def test_cells_can_import_dsl_modules(shell, tmp_path, monkeypatch) -> None:
    """``%load_ext tunedsl`` installs the import hook as well."""
    from tunedsl import activate

    (tmp_path / "dsl_cell_mod.py").write_text(
        "from tunedsl import autotune, cdiv\n"
        "def launch(kernel, n):\n"
        "    return autotune(space=dict(tile=[64]), blocks=cdiv(n, $tile), kernel(n, T=$tile))\n"
        "BLOCKS = cdiv(1000, 64)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        result = shell.run_cell("import dsl_cell_mod\ndsl_cell_mod.BLOCKS")
        assert result.success, result.error_in_exec or result.error_before_exec
        assert result.result == 16
        assert activate.installed()
    finally:
        sys.modules.pop("dsl_cell_mod", None)
