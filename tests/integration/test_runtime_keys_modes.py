"""Each key axis gets its own record; bad records are misses; modes; threads."""

from __future__ import annotations

import json
import threading
import warnings

import pytest
import torch
import triton
import triton.language as tl
from runtime_helpers import call, new_process, record_files, site
from runtime_kernels import fill_value, pair_add, vadd

from tunedsl import Config, autotune_launch, cdiv, warn
from tunedsl.errors import CacheWarning
from tunedsl.store import records

pytestmark = pytest.mark.needs_triton


def args(n: int = 256, dtype=torch.float32):
    a, b = torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype)
    return (a, b, torch.empty_like(a), n)


def test_each_key_axis_gets_its_own_record(tune_count: list) -> None:
    s = site("axes")
    base = args()
    call(s, vadd, base, 256)
    assert len(record_files()) == 1
    call(s, vadd, args(dtype=torch.float16), 256)  # dtype
    assert len(record_files()) == 2
    call(s, vadd, args(512), 512)  # shape
    assert len(record_files()) == 3
    a = torch.randn(512)
    strided = (a[::2], base[1], base[2], 256)  # stride pattern of the first argument
    call(s, vadd, strided, 256)
    assert len(record_files()) == 4
    # Same dtype, shape and stride pattern, other data: no new record, no tuning.
    res = call(s, vadd, args(), 256)
    assert res.source == "memory" and len(record_files()) == 4
    # Static hints are part of the key: same site name, other hint, another record.
    call(site("axes", static_hints={"num_stages": 2}), vadd, base, 256)
    assert len(record_files()) == 5
    assert len(tune_count) == 5


def test_tuple_argument_is_keyed_by_its_elements(tune_count: list) -> None:
    # Triton specializes each element of a tuple argument (a tensor's dtype, an int's
    # class), so two calls whose tuples differ there must not share one decision.
    s = site("tuplekey")
    out = torch.empty(256)

    def pair(dtype: torch.dtype, n: int = 256) -> tuple:
        return (torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype))

    a, b = pair(torch.float32)
    res = call(s, pair_add, ((a, b), out, 256), 256)
    assert res.source == "tuned" and torch.equal(out, a + b)
    assert call(s, pair_add, (pair(torch.float32), out, 256), 256).source == "memory"
    a, b = pair(torch.float16)
    res = call(s, pair_add, ((a, b), out, 256), 256)
    assert res.source == "tuned" and torch.equal(out, (a + b).float())
    assert res.key["args"]["pair"] == [
        {"dtype": "float16", "shape": [256], "stride": "1"},
        {"dtype": "float16", "shape": [256], "stride": "1"},
    ]
    assert call(s, pair_add, (pair(torch.float32, 512), out, 256), 256).source == "tuned"
    assert len(record_files()) == 3 and len(tune_count) == 3
    new_process(s)
    assert call(s, pair_add, (pair(torch.float16), out, 256), 256).source == "disk"


def test_constexpr_object_is_keyed_by_its_value(tune_count: list) -> None:
    # A `tl.constexpr(...)` given to a plain parameter is compiled into the kernel, so
    # each value is its own decision (and its own signature for precompile).
    import triton.language as tl

    s = site("constexprobj")
    out = torch.empty(256)
    for value, source in [(3, "tuned"), (3, "memory"), (5, "tuned")]:
        res = call(s, fill_value, (out, 256, tl.constexpr(value)), 256)
        assert res.source == source and torch.equal(out, torch.full((256,), float(value)))
    assert res.key["args"]["value"] == {"constexpr": 5}
    assert len(record_files()) == 2 and len(tune_count) == 2


def test_user_key_replaces_shapes(tune_count: list) -> None:
    s = site("userkey", has_key=True)
    call(s, vadd, args(256), 256, key=1)
    call(s, vadd, args(512), 512, key=1)  # other shape, same user key: same decision
    assert len(record_files()) == 1 and len(tune_count) == 1
    call(s, vadd, args(512), 512, key=2)
    assert len(record_files()) == 2 and len(tune_count) == 2
    data = json.loads(record_files()[0].read_text())
    assert "shape" not in json.dumps(data["key"]) and "user_key" in data["key"]


@pytest.mark.parametrize("first", [1, 1.0, True], ids=repr)
def test_equal_user_keys_name_one_record_whichever_comes_first(first, tune_count: list) -> None:
    """``key=1``, ``key=1.0`` and ``key=True`` are one decision in a process (they are
    equal, as in triton.autotune's key); whichever a process meets first, they name the
    same record, so a new process finds it instead of tuning again."""
    s = site("equalkeys", has_key=True)
    call(s, vadd, args(256), 256, key=first)
    assert len(record_files()) == 1 and len(tune_count) == 1
    for other in (1, 1.0, True):
        new_process(s)
        assert call(s, vadd, args(256), 256, key=other).source == "disk", other
    assert len(record_files()) == 1 and len(tune_count) == 1


@triton.jit
def _double(x, TILE: tl.constexpr):
    return x * 2


