"""Lazy search spaces: axes and their kinds, sampling, membership and neighbours, without
ever listing a large space (pure Python)."""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Callable

import pytest

from tunedsl.engine.seams import SearchSpace
from tunedsl.errors import UsageError
from tunedsl.model.config import Config
from tunedsl.model.space import Axis, ListSpace, Space, expand_space, search_space


class Counting:
    """A constraint that counts its calls: how we know a space was never listed."""

    def __init__(self, keep: object = None) -> None:
        self.calls = 0
        self.keep = keep or (lambda c: (c.f + c.g) % 3 != 0)

    def __call__(self, cfg: Config) -> bool:
        self.calls += 1
        return bool(self.keep(cfg))  # type: ignore[operator]


def ten_million(constraint: Callable[[Config], bool]) -> Space:
    return Space({name: list(range(10)) for name in "abcdefg"}, constraint=constraint)


def test_a_space_of_ten_million_points_is_never_listed() -> None:
    fn = Counting()
    space = ten_million(fn)
    assert isinstance(space, SearchSpace)
    assert space.size_hint() == 10**7
    assert fn.calls == 0  # building and sizing test nothing

    drawn = space.sample(random.Random(0), 200)
    assert len(drawn) == len(set(drawn)) == 200
    assert all((c.f + c.g) % 3 != 0 for c in drawn)
    assert fn.calls < 1_000  # rejection sampling: about 300 draws for 200 points

    calls = fn.calls
    first = list(itertools.islice(space.iter_valid(), 5))
    assert first[0] == Config(a=0, b=0, c=0, d=0, e=0, f=0, g=1)
    assert fn.calls - calls < 20  # lazy: a handful of points were looked at

    calls = fn.calls
    assert drawn[0] in space
    assert len(space.neighbours(drawn[0])) <= 2 * 7
    assert fn.calls - calls <= 1 + 2 * 7


def test_sampling_is_deterministic_given_the_rng() -> None:
    space = ten_million(Counting())
    assert space.sample(random.Random(7), 20) == space.sample(random.Random(7), 20)
    assert space.sample(random.Random(7), 20) != space.sample(random.Random(8), 20)


def test_sampling_a_large_space_the_constraint_rejects_names_the_fix() -> None:
    space = ten_million(Counting(lambda c: False))
    with pytest.raises(UsageError, match="rejected the first 10,000 of its 10,000,000 config"):
        space.sample(random.Random(0), 10)


def test_a_small_space_is_sampled_exactly_even_when_few_points_are_valid() -> None:
    space = Space(a=list(range(20)), b=list(range(20)), constraint=lambda c: c.a == c.b == 3)
    assert space.sample(random.Random(0), 5) == [Config(a=3, b=3)]


def test_sampling_is_uniform_over_the_valid_points() -> None:
    space = Space(a=list(range(100)), b=list(range(100)), constraint=lambda c: c.a < 10)
    rng = random.Random(1)
    counts = [0] * 10
    for _ in range(200):
        for cfg in space.sample(rng, 10):
            counts[cfg.a] += 1
    assert min(counts) > 120 and max(counts) < 280  # 200 each expected


@pytest.mark.parametrize(
    "values, kind",
    [
        ([16, 32, 64, 256], "log"),
        ([1, 2, 3, 4], "ordered"),
        ([0.5, 1.5], "ordered"),
        ([True, False], "categorical"),
        (["nn", "nt"], "categorical"),
        ([1, "x"], "categorical"),
    ],
)
def test_axis_kinds_are_inferred_from_the_values(values: list[object], kind: str) -> None:
    assert Axis(values).kind == kind
    assert Space(x=values).dims["x"].kind == kind


def test_axis_constructors_and_steps() -> None:
    assert Axis.pow2(16, 256).values == (16, 32, 64, 128, 256)
    assert Axis.pow2(16, 256).kind == "log"
    stages = Axis.ordered([4, 1, 2, 3])
    assert stages.step_neighbours(2) == [1, 3]
    assert stages.step_neighbours(4) == [3]
    layout = Axis.categorical(["nn", "nt", "tn"])
    assert layout.step_neighbours("nt") == ["nn", "tn"]
    assert Axis([1, 1.0, True]).values == (1, 1.0, True)  # three distinct values, as in Config
    with pytest.raises(UsageError, match="numbers only"):
        Axis.ordered(["a"])
    with pytest.raises(UsageError, match="expected integers"):
        Axis.pow2(0, 8)


