"""The search engine on the real miss path: search=/seed=/budget= through a site, real
kernels under the interpreter (strategies, records, continuing, failures)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from search_kernels import vadd_split

from tunedsl import Space, autotune_launch, cdiv
from tunedsl.backends.inprocess import InProcessMeasurer
from tunedsl.engine.search.model import model_available
from tunedsl.model.config import Config
from tunedsl.model.variant import Variant

N = 2048
SPACE = {"TILE": [16, 32, 64, 128, 256], "SPLIT": [1, 2, 4]}  # 15 points


def launch(space=SPACE, n=N, **options):
    a, b = torch.randn(n), torch.randn(n)
    c = torch.empty(n)
    res = autotune_launch(
        vadd_split,
        space=space,
        grid=lambda cfg: (cdiv(n, cfg.TILE * cfg.SPLIT),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.TILE, "SPLIT": cfg.SPLIT},
        **options,
    )
    torch.testing.assert_close(c, a + b)  # the caller's launch is right, whatever was chosen
    return res


def new_process() -> None:
    """What a new process starts without: the sites' in-memory decisions."""
    from tunedsl.runtime import api

    for site in list(api._sites.values()):
        site.clear()


@pytest.fixture
def prepared(monkeypatch: pytest.MonkeyPatch) -> list[list[Config]]:
    """Every batch the in-process measurer compiled, in order."""
    batches: list[list[Config]] = []
    real = InProcessMeasurer.prepare

    def counting(self, configs):
        batches.append(list(configs))
        return real(self, configs)

    monkeypatch.setattr(InProcessMeasurer, "prepare", counting)
    return batches


STRATEGIES = ["exhaustive", "random", "pattern", "auto"] + (["model"] if model_available() else [])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_tunes_a_real_kernel_and_records_how(
    strategy: str, prepared: list[list[Config]]
) -> None:
    res = launch(name=f"s-{strategy}", search=strategy, seed=3, budget=30)
    assert res.source == "tuned"
    record = res.record
    assert record.strategy in (strategy, "auto:exhaustive")
    assert record.seed == 3 and record.budget_s == 30.0
    ok = [r for r in record.results if r.status == "ok"]
    assert res.config in {r.config for r in ok}
    assert all(isinstance(r.round, int) for r in record.results)
    # What was compiled is what the record holds (each configuration once).
    compiled = [c for batch in prepared for c in batch]
    assert len(compiled) == len(set(compiled)) >= len(record.results)
    assert {r.config for r in record.results} <= set(compiled)
    # The record on disk says the same, and a second call uses it.
    data = json.loads(Path(os.environ["TUNEDSL_CACHE_DIR"], "records", f"{res.digest}.json")
                      .read_text()) if Path(os.environ["TUNEDSL_CACHE_DIR"], "records").is_dir() else None  # fmt: skip
    if data is not None:
        assert data["strategy"] == record.strategy and data["seed"] == 3
    again = launch(name=f"s-{strategy}", search=strategy, seed=3, budget=30)
    assert again.source in ("memory", "disk") and again.config == res.config


def test_default_search_is_exhaustive_with_racing_and_no_budget() -> None:
    res = launch(name="s-default")
    assert res.record.strategy == "auto:exhaustive" and res.record.budget_s is None
    assert {r.config for r in res.record.results} == {
        Config(TILE=t, SPLIT=s) for t in SPACE["TILE"] for s in SPACE["SPLIT"]
    }


def test_the_next_batch_compiles_ahead_and_is_measured_once(
    prepared: list[list[Config]], monkeypatch: pytest.MonkeyPatch
) -> None:
    prefetched: list[list[Config]] = []
    real = InProcessMeasurer.prefetch

    def recording(self, configs):
        prefetched.append(list(configs))
        return real(self, configs)

    monkeypatch.setattr(InProcessMeasurer, "prefetch", recording)
    space = {**SPACE, "TILE": [8, *SPACE["TILE"]]}  # 18 points: exhaustive's 16, then 2
    res = launch(space, name="s-ahead", search="exhaustive")
    everything = {Config(TILE=t, SPLIT=s) for t in space["TILE"] for s in space["SPLIT"]}
    assert {r.config for r in res.record.results} == everything
    assert prefetched and prefetched[0] == prepared[1]  # compiled ahead, then prepared
    compiled = [c for batch in prepared for c in batch]
    assert len(compiled) == len(set(compiled)) == len(everything)  # each config once


