"""Rules for keys never tuned: features, the cover, the maps, validation, the file format
(pure Python, on swept keys whose timings follow a known landscape)."""

from __future__ import annotations

import json
import math

import pytest

from tunedsl.model.config import Config
from tunedsl.model.rule import MAX_CONFIGS, InvalidRule, Rule
from tunedsl.model.rule_build import SweptKey, build, cover, missing_cells, with_cells
from tunedsl.model.rule_features import key_features

CONFIGS = [Config(block=b, warps=w) for b in (16, 32, 64, 128, 256) for w in (4, 8)]


def ideal_block(m: int) -> int:
    return min(256, max(16, 2 ** round(math.log2(m) / 2 + 1)))


def landscape(m: int, config: Config) -> float:
    """Time of ``config`` on M=m: best at ideal_block(m), 4 warps a little better."""
    return (
        m
        * (1 + 0.4 * abs(math.log2(config.block / ideal_block(m))))
        * (1.02 if config.warps == 8 else 1.0)
    )


def key(m: int, dtype: str = "float16", n: int = 512) -> dict:
    return {"args": {"a": {"dtype": dtype, "shape": [m, n], "stride": "s1"}, "M": "i16"}}


def swept(sizes, dtype: str = "float16") -> list[SweptKey]:
    return [SweptKey(key(m, dtype), {c: landscape(m, c) for c in CONFIGS}) for m in sizes]


SIZES = [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 4096, 8192]


def test_features_are_log_sizes_and_families_the_categorical_rest() -> None:
    family, x = key_features(key(1000))
    assert x == {
        "args.a.shape[0]": pytest.approx(math.log2(1000)),
        "args.a.shape[1]": 9.0,
        "args.M%16": 1.0,
    }
    assert json.loads(family) == {"args.a.dtype": "float16", "args.a.stride": "s1", "args.M": "i32"}
    # An int's alignment is no family: an odd M shares the powers of two's rule, with its
    # alignment as a feature.
    odd = {"args": {**key(1000)["args"], "M": "i"}}
    assert key_features(odd) == (family, {**x, "args.M%16": 0.0})
    # What Triton compiles another kernel for is: an int equal to 1 (no alignment to split
    # on), a 64-bit int (of either alignment), an unsigned one.
    for cls, part, aligned in (("i1", "==1", None), ("i16L", "i64", 1.0), ("iL", "i64", 0.0),
                               ("iU", "u64", 0.0)):  # fmt: skip
        fam, feats = key_features({"args": {**key(1000)["args"], "M": cls}})
        assert json.loads(fam) == {**json.loads(family), "args.M": part}, cls
        assert feats.get("args.M%16") == aligned, cls
    assert key_features(key(1000, "float32"))[0] != family
    # A constexpr value and the user's key= are part of the key as they are.
    # A numeric constexpr (a block computed from a size) is a feature, a flag a family; the
    # user's key= is part of the key as it is.
    fam, feats = key_features(
        {"args": {"B": {"constexpr": 64}, "F": {"constexpr": True}}, "user_key": [1024, "x"]}
    )
    assert json.loads(fam) == {"args.F": '{"constexpr":true}', "key[1]": "x"}
    assert feats == {"args.B": 6.0, "key[0]": 10.0}
    # An int class's name in key= is a string like any other; an int below 2 (a flag, a
    # sentinel) and a NaN are families, a positive float a size.
    fam, feats = key_features(
        {"args": {"w": [0, -2, 2.0, float("nan")]}, "user_key": ["i16", (4, None)]}
    )
    assert json.loads(fam) == {
        "args.w[0]": 0,
        "args.w[1]": -2,
        "args.w[3]": "nan",
        "key[0]": "i16",
        "key[1][1]": None,
    }
    assert feats == {"args.w[2]": 1.0, "key[1][0]": 2.0}
    # Values that were one point in log2 read apart: 0 and 1 (flags), 0.25 and 0.5, -1 and -7.
    for a, b in ((0, 1), (0.25, 0.5), (-1, -7), (0.0, 1.0), ({"constexpr": 0}, {"constexpr": 1})):
        assert key_features({"args": {}, "user_key": a}) != key_features(
            {"args": {}, "user_key": b}
        ), (a, b)


