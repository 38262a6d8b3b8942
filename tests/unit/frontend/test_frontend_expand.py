"""The expander: the contract's shape, literal analysis, hygiene, scoping, positions and
tracebacks, run against a small stand-in for ``tunedsl.runtime.dsl``."""

from __future__ import annotations

import ast
import sys
import traceback
import types
from typing import Any

import pytest

import tunedsl.runtime
from tunedsl.frontend import GRAMMAR_VERSION
from tunedsl.frontend.compile import compile_source, expand_source, expand_to_ast, needs_expansion

HEADER = "from tunedsl import autotune, cdiv\n"


class FakeConfig:
    def __init__(self, fields: dict[str, Any]) -> None:
        self.__dict__.update(fields)


class FakeSite:
    """Calls ``bind`` for every configuration of the space and launches the kernel with it."""

    def __init__(self, log: list[Any], **site: Any) -> None:
        self.site = site
        self.log = log

    def launch(self, kernel, args, kwargs, bind, key, lazy):  # type: ignore[no-untyped-def]
        lazy_parts = lazy() if lazy is not None else (None, {}, {})
        space = self.site["space"] if self.site["space"] is not None else lazy_parts[0]
        results = []
        for fields in _configs(space):
            holes, dyn, grid = bind(FakeConfig(fields))
            it = iter(holes)
            full = tuple(next(it) if a is HOLE else a for a in args)
            results.append(kernel(*full, **kwargs, **dyn, grid=grid))
        self.log.append({"key": key, "lazy": lazy_parts, "site": self.site})
        return results


def _configs(space: Any) -> list[dict[str, Any]]:
    if isinstance(space, list):
        return space
    names = list(space)
    out: list[dict[str, Any]] = [{}]
    for name in names:
        out = [{**c, name: v} for c in out for v in space[name]]
    return out