def test_a_seed_gives_the_same_proposals(prepared: list[list[Config]]) -> None:
    # The first batch is proposed before any timing exists: a function of the seed alone.
    firsts = []
    for i, seed in enumerate((7, 7, 8)):
        prepared.clear()
        launch(name=f"seeded-{i}", search="random", seed=seed, budget=30)
        firsts.append(prepared[0])
    assert firsts[0] == firsts[1]
    assert firsts[0] != firsts[2]


def test_a_larger_budget_continues_the_stored_search(prepared: list[list[Config]]) -> None:
    n = 8192  # a launch takes long enough under the interpreter that 0.2 s measures few
    first = launch(name="grow", n=n, search="random", budget=0.2)
    before = {r.config for r in first.record.results}
    assert 0 < len(before) < 15
    # The same budget again: the stored search decides (nothing measured).
    prepared.clear()
    new_process()
    assert launch(name="grow", n=n, search="random", budget=0.2).source == "disk"
    assert prepared == []
    # A larger budget continues: only new configurations (and at most the final race's
    # leaders) are compiled, and the record grows to the whole space.
    new_process()
    second = launch(name="grow", n=n, search="random", budget=600)
    assert second.source == "tuned"
    after = {r.config for r in second.record.results}
    assert before < after and len(after) == 15
    again = [c for batch in prepared for c in batch if c in before]
    assert len(again) <= 3  # the default effort races its 3 leaders side by side


FAILING = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from search_kernels import vadd_split
from tunedsl import autotune_launch, cdiv
from tunedsl.backends.inprocess import InProcessMeasurer
real = InProcessMeasurer.prepare
def counting(self, configs):
    for c in configs:
        print("prepared", c.TILE, flush=True)
    return real(self, configs)
InProcessMeasurer.prepare = counting
n = 256
a, b = torch.randn(n), torch.randn(n)
c = torch.empty(n)
tiles = [int(t) for t in sys.argv[2].split(",")]
res = autotune_launch(vadd_split, space={"TILE": tiles, "SPLIT": [1]},
                      grid=lambda cfg: (cdiv(n, cfg.TILE),), args=(a, b, c, n),
                      kwargs=lambda cfg: {"TILE": cfg.TILE, "SPLIT": 1}, name="fails")
