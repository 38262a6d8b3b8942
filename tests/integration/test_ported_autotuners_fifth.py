"""A fifth batch of other autotuners' test suites, ported to tunedsl: Helion's AOT
heuristics (a configuration valid only for some shapes is never assigned where it
fails) against tunedsl's shipped rules, and Helion's cache-key tests.

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through DSL macros compiled by ``tunedsl.frontend``,
and the real ``tunedsl rules`` command in a subprocess.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from rule_helpers import rule_file, rules_cli, ship

from tunedsl.errors import CacheWarning
from tunedsl.frontend.compile import compile_source
from tunedsl.store.rules import read_rule_file

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import torch
from tunedsl import autotune, cdiv
from ported_kernels_fifth import fill_upto


def filled(n):
    dst = torch.empty(n)
    res = autotune(space=dict(tile=[32, 64, 128, 256]), blocks=cdiv(n, $tile),
        fill_upto(dst, N=n, TILE=$tile))
    assert torch.equal(dst, torch.arange(n, dtype=torch.float32)), res.config
    return res
"""


def load(path: Path, text: str = SCRIPT) -> dict[str, Any]:
    """``text`` written to ``path``, expanded by the front end and run as a module (a new
    module each time: a new process's sites)."""
    path.write_text(text, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_fifth", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


# --- Helion AOT heuristics: a configuration valid only for some shapes -----------------------


SWEPT = (64, 128, 256, 512, 1024)


def readable(n: int) -> dict[str, Any]:
    """The readable key of ``filled(n)``."""
    dst = {"dtype": "float32", "shape": [n], "stride": "1"}
    return {"args": {"N": {"constexpr": n}, "dst": dst}}


def _picked_and_failed(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "fails on this key" in str(w.message)]


@pytest.mark.usefixtures("fresh_rules")
def test_a_rule_pick_that_fails_between_swept_sizes_is_replaced_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Helion's AOT heuristic partitions shapes by which configurations are valid there and
    skips shapes no configuration covers, so a shape is never sent to a configuration that
    fails on it. A tunedsl rule maps sizes between swept ones to a swept key's pick; here
    ``TILE <= N`` is asserted, so the rule's pick for a size between swept ones (N=256's
    tile=256 for N=200, say) may not run there. The call is not lost: where tuning may run
    the key is tuned (a valid tile, the right output), and where it may not
    (``TUNEDSL_AUTOTUNE=cached``) the rule's next configuration that runs is launched; the
    failed pick is named in a warning."""
    # ported from: pytorch/helion test/test_aot_autotuning.py::test_single_config_with_validity_partitioning
    # ported from: pytorch/helion test/test_aot_autotuning.py::test_uncoverable_shapes_skipped
    path = tmp_path / "ported_fifth.py"
    module = load(path)
    for n in SWEPT:  # larger tiles fail on the smaller sizes: the records say so
        assert module["filled"](n).source == "tuned"
    out = tmp_path / "rules"
    done = rules_cli("build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    # The held-out sizes whose pick cannot run there: the rule's map comes from the timings.
    rule = read_rule_file(rule_file(out))
    fails = [n for n in range(80, 1024, 16) if rule.decide(readable(n))[0].tile > n]
    assert len(fails) >= 2, fails  # (from N=128's tile=128 or N=256's tile=256: timings)
    first, later = fails[0], fails[-1]
    for mode in ("on", "cached"):
        monkeypatch.setenv("TUNEDSL_AUTOTUNE", mode)
        ship(out, monkeypatch, tmp_path / mode)
        fresh = load(path)  # a new process's site
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CacheWarning)
            res = fresh["filled"](first)  # the output is checked in the script
        failed = _picked_and_failed(caught)
        assert failed and all("TILE must not exceed N" in f for f in failed)
        assert res.source == ("tuned" if mode == "on" else "rule") and res.config.tile <= first
        # In range keys whose pick runs are still the rule's, the next call of the first a hit.
        assert fresh["filled"](300).source == "rule"
        assert fresh["filled"](first).source == "memory"
        # Another such size, decided by the plan the rule's keys of this layout made: its
        # pick is refused there too (warned once per rule, pick and what replaces it).
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always", CacheWarning)
            res = fresh["filled"](later)
        assert res.source == ("tuned" if mode == "on" else "rule") and res.config.tile <= later
