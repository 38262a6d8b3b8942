"""A rule's maps and an int's alignment (a multiple of 16 or not): a batch size swept in
powers of two is off a multiple of 16 only below 16, and those small sizes' pick must not
decide the odd sizes above them (pure Python, on the timings of a row-sum kernel)."""

from __future__ import annotations

from dataclasses import replace

from tunedsl.model.config import Config
from tunedsl.model.rule import Rule
from tunedsl.model.rule_build import SweptKey, build, fit_tree
from tunedsl.model.rule_features import key_features
from tunedsl.model.rule_near import nearest
from tunedsl.model.rule_notes import build_notes

# One row a step (A), or 16 rows a step after a fixed setup (B): A is best up to R=8, B
# from R=16 (the interpreter's timings of repro rowsum, in ms).
A, B = Config(BR=1, SETUP=0), Config(BR=16, SETUP=12)
TIMES = {2: (4.0, 15.4), 4: (6.7, 18.6), 8: (12.4, 15.6), 16: (21.9, 15.4), 32: (50.6, 25.4)}
TIMES[64] = (82.3, 20.0)
ODD_ABOVE_16 = (17, 24, 33, 40, 50, 63)


def rows_key(r: int) -> dict:
    """A batch of ``r`` rows: the int argument R is ``r``, its class says its alignment."""
    return {
        "args": {
            "BLOCK": {"constexpr": 64},
            "C": "i16",
            "R": "i16" if r % 16 == 0 else "i",
            "x": {"dtype": "float32", "shape": [r, 64], "stride": "s1"},
            "out": {"dtype": "float32", "shape": [r], "stride": "1"},
        }
    }


def keys() -> list[SweptKey]:
    return [SweptKey(rows_key(r), {A: a, B: b}, complete=True) for r, (a, b) in TIMES.items()]


def test_an_odd_batch_size_beyond_the_odd_sizes_swept_takes_the_nearest_of_all() -> None:
    """The odd sizes swept (2, 4, 8) bracket no odd size above 16: 40 takes the pick of 32
    (or 64), not of 8."""
    points = [(key_features(rows_key(r))[1], 0 if a < b else 1) for r, (a, b) in TIMES.items()]
    for r in ODD_ABOVE_16:
        assert nearest(points, key_features(rows_key(r))[1]) == 1, r
    assert nearest(points, key_features(rows_key(6))[1]) == 0  # bracketed by 4 and 8


def test_the_regret_tree_splits_on_the_batch_size_not_on_its_alignment() -> None:
    """The split on R's alignment partitions the keys as the split on R at 8|16 does: the
    size wins the tie, and the alignment, odd only at one end of the sweep, is no evidence."""
    ks = keys()
    tree = fit_tree(ks, [key_features(k.readable)[1] for k in ks], [A, B])
    assert tree.feature is not None and not tree.feature.endswith("%16"), tree
    built = build(ks)
    rule = Rule("s", {}, None, None, {}, {}, built.configs, built.families, built.validation)
    for r in ODD_ABOVE_16:
        pick, in_range = rule.decide(rows_key(r))
        assert in_range and pick == B, (r, pick)
    for fam in built.families:  # whichever map validation chose, and the other one
        for other in (fam.tree, None):
            alt = replace(fam, tree=other)
            for r in ODD_ABOVE_16:
                assert built.configs[alt.pick(key_features(rows_key(r))[1])] == B, (r, other)


def test_build_notes_an_int_swept_off_a_multiple_of_16_only_at_one_end() -> None:
    ks = keys()
    notes = build_notes("s", ks, build(ks))
    (note,) = [n for n in notes if "off a multiple of 16 only" in n]
    assert "args.R off a multiple of 16 only below the multiples of 16" in note, note
    assert "(2-8; multiples of 16: 16-64)" in note and "Sweep sizes off a multiple" in note
    # Odd sizes swept across the range: no note.
    odd = {17: (23.0, 16.0), 40: (60.0, 22.0), 63: (80.0, 20.5)}
    across = ks + [SweptKey(rows_key(r), {A: a, B: b}, complete=True) for r, (a, b) in odd.items()]
    assert not [n for n in build_notes("s", across, build(across)) if "multiple of 16 only" in n]


def test_a_batch_size_swept_alone_is_searched_by_bisection_with_the_scans_answer() -> None:
    # One size and no size of a key's own: the map bisects a sorted line instead of
    # scanning every swept key; it must give the scan's answer, the first of ties included
    # (equal sizes swept twice, a query midway between two swept sizes).
    import random

    from tunedsl.model.rule_near import _Line, _scan

    rng = random.Random(7)
    for _ in range(300):
        values = [float(rng.randint(0, 12)) for _ in range(rng.randint(1, 9))]
        rows = [((v,), 0.0, rng.randint(0, 3), ()) for v in values]
        line = _Line(rows)
        for a in [rng.uniform(-2, 14), float(rng.randint(-1, 13)), rng.randint(0, 24) / 2]:
            for best_d in (float("inf"), rng.uniform(0, 9)):
                assert _scan(line, (a,), best_d, -1) == _scan(rows, (a,), best_d, -1), (
                    values, a, best_d,
                )  # fmt: skip