HOLE = object()


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A stand-in ``tunedsl.runtime.dsl``; returns the log of site calls."""
    log: list[Any] = []
    fake = types.ModuleType("tunedsl.runtime.dsl")
    fake.HOLE = HOLE  # type: ignore[attr-defined]
    fake.make_site = lambda **site: FakeSite(log, **site)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tunedsl.runtime.dsl", fake)
    monkeypatch.setattr(tunedsl.runtime, "dsl", fake, raising=False)
    return log


def run(source: str, filename: str = "/w/script.py", **env: Any) -> dict[str, Any]:
    code = compile_source(source, filename)
    namespace: dict[str, Any] = {"__name__": "script", **env}
    exec(code, namespace)
    return namespace


def kernel(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
    return (args, kwargs)


def test_grammar_version_is_a_string() -> None:
    assert isinstance(GRAMMAR_VERSION, str) and GRAMMAR_VERSION


def test_macro_runs_bind_per_configuration(runtime: list[Any]) -> None:
    src = HEADER + (
        "def add(a, n):\n"
        "    return autotune(space=dict(tile=[2, 4], num_warps=[1]), blocks=cdiv(n, $tile),\n"
        "                    key=n // 4, num_stages=3, k(a, n * $tile, TILE=$tile, flag=True))\n"
        "res = add('A', 8)\n"
    )
    ns = run(src, k=kernel)
    assert ns["res"] == [
        (("A", 16), {"flag": True, "TILE": 2, "grid": (4,)}),
        (("A", 32), {"flag": True, "TILE": 4, "grid": (2,)}),
    ]
    [call] = runtime
    assert call["key"] == 2
    assert call["lazy"] == (None, {}, {})
    site = call["site"]
    assert site["space"] == {"tile": [2, 4], "num_warps": [1]}
    assert site["static_hints"] == {"num_stages": 3}
    assert (site["filename"], site["line"], site["col"], site["kernel_text"]) == (
        "/w/script.py",
        3,
        11,
        "k",
    )
    lines = src.splitlines()
    expected = [(3, lines[2].index("$tile"))]
    expected += [(4, i) for i in range(len(lines[3])) if lines[3].startswith("$tile", i)]
    assert site["placeholders"] == tuple(("tile", line, col) for line, col in expected)
    assert site["has_key"] is True


def test_non_literal_parts_are_read_by_the_lazy_thunk(runtime: list[Any]) -> None:
    src = HEADER + (
        "S = {'t': [1, 2]}\n"
        "r = autotune(space=S, blocks=$t, num_warps=W, verify=V, rtol=0.5, k(x=$t))\n"
    )
    ns = run(src, k=kernel, W=4, V="check")
    assert [r[1]["x"] for r in ns["r"]] == [1, 2]
    [call] = runtime
    assert call["lazy"] == ({"t": [1, 2]}, {"num_warps": 4}, {"verify": "check"})
    assert call["site"]["space"] is None
    assert call["site"]["options"] == {"rtol": 0.5}


def test_site_is_built_once_per_module_load(runtime: list[Any]) -> None:
    src = HEADER + (
        "def f(i):\n    return autotune(space={'t': [1]}, blocks=1, k(i, $t))\n"
        "out = [f(i) for i in range(3)]\n"
    )
    ns = run(src, k=kernel)
    assert [name for name in ns if name.startswith("__tunedsl_site")] == ["__tunedsl_site_0__"]
    assert len(runtime) == 3
    assert len({id(c["site"]) for c in runtime}) == 1
    assert [o[0][0] for o in ns["out"]] == [(0, 1), (1, 1), (2, 1)]


def test_evaluation_order_kernel_args_kwargs_key_then_lazy(runtime: list[Any]) -> None:
    src = HEADER + (
        "r = autotune(space=t('space', {'x': [1]}), blocks=$x, key=t('key', 0),\n"
        "             ks[t('kernel', 0)](t('arg', 1), t('dyn', 2) + $x, kw=t('kw', 3)))\n"
    )
    order: list[str] = []

    def t(label: str, value: Any) -> Any:
        order.append(label)
        return value

    run(src, ks=[kernel], t=t)
    assert order == ["kernel", "arg", "kw", "key", "space", "dyn"]


def test_user_names_cfg_space_key_autotune_keep_their_meaning(runtime: list[Any]) -> None:
    src = (
        "from tunedsl import autotune\n"
        "cfg, space, key = 'user cfg', {'t': [5]}, 'user key'\n"
        "r = autotune(space=space, blocks=1, key=key, k(cfg, $t))\n"
        "autotune_ref = autotune\n"
    )
    ns = run(src, k=kernel)
    assert ns["r"] == [(("user cfg", 5), {"grid": (1,)})]
    assert runtime[0]["key"] == "user key"
    assert ns["cfg"] == "user cfg"


def test_generated_names_avoid_the_modules_names() -> None:
    src = HEADER + (
        "__tunedsl_rt__ = 1\n__tunedsl_cfg_0__ = 2\n"
        "r = autotune(space={'t': [1]}, blocks=1, k($t))\n"
    )
    text = expand_source(src)
    assert "import tunedsl.runtime.dsl as __tunedsl_rt_1__" in text
    assert "lambda __tunedsl_cfg_0_1__:" in text
    assert "__tunedsl_rt__ = 1" in text


def test_several_macros_are_numbered_in_source_order() -> None:
    src = HEADER + "".join(
        f"r{i} = autotune(space={{'t': [{i}]}}, blocks=1, k($t))\n" for i in range(3)
    )
    tree = expand_to_ast(src)
    sites = [
        n.targets[0].id  # type: ignore[attr-defined]
        for n in tree.body
        if isinstance(n, ast.Assign) and "site" in getattr(n.targets[0], "id", "")
    ]
    assert sites == ["__tunedsl_site_0__", "__tunedsl_site_1__", "__tunedsl_site_2__"]


def test_prologue_goes_after_docstring_and_future_imports() -> None:
    src = (
        '"""Doc."""\nfrom __future__ import annotations\n'
        + HEADER
        + ("r = autotune(space={'t': [1]}, blocks=1, k($t))\n")
    )
    tree = expand_to_ast(src)
    assert isinstance(tree.body[0], ast.Expr)
    assert isinstance(tree.body[1], ast.ImportFrom) and tree.body[1].module == "__future__"
    assert isinstance(tree.body[2], ast.Import)
    assert tree.body[2].names[0].name == "tunedsl.runtime.dsl"
    compile_source(src)  # the __future__ import is still first


def test_dict_rebound_makes_dict_call_space_non_literal() -> None:
    src = HEADER + "dict = my_dict\nr = autotune(space=dict(t=[1]), blocks=$zz, k(1))\n"
    text = expand_source(src)  # no unknown-field error: the space is not literal
    assert "space=None" in text
    assert ": (dict(t=[1]), {}, {})" in text  # the lazy thunk reads it


def test_list_of_dicts_space_fields_are_the_union() -> None:
    # A field one configuration has (num_warps) is a field; every `$` read must be in each
    # (test_frontend_errors.py names the configuration that lacks one).
    space = "[{'a': 1, 'b': 1}, {'a': 2, 'b': 2, 'num_warps': 4}]"
    src = HEADER + f"r = autotune(space={space}, blocks=$a, k($b))\n"
    assert f"space={space}" in expand_source(src)


def test_module_without_macro_compiles_to_exactly_compile() -> None:
    src = "import os\nx = [i * 2 for i in range(3)]\ndef f():\n    return x\n"
    assert not needs_expansion(src)
    got = compile_source(src, "p.py")
    want = compile(src, "p.py", "exec", dont_inherit=True)
    assert got.co_code == want.co_code and got.co_consts == want.co_consts
    assert got == want


def test_bytes_with_coding_cookie_and_bom() -> None:
    text = (
        "# -*- coding: latin-1 -*-\n"
        + HEADER
        + "r = autotune(space={'t': [1]}, blocks=1, k('é', $t))\n"
    )
    assert "k, ('é', __tunedsl_rt__.HOLE)" in expand_source(text.encode("latin-1"))
    bom = (
        b"\xef\xbb\xbf"
        + (HEADER + "r = autotune(space={'t': [1]}, blocks=1, k('é', $t))\n").encode()
    )
    assert "'é'" in expand_source(bom)
    plain = b"# coding: latin-1\ns = '\xe9'\n"
    code = compile_source(plain, "p.py")
    ns: dict[str, Any] = {}
    exec(code, ns)
    assert ns["s"] == "é"


def test_crlf_line_ends_keep_lines(runtime: list[Any]) -> None:
    src = (
        HEADER.replace("\n", "\r\n")
        + "x = 1\r\nr = autotune(space={'t': [1]},\r\n  blocks=1, k($t))\r\n"
    )
    run(src, k=kernel)
    assert runtime[0]["site"]["line"] == 3
    assert runtime[0]["site"]["placeholders"] == (("t", 4, 14),)


def test_traceback_from_blocks_points_at_the_users_line(runtime: list[Any]) -> None:
    src = HEADER + (
        "def add(a, n):\n"
        "    return autotune(space=dict(tile=[0]),\n"
        "                    blocks=n // $tile,\n"
        "                    k(a, TILE=$tile))\n"
    )
    ns = run(src, filename="/w/user_script.py", k=kernel)
    with pytest.raises(ZeroDivisionError) as info:
        ns["add"]("a", 8)
    frames = traceback.extract_tb(info.value.__traceback__)
    last = frames[-1]
    assert (last.filename, last.lineno) == ("/w/user_script.py", 4)
    if sys.version_info >= (3, 11):  # column positions in tracebacks
        assert (last.colno, last.end_colno) == (27, 37)  # `n // $tile`
    caller = next(f for f in frames if f.name == "add")
    assert caller.lineno == 3  # the macro call itself


def test_traceback_from_a_launch_argument_points_at_it(runtime: list[Any]) -> None:
    src = HEADER + (
        "def add(a, n):\n"
        "    return autotune(space=dict(tile=[1]), blocks=1,\n"
        "                    k(a,\n"
        "                      n[$tile]))\n"
    )
    ns = run(src, filename="/w/user_script.py", k=kernel)
    with pytest.raises(TypeError) as info:
        ns["add"]("a", 8)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (last.filename, last.lineno) == ("/w/user_script.py", 5)
    if sys.version_info >= (3, 11):
        assert last.colno == 22


def test_macros_in_decorators_and_class_bases_are_expanded() -> None:
    src = HEADER + (
        "@deco(autotune(space={'t': [1]}, blocks=1, k($t)))\n"
        "def f():\n    pass\n"
        "class C(autotune(space={'t': [1]}, blocks=1, k($t))):\n    pass\n"
    )
    text = expand_source(src)
    assert "autotune(" not in text.replace("from tunedsl import autotune", "")
    assert "@deco(__tunedsl_site_0__.launch(" in text
    assert "class C(__tunedsl_site_1__.launch(" in text


def test_undecodable_dsl_bytes_are_a_syntax_error_never_compiled_unexpanded() -> None:
    source = b"from tunedsl import autotune\n# caf\xff\nr = autotune(k(a), space=S, blocks=1)\n"
    assert needs_expansion(source)
    with pytest.raises(SyntaxError) as info:
        compile_source(source, "m.py")
    assert info.value.lineno == 2 and "PEP 263" in info.value.msg
    # plain modules keep compile()'s own verdict
    plain = b"x = 1  # caf\xff\n"
    assert not needs_expansion(plain)
    assert compile_source(plain, "p.py") == compile(plain, "p.py", "exec", dont_inherit=True)


@pytest.mark.parametrize(
    "arg",
    ["-" * 500 + "$t", "-" * 5000 + "$t", "+".join(["$t"] * 9900)],
    ids=["500_unary_minuses", "5000_unary_minuses", "sum_of_9900_terms"],
)
def test_expand_source_keeps_up_with_the_deepest_expressions_python_compiles(arg: str) -> None:
    # Up to 3.12 the deep ones are rejected; 3.13 compiles them (its parser allows twice the
    # nesting), and ast.unparse then needs more than 12 000 frames. Whatever compiles must
    # expand to text that compiles.
    src = HEADER + f"r = autotune(space=S, blocks=1, k({arg}))\n"
    try:
        compile_source(src)
    except SyntaxError:  # too deep for this Python: a TunedslSyntaxError, nothing to show
        assert len(arg) > 1000  # 500 levels in a macro compile on every supported Python
        return
    compile(expand_source(src), "expanded", "exec")


def test_expand_source_handles_deep_expressions_that_compile() -> None:
    terms = "+".join(["$t"] * 600)
    src = HEADER + f"r = autotune(space=S, blocks=1, k({terms}))\n"
    compile_source(src)
    text = expand_source(src)
    assert text.count("__tunedsl_cfg_0__.t") == 600
    assert sys.getrecursionlimit() < 12_000  # the limit was restored


def test_a_field_name_is_read_as_python_reads_identifiers(runtime: list[Any]) -> None:
    # Python reads an identifier normalised (NFKC): `té` typed as e + U+0301 is `té`, and
    # `ﬁle` (a ligature) is `file`. `$te\u0301` was `$te` followed by a stray mark.
    src = HEADER + (
        "r = autotune(space=dict(t\u00e9=[2], file=[3]), blocks=1,\n"
        "             k(A=$te\u0301, B=$\ufb01le))\n"
    )
    ns = run(src, k=kernel)
    assert ns["r"] == [((), {"A": 2, "B": 3, "grid": (1,)})]
    assert [name for name, _, _ in runtime[0]["site"]["placeholders"]] == ["t\u00e9", "file"]
