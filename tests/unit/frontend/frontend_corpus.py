"""Hypothesis strategies that generate macro calls, valid and invalid, for the corpus tests.

The generated text stays inside what grammar/tunedsl.lark decides: it never produces the
static errors the grammar leaves to the front end (unknown `$NAME` against a literal
space, a field of a literal space that nothing reads, repeated keywords, hint/field
conflicts, a literal hint value the runtime refuses, blocks= arity or constant type), so the
grammar and the front end must accept exactly the same strings.
"""

from __future__ import annotations

from hypothesis import strategies as st

HEADER = "from tunedsl import autotune, cdiv\nimport tunedsl as td\n"
FIELDS = ("tile", "BLOCK", "w")
NAMES = ("a", "b", "n", "x", "ys")
STRINGS = ("'$x'", '"cost $5"', "b'$'", 'f"{a} $tile"', "r'\\$'", "'''$a\n$b'''", "''")
OPTIONAL_KEYWORDS = ("key", "num_warps", "num_stages", "restore_value", "verify", "name", "rtol")
BAD_DOLLARS = ("$ tile", "$1", "$class", "$")


def hint_of(expression: str) -> str:
    """A hint's value the front end leaves to the runtime (no literal)."""
    return f"warps({expression})"


def expressions(dsl: bool, stray_dollar: bool = False) -> st.SearchStrategy[str]:
    """Python expressions; with ``dsl`` they may use `$field`; with ``stray_dollar`` they may
    hold a misplaced or malformed `$` (which makes them invalid everywhere)."""
    atoms = [
        st.sampled_from(NAMES),
        st.integers(0, 4096).map(str),
        st.sampled_from(STRINGS),
    ]
    if dsl:
        atoms.append(st.sampled_from(FIELDS).map(lambda f: "$" + f))
    if stray_dollar:
        atoms.append(st.sampled_from(BAD_DOLLARS + tuple("$" + f for f in FIELDS)))
    base = st.one_of(*atoms)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "*", "//", "-", " if a else "]), inner).map(
                lambda t: f"{t[0]} {t[1]} {t[2]}"
            ),
            st.tuples(st.sampled_from(["cdiv", "f", "g.h"]), st.lists(inner, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"
            ),
            inner.map(lambda e: f"({e}).shape"),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
            st.lists(inner, min_size=2, max_size=3).map(lambda es: "(" + ", ".join(es) + ")"),
            st.lists(inner, max_size=3).map(lambda es: "[" + ", ".join(es) + "]"),
            inner.map(lambda e: f"-{e}"),
        )

    return st.recursive(base, extend, max_leaves=6)


@st.composite
def macro_calls(draw: st.DrawFn) -> str:
    """One module line holding a macro call, or a stray `$` outside one."""
    mistakes = (
        draw(st.sets(st.sampled_from(MISTAKES), max_size=1)) if draw(st.booleans()) else set()
    )
    plain = expressions(dsl=False, stray_dollar="dollar_in_plain_part" in mistakes)
    dsl = expressions(dsl=True, stray_dollar="bad_dollar_in_dsl_part" in mistakes)

    fields = list(FIELDS)
    space = draw(
        st.sampled_from(
            [
                "dict(" + ", ".join(f"{f}=[1, 2]" for f in fields) + ")",
                "{" + ", ".join(f"'{f}': [16, 32]" for f in fields) + "}",
                "["
                + ", ".join("{" + ", ".join(f"'{f}': {i}" for f in fields) + "}" for i in (1, 2))
                + "]",
                "SPACE",
                "make_space(n)",
            ]
        )
    )
    if "dollar_in_plain_part" in mistakes:
        # Inside a call: a drawn literal such as `[]` would be a space without fields, which
        # the front end rejects for its `$` names (a check beyond the grammar).
        space = f"make_space({draw(plain)})"
    blocks_atom = st.one_of(
        st.sampled_from(FIELDS).map(lambda f: "$" + f),
        st.integers(1, 64).map(str),
        st.tuples(dsl, dsl).map(lambda t: f"cdiv({t[0]}, {t[1]})"),
    )
    blocks = draw(
        st.one_of(
            blocks_atom,
            st.lists(blocks_atom, min_size=1, max_size=3).map(
                lambda es: "(" + ", ".join(es) + ",)"
            ),
        )
    )
    callee = draw(st.sampled_from(["k", "ks.vadd", "ks[0]"]))
    if "dollar_in_kernel" in mistakes:
        callee = "ks[$tile]"
    args = draw(st.lists(dsl, max_size=3))
    kwargs = draw(st.dictionaries(st.sampled_from(["TILE", "BLOCK_N", "eps"]), dsl, max_size=2))
    launch_args = args + [f"{k}={v}" for k, v in kwargs.items()]
    # The launch reads every field (a field nothing reads is a front-end check).
    launch_args += [f"F_{f}=${f}" for f in fields]
    launch = f"{callee}({', '.join(launch_args)})"
    if "launch_not_a_call" in mistakes:
        launch = draw(st.sampled_from(["k", "$tile", "k[0]", "(k)"]))

    parts = [f"space={space}", f"blocks={blocks}", launch]
    if "missing_space" in mistakes:
        parts.remove(parts[0])
    elif "missing_blocks" in mistakes:
        parts.remove(parts[1])
    elif "missing_launch" in mistakes:
        parts.remove(launch)
    elif "two_launches" in mistakes:
        parts.append("k2(a)")
    optional = draw(st.lists(st.sampled_from(OPTIONAL_KEYWORDS), unique=True, max_size=3))
    for name in optional:
        # A literal hint the runtime refuses (`num_warps=0`, `[2, 4]`) is a front-end check:
        # a hint is a valid literal or an expression the runtime reads.
        if name in ("num_warps", "num_stages"):
            value = draw(st.one_of(st.sampled_from(["1", "4", "None"]), plain.map(hint_of)))
        else:
            value = draw(plain)
        parts.append(f"{name}={value}")
    if "unknown_keyword" in mistakes:
        parts.append(draw(st.sampled_from(["spcae=1", "num_warp=4", "grid=2", "TILE=$tile"])))
    if "star_argument" in mistakes:
        parts.append(draw(st.sampled_from(["*xs", "**opts"])))
    order = draw(st.permutations(parts))
    trailing = draw(st.sampled_from(["", ","]))
    sep = draw(st.sampled_from([", ", ",\n    ", ",  # $comment\n    "]))
    prefix = draw(st.sampled_from(["autotune", "td.autotune"]))
    call = f"{prefix}({sep.join(order)}{trailing})"
    if "dollar_outside" in mistakes:
        return f"y = {draw(dsl)} + $tile"
    return draw(st.sampled_from(["", "res = ", "out.r = "])) + call


MISTAKES = (
    "dollar_in_plain_part",
    "bad_dollar_in_dsl_part",
    "dollar_in_kernel",
    "launch_not_a_call",
    "missing_space",
    "missing_blocks",
    "missing_launch",
    "two_launches",
    "unknown_keyword",
    "star_argument",
    "dollar_outside",
)
