"""What the front end must do with any input, and the mutations the fuzzers apply.

The property (``check``): every module that uses the DSL either compiles or raises
``SyntaxError`` (``TunedslSyntaxError`` is one), and when it compiles, its expanded text
(``expand_source``) compiles too. A module that does not use the DSL must behave exactly
as ``compile()`` does, including CPython's own ``RecursionError``/``MemoryError`` for
absurd nesting (the front end promises to compile such modules exactly as ``compile()``).

Pure Python; shared by tests/reliability/test_fuzz_frontend.py and benchmarks/fuzz_frontend.py.
"""

from __future__ import annotations

import random
import re
import warnings
from collections.abc import Callable
from pathlib import Path

from tunedsl.frontend.compile import compile_source, expand_source, needs_expansion

REPO = Path(__file__).resolve().parents[2]

COMPILED, REJECTED, PLAIN_ERROR = "compiled", "rejected", "plain module, CPython's own error"


class FrontendBug(AssertionError):
    """The front end broke the property; the message holds the input's repr."""


def _plain_python_outcome(source: bytes | str) -> type[BaseException] | None:
    try:
        compile(source, "<plain>", "exec", dont_inherit=True)
    except BaseException as err:
        return type(err)
    return None


def check(source: bytes | str, filename: str = "<fuzz>") -> str:
    """COMPILED or REJECTED (or PLAIN_ERROR for a non-DSL module that CPython rejects the
    same way); raise FrontendBug for anything else."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning/DeprecationWarning of odd literals
        try:
            dsl = needs_expansion(source)
        except SyntaxError:
            return REJECTED
        except Exception as err:
            raise FrontendBug(f"needs_expansion: {type(err).__name__} on {_show(source)}") from err
        failure = _failure(lambda: compile_source(source, filename))
        if isinstance(failure, SyntaxError):
            return REJECTED
        if failure is not None:
            if not dsl and _plain_python_outcome(source) is type(failure):
                return PLAIN_ERROR
            raise FrontendBug(f"{type(failure).__name__}: {failure} on {_show(source)}")

        def expand_and_compile() -> None:
            expanded = expand_source(source, filename)
            compile(expanded, filename + " (expanded)", "exec", dont_inherit=True)

        failure = _failure(expand_and_compile)
        if failure is not None:
            raise FrontendBug(
                f"compiled, but its expansion does not: {type(failure).__name__}: {failure} "
                f"on {_show(source)}"
            )
    return COMPILED


def _failure(action: Callable[[], object]) -> Exception | None:
    """The exception ``action`` raised, with its traceback dropped: a RecursionError's
    thousand frames take pytest many seconds to render, and the message says enough."""
    try:
        action()
    except Exception as err:
        return err.with_traceback(None)
    return None


def _show(source: bytes | str) -> str:
    text = repr(source)
    return text if len(text) < 2000 else text[:1000] + " ... " + text[-600:]


# -- the corpus and its mutations ------------------------------------------------------------


def corpus() -> list[bytes]:
    """Valid DSL scripts of the repository: the gallery, test fixtures, golden inputs (the
    fixtures that are invalid on purpose are left out: mutations start from valid text)."""
    patterns = [
        "examples/*.py",
        "tests/unit/dsl_fixtures/*",
        "tests/golden/**/*.py",
        "tests/golden/**/*.dslpy",
        "tests/integration/precompile_fixtures/**/*.py",
    ]
    files: dict[Path, bytes] = {}
    for pattern in patterns:
        for path in sorted(REPO.glob(pattern)):
            if path.is_file():
                data = path.read_bytes()
                if b"autotune" in data and _compiles(data):
                    files[path] = data
    return list(files.values())


def _compiles(data: bytes) -> bool:
    try:
        return check(data) == COMPILED
    except FrontendBug:
        return False


_TOKEN = re.compile(rb"[A-Za-z_0-9]+|\s+|.", re.DOTALL)
UNICODE = ["é", "\u00a0", "\u2028", "\u200b", "ｔ", "𝔘", "\ufeff", "\x00", "\x0c", "ß", "٣"]
BRACKETS = b"()[]{}"


def _tokens(data: bytes) -> list[bytes]:
    return _TOKEN.findall(data)


def mutate(data: bytes, kind: str, rng: random.Random, other: bytes = b"") -> bytes:
    """Apply one mutation of ``kind`` at a random place."""
    if not data:
        data = b"\n"
    pos = rng.randrange(len(data) + 1)
    if kind == "flip":
        i = min(pos, len(data) - 1)
        return data[:i] + bytes([data[i] ^ rng.choice([1, 2, 0x20, 0x80, 0xFF])]) + data[i + 1 :]
    if kind in ("delete_token", "duplicate_token", "swap_tokens"):
        toks = _tokens(data)
        i = rng.randrange(len(toks))
        if kind == "delete_token":
            del toks[i]
        elif kind == "duplicate_token":
            toks.insert(i, toks[i])
        else:
            j = rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
        return b"".join(toks)
    if kind == "dollar":
        out = data
        for _ in range(rng.randint(1, 5)):
            p = rng.randrange(len(out) + 1)
            out = out[:p] + rng.choice([b"$", b"$tile", b"$ ", b"$$", b"$1", b"$class"]) + out[p:]
        return out
    if kind == "bracket":
        if rng.random() < 0.5:
            return data[:pos] + bytes([rng.choice(BRACKETS)]) + data[pos:]
        spots = [i for i, b in enumerate(data) if b in BRACKETS]
        if not spots:
            return data
        i = rng.choice(spots)
        return data[:i] + data[i + 1 :]
    if kind == "unicode":
        if rng.random() < 0.2:
            return data[:pos] + bytes([rng.choice([0xE9, 0xFF, 0xC3, 0x80])]) + data[pos:]
        return data[:pos] + rng.choice(UNICODE).encode("utf-8") + data[pos:]
    if kind == "deep_nesting":
        depth = rng.choice([50, 150, 199, 201, 400, 1000])
        opener, closer = rng.choice([(b"(", b")"), (b"[", b"]"), (b"-", b""), (b"not ", b"")])
        toks = _tokens(data)
        i = rng.randrange(len(toks))
        toks[i] = opener * depth + toks[i] + closer * depth
        return b"".join(toks)
    if kind == "huge_line":
        size = rng.choice([1_000, 20_000, 100_000])
        filler = rng.choice([b"+$tile", b"+1", b"x", b" ", b"'" + b"s" * 10 + b"'+"])
        return data[:pos] + filler * (size // len(filler)) + data[pos:]
    if kind == "truncate":
        return data[:pos]
    if kind == "splice":
        if not other:
            return data
        a = rng.randrange(len(other) + 1)
        b = min(len(other), a + rng.randint(1, 200))
        return data[:pos] + other[a:b] + data[pos:]
    if kind == "cookie":
        cookie = rng.choice([b"# coding: latin-1\n", b"# coding: bogus\n", b"\xef\xbb\xbf"])
        return cookie + data
    raise ValueError(f"unknown mutation {kind!r}")


MUTATIONS = (
    "flip",
    "delete_token",
    "duplicate_token",
    "swap_tokens",
    "dollar",
    "bracket",
    "unicode",
    "deep_nesting",
    "huge_line",
    "truncate",
    "splice",
    "cookie",
)


def mutant(rng: random.Random, files: list[bytes]) -> bytes:
    """One to three mutations of one corpus file."""
    data = rng.choice(files)
    for _ in range(rng.randint(1, 3)):
        data = mutate(data, rng.choice(MUTATIONS), rng, other=rng.choice(files))
    return data
