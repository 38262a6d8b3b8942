"""Decisions that stay right (prune, verify, keys, hooks, threads, table bound).

Each test reproduces one fault with real kernels under the interpreter and fails
on the code before the fix.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest
import torch
from decision_kernels import rowsum, scale_by, scale_optional
from runtime_helpers import SPACE, call, new_process, record_files, site
from runtime_kernels import scale_inplace, vadd, vadd_wrong_for_big_tiles

from tunedsl import Config, autotune_launch, cdiv
from tunedsl.errors import CacheWarning, UsageError
from tunedsl.model import keys
from tunedsl.runtime import verified
from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

BLOCKS = {"block": [16, 128, 256, 1024]}


def keep_big_enough(configs: list, args: dict) -> list:
    return [c for c in configs if c.block >= args["n"]]


def rowsum_call(s, x, n: int, **options):
    out = torch.zeros(1)
    res = s(rowsum, (x, out, n), {}, lambda cfg: ((), {"BLOCK": cfg.block}, (1,)), None, None)
    return res, out.item()


def prune_site(name: str, space=BLOCKS, **options):
    return site(name, space=space, placeholders=(), options={"prune": keep_big_enough, **options})


# -- 1. prune= and stored records, cached mode ------------------------------------------------


def test_a_pruned_record_is_reused_by_a_new_process(tune_count: list) -> None:
    x = torch.ones(1000)
    s = prune_site("pruned-record")
    res, total = rowsum_call(s, x, 100)
    assert res.source == "tuned" and total == 100.0
    new_process(s)
    res, total = rowsum_call(s, x, 100)
    assert res.source == "disk" and total == 100.0
    assert len(tune_count) == 1


def test_cached_mode_never_launches_a_configuration_prune_rejects() -> None:
    x = torch.ones(1000)
    for mode in ("cached", "off"):
        s = prune_site(f"pruned-{mode}", mode=mode)
        res, total = rowsum_call(s, x, 100)
        assert res.source == "default" and res.config == Config(block=128)
        assert total == 100.0


def test_cached_mode_keeps_a_stored_choice_when_the_space_grows(tune_count: list) -> None:
    a, b = torch.randn(256), torch.randn(256)
    s = site("grows")
    first = call(s, vadd, (a, b, torch.empty(256), 256), 256)
    grown = site("grows", space={"tile": [32, 64, 128, 256]}, options={"mode": "cached"})
    res = call(grown, vadd, (a, b, torch.empty(256), 256), 256)
    assert res.source == "disk" and res.config == first.config
    assert len(tune_count) == 1


# -- 2. prune= sees every call's arguments ---------------------------------------------------


def test_a_decision_is_not_reused_for_arguments_prune_rejects_it_for() -> None:
    x = torch.ones(1000)
    s = prune_site("prune-values")
    for n in (100, 200, 900, 100):
        res, total = rowsum_call(s, x, n)
        assert total == float(n) and res.config.block >= n
    assert s.prune_reads == frozenset({"n"})
    # A site without prune= keeps its plain key function (no prune part, same hot path).
    plain = site("no-prune", space=BLOCKS, placeholders=())
    rowsum_call(plain, x, 1000)
    assert plain.prune_reads == frozenset() and plain._key_fn is plain._base_key_fn


# -- 3. verify= checks decisions it did not make ---------------------------------------------


def test_a_forged_record_cannot_bypass_verify(tune_count: list) -> None:
    a, b = torch.randn(300), torch.randn(300)
    c = torch.empty(300)
    s = site("forged")
    call(s, vadd_wrong_for_big_tiles, (a, b, c, 300), 300)  # tuned without verify
    (path,) = record_files()
    record = records.read_record_file(path)
    records.save_record(dataclasses.replace(record, chosen=Config(tile=256)))  # wrong config
    checked = site("forged", options={"verify": True})
    with pytest.warns(CacheWarning, match="fails verify= here"):
        res = call(checked, vadd_wrong_for_big_tiles, (a, b, c, 300), 300)
    assert res.config != Config(tile=256) and res.source == "tuned"
    torch.testing.assert_close(c, a + b)
    assert len(tune_count) == 2


def test_a_verified_record_is_checked_once_and_used() -> None:
    a, b = torch.randn(300), torch.randn(300)
    s = site("checked-once", options={"verify": True})
    call(s, vadd, (a, b, torch.empty(300), 300), 300)
    new_process(s)
    res = call(s, vadd, (a, b, torch.empty(300), 300), 300)
    assert res.source == "disk"
    assert res.digest in verified.PASSED


# -- 4. constexpr values keyed with their type -----------------------------------------------


def test_constexpr_2_and_2_0_and_true_get_their_own_decisions() -> None:
    x = torch.ones(64)
    s = site("constexpr-types")
    results = []
    for k in (2, 2.0, True, 1):
        out = torch.empty(64)
        results.append(call(s, scale_by, (x, out, 64), 64, K=k))
    assert [r.source for r in results] == ["tuned"] * 4
    assert len(s.table()) == 4
    assert keys.constexpr_key(2) != keys.constexpr_key(2.0)


@pytest.mark.parametrize("first", [0.0, -0.0])
def test_a_constexpr_of_zero_and_of_negative_zero_name_one_record_whichever_comes_first(
    first: float,
) -> None:
    # -0.0 == 0.0 and they hash alike: the call key, and Triton's own cache of compiled
    # kernels, hold one of them for both. The record key does too, so a process that meets
    # the other first finds the same record (it was tuned again under another digest).
    x = torch.ones(64)
    s = site("constexpr-zero")
    first_result = call(s, scale_by, (x, torch.empty(64), 64), 64, K=first)
    assert first_result.source == "tuned"
    new_process(s)
    other = call(s, scale_by, (x, torch.empty(64), 64), 64, K=-first)
    assert (other.source, other.digest, other.key) == (
        "disk",
        first_result.digest,
        first_result.key,
    )
    assert len(record_files()) == 1


# -- 5. the plain API's kwargs= --------------------------------------------------------------


def add_by_keywords(a, b, c, **options):
    n = a.numel()
    return autotune_launch(
        vadd,
        space=SPACE,
        grid=lambda cfg: (cdiv(n, cfg.tile),),
        kwargs=lambda cfg: {"a": a, "b": b, "c": c, "n": n, "TILE": cfg.tile},
        **options,
    )


def test_kwargs_function_tensors_enter_the_key_and_prune() -> None:
    seen: list = []

    def prune(configs, args):
        seen.append(args["a"].dtype)
        return configs

    for dtype in (torch.float32, torch.float16):
        a, b = torch.randn(128, dtype=dtype), torch.randn(128, dtype=dtype)
        c = torch.empty(128, dtype=dtype)
        res = add_by_keywords(a, b, c, prune=prune)  # keyword-only call, no key=
        assert res.source == "tuned"
        assert res.key["args"]["a"]["dtype"] == str(dtype).removeprefix("torch.")
        torch.testing.assert_close(c, a + b)
    assert seen == [torch.float32, torch.float16]


# -- 7. None for restore_value / reset_to_zero -----------------------------------------------


def test_none_in_restore_value_and_reset_to_zero_is_skipped() -> None:
    x = torch.ones(64)
    s = site("optional", options={"restore_value": ["x", "extra"], "reset_to_zero": ["extra"]})
    res = call(s, scale_optional, (x, None, 64), 64)
    assert res.source == "tuned" and torch.equal(x, torch.full((64,), 2.0))
    res = call(s, scale_optional, (x, None, 64), 64)  # the hot path's zeroing skips None too
    assert res.source == "memory" and torch.equal(x, torch.full((64,), 4.0))


# -- 8. one configuration: launched once ------------------------------------------------------


def test_a_single_configuration_is_launched_once(tune_count: list) -> None:
    x = torch.ones(64)
    res = call(site("single", space={"tile": [64]}), scale_inplace, (x, 64), 64)
    assert torch.equal(x, torch.full((64,), 2.0)) and res.config == Config(tile=64)
    y = torch.ones(1000)
    res, total = rowsum_call(prune_site("single-pruned"), y, 900)  # prune keeps only 1024
    assert total == 900.0 and res.config == Config(block=1024)
    assert tune_count == []


# -- 9. post_hook(args, exception=...) ---------------------------------------------------------


def test_post_hook_gets_the_error_as_exception_keyword() -> None:
    seen: list = []

    def post_hook(args, *, exception):  # Triton's hook signature, keyword only
        seen.append(exception)

    a, b = torch.randn(64), torch.randn(64)
    call(site("post-kw", options={"post_hook": post_hook}), vadd, (a, b, torch.empty(64), 64), 64)
    assert seen == [None, None, None]


# -- 10. two threads on a site's first call ----------------------------------------------------


def _in_two_threads(work) -> list[BaseException]:
    """Run ``work`` on two threads at once; what each raised."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as err:  # surfaced by the caller
            errors.append(err)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_two_threads_on_the_first_call_share_one_key(monkeypatch: pytest.MonkeyPatch) -> None:
    barrier = threading.Barrier(2, timeout=60)
    real = keys.make_call_key_fn

    def both_at_once(*args, **kwargs):
        barrier.wait()  # both threads have passed the unlocked "kernel is known" check
        return real(*args, **kwargs)

    monkeypatch.setattr(keys, "make_call_key_fn", both_at_once)
    s = site("threads-first", options={"mode": "off"})
    a, b = torch.randn(64), torch.randn(64)
    errors = _in_two_threads(lambda: call(s, vadd, (a, b, torch.empty(64), 64), 64))
    assert errors == []
    assert s._other_kernels == {} and len(s.table()) == 1