print("chosen", res.config.TILE, res.source)
"""


def test_a_failed_configuration_is_never_tried_again_in_another_process(tmp_path: Path) -> None:
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    here = str(Path(__file__).parent)
    env = {**os.environ, "TRITON_INTERPRET": "1"}

    def run(tiles: str) -> list[str]:
        proc = subprocess.run(
            [sys.executable, str(script), here, tiles], env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    first = run("48,64")  # tl.arange needs a power of two: TILE=48 fails
    assert "prepared 48" in first and "chosen 64 tuned" in first
    second = run("48,64,128")  # a new configuration: tune again, but never TILE=48
    assert "prepared 48" not in second and "prepared 128" in second
    assert any(line.startswith("chosen") for line in second)


def test_a_lazy_space_with_a_constraint_tunes() -> None:
    space = Space(
        TILE=[16, 32, 64, 128], SPLIT=[1, 2, 4], constraint=lambda c: c.SPLIT * c.TILE <= 256
    )
    res = launch(space=space, name="lazy", search="pattern", budget=30)
    assert res.config.SPLIT * res.config.TILE <= 256
    assert all(r.config.SPLIT * r.config.TILE <= 256 for r in res.record.results)


def test_a_million_point_space_is_searched_without_being_listed() -> None:
    from tunedsl.model.settings import Settings
    from tunedsl.runtime.tuner import TuneRequest, tune

    calls = itertools.count()  # a library's object: no part of the constraint's identity

    def constraint(cfg: Config) -> bool:
        next(calls)
        return cfg.D % 7 == 0

    space = Space(
        TILE=[16, 32, 64, 128, 256], SPLIT=[1, 2, 4], D=list(range(1000)), E=list(range(200)),
        constraint=constraint,
    )  # fmt: skip
    assert space.size_hint() == 3_000_000
    n = 1024
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)

    def variant_for(cfg: Config) -> Variant:
        grid = (cdiv(n, cfg.TILE * cfg.SPLIT),)
        return Variant(cfg, (a, b, c, n), {"TILE": cfg.TILE, "SPLIT": cfg.SPLIT}, grid, {})

    pruned = []

    def prune(batch: list[Config]) -> list[Config]:
        pruned.extend(batch)
        return [cfg for cfg in batch if cfg.E < 100]  # prune= applies per proposed point

    out = tune(
        TuneRequest(
            kernel=vadd_split, variants=[], variant_for=variant_for, keep=prune,
            settings=Settings(space=space, large=True, search="random", seed=1, budget_s=2.0),
        )
    )  # fmt: skip
    assert out.strategy == "random" and out.budget_s == 2.0
    assert out.chosen.D % 7 == 0 and out.chosen.E < 100
    assert all(r.config.E < 100 and r.config.D % 7 == 0 for r in out.results)
    assert pruned and 0 < out.compiled < 500
    assert next(calls) < 20_000  # sampled by rejection, never listed (3 * 10^6 points)


def test_a_site_tunes_a_million_point_space_without_listing_it(
    prepared: list[list[Config]],
) -> None:
    calls = itertools.count()  # a library's object: no part of the constraint's identity

    def constraint(cfg: Config) -> bool:
        next(calls)
        return cfg.D % 7 == 0

    def prune(configs, args):
        return [c for c in configs if c.E < 100 and c.TILE <= args["n"]]

    def space() -> Space:
        return Space(
            TILE=[16, 32, 64, 128, 256], SPLIT=[1, 2, 4], D=list(range(1000)),
            E=list(range(200)), constraint=constraint,
        )  # fmt: skip

    res = launch(space=space(), name="huge", search="random", budget=2, prune=prune)
    assert res.source == "tuned" and res.record.strategy == "random"
    assert res.config.D % 7 == 0 and res.config.E < 100
    results = res.record.results
    assert all(r.config.D % 7 == 0 and r.config.E < 100 for r in results)
    compiled = [c for batch in prepared for c in batch]
    # Measured ones are recorded; one compiled as the budget ran out may be left unmeasured.
    assert 0 < len(compiled) < 500 and {r.config for r in results} <= set(compiled)
    assert next(calls) < 50_000  # 3 * 10^6 points: sampled, never listed
    # Another process with the same budget uses the record; nothing is measured.
    new_process()
    prepared.clear()
    again = launch(space=space(), name="huge", search="random", budget=2, prune=prune)
    assert again.source == "disk" and again.config == res.config and prepared == []
    # cached mode without a record launches the default (the first valid point).
    off = launch(space=space(), name="huge-off", mode="off")
    assert off.source == "default" and off.config == Config(TILE=16, SPLIT=1, D=0, E=0)


def test_bad_search_options_are_usage_errors() -> None:
    from tunedsl.errors import UsageError

    with pytest.raises(UsageError, match="search='anneal'; expected one of auto, exhaustive"):
        launch(name="bad-search", search="anneal")
    with pytest.raises(UsageError, match="seed= must be an integer"):
        launch(name="bad-seed", seed="7")
    with pytest.raises(UsageError, match="budget=0 must be a positive, finite number of seconds"):
        launch(name="bad-budget", budget=0)


def test_the_tuner_gets_the_sites_settings_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """One settings object travels from the site to the tuner: no option is copied field by
    field into the request (where one left out of the copy would silently be its default)."""
    from dataclasses import fields

    from tunedsl.engine.request import TuneRequest
    from tunedsl.model.settings import Settings
    from tunedsl.runtime import tuner
    from tunedsl.runtime.site import Site

    requests: list[TuneRequest] = []
    real = tuner.tune
    monkeypatch.setattr(tuner, "tune", lambda req: requests.append(req) or real(req))
    built: list[Settings] = []  # what the site's settings built for this key
    real_settings = Site.settings
    monkeypatch.setattr(
        Site, "settings", lambda self, lazy: built.append(real_settings(self, lazy)) or built[-1]
    )
    monkeypatch.setenv("TUNEDSL_EFFORT", "quick")  # the environment: each field's default
    res = launch(name="s-whole", search="random", seed=5, budget=20, rtol=0.01)
    assert res.source == "tuned"
    (req,) = requests
    assert req.settings is built[-1]  # the very object, not a copy of some of its fields
    settings = req.settings
    assert (settings.search, settings.seed, settings.budget_s) == ("random", 5, 20.0)
    assert (settings.rtol, settings.effort) == (0.01, "quick")
    assert not {f.name for f in fields(TuneRequest)} & {f.name for f in fields(Settings)}


@pytest.mark.parametrize("strategy", ["random", "model"])
def test_a_search_of_a_large_space_measures_the_default(
    strategy: str, prepared: list[list[Config]]
) -> None:
    if strategy == "model" and not model_available():
        pytest.skip("the model search needs numpy")
    # 3 * 10^6 points: a draw meets the default about once in 430,000 tries, so a search
    # that does not put it in its first batch all but never measures it.
    space = Space(
        TILE=[16, 32, 64, 128, 256], SPLIT=[1, 2, 4], D=list(range(1000)), E=list(range(200)),
        constraint=lambda c: c.D % 7 == 0,
    )  # fmt: skip
    default = {"TILE": 64, "SPLIT": 2, "D": 693, "E": 150}
    res = launch(space=space, name=f"dflt-{strategy}", search=strategy, budget=20, default=default)
    results = {r.config: r for r in res.record.results}
    assert results[Config(default)].status == "ok"
    assert Config(default) in prepared[0]  # in the first batch, compiled once
    compiled = [c for batch in prepared for c in batch]
    assert len(compiled) == len(set(compiled))


def test_a_space_of_more_points_than_an_index_holds_is_searched() -> None:
    # 5 * 3 * 2^70 points: past sys.maxsize, which len() of the space's candidates raised
    # as an OverflowError from the miss.
    axes = {f"F{i}": [0, 1] for i in range(70)}
    space = Space(TILE=[16, 32, 64, 128, 256], SPLIT=[1, 2, 4], **axes)
    assert space.size_hint() > sys.maxsize
    res = launch(space=space, name="past-maxsize", search="random", budget=5)
    assert res.source == "tuned" and res.config in space


def test_a_default_that_prune_drops_is_not_measured(prepared: list[list[Config]]) -> None:
    space = Space(TILE=[16, 32, 64, 128, 256], SPLIT=[1, 2, 4], D=list(range(1000)))

    def prune(configs, args):
        return [c for c in configs if c.SPLIT != 2]

    default = {"TILE": 64, "SPLIT": 2, "D": 5}
    res = launch(space=space, name="dflt-pruned", search="random", budget=10, default=default,
                 prune=prune)  # fmt: skip
    assert all(c.SPLIT != 2 for batch in prepared for c in batch)
    assert all(r.config.SPLIT != 2 for r in res.record.results)


@pytest.mark.parametrize(
    "space, says",
    [
        (Space(TILE=[16, 32], SPLIT=[1, 2], constraint=lambda c: c.TILE > 100),
         "removed all 4 configurations; loosen it or widen the axes"),
        ({"TILE": [16, 32], "SPLIT": []}, "space axis 'SPLIT' is empty: give at least one value"),
        ([], "space is an empty list: give at least one configuration"),
    ],
)  # fmt: skip
def test_an_empty_space_names_the_sites_line(space, says: str) -> None:
    from tunedsl.errors import UsageError

    with pytest.raises(UsageError) as info:
        launch(space=space, name="empty-space")
    text = str(info.value)
    assert says in text
    # The site's file and line (the autotune_launch call in launch()), as every other
    # mistake in the site's options says.
    line = next(i for i, s in enumerate(Path(__file__).read_text().splitlines(), 1)
                if "res = autotune_launch(" in s)  # fmt: skip
    assert text.startswith(f"{__file__}:{line}:"), text


def test_a_prune_that_drops_most_batches_does_not_stop_the_search_early() -> None:

    # prune= keeps 2% of the space: most batches of 8 random draws lose every point to it.
    # Each such batch is progress (eight points never proposed again), not a strategy stuck
    # re-proposing what it measured: the search goes on until its budget is spent.
    space = Space(
        TILE=[16, 32, 64, 128, 256], SPLIT=[1, 2, 4], D=list(range(1000)), E=list(range(200))
    )
    kept = []

    def prune(configs, args):
        out = [c for c in configs if c.E < 4]
        kept.extend(out)
        return out

    budget = 16.0
    start = time.monotonic()
    res = launch(space=space, n=64, name="mostly-pruned", search="random", budget=budget,
                 prune=prune, default={"TILE": 16, "SPLIT": 1, "D": 0, "E": 0})  # fmt: skip
    took = time.monotonic() - start
    assert res.source == "tuned" and all(r.config.E < 4 for r in res.record.results)
    # Stopping early is fast whatever the machine; a slow machine only takes longer.
    assert took >= budget / 2, (took, len(kept))


def test_an_exhaustive_search_its_budget_cut_short_says_so() -> None:
    # 9 * 64 = 576 configurations: far more than half a second measures under the
    # interpreter (a launch there alone takes a millisecond or more).
    space = {"TILE": [2**k for k in range(4, 13)], "SPLIT": list(range(1, 65))}
    with pytest.warns(UserWarning, match=r"search='exhaustive' of vadd_split measured \d+ "
                      r"of its 576 configurations before its budget of 0.5 s ran out") as seen:  # fmt: skip
        res = launch(space=space, n=64, name="cut-short", search="exhaustive", budget=0.5)
    assert res.record.strategy == "exhaustive" and len(res.record.results) < 576
    assert any(w.filename == __file__ for w in seen)  # at the user's line


def test_a_budget_cut_search_set_by_the_environment_names_the_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # search= and budget= were never written at the site: the fix is in the environment.
    monkeypatch.setenv("TUNEDSL_SEARCH", "exhaustive")
    monkeypatch.setenv("TUNEDSL_BUDGET", "0.6")
    space = {"TILE": [2**k for k in range(4, 13)], "SPLIT": list(range(1, 65))}
    with pytest.warns(UserWarning, match=r"before its budget of 0.6 s ran out") as seen:
        launch(space=space, n=64, name="cut-short-by-env")
    text = " ".join(str(w.message) for w in seen)
    assert "TUNEDSL_BUDGET" in text and "TUNEDSL_SEARCH" in text, text


def test_a_budget_cut_auto_search_does_not_tell_the_user_to_leave_search_out() -> None:
    # auto lists a space of at most 256 configurations and measures it exhaustively: the
    # warning names that, not a search= the user never wrote, and offers only the budget.
    space = {"TILE": [2**k for k in range(4, 12)], "SPLIT": list(range(1, 33))}
    with pytest.warns(UserWarning, match=r"the search \(auto: exhaustive\) of vadd_split "
                      r"measured \d+ of its 256 configurations") as seen:  # fmt: skip
        launch(space=space, n=64, name="cut-short-auto", budget=0.4)
    text = " ".join(str(w.message) for w in seen)
    assert "search='exhaustive'" not in text and "leave search= out" not in text


def test_the_start_of_a_large_search_is_logged_as_one(caplog: pytest.LogCaptureFixture) -> None:
    # A space too large to list has no count of candidates: its start line said
    # "0 configuration(s)", as if there were nothing to tune.
    space = Space(TILE=[16, 32, 64, 128, 256], SPLIT=[1, 2, 4], D=list(range(1000)))
    with caplog.at_level("INFO", logger="tunedsl"):
        launch(space=space, n=64, name="logged-large", search="random", budget=2)
    starts = [r.getMessage() for r in caplog.records if r.tunedsl_event["event"] == "start"]
    assert starts == ["tuning vadd_split: searching a space of 15,000 points"], starts


@pytest.fixture
def ahead_batches(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every batch the in-process measurer was announced to compile ahead, in order."""
    from tunedsl.backends import inprocess

    batches: list[inprocess.CompileAhead] = []

    class Recorded(inprocess.CompileAhead):
        def __init__(self, kernel, variants) -> None:
            super().__init__(kernel, variants)
            batches.append(self)

    monkeypatch.setattr(inprocess, "CompileAhead", Recorded)
    return batches


