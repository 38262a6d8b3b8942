"""A site's plan for the new sizes of one argument layout (``runtime/rule_plans.py``) decides
exactly what the general way decides, and leaves to it every key it cannot: one site object
called on many sizes, against a new site for each size (which has no plan), with the real
rule file `tunedsl rules build` wrote, real kernels under the interpreter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from decision_kernels import scale_by
from rule_helpers import SPACE, rule_file, run, ship, two_rule_directories
from runtime_helpers import call, site
from runtime_kernels import vadd

from tunedsl.errors import CacheWarning
from tunedsl.model.config import Config
from tunedsl.runtime import miss
from tunedsl.store import rules as rule_store

pytestmark = [pytest.mark.needs_triton, pytest.mark.usefixtures("fresh_rules")]


def _call(s, n: int, dtype=torch.float32):
    a, b = torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype)
    c = torch.empty(n, dtype=dtype)
    res = call(s, vadd, (a, b, c, n), n)
    torch.testing.assert_close(c, a + b)
    return res


@pytest.fixture
def general_ways(monkeypatch: pytest.MonkeyPatch) -> list:
    """The misses that went the general way (``miss.resolve``, which still runs)."""
    seen: list = []
    real = miss.resolve
    monkeypatch.setattr(miss, "resolve", lambda site, c: (seen.append(c), real(site, c))[1])
    return seen


# In the swept range (64..1024), odd sizes and multiples of 16 (two layouts: the int's class).
SIZES = (65, 100, 300, 301, 304, 480, 512, 555, 700, 1000, 1024)


def test_new_sizes_of_a_layout_are_decided_by_its_plan_as_the_general_way_decides_them(
    built_rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    general_ways: list,
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    planned = [_call(s, n) for n in SIZES]
    # Two layouts (n % 16 == 0 or not): each one's first miss went the general way.
    assert len(general_ways) == 2 and tune_count == []
    general_ways.clear()
    for n, got in zip(SIZES, planned, strict=True):
        alone = run("swept", n)  # a new site: the general way
        assert (got.source, got.config, got.key, got.digest, got.site, got.record) == (
            alone.source,
            alone.config,
            alone.key,
            alone.digest,
            alone.site,
            alone.record,
        ), n
        assert got.source == "rule"
    assert len(general_ways) == len(SIZES)
    # The planned keys are hits from now on, with the same result.
    again = [_call(s, n) for n in SIZES]
    assert [r.source for r in again] == ["memory"] * len(SIZES)
    assert [r.config for r in again] == [r.config for r in planned]


def test_a_record_for_a_new_size_decides_before_the_plan(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, general_ways: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert [_call(s, n).source for n in (300, 302)] == ["rule", "rule"]
    with rule_store.measuring():  # as a sweep does: the miss is tuned, and recorded
        tuned = _call(site("swept", space=SPACE), 333)
    assert tuned.source == "tuned"
    found = _call(s, 333)
    assert found.source == "disk" and found.config == tuned.config
    assert found.digest == tuned.digest


def _second_directory(built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A second shipped directory on the path, after the rule's (empty, private)."""
    second = tmp_path / "second"
    second.mkdir(mode=0o700)
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", os.pathsep.join(map(str, (built_rules, second))))
    rule_store.forget_loaded()
    return second