def test_a_tensor_reads_as_the_same_features_whatever_form_its_parts_take() -> None:
    """A tensor's readable form is read whole; parts in another form (a user key shaped like
    one, an empty or zero size, a bool) give what the walk gives part by part."""
    tensor = {"dtype": "float16", "shape": [0, 1, 3000], "stride": "s1"}
    fam, feats = key_features({"args": {"t": tensor}, "user_key": dict(tensor)})
    assert json.loads(fam) == {
        "args.t.dtype": "float16",
        "args.t.stride": "s1",
        "key.dtype": "float16",
        "key.stride": "s1",
    }
    sizes = {"shape[0]": 0.0, "shape[1]": 0.0, "shape[2]": pytest.approx(math.log2(3000))}
    assert feats == {f"{p}.{k}": v for p in ("args.t", "key") for k, v in sizes.items()}
    # A bool is no size, and an int class's name is no dtype: each is read as it is.
    fam, feats = key_features({"args": {"t": {"dtype": "i16", "shape": [True, 8], "stride": "s1"}}})
    assert json.loads(fam) == {
        "args.t.shape[0]": True,
        "args.t.stride": "s1",
        "args.t.dtype": "i32",
    }
    assert feats == {"args.t.dtype%16": 1.0, "args.t.shape[1]": 3.0}
    assert key_features({"args": {"t": {"dtype": "float16", "shape": [], "stride": "c"}}})[1] == {}


def test_a_key_of_int_classes_and_tensors_reads_as_the_walk_reads_it() -> None:
    """The common key (int classes and plain tensors only) is read without the general walk:
    the same family and features, in the same order, as the walk gives (which a key with
    any other part, here a ``prune`` entry the features never read, takes)."""
    t = {"dtype": "float32", "shape": [5, 16], "stride": "s1"}
    keys = [
        {"n": "i16", "x": t, "y": {**t, "shape": [7, 3000]}},
        {"z": "i", "a": {**t, "shape": [0, 1, 2]}, "m": "i1"},
        {"x": {**t, "dtype": "bfloat16"}, "n": "i16L"},
        {"x": {**t, "shape": []}},
        {"x": {**t, "shape": [True, 8]}},  # a bool: no size
        {"x": {**t, "dtype": "i16"}},  # an int class's name: no dtype
        {"x": t, "flag": "on"},  # a string: a family
        {"x": t, "c": {"constexpr": 64}},
        {"x": t, "h": {"shape": [4]}},  # a dict, not a tensor's form
    ]
    for args in keys:
        key_features({"args": args})  # the first read of a shape's length walks it
        fam, feats = key_features({"args": args})
        walked_fam, walked = key_features({"args": args, "prune": {}})
        assert fam == walked_fam and list(feats.items()) == list(walked.items()), args
    # Twice, and with the arguments in another order: the same.
    again = key_features({"args": dict(reversed(keys[0].items()))})
    assert again[0] == key_features({"args": keys[0]})[0]
    assert again[1] == key_features({"args": keys[0]})[1]


def test_the_cover_has_every_key_within_the_tolerance_of_its_best() -> None:
    keys = swept(SIZES)
    chosen = cover(keys, tolerance=0.03)
    assert 1 < len(chosen) <= MAX_CONFIGS
    for k in keys:
        assert min(k.times[c] for c in chosen) <= 1.03 * k.best  # type: ignore[operator]
    assert all(c.warps == 4 for c in chosen)  # 8 warps never covers: 2% slower everywhere
    assert len(cover(keys, tolerance=0.03, max_configs=2)) == 2


