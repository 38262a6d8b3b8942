"""A rule's pick that this call may not launch (prune= drops it, or it fails verify=): where
tuning may not run, the rule's next configuration is launched before the site's default
(real rule files, real kernels under the interpreter)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rule_helpers import SPACE, rule_file, run, ship

from tunedsl.errors import CacheWarning
from tunedsl.model.config import Config

pytestmark = [pytest.mark.needs_triton, pytest.mark.usefixtures("fresh_rules")]


def _rule_of(path: Path, configs: list[Config]) -> None:
    """Rewrite the built rule: ``configs`` in this order, every key picking the first."""
    data = json.loads(path.read_text())
    data["configs"] = [c.to_json() for c in configs]
    for family in data["families"]:
        family["model"], family["tree"] = "tree", {"pick": 0}
        for point in family["points"]:
            point["pick"] = 0
    path.write_text(json.dumps(data))  # the same file: still the user's, still private


def _without(*tiles: int):
    def prune(configs: list, args: dict) -> list:
        return [c for c in configs if c.tile not in tiles]

    return prune


def test_a_pruned_pick_launches_the_rules_next_configuration_where_tuning_may_not_run(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    default, c64, c128, c256 = (Config(tile=t) for t in SPACE["tile"])
    _rule_of(rule_file(built_rules), [c64, c256, c128])
    ship(built_rules, monkeypatch, tmp_path)
    # The rule's pick is dropped by prune=: its next configuration in the rule's order, not
    # the site's default (nor the space's next).
    with pytest.warns(CacheWarning, match=re.escape(f"launching its next configuration, {c256}")):
        res = run("swept", 300, mode="cached", prune=_without(64))
    assert res.source == "rule" and res.config == c256
    with pytest.warns(CacheWarning, match=re.escape(f"launching its next configuration, {c128}")):
        res = run("swept", 301, mode="cached", prune=_without(64, 256))
    assert res.source == "rule" and res.config == c128
    # None of the rule's configurations kept: the site's default, as without a rule.
    _rule_of(rule_file(built_rules), [c64, c128])
    with pytest.warns(CacheWarning, match="not using it, launching the site's default$"):
        res = run("swept", 302, mode="cached", prune=_without(64, 128))
    assert res.source == "default" and res.config == default
    assert tune_count == []
    # Where tuning may run, a pruned pick is tuned instead (the rule is not trusted further).
    res = run("swept", 303, prune=_without(64))
    assert res.source == "tuned" and len(tune_count) == 1


def test_a_pick_that_fails_verify_launches_the_rules_next_that_passes_where_tuning_may_not_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    import torch
    from rule_helpers import rules_cli
    from runtime_helpers import call, site
    from runtime_kernels import vadd_wrong_for_big_tiles as kernel  # wrong for TILE > 128

    def launch(n: int, **options):
        a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
        return call(site("wrong", space=SPACE, options=options), kernel, (a, b, c, n), n), c, a + b

    for n in (64, 256, 1024):  # the sweep (no verify=): a rule for this kernel
        assert launch(n)[0].source == "tuned"
    out = tmp_path / "rules"
    assert rules_cli("build", "--out", str(out)).returncode == 0
    c256, c64, c128 = Config(tile=256), Config(tile=64), Config(tile=128)
    _rule_of(rule_file(out), [c256, c64, c128])
    ship(out, monkeypatch, tmp_path)
    tuned = len(tune_count)
    with pytest.warns(CacheWarning, match=re.escape(f"launching its next configuration, {c64}")):
        res, c, expected = launch(300, mode="cached", verify=True)
    assert res.source == "rule" and res.config == c64 and len(tune_count) == tuned
    torch.testing.assert_close(c, expected)


def test_a_key_outside_the_range_whose_pick_is_refused_warns_once(
    built_rules: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tune_count: list
) -> None:
    # The range's warning names the refused pick and what is launched; a second warning
    # about the same refused pick said it again.
    import warnings

    _, c64, c128, c256 = (Config(tile=t) for t in SPACE["tile"])
    _rule_of(rule_file(built_rules), [c64, c256, c128])
    ship(built_rules, monkeypatch, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run("swept", 5000, mode="cached", prune=_without(64))  # beyond the sweep
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(said) == 1, said
    assert "outside the range" in said[0] and str(c64) in said[0], said
    assert f"launches its next configuration, {c256}" in said[0], said
    assert res.source == "rule" and res.config == c256 and tune_count == []