#: The search's budget on a clock that stands still until the second batch's hook moves it
#: past the budget (``budget_clock``), so the budget ends inside that batch however long the
#: first one takes on a loaded machine.
BUDGET_S = 8


@pytest.fixture
def budget_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """The driver's clock (its seam, ``run_search(clock=...)``) standing still; the fixture
    is the function that moves it forward."""
    from tunedsl.engine import driver

    now = [0.0]
    monkeypatch.setitem(driver.run_search.__kwdefaults__, "clock", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def test_a_budget_ending_inside_a_batch_compiled_ahead_cancels_the_rest_of_it(
    prepared: list[list[Config]], ahead_batches: list[Any], budget_clock: Callable[[float], None]
) -> None:
    # The budget runs out while the race takes the second batch, which was compiled ahead:
    # what of it is not compiled yet must not go on compiling after the tuning returned
    # (on a GPU, seconds of ptxas a configuration, at the program's exit too).
    seen: list[tuple[int, int]] = []

    def slow_in_the_second_batch(args) -> None:
        config = (args["TILE"], args["SPLIT"])
        if config not in seen:
            seen.append(config)
            if len(seen) == 18:  # the second batch's second configuration: the budget ends
                budget_clock(BUDGET_S + 1)

    space = {"TILE": [8, 16, 32, 64, 128, 256, 512, 1024], "SPLIT": [1, 2, 4, 8, 16, 32]}
    with warnings.catch_warnings():  # the budget's warning (said once a process)
        warnings.simplefilter("ignore")
        res = launch(
            space, n=256, name="s-ahead-budget", search="exhaustive", budget=BUDGET_S,
            pre_hook=slow_in_the_second_batch,
        )  # fmt: skip
    measured = {r.config for r in res.record.results}
    assert len(prepared) >= 2 and ahead_batches, (len(prepared), ahead_batches)
    taken = [b for b in ahead_batches if b.configs & set(prepared[1])]
    assert taken and not taken[0].configs <= measured  # the budget ended inside it
    for batch in ahead_batches:
        assert batch.cancelled.is_set() or batch.configs <= measured, batch.configs


def test_batches_announced_ahead_and_never_raced_stop_before_the_final_race(
    prepared: list[list[Config]],
    ahead_batches: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    budget_clock: Callable[[float], None],
) -> None:
    # The budget ends the search with a batch announced and compiling ahead: it is never
    # raced, and its compiles must not go on while the final race (the choice) is measured.
    stopped: list[bool] = []  # at each sample: whether every batch never raced is stopped
    real_sample = InProcessMeasurer.sample

    def sample(self, config, reps):
        raced = {c for batch in prepared for c in batch}
        stopped.append(all(b.cancelled.is_set() for b in ahead_batches if not b.configs & raced))
        return real_sample(self, config, reps)

    monkeypatch.setattr(InProcessMeasurer, "sample", sample)
    seen: list[tuple[int, int]] = []

    def slow_in_the_second_batch(args) -> None:
        config = (args["TILE"], args["SPLIT"])
        if config not in seen:
            seen.append(config)
            if len(seen) == 18:
                budget_clock(BUDGET_S + 1)

    space = {"TILE": [8, 16, 32, 64, 128, 256, 512, 1024], "SPLIT": [1, 2, 4, 8, 16, 32]}
    with warnings.catch_warnings():  # the budget's warning (said once a process)
        warnings.simplefilter("ignore")
        launch(
            space, n=320, name="s-ahead-final", search="exhaustive", budget=BUDGET_S,
            pre_hook=slow_in_the_second_batch,
        )  # fmt: skip
    raced = {c for batch in prepared for c in batch}
    assert any(not b.configs & raced for b in ahead_batches), "no batch was left announced"
    assert stopped and stopped[-1], stopped  # the final race's samples


def test_the_compile_pool_is_sized_for_the_configurations_in_flight_not_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Batches announced ahead share one pool of compile processes, forked for what is in
    # flight when the first batch is prepared: 20 configurations on a host allowing 64
    # compile workers must not ask for 64 processes (a pool a core, however small the
    # space), and every batch of one announcement asks for the same pool.
    from tunedsl.backends import compile_ahead, inprocess

    asked: list[tuple[int, int]] = []  # (jobs, shared_by) of each compile stream
    real = compile_ahead.compile_jobs

    def recorded(kernel, todo, cancelled=None, shared_by=0, **rest):
        asked.append((len(todo), shared_by))
        return real(kernel, todo, cancelled, shared_by, **rest)

    monkeypatch.setattr(compile_ahead, "compile_jobs", recorded)
    monkeypatch.setattr(inprocess, "compile_jobs", recorded)
    monkeypatch.setenv("TUNEDSL_COMPILE_WORKERS", "64")
    space = {"TILE": [8, 16, 32, 64, 128], "SPLIT": [1, 2, 4, 8]}  # 20 configurations
    launch(space, n=256, name="s-pool-in-flight", search="exhaustive")
    streams = [(jobs, shared) for jobs, shared in asked if jobs]
    assert sum(jobs for jobs, _ in streams) == 20, asked
    assert len(streams) > 1  # batches were announced ahead
    assert max(shared for _, shared in streams) == 20, asked


@pytest.mark.parametrize("strategy", ["exhaustive", "random"])
def test_a_budget_too_short_for_any_measurement_still_measures_one(strategy: str) -> None:
    # A budget spent before the first configuration was measured (1e-9 s, or a slow first
    # compile) ended the search with nothing tried: "every configuration failed", listing
    # none, though none had failed. The search measures one configuration, then stops.
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = launch(name=f"no-time-{strategy}", search=strategy, budget=1e-9)
    assert res.record is not None and [r.status for r in res.record.results] == ["ok"]
    cut_short = [w for w in seen if "measured 1 of its 15 configurations before" in str(w.message)]
    assert len(cut_short) == (strategy == "exhaustive"), [str(w.message) for w in seen]