def test_the_rule_picks_the_best_configuration_for_sizes_between_the_swept_ones() -> None:
    built = build(swept(SIZES))
    rule = Rule("s", {}, None, None, {"name": "gpu"}, {}, built.configs, built.families, {})
    for m in (20, 40, 100, 300, 700, 1200, 3000, 6000):  # never swept
        picked, in_range = rule.decide(key(m))
        assert in_range
        best = min(landscape(m, c) for c in CONFIGS)
        assert landscape(m, picked) <= 1.25 * best, (m, picked)
    v = built.validation
    assert v["method"] == "leave-one-key-out" and v["keys"] == len(SIZES)
    assert 1.0 <= v["geomean"] <= v["p95"] <= v["max"]  # type: ignore[operator]
    assert v["geomean"] <= v["baselines"]["single_best"]["geomean"]  # type: ignore[index]


def test_keys_of_one_family_with_other_sizes_are_left_out_with_a_note() -> None:
    """A constexpr passed at its default is left out of the key (``WIDTH: tl.constexpr = 64``):
    a sweep of WIDTH=64 and WIDTH=32 gives one family whose keys name different sizes. The
    build crashed on them (a KeyError in the tree); it builds from the keys of the sizes most
    keys have, says which it left out, and the rule decides none like them."""

    def width_key(m: int, width: int | None) -> dict:
        k = key(m)
        if width is not None:
            k["args"]["WIDTH"] = {"constexpr": width}
        return k

    keys = [
        SweptKey(width_key(m, w), {c: landscape(m, c) for c in CONFIGS})
        for m in (64, 256, 1024)
        for w in (None, 32)
    ][:5]  # three at the default, two with WIDTH=32
    built = build(keys)
    assert built.validation["keys"] == 3
    (note,) = built.left_out
    assert note.startswith("2 swept key(s) left out: they have args.WIDTH, unlike the 3 other")
    assert "give it no default" in note
    rule = Rule("s", {}, None, None, {}, {}, built.configs, built.families, {})
    assert Rule.from_json(json.loads(json.dumps(rule.to_json()))).families == rule.families
    assert rule.decide(width_key(100, None))[1] is True
    assert rule.decide(width_key(100, 32))[1] is False


def test_keys_outside_the_range_or_family_are_said_to_be() -> None:
    built = build(swept([64, 128, 256]))
    rule = Rule("s", {}, None, None, {}, {}, built.configs, built.families, {})
    assert rule.decide(key(100))[1] is True
    assert rule.decide(key(4096))[1] is False  # beyond the sweep: clamped, not in range
    assert rule.decide(key(100, n=1024))[1] is False  # a size the sweep held fixed
    picked, in_range = rule.decide(key(100, "float32"))  # another family: the closest one
    assert not in_range and picked in built.configs


def test_two_families_get_their_own_maps() -> None:
    keys = swept([64, 256, 1024]) + [
        SweptKey(key(m, "float32"), {c: landscape(m * 64, c) for c in CONFIGS})
        for m in (64, 256, 1024)
    ]
    built = build(keys)
    rule = Rule("s", {}, None, None, {}, {}, built.configs, built.families, {})
    assert len(built.families) == 2
    half, _ = rule.decide(key(256))
    single, _ = rule.decide(key(256, "float32"))
    assert half.block == ideal_block(256) and single.block == ideal_block(256 * 64)


def test_failed_configurations_never_cover_and_unmeasured_picks_are_counted() -> None:
    # The ideal block fails on every key: the cover holds only configurations that ran.
    keys = [
        SweptKey(
            key(m), {c: (None if c.block == ideal_block(m) else landscape(m, c)) for c in CONFIGS}
        )
        for m in SIZES
    ]
    chosen = cover(keys)
    for k in keys:
        assert any(k.times[c] is not None and k.times[c] <= 1.03 * k.best for c in chosen)
    # Each key timed two configurations only: a held-out key's pick is often one it never
    # timed, and the report counts those instead of guessing their regret.
    sparse = [
        SweptKey(key(m), {c: landscape(m, c) for c in (CONFIGS[i % 10], CONFIGS[(i + 3) % 10])})
        for i, m in enumerate(SIZES)
    ]
    v = build(sparse).validation
    assert v["unmeasured"] > 0  # type: ignore[operator]
    assert v["n"] + v["unmeasured"] == len(SIZES)  # type: ignore[operator]
    with pytest.raises(ValueError, match="no swept key has a successful time"):
        build([SweptKey(key(64), dict.fromkeys(CONFIGS))])