@pytest.mark.parametrize("where", ["beside the rule", "in a second shipped directory"])
def test_a_record_shipped_beside_the_rule_after_the_plan_decides_before_it(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    into = built_rules
    if where == "in a second shipped directory":  # three records directories to look in
        into = _second_directory(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert [_call(s, n).source for n in (300, 302)] == ["rule", "rule"]
    with rule_store.measuring():
        tuned = _call(site("swept", space=SPACE), 333)
    # The record moves from the cache to a shipped directory (the environment unchanged).
    (made,) = (tmp_path / "fresh-cache").rglob(f"{tuned.digest}.json")
    os.replace(made, into / made.name)
    found = _call(s, 333)
    assert found.source == "disk" and found.config == tuned.config
    assert found.digest == tuned.digest


def test_sizes_outside_the_swept_range_are_tuned_not_planned(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert _call(s, 301).source == "rule"
    assert [_call(s, n).source for n in (5001, 17)] == ["tuned", "tuned"]
    assert len(tune_count) == 2
    assert _call(s, 303).source == "rule"


@pytest.mark.parametrize("first", [20, 300])
def test_sizes_a_second_rule_covers_are_planned_as_the_general_way_decides_them(
    first: int,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    general_ways: list,
) -> None:
    # Rule A (a directory first on the path) swept 8..32, rule B (the next) 64..512: one
    # site's first miss is decided the general way, whichever rule decides it; every later
    # size either rule covers is the layout's plan's, with the general way's decision.
    two_rule_directories(monkeypatch, tmp_path)
    general_ways.clear()  # (the sweeps')
    tune_count.clear()
    s = site("swept", space=SPACE)
    sizes = (first, 100, 9, 301, 27, 500, 77, 13)  # none a multiple of 16: one layout
    planned = [_call(s, n) for n in sizes]
    assert [r.source for r in planned] == ["rule"] * len(sizes)
    assert len(general_ways) == 1 and tune_count == []
    for n, got in zip(sizes, planned, strict=True):
        alone = run("swept", n)  # a new site: the general way
        assert (got.source, got.config, got.digest) == (alone.source, alone.config, alone.digest)
    # In neither rule's range: the general way tunes it.
    general_ways.clear()
    assert _call(s, 3001).source == "tuned" and len(general_ways) == 1


def test_a_second_rule_whose_sweep_never_timed_a_kept_configuration_leaves_its_sizes_tuned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list, general_ways: list
) -> None:
    # Rule B swept without tile 256, which the site keeps: its sizes are tuned (the general
    # way warns), while rule A's are still planned.
    two_rule_directories(monkeypatch, tmp_path, large_space={"tile": [32, 64, 128]})
    general_ways.clear()  # (the sweeps')
    tune_count.clear()
    s = site("swept", space=SPACE)
    assert _call(s, 20).source == "rule" and len(general_ways) == 1
    with pytest.warns(CacheWarning, match=r"never timed Config\(tile=256\).*tuning instead"):
        assert _call(s, 300).source == "tuned"
    assert len(general_ways) == 2 and len(tune_count) == 1
    assert [_call(s, n).source for n in (9, 27)] == ["rule", "rule"]
    assert len(general_ways) == 2
    assert _call(s, 400).source == "tuned" and len(general_ways) == 3


def test_another_dtype_is_not_decided_by_the_plan_of_float32(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert _call(s, 301).source == "rule"
    # float64 was never swept: its family is outside the rule, so it is tuned.
    assert _call(s, 305, torch.float64).source == "tuned" and len(tune_count) == 1


@pytest.mark.parametrize("directories", [1, 2])
def test_a_rule_rebuilt_while_a_plan_is_held_decides_the_next_size(
    built_rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    directories: int,
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    if directories == 2:  # a rule file watched in each
        _second_directory(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert [_call(s, n).source for n in (300, 302)] == ["rule", "rule"]
    path = rule_file(built_rules)
    data = json.loads(path.read_text())
    picked = {json.dumps(c, sort_keys=True) for c in data["configs"]}
    other = next(
        Config(tile=t)
        for t in SPACE["tile"]
        if json.dumps(Config(tile=t).to_json(), sort_keys=True) not in picked
    )
    data["configs"] = [other.to_json()] * len(data["configs"])
    replacement = path.with_name(".new")
    replacement.write_text(json.dumps(data))
    os.chmod(replacement, 0o600)
    os.replace(replacement, path)
    res = _call(s, 306)
    assert res.source == "rule" and res.config == other and tune_count == []


@pytest.mark.parametrize("directories", [1, 2])
@pytest.mark.parametrize("change", ["opened to the group", "damaged in place"])
def test_a_rule_file_changed_in_place_while_a_plan_is_held_decides_nothing_more(
    built_rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    change: str,
    directories: int,
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    if directories == 2:
        _second_directory(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert [_call(s, n).source for n in (300, 302)] == ["rule", "rule"]
    path = rule_file(built_rules)
    if change == "opened to the group":  # the same file, another mode: its ctime moves
        os.chmod(path, 0o660)
    else:  # the same inode, rewritten
        with open(path, "r+") as f:
            f.truncate(10)
    with pytest.warns(CacheWarning, match="ignoring rule"):
        res = _call(s, 306)
    assert res.source == "tuned" and len(tune_count) == 1


def test_a_rule_file_added_to_a_second_directory_while_a_plan_is_held_is_read(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, general_ways: list
) -> None:
    # The plan watches the rule's name in every directory of the path: a file put there (a
    # damaged one here) is read at the next miss, which says so and still takes the first.
    ship(built_rules, monkeypatch, tmp_path)
    second = _second_directory(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert [_call(s, n).source for n in (300, 302)] == ["rule", "rule"]
    assert len(general_ways) == 1
    path = rule_file(built_rules)
    (second / path.name).write_text("{")
    os.chmod(second / path.name, 0o600)
    with pytest.warns(CacheWarning, match="ignoring rule"):
        assert _call(s, 306).source == "rule"
    assert len(general_ways) == 2


def test_a_planned_miss_copies_every_tensor_of_its_call_before_the_picks_first_launch(
    built_rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    general_ways: list,
) -> None:
    # Under the interpreter a pick's failed launch may have written any tensor of the call:
    # a planned miss copies the tensors the general way finds, a keyword argument's included.
    from tunedsl.backends.inplace import data_arguments
    from tunedsl.backends.triton import bind_arguments, kernel_info
    from tunedsl.runtime import rule_plans
    from tunedsl.runtime.helpers import cdiv

    ship(built_rules, monkeypatch, tmp_path)
    copied: list = []
    real = rule_plans._in_place
    monkeypatch.setattr(
        rule_plans, "_in_place", lambda c, r: copied.append((c, real(c, r))) or copied[-1][1]
    )
    s = site("swept", space=SPACE)
    for n in (300, 302, 306):
        a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
        bind = lambda cfg, n=n: ((), {"TILE": cfg.tile}, (cdiv(n, cfg.tile),))  # noqa: E731
        assert s(vadd, (a, b), {"c": c, "n": n}, bind, None, None).source == "rule"
        torch.testing.assert_close(c, a + b)
    assert len(general_ways) == 1 and tune_count == []  # the last two: the plan's
    for made, saved in copied:
        bound = bind_arguments(kernel_info(vadd), made.args, made.static_kwargs)
        found = [t for t in data_arguments(bound).values() if isinstance(t, torch.Tensor)]
        assert sorted(map(id, found)) == sorted(id(t) for t, _ in saved) and len(found) == 3
        assert all(copy is not t and copy.data_ptr() != t.data_ptr() for t, copy in saved)


def test_a_sweep_tunes_the_sizes_a_plan_would_decide(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert [_call(s, n).source for n in (300, 302)] == ["rule", "rule"]
    with rule_store.measuring():
        assert _call(s, 310).source == "tuned"
    assert len(tune_count) == 1


def test_mode_off_after_a_plan_launches_the_default(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert [_call(s, n).source for n in (300, 302)] == ["rule", "rule"]
    monkeypatch.setenv("TUNEDSL_AUTOTUNE", "off")  # the settings change: the plan is not used
    assert _call(s, 310).source == "default"


def _keep_all(configs, named):
    return list(configs)


@pytest.mark.parametrize(
    "options", [{"prune": _keep_all}, {"verify": False, "mode": "cached"}], ids=["prune", "cached"]
)
def test_a_site_that_prunes_has_no_plan_and_a_cached_one_has_the_same_decisions(
    built_rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    general_ways: list,
    options: dict,
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE, options=options)
    got = [_call(s, n) for n in (300, 301, 302, 303)]
    assert [r.source for r in got] == ["rule"] * 4 and tune_count == []
    # prune= runs on every key (it may read the arguments): every miss goes the general way.
    assert len(general_ways) == (4 if "prune" in options else 1)
    general_ways.clear()
    assert [r.config for r in got] == [
        run("swept", n, **options).config for n in (300, 301, 302, 303)
    ]


def test_after_the_environment_changes_a_layouts_next_sizes_are_planned_anew(
    built_rules: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tune_count: list,
    general_ways: list,
) -> None:
    ship(built_rules, monkeypatch, tmp_path)
    s = site("swept", space=SPACE)
    assert [_call(s, n).source for n in (300, 302)] == ["rule", "rule"]  # one layout (n % 16)
    assert len(general_ways) == 1
    # Any variable set (torch.compile's, a Triton knob): the plan made before is dropped, the
    # next size goes the general way and leaves a plan of the layout as it is now.
    monkeypatch.setenv("TUNEDSL_TEST_UNRELATED", "1")
    got = [_call(s, n) for n in (306, 308, 310, 314)]
    assert [r.source for r in got] == ["rule"] * 4 and tune_count == []
    assert len(general_ways) == 2


def _scale(s, n: int, k: float):
    x, out = torch.randn(n), torch.empty(n)
    res = call(s, scale_by, (x, out, n), n, K=k)
    torch.testing.assert_close(out, x * k)
    return res


def test_a_constexpr_of_negative_zero_is_decided_as_the_general_way_decides_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A rule swept with K=0.0; a plan made for it reads K=-0.0 (equal to 0.0): what it
    # decides is what the general way decides, key and digest included.
    from rule_helpers import SWEPT, rules_cli

    for n in SWEPT:
        assert _scale(site("scaled", space=SPACE), n, 0.0).source == "tuned"
    out = tmp_path / "rules"
    assert rules_cli("build", "--out", str(out)).returncode == 0
    ship(out, monkeypatch, tmp_path)
    s = site("scaled", space=SPACE)
    assert [_scale(s, n, 0.0).source for n in (300, 302)] == ["rule", "rule"]  # a plan now
    got = _scale(s, 306, -0.0)  # n of the plan's int class (not a multiple of 16)
    alone = _scale(site("scaled", space=SPACE), 306, -0.0)  # a new site: the general way
    assert (got.source, got.config, got.key, got.digest) == (
        alone.source,
        alone.config,
        alone.key,
        alone.digest,
    )


@pytest.mark.parametrize("where", ["in the cache", "shipped", "in a second shipped directory"])
@pytest.mark.parametrize("way", ["general", "plan"])
def test_a_record_of_this_space_under_its_own_digest_decides_before_the_rule(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str, way: str
) -> None:
    """A key tuned from a second space keeps its record under that space's own digest (the
    first space's record held the key's digest). Once the first space's record was gone
    (cleared, or the record shipped alone), a rule covering the key decided it before the
    record was looked for: the rule's prediction launched instead of the measured choice."""
    from tunedsl.runtime.space_records import own_digest, space_digest

    ship(built_rules, monkeypatch, tmp_path)
    with rule_store.measuring():  # two spaces tune the key: the second's own digest
        first = _call(site("swept", space={"tile": [32, 64]}), 333)
        tuned = _call(site("swept", space=SPACE), 333)
    assert (first.source, tuned.source) == ("tuned", "tuned")
    s = site("swept", space=SPACE)
    assert tuned.digest == first.digest  # the key's
    own = tuned.record.digest
    assert own == own_digest(first.digest, space_digest(s.settings(None)))
    records = tmp_path / "fresh-cache"
    (records_first,) = records.rglob(f"{first.digest}.json")
    records_first.unlink()  # `tunedsl cache clear` of the first space's record
    if where != "in the cache":  # (three records directories to look in, in the second)
        into = built_rules
        if where == "in a second shipped directory":
            into = _second_directory(built_rules, monkeypatch, tmp_path)
            s = site("swept", space=SPACE)
        (made,) = records.rglob(f"{own}.json")
        os.replace(made, into / made.name)
    if way == "plan":  # the layout's plan is made by a size the rule decides
        assert [_call(s, n).source for n in (300, 302)] == ["rule", "rule"]
    found = _call(s, 333)
    assert found.source == "disk", found
    assert found.config == tuned.config and found.record is not None


def test_layouts_past_the_plans_a_site_keeps_are_decided_the_general_way_alike(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list, general_ways: list
) -> None:
    """A site keeps plans for MAX_PLANS layouts and makes at most MAX_TRIES (docs/shapes.md,
    "Run"): calls that take turns among more layouts than that have the new sizes of the
    other layouts decided the general way, with the same decisions, never tuned."""
    from rule_helpers import SWEPT, rules_cli

    from tunedsl.runtime import rule_plans

    dtypes = (torch.float32, torch.float16, torch.float64, torch.int16, torch.int32, torch.int64)

    def vectors(n: int, dtype) -> tuple:
        return tuple(torch.randint(-50, 50, (n,)).to(dtype) for _ in range(3))

    def add(s, n: int, dtype):
        a, b, c = vectors(n, dtype)
        res = call(s, vadd, (a, b, c, n), n)
        assert torch.equal(c, a + b), (n, dtype)
        return res

    sweeping = site("swept", space=SPACE)
    for dtype in dtypes:  # one family of the rule a dtype
        assert {add(sweeping, n, dtype).source for n in SWEPT} == {"tuned"}
    out = tmp_path / "rules"
    built = rules_cli("build", "--out", str(out))
    assert built.returncode == 0, built.stderr
    ship(out, monkeypatch, tmp_path)
    tune_count.clear()
    layouts = [(dtype, odd) for dtype in dtypes for odd in (False, True)]  # n % 16 or not
    assert len(layouts) > rule_plans.MAX_PLANS
    sizes = {False: iter(range(64, 1025, 16)), True: iter(range(65, 1024, 2))}
    s = site("swept", space=SPACE)
    got = []
    for _ in range(rule_plans.MAX_TRIES // len(layouts) + 2):  # until no plan is made
        for dtype, odd in layouts:
            n = next(sizes[odd])
            got.append((n, dtype, add(s, n, dtype)))
    assert tune_count == [] and {r.source for _, _, r in got} == {"rule"}
    # The last round: the layouts past the plans kept went the general way.
    assert len(general_ways) > len(layouts)
    for n, dtype, r in got:  # each as a new site decides it (the general way)
        alone = add(site("swept", space=SPACE), n, dtype)
        assert (alone.source, alone.config, alone.digest) == (r.source, r.config, r.digest)