def test_two_threads_on_the_first_call_of_a_site_with_a_computed_hint_store_one_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both threads build the key before the site learns that its hints are computed (which
    joins their values to the key): the second waited for the first's decision under the
    key without them, found nothing there (it was stored with them) and decided again,
    storing an entry under a key no call builds again: two entries for one key."""
    barrier = threading.Barrier(2, timeout=60)
    s = site("threads-first-hinted", options={"mode": "off"})
    plans = type(s._rule_plans)
    real = plans.decide

    def both_at_once(*args, **kwargs):
        barrier.wait()  # both threads missed, under the key built without the hints
        return real(*args, **kwargs)

    monkeypatch.setattr(plans, "decide", both_at_once)
    a, b = torch.randn(64), torch.randn(64)
    hinted = lambda: (None, {"num_warps": 2}, None)  # noqa: E731
    errors = _in_two_threads(lambda: call(s, vadd, (a, b, torch.empty(64), 64), 64, lazy=hinted))
    assert errors == []
    assert [k[-1] for k in s.table()] == [("hints", (("num_warps", 2),))]


# -- 11. hint and field of a computed space --------------------------------------------------


def test_hint_and_field_of_a_computed_space_is_an_error() -> None:
    s = site("hint-field", space=None, static_hints={"num_warps": 4}, placeholders=())
    lazy = lambda: ({"tile": [64], "num_warps": [2, 4]}, {}, {})  # noqa: E731
    a, b = torch.randn(64), torch.randn(64)
    with pytest.raises(UsageError, match="both as a static hint and as a field of space="):
        call(s, vadd, (a, b, torch.empty(64), 64), 64, lazy=lazy)


# -- 12. name= -----------------------------------------------------------------------------------


def test_name_is_validated_and_a_computed_name_is_honoured() -> None:
    a, b = torch.randn(64), torch.randn(64)
    s = site(None, options={"mode": "off"})
    bad = lambda: (None, {}, {"name": 123})  # noqa: E731
    with pytest.raises(UsageError, match="name= must be a non-empty string"):
        call(s, vadd, (a, b, torch.empty(64), 64), 64, lazy=bad)
    s = site(None, options={"mode": "off"})
    good = lambda: (None, {}, {"name": "computed-name"})  # noqa: E731
    res = call(s, vadd, (a, b, torch.empty(64), 64), 64, lazy=good)
    assert res.site == "computed-name"


# -- 15. a bounded decision table ------------------------------------------------------------


def test_the_decision_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from tunedsl.runtime import site as site_module

    monkeypatch.setattr(site_module, "MAX_DECISIONS", 4)
    s = site("bounded", options={"mode": "off"})
    for n in range(1, 11):
        a, b = torch.randn(n), torch.randn(n)
        c = torch.empty(n)
        call(s, vadd, (a, b, c, n), n)
        torch.testing.assert_close(c, a + b)
    assert len(s.table()) <= 4


# -- 17. a site re-entered from its own hook ---------------------------------------------------


def test_a_site_called_from_its_own_pre_hook_is_a_usage_error() -> None:
    a, b = torch.randn(64), torch.randn(64)
    c = torch.empty(64)
    holder: list = []

    def pre_hook(args) -> None:
        call(holder[0], vadd, (a, b, c, 64), 64)

    holder.append(site("reentrant", options={"pre_hook": pre_hook}))
    errors: list = []

    def run() -> None:
        try:
            call(holder[0], vadd, (a, b, c, 64), 64)
        except BaseException as err:  # checked below
            errors.append(err)

    t = threading.Thread(target=run, daemon=True)  # a hang must not hang the test run
    t.start()
    t.join(timeout=300)
    assert not t.is_alive(), "the re-entered site waited on itself"
    assert len(errors) == 1 and isinstance(errors[0], UsageError)
    assert "called again from its own pre_hook=" in str(errors[0])


# -- 6. mixed GPU models ------------------------------------------------------------------------


def test_mixed_gpu_models_key_decisions_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    # No host here has two GPU models: the two device queries stand in for one that does
    # (tests/gpu/test_device_facts.py checks the real queries on a GPU).
    from tunedsl.backends import triton as bt

    current = [0]
    monkeypatch.setattr(bt, "mixed_device_models", lambda: True)
    monkeypatch.setattr(bt, "current_device_index", lambda: current[0])
    models = ["GPU model A", "GPU model B"]
    monkeypatch.setattr(
        bt, "device_facts", lambda: {"type": "interpreter", "name": models[current[0]]}
    )
    s = site("mixed-devices", options={"mode": "off"})
    a, b = torch.randn(64), torch.randn(64)
    call(s, vadd, (a, b, torch.empty(64), 64), 64)
    current[0] = 1
    res = call(s, vadd, (a, b, torch.empty(64), 64), 64)
    assert res.source == "default"  # decided for device 1, not served device 0's decision
    assert sorted(k[-1] for k in s.table()) == [("device", 0), ("device", 1)]
    assert len({r.digest for r in s.table().values()}) == 2  # the model is in the digest
    # One model everywhere (the usual host): no device part, the plain key function.
    same = site("one-model", options={"mode": "off"})
    monkeypatch.setattr(bt, "mixed_device_models", lambda: False)
    call(same, vadd, (a, b, torch.empty(64), 64), 64)
    assert same._key_fn is same._base_key_fn


def test_the_bounded_table_keeps_the_keys_in_use() -> None:
    """Eviction is least-recently-used (the clock approximation): keys hit since the last
    sweep are spared, the oldest of the others go."""
    from tunedsl.model.config import Config
    from tunedsl.runtime.entry import Entry, evict

    table = {k: Entry(Config(k=k), print, None, (), ()) for k in range(8)}  # type: ignore[arg-type]
    table[0].used = table[1].used = True
    evict(table, 2)
    assert list(table) == [4, 5, 6, 7, 0, 1]  # 2 and 3 dropped; 0 and 1 moved to the back
    assert not table[0].used and not table[1].used  # their second chance is spent
    for entry in table.values():
        entry.used = True
    evict(table, 3)  # every one in use: each gets its second chance, then the oldest go
    assert list(table) == [7, 0, 1]


def test_a_hit_marks_its_entry_used(monkeypatch: pytest.MonkeyPatch) -> None:
    s = site("used-bit", options={"mode": "off"})
    a, b = torch.randn(32), torch.randn(32)
    c = torch.empty(32)
    call(s, vadd, (a, b, c, 32), 32)
    (entry,) = s._table.values()
    assert entry.used is False  # the miss itself is not a use
    call(s, vadd, (a, b, c, 32), 32)
    assert entry.used is True


# -- the miss path: the site stores what the resolver decides -----------------------------------


def test_a_miss_builds_the_call_key_once(monkeypatch: pytest.MonkeyPatch) -> None:
    s = site("key-once", options={"mode": "off"})
    a, b = torch.randn(64), torch.randn(64)
    call(s, vadd, (a, b, torch.empty(64), 64), 64)  # registers the kernel
    built: list = []
    key_of = s.call_key

    def counted(*args):  # the site's own call_key, counted
        built.append(args)
        return key_of(*args)

    monkeypatch.setattr(s, "call_key", counted)
    a, b = torch.randn(96), torch.randn(96)
    res = call(s, vadd, (a, b, torch.empty(96), 96), 96)  # a new key: a miss
    assert res.source == "default" and len(s.table()) == 2
    assert built == []  # the key the lookup built is the key the entry is stored under
    assert call(s, vadd, (a, b, torch.empty(96), 96), 96).source == "memory"


def test_a_key_grown_by_prune_stores_its_entry_under_the_grown_key() -> None:
    x = torch.ones(1000)
    s = prune_site("prune-grows-key", mode="off")
    first, total = rowsum_call(s, x, 100)  # prune= reads n on this miss: the key grows
    assert first.source == "default" and total == 100.0
    again, total = rowsum_call(s, x, 100)
    # One entry: under the old key it would never be found, and the second call would add
    # another under the grown key.
    assert again.source == "memory" and total == 100.0 and len(s.table()) == 1