@triton.jit
def _triple_small_tiles(x, TILE: tl.constexpr):
    tl.static_assert(TILE <= 16)
    return x * 3


@triton.jit
def _apply(a, c, n, TILE: tl.constexpr, ACT: tl.constexpr, LIMIT: tl.constexpr):
    tl.static_assert(TILE <= LIMIT)
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, ACT(tl.load(a + offs, mask=mask), TILE), mask=mask)


@pytest.mark.parametrize("changed", ["function", "number"])
def test_a_constexpr_a_kwargs_function_gives_is_keyed_by_its_value(
    changed: str, tune_count: list
) -> None:
    """A constexpr that a ``kwargs=`` function returns alike for every configuration (a
    @triton.jit activation, a limit) is another compiled kernel per value: another value is
    another decision and record, never the first value's choice (here: a tile that no
    longer compiles)."""
    n = 100
    a, c = torch.arange(n, dtype=torch.float32), torch.empty(n)

    def launch(act, limit):
        return autotune_launch(
            _apply,
            space={"tile": [16, 64]},
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(a, c, n),
            kwargs=lambda cfg: {"TILE": cfg.tile, "ACT": act, "LIMIT": limit},
            effort="quick",
            name=f"kwargs-constexpr-{changed}",
        )

    first = launch(_double, 64)
    torch.testing.assert_close(c, a * 2)
    second = launch(_triple_small_tiles, 64) if changed == "function" else launch(_double, 16)
    assert second.source == "tuned" and second.digest != first.digest
    assert second.config == Config(tile=16)  # the only tile that compiles now
    torch.testing.assert_close(c, a * 3 if changed == "function" else a * 2)
    assert len(record_files()) == 2 and len(tune_count) == 2
    from tunedsl.runtime import api

    new_process(*api._sites.values())
    again = launch(_double, 64)
    assert (again.source, again.digest) == ("disk", first.digest)


def test_keyword_order_does_not_change_the_record(tune_count: list) -> None:
    s = site("kworder")
    a, b, c, n = args()
    bind = lambda cfg: ((), {"TILE": cfg.tile}, ((n + cfg.tile - 1) // cfg.tile,))  # noqa: E731
    s(vadd, (a,), {"b": b, "c": c, "n": n}, bind, None, None)
    res = s(vadd, (a,), {"n": n, "c": c, "b": b}, bind, None, None)
    torch.testing.assert_close(c, a + b)
    assert res.source == "memory" and len(record_files()) == 1 and len(tune_count) == 1


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda d: "{ this is not json",
        lambda d: json.dumps([d]),
        lambda d: json.dumps({**d, "schema": d["schema"] + 1}),
        lambda d: json.dumps({**d, "results": {"oops": 1}}),
        lambda d: json.dumps({**d, "chosen": {"tile": 999}}),
    ],
    ids=["not-json", "wrong-shape", "future-schema", "wrong-type", "foreign-choice"],
)
def test_bad_record_is_a_miss_with_one_warning(corrupt, tune_count: list) -> None:
    call(site("corrupt"), vadd, args(), 256)
    (path,) = record_files()
    path.write_text(corrupt(json.loads(path.read_text())))
    warn.forget()
    with pytest.warns(CacheWarning) as caught:
        res = call(site("corrupt"), vadd, args(), 256)
    assert res.source == "tuned" and len(tune_count) == 2
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    json.loads(path.read_text())  # tuning again replaced it with a valid record
    assert records.load_record(path.stem) is not None


def test_choice_outside_the_current_space_retunes_with_a_warning(tune_count: list) -> None:
    first = call(site("shrink", space={"tile": [64, 128, 256]}), vadd, args(), 256)
    smaller = [t for t in (64, 128, 256) if t != first.config.tile]
    warn.forget()
    with pytest.warns(CacheWarning, match="not in the current space"):
        res = call(site("shrink", space={"tile": smaller}), vadd, args(), 256)
    assert res.source == "tuned" and res.config.tile in smaller
    # The surviving configurations' old timings were reused, not measured from scratch.
    assert tune_count[1].previous and set(tune_count[1].previous) == {
        Config(tile=t) for t in smaller
    }


def test_adding_a_configuration_measures_only_the_new_one(
    monkeypatch: pytest.MonkeyPatch, tune_count: list
) -> None:
    call(site("grow", space={"tile": [64, 128]}), vadd, args(), 256)
    from tunedsl.backends.inprocess import InProcessMeasurer

    measured = []
    real = InProcessMeasurer.prepare

    def counting(self, configs):
        measured.append(list(configs))  # each batch compiled (and warmed up) for measuring
        return real(self, configs)

    monkeypatch.setattr(InProcessMeasurer, "prepare", counting)
    res = call(site("grow", space={"tile": [64, 128, 256]}), vadd, args(), 256)
    # Only tile=256 is new; the stored leaders are prepared again only for the final race.
    assert res.source == "tuned" and measured[0] == [Config(tile=256)], measured
    assert sum(c == Config(tile=256) for batch in measured for c in batch) == 1
    assert set(res.timings) == {Config(tile=64), Config(tile=128), Config(tile=256)}
    # With nothing new, the record is simply used.
    assert call(site("grow", space={"tile": [64, 128, 256]}), vadd, args(), 256).source == "disk"