def test_a_rule_round_trips_and_a_hostile_file_is_refused_naming_the_field() -> None:
    built = build(swept(SIZES))
    rule = Rule(
        "s",
        {"qualname": "k"},
        None,
        None,
        {"name": "g"},
        {"triton": "3.6"},
        built.configs,
        built.families,
        built.validation,
    )
    data = rule.to_json()
    again = Rule.from_json(json.loads(json.dumps(data)))
    assert again.configs == rule.configs and again.decide(key(300)) == rule.decide(key(300))
    # Written as schema 4 (an int's alignment decides only sizes its swept keys bracket). A
    # file of schema 1 or 2 does not say which int classes (==1, 32- or 64-bit) its sweep had,
    # one of schema 3 let odd sizes swept at one end decide the others: it is built again.
    assert data["schema"] == 4
    for older in (1, 2):
        with pytest.raises(InvalidRule, match=r"does not say which int classes .*build the rule"):
            Rule.from_json({**json.loads(json.dumps(data)), "schema": older})
    with pytest.raises(InvalidRule, match=r"schema 3 .*multiple of 16 .*build the rule again"):
        Rule.from_json({**json.loads(json.dumps(data)), "schema": 3})

    def damaged(change) -> dict:
        d = json.loads(json.dumps(data))
        change(d)
        return d

    cases = {
        "not a tunedsl rule": lambda d: d.update(kind="record"),
        r"schema \[\] is not one this tunedsl reads .4.: build": lambda d: d.update(schema=[]),
        "schema 99 is not one this tunedsl reads .4.: build the rule again": lambda d: d.update(
            schema=99
        ),
        "rule.configs is not a list of 1 to 8": lambda d: d.update(configs=[]),
        "expected a configuration index": lambda d: d["families"][0].update(
            model="tree", tree={"pick": 99}
        ),
        "configuration index": lambda d: d["families"][0]["points"][0].update(pick=-1),
        "finite threshold": lambda d: d["families"][0].update(
            model="tree",
            tree={
                "feature": "x",
                "threshold": float("nan"),
                "low": {"pick": 0},
                "high": {"pick": 0},
            },
        ),
        "is not a tree node": lambda d: d["families"][0].update(model="tree", tree=_deep(40)),
        "low > high": lambda d: d["families"][0]["ranges"].update({"args.a.shape[0]": [9, 1]}),
        "expected 'tree' or 'nearest'": lambda d: d["families"][0].update(model="forest"),
        # An int past any float (math.isfinite raised OverflowError, not InvalidRule).
        "needs a feature name and a finite threshold": lambda d: d["families"][0].update(
            model="tree",
            tree={"feature": "x", "threshold": 10**400, "low": {"pick": 0}, "high": {"pick": 0}},
        ),
    }
    for message, change in cases.items():
        with pytest.raises(InvalidRule, match=message):
            Rule.from_json(damaged(change))
    # A build time past any float reads as unknown (0), as any other non-number does.
    assert Rule.from_json(damaged(lambda d: d.update(built=10**400))).built == 0.0


def _deep(levels: int) -> dict:
    node: dict = {"pick": 0}
    for _ in range(levels):
        node = {"feature": "x", "threshold": 1.0, "low": node, "high": {"pick": 0}}
    return node


def test_show_reads_as_sizes_not_logarithms() -> None:
    built = build(swept(SIZES))
    rule = Rule(
        "site",
        {},
        None,
        None,
        {"name": "H100"},
        {"triton": "3.6.0"},
        built.configs,
        built.families,
        built.validation,
    )
    text = rule.describe()
    assert "measured on H100 with triton 3.6.0" in text
    assert "args.a.shape[0] in [16, 8192]" in text
    assert "[A] Config(block=" in text


