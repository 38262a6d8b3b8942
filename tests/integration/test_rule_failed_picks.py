"""A rule's pick whose first launch on a key fails (a configuration that cannot run at a size
between swept ones) is refused for that key and the call made again: what that redo may
and may not see (real rule files, real kernels under the interpreter)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from rule_helpers import SPACE, SWEPT, rule_file, rules_cli, ship
from runtime_helpers import call, site
from test_rule_refused import _rule_of

from tunedsl.errors import CacheWarning
from tunedsl.model.config import Config
from tunedsl.runtime import ruled

pytestmark = [
    pytest.mark.needs_triton,
    pytest.mark.usefixtures("fresh_rules", "no_failed_picks"),
]


@pytest.fixture
def no_failed_picks():
    """A new process's failed picks: none (the tests here fail the same key's pick)."""
    before = dict(ruled.FAILED_PICKS)
    ruled.FAILED_PICKS.clear()
    yield
    ruled.FAILED_PICKS.clear()
    ruled.FAILED_PICKS.update(before)


@triton.jit
def bump_upto(x, N: tl.constexpr, TILE: tl.constexpr):
    """x[i] += 1 for i < N, then a tile wider than N is refused. Under the interpreter the
    refusal comes after the first program's stores: a failed launch has written x."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(x + offs, tl.load(x + offs, mask=offs < N) + 1, mask=offs < N)
    tl.static_assert(TILE <= N, "TILE must not exceed N")


def _bump(n: int, x: torch.Tensor, named: bool, **options: object):
    restore = {"restore_value": ["x"]} if named else {}
    s = site("bumped", space=SPACE, options={**restore, **options})
    return call(s, bump_upto, (x,), n, N=n)


@pytest.mark.parametrize("named", [True, False], ids=["restore_value", "undeclared"])
@pytest.mark.parametrize("mode", ["cached", "on"])
def test_a_failed_pick_on_an_in_place_argument_is_redone_from_the_callers_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, named: bool
) -> None:
    """The rule's pick (tile=256) cannot run at N=200; its failed launch wrote ``x`` before
    failing. The redo (the rule's next configuration, or a tuning) starts from the caller's
    ``x``, whether or not the site named it in ``restore_value=`` (the redo is tunedsl's, not
    a tuning the user declared in-place arguments for): ``x`` is bumped once, not twice."""
    for n in SWEPT:
        x = torch.zeros(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # undeclared: tuning finds x written in place
            assert _bump(n, x, named).source == "tuned"
        assert torch.equal(x, torch.ones(n))
    out = tmp_path / "rules"
    done = rules_cli("build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    _, c64, c128, c256 = (Config(tile=t) for t in SPACE["tile"])
    _rule_of(rule_file(out), [c256, c64, c128])  # every key picks tile=256 first
    ship(out, monkeypatch, tmp_path / mode)
    x = torch.arange(200, dtype=torch.float32)
    with pytest.warns(CacheWarning, match=re.escape(f"picked {c256}, which fails on this key")):
        res = _bump(200, x, named, mode=mode)
    assert res.config.tile <= 200
    assert res.source == ("rule" if mode == "cached" else "tuned")
    torch.testing.assert_close(x, torch.arange(200, dtype=torch.float32) + 1)


def test_the_failed_picks_kept_are_bounded() -> None:
    """A serving loop meeting new sizes whose pick fails keeps a bounded record of them (the
    sites' tables are bounded; this was not), the newest still refused."""
    err = RuntimeError("cannot run here")
    for i in range(3 * ruled.MAX_FAILED_PICKS):
        ruled.note_failed(f"digest-{i}", Config(tile=256), err)
    assert len(ruled.FAILED_PICKS) <= ruled.MAX_FAILED_PICKS
    newest = f"digest-{3 * ruled.MAX_FAILED_PICKS - 1}"
    assert ruled.FAILED_PICKS[(newest, Config(tile=256))].startswith("RuntimeError")


@triton.jit
def bump_checked(x, flag, N: tl.constexpr, TILE: tl.constexpr):
    assert flag > 0, "flag must be positive"  # the user's input check, under any tile
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(x + offs, tl.load(x + offs, mask=offs < N) + 1, mask=offs < N)


def _checked(n: int, flag: int, **options: object) -> object:
    s = site("checked", space=SPACE, options={"restore_value": ["x"], **options})
    return call(s, bump_checked, (torch.zeros(n), flag), n, N=n)


@pytest.mark.parametrize("mode", ["cached", "on"])
def test_an_input_every_configuration_refuses_raises_its_error_and_leaves_the_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A call on a rule's key with an input the kernel's own check refuses (the same key as
    good calls: an int's class, not its value) fails whatever is launched: the caller gets
    that error (under "on" it got "every configuration failed"), and the rule's picks stay
    usable for the key (they were refused for the process: the next good call launched the
    site's default, or tuned)."""
    for n in SWEPT:
        assert _checked(n, 2).source == "tuned"
    out = tmp_path / "rules"
    done = rules_cli("build", "--out", str(out))
    assert done.returncode == 0, done.stderr
    _, c64, c128, c256 = (Config(tile=t) for t in SPACE["tile"])
    _rule_of(rule_file(out), [c64, c128, c256])
    ship(out, monkeypatch, tmp_path / mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match="flag must be positive") as err:
            _checked(256, -3, mode=mode)
    assert "every configuration" not in str(err.value)
    assert not ruled.FAILED_PICKS
    good = _checked(256, 2, mode=mode)
    assert (good.config, good.source) == (c64, "rule")
