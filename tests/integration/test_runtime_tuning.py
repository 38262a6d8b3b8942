"""End-to-end tuning with real Triton kernels under the interpreter (TRITON_INTERPRET=1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from runtime_helpers import call, load_json, record_files, site
from runtime_kernels import vadd

import tunedsl
from tunedsl import Config, LaunchResult, Space, autotune_launch, cdiv
from tunedsl.errors import TunedslSyntaxError, TuningError, UsageError

pytestmark = pytest.mark.needs_triton
HERE = Path(__file__).parent


def tensors(n: int = 300, dtype=torch.float32):
    a, b = torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype)
    return a, b, torch.empty_like(a)


def test_dsl_site_tunes_then_hits_memory() -> None:
    a, b, c = tensors()
    s = site()
    first = call(s, vadd, (a, b, c, a.numel()), a.numel())
    assert isinstance(first, LaunchResult)
    assert first.source == "tuned" and first.config in s.settings(None).configs
    torch.testing.assert_close(c, a + b)
    c.zero_()
    second = call(s, vadd, (a, b, c, a.numel()), a.numel())
    assert second.source == "memory" and second.config == first.config
    torch.testing.assert_close(c, a + b)
    # Every configuration was measured and the chosen one is the fastest re-measured.
    timings = first.timings
    assert set(timings) == set(s.settings(None).configs)
    assert all(r.status == "ok" and r.reps >= 1 and r.median_ms > 0 for r in timings.values())
    assert first.time_ms() == timings[first.config].median_ms
    assert first.first_config == Config(tile=64)
    # The record on disk says the same.
    (path,) = record_files()
    data = load_json(path)
    assert data["chosen"] == first.config.to_json()
    assert data["kernel"]["qualname"] == "vadd" and len(data["kernel"]["source_hash"]) == 64
    # Triton's specialization of a launch on the default target (cuda:90), as replay needs it:
    # torch's allocations are 16-byte aligned, n=300 is not a multiple of 16.
    assert data["signature"] == {
        "a": "*fp32:D",
        "b": "*fp32:D",
        "c": "*fp32:D",
        "n": "i32:",
        "TILE": {"constexpr": 64},
    }
    assert {r["constexprs"]["TILE"] for r in data["results"]} == {64, 128, 256}


def test_autotune_launch_plain_api() -> None:
    a, b, c = tensors(500)
    n = a.numel()
    results = []
    for _ in range(3):
        c.zero_()
        res = autotune_launch(
            vadd,
            space={"tile": [128, 256], "num_warps": [2, 4]},
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=lambda cfg: (a, b, c, n),
            kwargs=lambda cfg: {"TILE": cfg.tile},
        )
        torch.testing.assert_close(c, a + b)
        results.append(res)
    assert [r.source for r in results] == ["tuned", "memory", "memory"]
    assert results[0].config == results[2].config
    assert results[0].config.num_warps in (2, 4)  # hints are in the configuration
    # Values instead of functions work as well (a different call location: another site).
    c.zero_()
    res = autotune_launch(
        vadd, space=[{"tile": 128}], grid=(cdiv(n, 128),), args=(a, b, c, n), kwargs={"TILE": 128}
    )
    assert res.config == Config(tile=128)
    torch.testing.assert_close(c, a + b)


def test_space_constraint_and_prune() -> None:
    a, b, c = tensors()
    n = a.numel()
    seen = []

    def prune(configs, args):
        seen.append((len(configs), sorted(args)))
        return [cfg for cfg in configs if cfg.tile != 256]

    res = autotune_launch(
        vadd,
        space=Space(tile=[32, 64, 128, 256], constraint=lambda c: c.tile >= 64),
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
        prune=prune,
    )
    assert seen == [(3, ["a", "b", "c", "n"])]
    assert set(res.timings) == {Config(tile=64), Config(tile=128)}


def test_failing_configuration_is_dropped_with_its_reason() -> None:
    a, b, c = tensors()
    n = a.numel()
    # tl.arange needs a power-of-two length: TILE=96 fails when it runs.
    res = autotune_launch(
        vadd,
        space={"tile": [96, 128]},
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.tile},
    )
    assert res.config == Config(tile=128)
    failed = res.timings[Config(tile=96)]
    assert failed.status == "failed" and "power of 2" in failed.reason.lower().replace(
        "power-of-two", "power of 2"
    )
    torch.testing.assert_close(c, a + b)


def test_every_configuration_failing_raises_tuning_error() -> None:
    a, b, c = tensors()
    n = a.numel()
    with pytest.raises(TuningError) as info:
        autotune_launch(
            vadd,
            space={"tile": [96, 48]},
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(a, b, c, n),
            kwargs=lambda cfg: {"TILE": cfg.tile},
        )
    text = str(info.value)
    assert "Config(tile=96)" in text and "Config(tile=48)" in text and "every configuration" in text


def test_bad_space_is_a_usage_error() -> None:
    a, b, c = tensors()
    with pytest.raises(UsageError, match="axis 'tile' is empty"):
        autotune_launch(vadd, space={"tile": []}, grid=(1,), args=(a, b, c, 1), kwargs={"TILE": 64})


def test_unknown_placeholder_with_non_literal_space() -> None:
    a, b, c = tensors()
    s = site(space=None, placeholders=(("tiel", 10, 30),))
    with pytest.raises(TunedslSyntaxError) as info:
        call(s, vadd, (a, b, c, a.numel()), a.numel(), lazy=lambda: ({"tile": [64]}, {}, {}))
    assert info.value.lineno == 10 and info.value.col == 30
    assert "did you mean `$tile`?" in str(info.value)


def test_non_literal_space_and_options_come_from_lazy() -> None:
    a, b, c = tensors()
    s = site(space=None)
    res = call(
        s,
        vadd,
        (a, b, c, a.numel()),
        a.numel(),
        lazy=lambda: ({"tile": [128, 512]}, {}, {"effort": "quick"}),
    )
    # (Two configurations: a space of one is launched, never tuned.)
    assert res.config in (Config(tile=128), Config(tile=512)) and res.record.effort == "quick"


def test_print_autotuning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TUNEDSL_PRINT_AUTOTUNING", "1")
    a, b, c = tensors()
    res = call(site(), vadd, (a, b, c, a.numel()), a.numel())
    out = capsys.readouterr().out
    assert "key:" in out and f"winner: {res.config}" in out
    for tile in (64, 128, 256):
        assert f"Config(tile={tile})" in out


def test_tunedsl_print_autotuning_0_wins_over_triton_print_autotuning_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """tunedsl's own setting, given explicitly, decides; Triton's is asked only when
    tunedsl's is unset (or empty)."""
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    monkeypatch.setenv("TUNEDSL_PRINT_AUTOTUNING", "0")
    a, b, c = tensors()
    assert call(site(), vadd, (a, b, c, a.numel()), a.numel()).source == "tuned"
    assert "winner:" not in capsys.readouterr().out
    monkeypatch.setenv("TUNEDSL_PRINT_AUTOTUNING", "")  # empty: unset, Triton's 1 prints
    monkeypatch.setenv("TUNEDSL_FORCE_RETUNE", "1")
    res = call(site(), vadd, (a, b, c, a.numel()), a.numel())
    assert res.source == "tuned" and f"winner: {res.config}" in capsys.readouterr().out