def test_where_the_per_size_bests_are_noise_one_configuration_is_the_map() -> None:
    import random

    rng = random.Random(7)
    configs = [Config(warps=w) for w in (1, 2, 4, 8)]
    # warps=4 is 3% faster everywhere; every time carries +-6% of noise.
    keys = [
        SweptKey(
            key(m),
            {
                c: m * (0.97 if c.warps == 4 else 1.0) * (1 + rng.uniform(-0.06, 0.06))
                for c in configs
            },
        )
        for m in SIZES
    ]
    built = build(keys)
    (family,) = built.families
    assert family.tree is not None and family.tree.pick is not None  # one leaf: one config
    assert built.configs[family.tree.pick] == Config(warps=4)
    v = built.validation
    assert v["geomean"] <= v["baselines"]["nearest_key"]["geomean"]  # type: ignore[index, operator]


def test_the_cells_a_rule_needs_and_the_records_never_timed_are_planned_for_measuring() -> None:
    # Small sizes swept with the small blocks only (a budgeted search), large ones with all.
    small = [
        SweptKey(key(m), {c: landscape(m, c) for c in CONFIGS if c.block <= 32}) for m in (16, 24)
    ]
    large = swept([1024, 4096])
    failed = SweptKey(key(64), {**{c: landscape(64, c) for c in CONFIGS}, CONFIGS[-1]: None})
    keys = [*small, *large, failed]
    built = build(keys)
    cells = missing_cells(keys, built.configs)
    # Exactly the rule's configurations each small key lacks; a failure was a measurement.
    expected = [(i, c) for i in (0, 1) for c in built.configs if c.block > 32]
    assert cells == expected and cells
    assert all(i != 4 for i, _ in cells)
    # Measured cells fill what a key lacks and never replace what it has.
    again = {c: 1.0 for c in CONFIGS}
    filled = with_cells(keys[0], again)
    assert all(c in filled.times for c in built.configs)
    assert all(filled.times[c] == keys[0].times[c] for c in keys[0].times)
    assert missing_cells([filled, *keys[1:]], built.configs) == [(i, c) for i, c in cells if i == 1]


def test_configurations_prune_drops_for_a_key_are_no_cells_to_measure_nor_picks() -> None:
    # A row kernel's prune= keeps the blocks at least as wide as M: on each key the
    # narrower blocks are no candidates (its record lists them as pruned), never timed.
    def pruned_key(m: int) -> SweptKey:
        kept = {c: landscape(m, c) for c in CONFIGS if c.block >= min(m, 256)}
        return SweptKey(key(m), kept, frozenset(c for c in CONFIGS if c not in kept))

    keys = [pruned_key(m) for m in (16, 24, 32, 48, 64, 96, 128, 192, 256, 512)]
    built = build(keys)
    assert missing_cells(keys, built.configs) == []  # nothing to measure: none is a candidate
    assert built.validation["unmeasured"] == 0 and built.validation["failed"] == 0
    # Every held-out pick and the single best configuration run on their keys: a block
    # narrower than the key's M is never the pick where one that fits runs on every key.
    for k in keys:
        pick, _ = Rule(
            site="s", kernel={}, hints=None, env=None, device={}, toolchain={},
            configs=built.configs, families=built.families, validation={}, built=0.0,
        ).decide(k.readable)  # fmt: skip
        assert pick in k.times, (k.readable, pick)
    # A cell measured later keeps what prune dropped; a key without the list lacks the cell.
    plain = SweptKey(keys[-1].readable, dict(keys[-1].times))  # M=512: the widest block only
    assert missing_cells([plain], built.configs) != []
    assert missing_cells([with_cells(plain, {}, keys[-1].pruned)], built.configs) == []


def rows_key(n: int) -> dict:
    """A row kernel's key: the row length is the row stride, so its alignment is known."""
    c = "i16" if n % 16 == 0 else "i"
    return {"args": {"x": {"dtype": "float16", "shape": [4096, n], "stride": "s1"}, "n": c}}


def rows_time(n: int, config: Config) -> float:
    """Rows whose length is a multiple of 16 load with vectors: 4 warps are best; otherwise
    the loads are scalar and 8 warps hide them better."""
    best = 4 if n % 16 == 0 else 8
    return n * (1.0 if config.warps == best else 1.08)