def test_cached_mode_uses_records_or_the_default(
    monkeypatch: pytest.MonkeyPatch, tune_count: list
) -> None:
    monkeypatch.setenv("TUNEDSL_AUTOTUNE", "cached")
    a, b, c, n = args()
    res = call(site("cached"), vadd, (a, b, c, n), n)
    assert res.source == "default" and res.config == Config(tile=64) and not record_files()
    torch.testing.assert_close(c, a + b)
    res = call(site("cached", options={"default": {"tile": 128}}), vadd, (a, b, c, n), n)
    assert res.config == Config(tile=128) and res.source == "default"
    monkeypatch.setenv("TUNEDSL_AUTOTUNE", "on")
    tuned = call(site("cached"), vadd, (a, b, c, n), n)
    monkeypatch.setenv("TUNEDSL_AUTOTUNE", "cached")
    res = call(site("cached"), vadd, (a, b, c, n), n)
    assert res.source == "disk" and res.config == tuned.config and len(tune_count) == 1


def test_off_mode_and_site_option(monkeypatch: pytest.MonkeyPatch, tune_count: list) -> None:
    call(site("off"), vadd, args(), 256)
    monkeypatch.setenv("TUNEDSL_AUTOTUNE", "off")
    res = call(site("off", options={"default": {"tile": 256}}), vadd, args(), 256)
    assert res.source == "default" and res.config == Config(tile=256)
    monkeypatch.setenv("TUNEDSL_AUTOTUNE", "on")
    res = call(site("off2", options={"mode": "off"}), vadd, args(), 256)
    assert res.source == "default" and len(tune_count) == 1


@pytest.mark.parametrize("env_mode", ["off", "cached"])
def test_a_site_that_tunes_where_the_environment_says_not_to_says_so(
    monkeypatch: pytest.MonkeyPatch, tune_count: list, env_mode: str
) -> None:
    # TUNEDSL_AUTOTUNE=off ("never tune") set for a run, and a site written with mode="on":
    # the site's option wins, as every option given at a site does, and it tuned without a
    # word, the variable accepted and ignored. It still wins; one warning says so.
    monkeypatch.setenv("TUNEDSL_AUTOTUNE", env_mode)
    with pytest.warns(UserWarning, match=rf"mode='on' .* TUNEDSL_AUTOTUNE={env_mode}") as caught:
        res = call(site("tunes", options={"mode": "on"}), vadd, args(), 256)
    assert res.source == "tuned" and len(tune_count) == 1
    assert "leave mode= out" in str(caught[0].message)
    assert caught[0].filename.endswith("runtime_helpers.py")  # the line of the site's call
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*wins over the variable")
        res = call(site("follows"), vadd, args(), 256)  # no mode=: the variable decides
        assert res.source == "default" and len(tune_count) == 1
        monkeypatch.setenv("TUNEDSL_AUTOTUNE", "on")
        call(site("agrees", options={"mode": "on"}), vadd, args(), 256)


def test_a_site_budget_beyond_the_environments_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # TUNEDSL_BUDGET=0.5 for a quick run, and a site written with budget=30: the site's
    # option wins and its search may take 60 times what the run allows, in silence.
    monkeypatch.setenv("TUNEDSL_BUDGET", "0.5")
    with pytest.warns(UserWarning, match=r"budget=30 .* TUNEDSL_BUDGET=0\.5") as caught:
        call(site("long", options={"budget": 30}), vadd, args(), 256)
    assert "leave budget= out" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*wins over the variable")
        call(site("short", options={"budget": 0.25}), vadd, args(), 256)  # within the cap
        call(site("unset"), vadd, args(), 256)


def test_threads_tune_each_key_once(tune_count: list) -> None:
    s = site("threads", space={"tile": [64, 128]})
    sizes = [128, 256, 384, 512]
    inputs = {n: args(n) for n in sizes}
    results: list = []
    errors: list = []
    barrier = threading.Barrier(16)

    def worker(i: int) -> None:
        n = sizes[i % len(sizes)]
        a, b, _, _ = inputs[n]
        c = torch.empty_like(a)  # each thread its own output
        barrier.wait()
        try:
            res = call(s, vadd, (a, b, c, n), n)
            torch.testing.assert_close(c, a + b)
            results.append((n, res.config, res.source))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, [str(e) for e in errors]
    assert len(results) == 16 and len(tune_count) == len(sizes)
    for n in sizes:
        configs = {cfg for m, cfg, _ in results if m == n}
        assert len(configs) == 1  # everyone got the one decision for their key
        assert sum(1 for m, _, src in results if m == n and src == "tuned") == 1


def test_no_warning_on_a_clean_hit() -> None:
    call(site("clean"), vadd, args(), 256)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert call(site("clean"), vadd, args(), 256).source == "disk"