def test_force_retune(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = tensors()
    assert call(site(), vadd, (a, b, c, a.numel()), a.numel()).source == "tuned"
    assert call(site(), vadd, (a, b, c, a.numel()), a.numel()).source == "disk"
    monkeypatch.setenv("TUNEDSL_FORCE_RETUNE", "1")
    assert call(site(), vadd, (a, b, c, a.numel()), a.numel()).source == "tuned"


def test_public_names_exist() -> None:
    for name in tunedsl.__all__:
        assert getattr(tunedsl, name) is not None


RACE_SCRIPT = """
import os, pathlib, sys, time, torch
sys.path.insert(0, sys.argv[1])
from tunedsl.backends.inprocess import InProcessMeasurer
if sys.argv[3] == "forbid":
    def refuse(*a, **k):
        raise AssertionError("benchmarked although a record exists")
    InProcessMeasurer.prepare = refuse
barrier = pathlib.Path(sys.argv[2])  # racers start together: both ready, then go
(barrier / str(os.getpid())).touch()
deadline = time.time() + 60
while len(list(barrier.iterdir())) < int(sys.argv[4]) and time.time() < deadline:
    time.sleep(0.001)
from runtime_kernels import vadd
from tunedsl import autotune_launch, cdiv
n = 300
a, b = torch.randn(n), torch.randn(n)
c = torch.empty(n)
res = autotune_launch(vadd, space={"tile": [64, 128, 256]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
                      args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="race")
assert torch.allclose(c, a + b)
print(res.source, res.config.tile)
"""


def test_processes_share_records(tmp_path: Path) -> None:
    """Two processes tuning one key at once tune once (the other waits for the record);
    a third process uses the record and runs no benchmark at all."""
    script = tmp_path / "race.py"
    script.write_text(RACE_SCRIPT)
    env = dict(os.environ, TRITON_INTERPRET="1")

    def start(barrier: Path, mode: str, parties: int) -> subprocess.Popen[str]:
        argv = [sys.executable, str(script), str(HERE), str(barrier), mode, str(parties)]
        return subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    race = tmp_path / "race"
    race.mkdir()
    procs = [start(race, "allow", 2) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    assert sorted(out.split()[0] for out, _ in outs) == ["disk", "tuned"]
    assert len({out.split()[1] for out, _ in outs}) == 1
    assert len(record_files()) == 1

    later = tmp_path / "later"
    later.mkdir()
    third = start(later, "forbid", 1)
    out, err = third.communicate(timeout=300)
    assert third.returncode == 0, err
    assert out.split() == ["disk", outs[0][0].split()[1]]