def test_a_row_length_off_a_multiple_of_16_gets_its_own_pick_when_the_sweep_had_both() -> None:
    configs = [Config(block=64, warps=w) for w in (4, 8)]
    sizes = [64, 96, 128, 192, 256, 384, 512, 768, 1024]
    sweep = [n for m in sizes for n in (m, m + 1)]  # each size aligned and not
    keys = [SweptKey(rows_key(n), {c: rows_time(n, c) for c in configs}) for n in sweep]
    built = build(keys)
    rule = Rule("s", {}, None, None, {}, {}, built.configs, built.families, built.validation)
    for n in (100, 301, 999, 160, 320, 880):  # never swept, either alignment
        pick, in_range = rule.decide(rows_key(n))
        assert in_range and rows_time(n, pick) == min(rows_time(n, c) for c in configs), n
    assert built.validation["geomean"] == pytest.approx(1.0)
    assert "if args.n % 16 != 0:" in rule.describe()
    # One odd length swept by chance is no evidence: no split on alignment for it.
    one_odd = [k for k, n in zip(keys, sweep, strict=True) if n % 16 == 0 or n == 65]
    lone = build(one_odd)

    def split_on(tree) -> set:
        if tree is None or tree.pick is not None:
            return set()
        return {tree.feature} | split_on(tree.low) | split_on(tree.high)

    assert not any("%16" in f for fam in lone.families for f in split_on(fam.tree))
    # A sweep of aligned lengths only: an odd length is still in range (the picks carry).
    aligned = [k for k, n in zip(keys, sweep, strict=True) if n % 16 == 0]
    only = build(aligned)
    rule = Rule("s", {}, None, None, {}, {}, only.configs, only.families, only.validation)
    assert rule.decide(rows_key(301))[1]


def test_the_nearest_swept_key_is_one_of_the_same_alignment_where_the_sweep_has_one() -> None:
    """A long row off a multiple of 16 takes the pick of the nearest odd length swept, not of
    the aligned length beside it (whose vector loads want another configuration)."""
    from tunedsl.model.rule_near import nearest

    def point(n: int) -> dict[str, float]:
        return key_features(rows_key(n))[1]

    aligned_pick, odd_pick = 0, 1
    points = [(point(n), aligned_pick if n % 16 == 0 else odd_pick) for n in (8192, 12288, 8193)]
    assert nearest(points, point(12000)) == aligned_pick
    assert nearest(points, point(12001)) == odd_pick  # 12288 is nearer, but aligned
    # With no swept key of its alignment, the nearest of any.
    assert nearest(points[:2], point(12001)) == aligned_pick


def test_the_swept_configurations_round_trip_and_a_bad_list_is_refused() -> None:
    built = build(swept([64, 128, 256]))
    rule = Rule(
        "s", {}, None, None, {}, {}, built.configs, built.families, {}, swept=frozenset(CONFIGS)
    )
    data = json.loads(json.dumps(rule.to_json()))
    assert Rule.from_json(data).swept == frozenset(CONFIGS)
    assert json.dumps(data) == json.dumps(Rule.from_json(data).to_json())  # one order
    assert Rule.from_json({**data, "swept": None}).swept is None  # a rule of an older build
    for bad in ({"block": 1}, [], [1, 2], [{"block": [1]}] * 5000):
        with pytest.raises(InvalidRule, match=r"rule\.swept"):
            Rule.from_json({**data, "swept": bad})


def test_a_configuration_that_failed_on_a_swept_key_is_never_its_pick() -> None:
    """Helion's AOT heuristics assign a configuration only to the shapes where it is valid
    (test_aot_autotuning.py test_single_config_with_validity_partitioning). Here a block
    wider than M fails: the rule must not pick one for a key it failed on (one configuration,
    block=128, was the map of every key, M=64's too), and its validation counts held-out picks
    that failed as failed, not left out of the regret as picks never timed."""
    sizes = [64, 128, 256, 512, 1024]
    blocks = {64: 1.0, 128: 1.9, 256: 2.0}  # speed of each block: fewer programs, faster

    def time(m: int, block: int) -> float | None:
        return None if block > m else m / min(blocks[block], blocks.get(m, 2.0))

    keys = [SweptKey(key(m), {Config(block=b, warps=4): time(m, b) for b in blocks}) for m in sizes]
    built = build(keys)
    (family,) = built.families
    for k in keys:
        pick = built.configs[family.pick(key_features(k.readable)[1])]
        assert k.times[pick] is not None, (k.readable, pick)
    v = built.validation
    assert v["failed"] >= 1  # type: ignore[operator]
    assert v["n"] + v["failed"] + v["unmeasured"] == len(sizes)  # type: ignore[operator]