def test_neighbours_step_along_one_axis_and_respect_the_constraint() -> None:
    space = Space(
        tile=Axis.pow2(16, 128),
        stages=Axis.ordered(range(1, 5)),
        layout=["a", "b", "c"],
        constraint=lambda c: c.tile * c.stages <= 128,
    )
    got = set(space.neighbours(Config(tile=64, stages=2, layout="b")))
    assert got == {
        Config(tile=32, stages=2, layout="b"),
        Config(tile=64, stages=1, layout="b"),
        Config(tile=64, stages=2, layout="a"),
        Config(tile=64, stages=2, layout="c"),
    }  # tile=128 and stages=3 break the constraint
    assert space.neighbours(Config(tile=64)) == []


def test_membership_checks_fields_values_types_and_constraint() -> None:
    space = Space(tile=[64, 128], flag=[True, False], constraint=lambda c: c.tile == 64 or c.flag)
    assert Config(tile=64, flag=False) in space
    assert Config(tile=128, flag=False) not in space  # the constraint
    assert Config(tile=32, flag=True) not in space  # not a value of the axis
    assert Config(tile=64, flag=1) not in space  # 1 is not True in a Config
    assert Config(tile=64) not in space
    assert {"tile": 64, "flag": True} not in space


def test_features_put_log_axes_on_a_log_scale() -> None:
    space = Space(tile=Axis.pow2(16, 64), stages=[1, 3], layout=["a", "b"])
    assert space.features(Config(tile=64, stages=3, layout="b")) == [6.0, 3.0, 1.0]


def test_configs_and_old_behaviour_of_small_spaces() -> None:
    space = Space(tile=Axis.pow2(64, 128), num_warps=[4, 8], constraint=lambda c: c.tile >= 128)
    assert space.configs() == (Config(tile=128, num_warps=4), Config(tile=128, num_warps=8))
    assert Space(tile=[64, 64, 128]).configs() == (Config(tile=64), Config(tile=128))
    with pytest.raises(UsageError, match="removed all 4"):
        Space(tile=[1, 2], w=[1, 2], constraint=lambda c: False).configs()


def test_search_space_of_each_accepted_spec() -> None:
    assert isinstance(search_space({"tile": [1, 2]}), Space)
    listed = search_space([{"tile": 16, "w": 4}, {"tile": 32, "w": 4}, {"tile": 32, "w": 8}])
    assert isinstance(listed, ListSpace)
    assert listed.size_hint() == 3
    assert Config(tile=32, w=4) in listed
    assert set(listed.neighbours(Config(tile=32, w=4))) == {
        Config(tile=16, w=4),
        Config(tile=32, w=8),
    }
    assert sorted(listed.sample(random.Random(0), 10), key=repr) == sorted(
        listed.iter_valid(), key=repr
    )


def test_the_engine_imports_neither_torch_triton_nor_a_model_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tunedsl.engine.driver, tunedsl.engine.search, tunedsl.engine.history\n"
        "import tunedsl.model.space\n"
        "bad = {'torch', 'triton', 'sklearn', 'lightgbm', 'xgboost'} & set(sys.modules)\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the first valid point is found in a bounded number of constraint calls ----------------------
# (the site's default and the key of a call whose arguments are a function of the configuration)
FIRST_SCAN = 10_000


class Bounded(Counting):
    """Counts its calls and stops a scan that goes far past the bound (a whole-space scan
    of 10^7 points takes minutes: a test of it must fail, not hang)."""

    def __call__(self, cfg: Config) -> bool:
        if self.calls >= 10 * FIRST_SCAN:
            raise AssertionError(f"the constraint was called {self.calls:,} times")
        return super().__call__(cfg)


def test_a_constraint_that_rejects_everything_is_an_error_after_a_bounded_scan() -> None:
    from tunedsl.model.settings import resolve

    counter = Bounded(lambda c: False)

    def nothing_fits(cfg: Config) -> bool:
        return counter(cfg)

    with pytest.raises(UsageError) as info:
        resolve(ten_million(nothing_fits), {}, {}, "kernels.py:12")
    text = str(info.value)
    assert text.startswith("kernels.py:12: the space's constraint ")
    assert "nothing_fits" in text and "rejected the first 10,000 of its 10,000,000" in text
    assert "loosen it, or narrow the axes" in text
    assert counter.calls == 2 * FIRST_SCAN


def test_a_small_space_the_constraint_empties_names_it_too() -> None:
    space = Space(a=list(range(50)), b=list(range(50)), constraint=lambda c: False)
    with pytest.raises(
        UsageError, match=r"<lambda at test_engine_space.py:\d+> removed all 2500 configurations"
    ):
        space.first_valid()


