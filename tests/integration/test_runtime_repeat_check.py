"""The hot path's repeat check: a call that repeats the last call's key is recognised
without building the key, and never a call whose key differs (real torch tensors, real
Triton kernels under the interpreter)."""

from __future__ import annotations

import itertools

import pytest
import torch
from runtime_helpers import call, site
from runtime_kernels import vadd

from tunedsl.backends.compat import layout_check
from tunedsl.model import keys
from tunedsl.model.hole import HOLE

pytestmark = pytest.mark.needs_triton

CONSTEXPR = frozenset({4})


def key_of(args: tuple, kwargs: dict | None = None) -> tuple:
    fn = keys.make_call_key_fn(CONSTEXPR, frozenset(), True, HOLE, with_align=True)
    return fn(args, kwargs or {}, None)


def repeat_check(sample: tuple):
    check = keys.make_repeat_check(sample, CONSTEXPR, HOLE, True, layout_check)
    assert check is not None, "torch's layout guard should be usable here"
    return check


def aliased(args: tuple) -> bool:
    """One tensor passed twice: torch's guard rejects such calls (they cost a key)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return any(x is y for x, y in itertools.combinations(tensors, 2))


def layouts() -> list[tuple]:
    """Calls that differ from a sample in one thing each (and some that do not)."""
    base = torch.randn(64, 32)
    other_data = torch.randn(64, 32)
    wide = torch.randn(64, 64)
    calls = [
        (base, other_data, 16, 1.5, 128),  # the sample's layout, other tensors
        (other_data, base, 32, 2.5, 128),  # other values of the same classes
        (base.to(torch.float16), other_data, 16, 1.5, 128),  # dtype
        (torch.randn(32, 64), other_data, 16, 1.5, 128),  # shape
        (torch.randn(32, 64).t(), other_data, 16, 1.5, 128),  # strides
        (wide[:, :32], other_data, 16, 1.5, 128),  # same shape, other row stride
        (torch.randn(64 * 32 + 1)[1:].view(64, 32), other_data, 16, 1.5, 128),  # alignment
        (base, other_data, 17, 1.5, 128),  # int class: %16 -> other
        (base, other_data, 1, 1.5, 128),  # int class: ==1
        (base, other_data, 2**40, 1.5, 128),  # an int beyond 32 bits
        (base, other_data, 16, 2, 128),  # float -> int
        (base, other_data, 16, 1.5, 256),  # a constexpr's value
        (base, other_data, 16, 1.5, 128.0),  # a constexpr's type
        (base, 3, 16, 1.5, 128),  # a tensor -> an int
        (base, other_data, 16, 1.5),  # arity
        (base, other_data, HOLE, 1.5, 128),  # a configuration-dependent argument
        (base, None, 16, 1.5, 128),
    ]
    return calls


def test_repeat_check_agrees_with_the_call_key_on_every_layout() -> None:
    calls = layouts()
    samples = [c for c in calls if len(c) == 5]
    compared = 0
    for sample, args in itertools.product(samples, calls):
        check = keys.make_repeat_check(sample, CONSTEXPR, HOLE, True, layout_check)
        if check is None:  # a layout the check does not cover (a 64-bit int)
            assert any(a.__class__ is int and a > 2**31 for a in sample)
            continue
        same_key = key_of(args) == key_of(sample)
        # The guard may reject more than the key would (never less): a False where the
        # keys are equal costs a key; a True where they differ would launch a wrong entry.
        assert not check(args, {}) or same_key, (sample, args)
        if same_key and not aliased(args) and not aliased(sample):
            assert check(args, {}), (sample, args)  # the common case is recognised
        compared += 1
    assert compared > 200


def test_several_ints_are_checked_together_exactly() -> None:
    # The check tests the non-negative 32-bit ints of a layout with one OR for their range
    # and one for divisibility by 16: never accepting a call whose key differs.
    t = torch.randn(16)
    values = [0, 1, 2, 15, 16, 17, 32, 2**31 - 16, 2**31, 2**40, -1, -16, -(2**31)]
    samples = [(t, m, n, k) for m in (16, 1, 7) for n in (32, 0) for k in (2**31 - 16, 5)]
    compared = 0
    for sample in samples:
        check = keys.make_repeat_check(sample, frozenset(), HOLE, True, layout_check)
        assert check is not None
        for m, n, k in itertools.product(values, repeat=3):
            args = (t, m, n, k)
            same_key = key_of(args) == key_of(sample)
            assert not check(args, {}) or same_key, (sample, args)
            if same_key and min(m, n, k) >= 0:  # negative ints may cost a key, never more
                assert check(args, {}), (sample, args)
            compared += 1
    for bad in (16.0, True, "16", None):  # another class in an int's place: no exception
        assert not keys.make_repeat_check(samples[0], frozenset(), HOLE, True, layout_check)(
            (t, 16, bad, 2**31 - 16), {}
        )
    assert compared > 20_000


def test_repeat_check_refuses_keyword_arguments_and_in_place_metadata_changes() -> None:
    a, b = torch.randn(256), torch.randn(256)
    check = repeat_check((a, b, 256, 1.0, 64))
    assert check((a, b, 256, 1.0, 64), {})
    assert not check((a, b, 256, 1.0, 64), {"out": a})
    a.resize_(512)  # the same tensor object, another shape
    assert not check((a, b, 256, 1.0, 64), {})
    a.resize_(256)
    assert check((a, b, 256, 1.0, 64), {})
    a.set_(torch.randn(257)[1:])  # the same object, storage moved off 16-byte alignment
    assert key_of((a, b, 256, 1.0, 64)) != key_of((b, b, 256, 1.0, 64))
    assert not check((a, b, 256, 1.0, 64), {})


def test_layouts_without_tensors_or_with_other_classes_get_no_check() -> None:
    assert keys.make_repeat_check((1, 2.0), frozenset(), HOLE, True, layout_check) is None
    t = torch.randn(8)
    assert keys.make_repeat_check((t, (1, 2)), frozenset(), HOLE, True, layout_check) is None
    assert keys.make_repeat_check((t, True), frozenset(), HOLE, True, layout_check) is None
    assert keys.make_repeat_check((t,), frozenset(), HOLE, True, lambda ts: None) is None


def test_a_site_alternating_layouts_launches_each_keys_decision() -> None:
    s = site("repeat-alternate")
    small = (torch.randn(256), torch.randn(256), torch.empty(256), 256)
    large = (torch.randn(1024), torch.randn(1024), torch.empty(1024), 1024)
    for args, n in ((small, 256), (large, 1024), (small, 256), (small, 256), (large, 1024)):
        args[2].zero_()
        call(s, vadd, args, n)
        assert torch.equal(args[2], args[0] + args[1])
    assert len(s.table()) == 2
    assert s._last is not None and s._last.repeat is not False  # the check is in use


def test_a_tensor_resized_in_place_between_calls_gets_its_own_decision() -> None:
    s = site("repeat-resize")
    a, b, c = torch.randn(256), torch.randn(256), torch.empty(256)
    call(s, vadd, (a, b, c, 256), 256)
    call(s, vadd, (a, b, c, 256), 256)  # the repeat check's hit
    for t in (a, b, c):
        t.resize_(512)
    a.normal_(), b.normal_()
    call(s, vadd, (a, b, c, 512), 512)
    assert torch.equal(c, a + b)
    assert len(s.table()) == 2  # the resized call was keyed, not taken for the last one


def test_clear_forgets_the_last_entry_too() -> None:
    s = site("repeat-clear")
    args = (torch.randn(256), torch.randn(256), torch.empty(256), 256)
    call(s, vadd, args, 256)
    call(s, vadd, args, 256)
    last = s._last
    assert last is not None
    s.clear()
    assert s._last is None
    # A thread that read the dropped entry just before clear() can still call its check
    # (never a repeat), and cannot make it the last entry again.
    assert last.repeat is not None and last.repeat(args, {}) is False
    s._remember(last, args, {})
    assert s._last is None
    assert call(s, vadd, args, 256).source != "memory"  # decided again, not remembered


def test_repeat_check_off_by_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEDSL_SAFE", "repeat")
    s = site("repeat-off")
    args = (torch.randn(256), torch.randn(256), torch.empty(256), 256)
    for _ in range(3):
        call(s, vadd, args, 256)
    assert s._last is None
    assert torch.equal(args[2], args[0] + args[1])
