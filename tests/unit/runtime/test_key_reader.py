"""A reader made for one argument layout (``model/key_reader.py``) gives exactly the readable
key, its canonical text and the rule features that the general functions give, for every
call of its layout, and None for a call of any other layout (real CPU tensors)."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from tunedsl.model import keys  # noqa: E402
from tunedsl.model.hole import HOLE  # noqa: E402
from tunedsl.model.key_reader import make_reader  # noqa: E402
from tunedsl.model.rule_features import key_features  # noqa: E402

NAMES = ("x", "w", "out", "n", "scale", "flag", "bias", "BLOCK", "EVEN")
CONSTEXPR = frozenset({"BLOCK", "EVEN"})
DEFAULTS = {"EVEN": False}


def general(args, kwargs, with_align):
    readable = keys.readable_key(NAMES, args, kwargs, None, CONSTEXPR, HOLE, DEFAULTS, with_align)
    family, features = key_features(readable)
    return readable, keys.canonical_json(readable), list(features.items()), family


def layout(m: int, k: int, n: int, *, transposed: bool = False, dtype=torch.float16):
    x = torch.randn(m, k, dtype=dtype)
    if transposed:
        x = torch.randn(k, m, dtype=dtype).t()
    w = torch.randn(k, dtype=dtype).expand(m, k)  # a broadcast: stride 0
    out = torch.empty(m, k, dtype=dtype)
    return (x, w, out, n, 0.5, True, None), {"BLOCK": 64}


@pytest.mark.parametrize("with_align", [False, True])
@pytest.mark.parametrize("transposed", [False, True])
def test_a_reader_gives_what_the_general_key_functions_give_for_every_size(
    with_align: bool, transposed: bool
) -> None:
    rng = random.Random(7)
    args, kwargs = layout(48, 32, 96, transposed=transposed)
    read = make_reader(NAMES, args, kwargs, CONSTEXPR, DEFAULTS, HOLE, with_align)
    assert read is not None
    checked = 0
    for _ in range(60):
        m, k = rng.randint(1, 3000), rng.randint(2, 300)
        n = rng.choice((16 * rng.randint(1, 99), 16 * rng.randint(1, 99) + rng.randint(2, 15)))
        args, kwargs = layout(m, k, n, transposed=transposed)
        got = read(args, kwargs)
        if n % 16 != 0:  # the sample's n is a multiple of 16: another layout
            assert got is None
            continue
        assert got is not None
        readable, text, features, family = general(args, kwargs, with_align)
        assert got[0] == readable and got[1] == text and list(got[2].items()) == features
        assert key_features(got[0])[0] == family
        checked += 1
    assert checked >= 20


def test_a_reader_turns_down_every_other_layout() -> None:
    args, kwargs = layout(48, 32, 96)
    read = make_reader(NAMES, args, kwargs, CONSTEXPR, DEFAULTS, HOLE, True)
    assert read is not None and read(args, kwargs) is not None
    x, w, out, n, scale, flag, bias = args
    unaligned = torch.randn(48 * 32 + 1, dtype=x.dtype)[1:].view(48, 32)  # 2 bytes off
    others = {
        "dtype": ((x.float(), w, out, n, scale, flag, bias), kwargs),
        "stride pattern": ((x.t(), w, out, n, scale, flag, bias), kwargs),
        "broadcast made whole": ((x, w.contiguous(), out, n, scale, flag, bias), kwargs),
        "rank": ((x.reshape(-1), w, out, n, scale, flag, bias), kwargs),
        "int class": ((x, w, out, n + 1, scale, flag, bias), kwargs),
        "int of 1": ((x, w, out, 1, scale, flag, bias), kwargs),
        "int beyond 32 bits": ((x, w, out, 2**40, scale, flag, bias), kwargs),
        "float for int": ((x, w, out, float(n), scale, flag, bias), kwargs),
        "int for float": ((x, w, out, n, 1, flag, bias), kwargs),
        "bool for float": ((x, w, out, n, True, flag, bias), kwargs),
        "tensor for None": ((x, w, out, n, scale, flag, x), kwargs),
        "hole": ((x, w, out, n, scale, flag, HOLE), kwargs),
        "unaligned": ((unaligned, w, out, n, scale, flag, bias), kwargs),
        "constexpr value": (args, {"BLOCK": 128}),
        "constexpr type": (args, {"BLOCK": 64.0}),
        "constexpr missing": (args, {}),
        "another keyword": (args, {"BLOCK": 64, "EVEN": True}),
        "fewer arguments": (args[:-1], kwargs),
    }
    for why, (a, k) in others.items():
        assert read(a, k) is None, why


def test_a_constexpr_at_its_default_is_read_as_the_general_key_leaves_it_out() -> None:
    args, _ = layout(48, 32, 96)
    for kwargs in ({"BLOCK": 64, "EVEN": False}, {"BLOCK": 64, "EVEN": True}):
        read = make_reader(NAMES, args, kwargs, CONSTEXPR, DEFAULTS, HOLE, False)
        assert read is not None
        bigger, _ = layout(200, 40, 96)
        got = read(bigger, kwargs)
        assert got is not None
        readable, text, features, _ = general(bigger, kwargs, False)
        assert got[0] == readable and got[1] == text and list(got[2].items()) == features
        assert ("EVEN" in got[0]["args"]) is kwargs["EVEN"]


def test_layouts_a_reader_does_not_read_get_none_and_go_the_general_way() -> None:
    x = torch.randn(8, 8)
    assert make_reader(("t", "n"), ((x, x), 3), {}, frozenset(), None, HOLE, False) is None
    assert make_reader(("o", "n"), (object(), 3), {}, frozenset(), None, HOLE, False) is None
    # A constexpr the reader cannot write as a literal (a Triton function, a dtype object).
    assert (
        make_reader(("f", "B"), (x, torch.float16), {}, frozenset({"B"}), None, HOLE, False) is None
    )