def test_the_first_valid_point_in_order_when_it_comes_early() -> None:
    fn = Bounded(lambda c: c.g == 7)
    assert ten_million(fn).first_valid() == Config(a=0, b=0, c=0, d=0, e=0, f=0, g=7)
    assert fn.calls == 8


def test_a_valid_region_far_down_the_order_is_found_by_drawing() -> None:
    """Only a == 9 is valid: the first such point in order is the 9,000,001st. Drawn at
    random with a fixed seed, one is found at once, and the same one every time."""
    fn = Bounded(lambda c: c.a == 9)
    first = ten_million(fn).first_valid()
    assert first.a == 9 and fn.calls < 2 * FIRST_SCAN
    assert ten_million(Bounded(lambda c: c.a == 9)).first_valid() == first


@pytest.mark.parametrize("size", [10_001, 19_999, 2 * FIRST_SCAN])
def test_a_space_of_up_to_twice_the_scan_is_scanned_whole_for_its_first_point(size: int) -> None:
    """One valid point, the last: a space of up to 20,000 points is scanned whole (as many
    constraint calls as the scan and the draws of a larger one). 10,000 draws at random
    past the first 10,000 points missed it (for 19,999 points), and the site said the
    constraint rejected everything."""
    fn = Bounded(lambda c: c.a == size - 1)
    space = Space(a=list(range(size)), constraint=fn)
    assert space.first_valid() == Config(a=size - 1)
    assert fn.calls == size
    assert space.sample(random.Random(0), 4) == [Config(a=size - 1)]


def test_a_space_without_constraint_or_a_list_space_is_its_first_point() -> None:
    assert Space(a=[3, 4], b=[5]).first_valid() == Config(a=3, b=5)
    assert ListSpace([Config(t=2), Config(t=1)]).first_valid() == Config(t=2)


def test_an_axis_given_twice_is_an_error_not_a_silent_override() -> None:
    # Space({"tile": ...}, tile=...) used to keep the keyword's values and drop the dict's.
    with pytest.raises(UsageError, match=r"axis 'tile' is given twice.*\[16, 32\].*\[64\]"):
        Space({"tile": [16, 32]}, tile=[64])
    assert Space({"tile": [16, 32]}, warps=[4]).size_hint() == 2  # distinct names merge


@pytest.mark.parametrize("axis", [{"nn", "nt", "tn"}, frozenset({16, 32})])
def test_a_set_axis_is_refused_naming_the_axis_and_the_fix(axis: object) -> None:
    # A set was listed in hash order: strings change order from one run to the next
    # (PYTHONHASHSEED), and with it which configuration wins a tie and the record's order.
    with pytest.raises(UsageError, match=r"space axis 'layout' is a set.*give a list.*sorted\("):
        expand_space({"layout": axis})
    with pytest.raises(UsageError, match=r"space axis 'layout' is a set"):
        Space(layout=axis, tile=[16]).size_hint()
    with pytest.raises(UsageError, match=r"Axis is a set"):
        Axis.categorical(axis)  # type: ignore[arg-type]
    assert [c.layout for c in expand_space({"layout": sorted(axis)})] == sorted(axis)


def test_a_numpy_axis_is_refused_with_the_fix() -> None:
    np = pytest.importorskip("numpy")
    tiles = np.array([16, 32, 64])
    with pytest.raises(UsageError, match=r"space axis 'tile' is a numpy array.*arr\.tolist\(\)"):
        expand_space({"tile": tiles})
    # list(arr) keeps numpy numbers: the error on one says how to get Python ones.
    with pytest.raises(UsageError, match=r"type int64.*arr\.tolist\(\) or int\(v\)"):
        expand_space({"tile": list(tiles)})
    assert [c.tile for c in expand_space({"tile": tiles.tolist()})] == [16, 32, 64]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes: Python 3.11+")
def test_a_constraint_that_raises_names_the_configuration_it_raised_for() -> None:
    """A constraint that raises (a division by a field that may be 0) reaches the user as
    raised, with a note naming the configuration and the fix (it named neither)."""
    space = Space(block=[32, 0, 64], constraint=lambda c: 256 // c.block >= 4)
    with pytest.raises(ZeroDivisionError) as raised:
        list(space.iter_valid())
    notes = getattr(raised.value, "__notes__", [])
    assert any("constraint= for Config(block=0)" in n and "return False" in n for n in notes)
