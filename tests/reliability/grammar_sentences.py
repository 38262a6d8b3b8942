"""Random sentences of grammar/tunedsl.lark: the grammar itself drives the generation.

The grammar is loaded with lark (templates expanded); from its start rule ``line`` a
random derivation is drawn, choosing for every rule one of its alternatives. Past a depth
budget the alternative with the shortest derivation is taken, so every sentence is finite.
Regex terminals (names, numbers, strings, placeholders) get samples from small pools that
include the tricky cases (``$`` inside strings, non-ASCII names, every number form).
Pure Python plus lark; used by the fuzz tests and ``benchmarks/fuzz_frontend.py``.
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path
from typing import Any

GRAMMAR = Path(__file__).resolve().parents[2] / "grammar" / "tunedsl.lark"

# The module a generated line is placed in: it binds every callee spelling the grammar has.
PREAMBLE = (
    "from tunedsl import autotune, cdiv\n"
    "import tunedsl\n"
    "import tunedsl as td\n"
    "async def f(k, a, b, n, x, ys, tile):\n"
    "    "
)

POOLS: dict[str, tuple[str, ...]] = {
    "NAME": ("a", "b", "n", "x", "ys", "k", "cdiv", "tile", "é", "_ok"),
    "NUMBER": ("0", "1", "7", "256", "0x1F", "0o17", "0b101", "1_000", "1.5", ".5", "1e3", "2j"),
    "STRING": ("'s'", '"$tile"', "b'$'", "r'\\$x'", "f'{a}$'", "''", "u'ü'"),
    "LONG_STRING": ("'''$a\n$b'''", '"""x"""'),
    "PLACEHOLDER": ("$tile", "$w", "$BLOCK", "$num_warps", "$é"),
    "COMP_OP": ("<", ">", "==", ">=", "<=", "!=", "in", "not in", "is", "is not"),
}


# Alternatives using these are taken 1 time in 10 (else `await` fills every expression).
RARE = frozenset({"AWAIT", "LAMBDA", "ASYNC", "__ANON_6"})


@lru_cache(maxsize=1)
def _grammar() -> tuple[dict[str, list[list[tuple[bool, str]]]], dict[str, str], dict[str, int]]:
    from lark import Lark
    from lark.grammar import Terminal
    from lark.lexer import PatternStr

    parser = Lark.open(str(GRAMMAR), start="line", parser="earley")
    rules: dict[str, list[list[tuple[bool, str]]]] = {}
    for rule in parser.rules:
        symbols = [(isinstance(s, Terminal), s.name) for s in rule.expansion]
        rules.setdefault(rule.origin.name, []).append(symbols)
    literals = {
        t.name: t.pattern.value for t in parser.terminals if isinstance(t.pattern, PatternStr)
    }
    # Shortest derivation height of every rule (a fixpoint); rules that cannot derive a
    # sentence (`no_placeholder: _NEVER`) never get one and are never chosen.
    height: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for name, alternatives in rules.items():
            for symbols in alternatives:
                parts = []
                for is_terminal, sym in symbols:
                    if is_terminal:
                        parts.append(0 if (sym in literals or sym in POOLS) else None)
                    else:
                        parts.append(height.get(sym))
                if any(p is None for p in parts):
                    continue
                h = 1 + max(parts, default=0)  # type: ignore[type-var]
                if h < height.get(name, 1 << 30):
                    height[name] = h
                    changed = True
    return rules, literals, height


def sentence(rng: random.Random, max_depth: int = 12, start: str = "line") -> str:
    """One random sentence derived from ``start``."""
    rules, literals, height = _grammar()
    out: list[str] = []

    def productive(symbols: list[tuple[bool, str]]) -> bool:
        return all(
            (sym in literals or sym in POOLS) if is_t else sym in height for is_t, sym in symbols
        )

    def derive(name: str, depth: int) -> None:
        options = [s for s in rules[name] if productive(s)]
        if depth >= max_depth:
            best = min(_alt_height(s, height) for s in options)
            options = [s for s in options if _alt_height(s, height) == best]
        rare = [s for s in options if any(sym in RARE for _, sym in s)]
        if rare and len(rare) < len(options) and rng.random() > 0.1:
            options = [s for s in options if s not in rare]
        for is_terminal, sym in rng.choice(options):
            if is_terminal:
                out.append(literals[sym] if sym in literals else rng.choice(POOLS[sym]))
            else:
                derive(sym, depth + 1)

    derive(start, 0)
    return " ".join(out)


def _alt_height(symbols: list[tuple[bool, str]], height: dict[str, Any]) -> int:
    return max((0 if t else height[s] for t, s in symbols), default=0)


def module(rng: random.Random, max_depth: int = 12) -> str:
    """A whole module around one generated statement: mostly ``x = <macro call>``, sometimes
    any ``line`` of the grammar (which may hold no macro call, or several)."""
    if rng.random() < 0.7:
        return PREAMBLE + "x = " + sentence(rng, max_depth, start="macro_call") + "\n"
    return PREAMBLE + sentence(rng, max_depth) + "\n"