def test_a_tree_splitting_on_a_feature_its_keys_lack_is_refused_naming_it() -> None:
    # A damaged or hand-edited tree that splits on a feature no swept key of its family has
    # (another size, a misspelt name) read every key as 0 there and sent it down one branch:
    # its pick decided keys in silence. The build only splits on features every key gives.
    built = build(swept(SIZES))
    rule = Rule("s", {"qualname": "k"}, None, None, {"name": "g"}, {}, built.configs, built.families, built.validation)  # fmt: skip
    data = json.loads(json.dumps(rule.to_json()))
    leaf = {"feature": "args.a.shape[0]", "threshold": 6.0, "low": {"pick": 0}, "high": {"pick": 1}}
    data["families"][0].update(model="tree", tree=leaf)
    assert Rule.from_json(data).decide(key(16)) != Rule.from_json(data).decide(key(8192))
    for where, tree in (
        ("tree", {**leaf, "feature": "args.a.shape[9]"}),
        ("tree.high", {**leaf, "high": {**leaf, "feature": "args.b.shape[0]"}}),
    ):
        data["families"][0]["tree"] = tree
        with pytest.raises(InvalidRule, match=rf"rule\.families\[0\]\.{where} splits on '"):
            Rule.from_json(data)


def test_a_bucket_of_0_or_1_outside_a_sweep_of_larger_buckets_is_named_with_the_swept_sizes() -> (
    None
):
    # key=n // 1024 gives 0 and 1 for the smallest sizes, which read as flags: their own
    # family. The reason named `key is 0 (swept: null)`, JSON for "the swept family has no
    # such part", where the sweep had it as a size.
    keys = [
        SweptKey({**key(64), "user_key": b}, {c: landscape(64 * b, c) for c in CONFIGS})
        for b in (2, 4, 8)
    ]
    built = build(keys)
    rule = Rule("s", {}, None, None, {}, {}, built.configs, built.families, {})
    _, why = rule.outside({**key(64), "user_key": 0}) or ("", "")
    assert "null" not in why, why
    assert "key is 0 (swept: sizes 2 to 8)" in why, why
    _, back = rule.outside({**key(64), "user_key": 1}) or ("", "")
    assert "key is 1 (swept: sizes 2 to 8)" in back, back


def test_a_familys_judge_for_one_feature_layout_answers_as_in_range_then_pick() -> None:
    """``Family.judge`` (what a layout's plan asks on each new key) gives ``pick`` exactly
    where ``in_range`` holds and None elsewhere: over one size, over a product grid of two,
    over two sizes swept together, with a tree or the nearest swept key, and for keys of a
    feature layout the family was not swept with."""
    from dataclasses import replace

    product = [(m, n) for m in (64, 256, 1024) for n in (128, 512)]
    sweeps = {
        "one size": [(m, 512) for m in (64, 128, 256, 512, 1024)],
        "product": product,
        "together": [(m, m) for m in (64, 128, 256, 512, 1024)],
    }
    probes = [(m, n) for m in (1, 32, 64, 100, 300, 1024, 5000) for n in (64, 128, 300, 512, 1024)]
    for name, sizes in sweeps.items():
        keys = [
            SweptKey(key(m, n=n), {c: landscape(m * n // 512, c) for c in CONFIGS})
            for m, n in sizes
        ]
        (family,) = build(keys).families
        for fam in (family, replace(family, tree=None)):  # a tree, and the nearest swept key
            names = tuple(key_features(key(100, n=300))[1])
            judge = fam.judge(names)
            seen = set()
            for m, n in probes:
                x = key_features(key(m, n=n))[1]
                assert tuple(x) == names
                want = fam.pick(x) if fam.in_range(x) else None
                assert judge(x) == want, (name, m, n)
                seen.add(want is None)
            assert seen == {True, False}, name  # keys in range and out of it
            other = {**x, "args.b.shape[0]": 5.0}  # a size this family was never swept with
            assert fam.judge(tuple(other))(other) is None and not fam.in_range(other)


def test_with_two_swept_keys_the_map_follows_what_the_sweep_measured_at_each() -> None:
    # A varlen sum swept at two bucket sizes: prune= drops the wide block at the small one,
    # where the narrow block is best; the wide block is 1.7x faster at the large one. Each
    # key held out leaves one key, so every map validated alike, and the simplest (one
    # configuration for every size: the narrow block) was chosen: the large key's own
    # sweep said 1.7x slower.
    narrow, wide = Config(block=64, warps=4), Config(block=256, warps=4)
    small = SweptKey(key(128), {narrow: 1.0}, frozenset({wide}))
    large = SweptKey(key(512), {narrow: 1.7, wide: 1.0})
    built = build([small, large])
    rule = Rule(
        site="s", kernel={}, hints=None, env=None, device={}, toolchain={},
        configs=built.configs, families=built.families, validation={}, built=0.0,
    )  # fmt: skip
    assert rule.decide(small.readable)[0] == narrow
    assert rule.decide(large.readable)[0] == wide
    assert rule.decide(key(480))[0] == wide  # a size beside the large key's
    from tunedsl.model.rule_notes import build_notes

    notes = build_notes("site", [small, large], built)
    assert any("validated on 1 held-out key(s), too few" in n for n in notes), notes


def computed_space_keys(complete: bool) -> list[SweptKey]:
    """A row kernel whose space is computed per call, ``block=[next_pow2(n), 2 * next_pow2(n)]``:
    each key's record timed its own space, which holds no block of the other sizes'."""
    keys = []
    for n in (64, 128, 256, 1024):
        for rows in (1, 3, 8):
            space = [Config(block=b, warps=w) for b in (n, 2 * n) for w in (1, 2, 4)]
            # Block 128 with one warp is the best wherever it is in the space; elsewhere the
            # best changes with the rows (timing noise, as under the interpreter).
            times = {
                c: rows * n * (1.0 if c == Config(block=128, warps=1) else 1.01 + noise)
                for c in space
                for noise in [0.02 * ((rows * 7 + c.block // n * 3 + c.warps * 5) % 5)]
            }
            k = {"args": {"x": {"dtype": "float32", "shape": [rows, n], "stride": "s1"}}}
            keys.append(SweptKey(k, times, complete=complete))
    return keys


def test_a_space_computed_per_call_validates_its_picks_in_each_keys_space() -> None:
    # Records that timed every candidate (an exhaustive sweep): a configuration a key's record
    # lacks is outside its space, a pick the runtime refuses there, never one of no regret.
    keys = computed_space_keys(complete=True)
    built = build(keys)
    v = built.validation
    assert v["unmeasured"] == 0 and v["failed"] == 0, v
    assert v["n"] + v["outside"] == len(keys), v  # type: ignore[operator]
    rule = Rule("s", {}, None, None, {}, {}, built.configs, built.families, v)
    for k in keys:  # one block for every size was the map: refused at every other size
        assert rule.decide(k.readable)[0] in k.times, k.readable
    # Where the records do not say so (a budgeted search), a pick never timed on its key
    # counts against its map as 4x slower: the map chosen is not the one block whose regret
    # rests on the few keys it was timed on.
    v = build(computed_space_keys(complete=False)).validation
    assert v["n"] > v["unmeasured"], v  # type: ignore[operator]
    shown = Rule("s", {}, None, None, {}, {}, (), (), {**v, "unmeasured": 9, "outside": 2})
    assert "; 2 picks outside their key's space; 9 picks never timed there" in shown.describe()
