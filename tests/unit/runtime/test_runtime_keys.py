"""Cache keys with stand-in tensors (duck-typed, as the key code sees any tensor)."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from tunedsl.model import keys
from tunedsl.model.hole import HOLE
from tunedsl.model.key_digest import KeyDigest


@dataclass(frozen=True)
class FakeTensor:
    """Has what the key reads from a tensor: dtype, shape, stride(), data_ptr()."""

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    ptr: int = 4096

    def stride(self) -> tuple[int, ...]:
        return self.strides

    def data_ptr(self) -> int:
        return self.ptr


def key_fn(with_shape: bool = True, with_align: bool = False):
    return keys.make_call_key_fn(
        frozenset({4}), frozenset({"TILE", "EVEN"}), with_shape, HOLE, with_align
    )


def t(dtype: str = "float32", shape=(64, 32), strides=(32, 1), ptr: int = 4096) -> FakeTensor:
    return FakeTensor(dtype, shape, strides, ptr)


def test_same_call_same_key() -> None:
    f = key_fn()
    assert f((t(), t(), 7), {}, None) == f((t(), t(), 7), {}, None)


def test_each_axis_separates() -> None:
    f = key_fn()
    base = f((t(), 64), {}, None)
    assert f((t(dtype="float16"), 64), {}, None) != base  # dtype
    assert f((t(shape=(64, 64), strides=(64, 1)), 64), {}, None) != base  # shape
    assert f((t(strides=(1, 64)), 64), {}, None) != base  # stride pattern
    assert f((t(), 65), {}, None) != base  # int class (16-divisible or not)
    assert f((t(), 1), {}, None) != base  # ==1


def test_ints_with_the_same_class_share_a_key() -> None:
    f = key_fn()
    assert f((t(), 32), {}, None) == f((t(), 64), {}, None)
    assert f((t(), 33), {}, None) == f((t(), 35), {}, None)
    assert keys.int_class(2**40) == "i16L" and keys.int_class(2**63 + 1) == "iU"


def test_constexprs_are_keyed_by_value() -> None:
    f = key_fn()
    assert f((t(), 64, 0, 0, 128), {}, None) != f((t(), 64, 0, 0, 256), {}, None)
    assert f((t(),), {"EVEN": True}, None) != f((t(),), {"EVEN": False}, None)


def test_floats_are_keyed_by_type_only() -> None:
    f = key_fn()
    assert f((t(), 0.5), {}, None) == f((t(), 2.5), {}, None)


def test_user_key_replaces_shapes() -> None:
    f = key_fn(with_shape=False)
    assert f((t(shape=(64, 32)),), {}, 1) == f((t(shape=(128, 32)),), {}, 1)
    assert f((t(),), {}, 1) != f((t(),), {}, 2)
    assert f((t(),), {}, 1) != f((t(dtype="float16"),), {}, 1)  # dtype still counts


def test_alignment_only_with_align() -> None:
    assert key_fn()((t(ptr=4096),), {}, None) == key_fn()((t(ptr=4100),), {}, None)
    aligned = key_fn(with_align=True)
    assert aligned((t(ptr=4096),), {}, None) != aligned((t(ptr=4100),), {}, None)


def test_holes_are_not_keyed() -> None:
    f = key_fn()
    assert f((t(), HOLE), {}, None) == f((t(), HOLE), {}, None)


def test_stride_pattern() -> None:
    assert keys.stride_pattern((4096, 1)) == "s1"
    assert keys.stride_pattern((0, 1)) == "01"
    assert keys.stride_pattern((1, 64)) == "1s"


def test_readable_key_sorts_keywords_and_is_json() -> None:
    names = ("a", "n", "TILE", "EVEN")
    one = keys.readable_key(
        names, (t(), 64), {"TILE": 8, "EVEN": True}, None, frozenset({"TILE", "EVEN"}), HOLE
    )
    two = keys.readable_key(
        names, (t(), 64), {"EVEN": True, "TILE": 8}, None, frozenset({"TILE", "EVEN"}), HOLE
    )
    assert keys.canonical_json(one) == keys.canonical_json(two)
    assert one["args"]["a"] == {"dtype": "float32", "shape": [64, 32], "stride": "s1"}
    assert one["args"]["TILE"] == {"constexpr": 8}
    ctx = {"device": {"name": "x"}}
    assert KeyDigest("s", ctx)(one) == KeyDigest("s", ctx)(two)
    assert KeyDigest("s", ctx)(one) != KeyDigest("s", {"device": {"name": "y"}})(one)
    assert KeyDigest("s", ctx)(one) != KeyDigest("other-site", ctx)(one)


def test_readable_key_with_user_key_has_no_shapes() -> None:
    out = keys.readable_key(("a",), (t(),), {}, (1, 2), frozenset(), HOLE)
    assert out == {"args": {"a": {"dtype": "float32", "stride": "s1"}}, "user_key": [1, 2]}


def test_the_record_key_tells_an_unaligned_tensor_apart_as_the_call_key_does() -> None:
    # With direct launch the call key holds each tensor's 16-byte alignment (Triton
    # compiles another kernel without it); the record key did not, so an unaligned slice
    # was given the decision tuned for the aligned kernel, in memory and from disk.
    names = ("a", "b")
    ctx = {"device": {"name": "x"}}

    def record(ptr: int, with_align: bool = True) -> dict:
        args = (t(ptr=ptr), (t(ptr=4096), t(ptr=ptr)))
        return keys.readable_key(names, args, {}, None, frozenset(), HOLE, with_align=with_align)

    aligned, unaligned = record(4096), record(4100)
    assert aligned == record(4096, with_align=False)  # aligned keys, and digests, unchanged
    assert unaligned["args"]["a"] == {
        "dtype": "float32",
        "shape": [64, 32],
        "stride": "s1",
        "aligned": False,
    }
    assert unaligned["args"]["b"][1]["aligned"] is False  # a tensor inside a tuple too
    assert KeyDigest("s", ctx)(aligned) != KeyDigest("s", ctx)(unaligned)
    assert KeyDigest("s", ctx)(record(4100)) == KeyDigest("s", ctx)(record(4132))
    assert record(4100, with_align=False) == aligned  # without direct launch: not keyed


def test_hashable_user_key() -> None:
    assert keys.hashable_user_key([1, [2, 3], {"b": 1}]) == (1, (2, 3), (("b", 1),))


def test_json_safe_writes_a_dataclass_by_the_fields_it_compares() -> None:
    @dataclass(frozen=True)
    class Inner:
        tag: str = dataclasses.field(repr=False)
        cache: object = dataclasses.field(default=None, compare=False)  # not in ==, not keyed

    @dataclass(frozen=True)
    class Outer:
        inner: Inner
        rest: tuple

    where = f"{__name__}.test_json_safe_writes_a_dataclass_by_the_fields_it_compares.<locals>"
    written = keys.json_safe(Outer(Inner("fp16", cache=object()), (1, float("nan"))))
    assert written == {
        "dataclass": f"{where}.Outer",
        "fields": {
            "inner": {"dataclass": f"{where}.Inner", "fields": {"tag": "fp16"}},
            "rest": [1, {"float": "nan"}],
        },
    }
    assert keys.json_safe(Outer) == repr(Outer)  # the class itself is no instance


def test_json_safe_tags_only_what_would_collide() -> None:
    class Color(enum.Enum):
        RED = 1

    assert keys.json_safe({"b": 1, "a": (2, 3.5)}) == {"a": [2, 3.5], "b": 1}  # as before
    assert keys.json_safe({1: "x", "1": "y"}) == {"dict": [["1", "y"], [1, "x"]]}
    assert keys.json_safe({"float": "nan"}) == {"dict": [["float", "nan"]]}  # not a tag
    assert keys.json_safe(float("-inf")) == {"float": "-inf"}
    assert keys.json_safe(Color.RED)["name"] == "RED"
    assert keys.json_safe(b"\x01") == {"bytes": "01"}
    # key= dicts: str keys as pairs (as before), others as DictItems, unequal to the pairs
    assert keys.json_safe(keys.hashable_user_key({"a": 1})) == [["a", 1]]
    typed = keys.hashable_user_key({1: "x"})
    assert typed != ((1, "x"),) and keys.json_safe(typed) == {"dict": [[1, "x"]]}
    assert typed == keys.hashable_user_key({1.0: "x"})


def _both(sample_args, sample_kwargs, with_shape=True, with_align=False):
    generic = keys.make_call_key_fn(
        frozenset({4}), frozenset({"TILE"}), with_shape, HOLE, with_align
    )
    generic(sample_args, sample_kwargs, None)  # registers the tensor class, as the site does
    special = keys.specialize_call_key_fn(
        generic,
        sample_args,
        sample_kwargs,
        frozenset({4}),
        frozenset({"TILE"}),
        with_shape,
        HOLE,
        with_align,
    )
    return generic, special


def test_specialized_key_equals_generic_for_every_layout() -> None:
    sample = (t(), t(), 64, 1.5, 256)
    generic, special = _both(sample, {"TILE": 8, "out": t()}, with_align=True)
    assert special is not generic  # code was generated for this layout
    calls = [
        (sample, {"TILE": 8, "out": t()}),
        (
            (t(ptr=4100), t(dtype="float16"), 1, 2.5, 128),
            {"out": t(), "TILE": 16},
        ),  # other values, kw order
        ((t(), t(), 2**40, 1.5, 256), {"TILE": 8, "out": t()}),  # 64-bit int: generic path
        ((t(), 7, 64, 1.5, 256), {"TILE": 8, "out": t()}),  # int where a tensor was
        ((t(), t(), 64), {"TILE": 8, "out": t()}),  # other arity
        (sample, {"TILE": 8}),  # other keywords
        (sample, {"TILE": 8, "other": t()}),
        ((t(), HOLE, 64, 1.5, 256), {"TILE": 8, "out": t()}),
    ]
    for args, kwargs in calls:
        assert special(args, kwargs, None) == generic(args, kwargs, None), (args, kwargs)


def test_layouts_the_generator_leaves_to_the_generic_function() -> None:
    generic, special = _both((t(), None, True), {})
    assert special is generic  # None and bool are rare: no code generated
    generic, special = _both((t(), 64), {}, with_shape=False)
    assert special is generic


def test_a_sites_digests_of_many_keys_name_each_record_as_the_whole_context_does() -> None:
    import hashlib
    import json

    contexts = [
        {"kernel": {"qualname": "k", "file": "pkg/mm.py"}, "env": {}, "hints": {"w": 4}},
        {"device": {"name": "Ünïcode GPU", "capability": "9.0"}, "x": [1.5, None, True]},
        {},
    ]
    readable = [
        {"args": {"a": {"dtype": "float16", "shape": [3, 5], "stride": "s1"}, "n": "i16"}},
        {"args": {"é": "$"}, "user_key": ["x", 2]},
        {},
    ]
    for site_id in ("site", 'a "quoted" name'):
        for context in contexts:
            many = KeyDigest(site_id, context)
            for key in readable:
                named = {"site": site_id, "key": key, "context": context}
                text = json.dumps(named, sort_keys=True, separators=(",", ":"), default=repr)
                whole = hashlib.sha256(text.encode("utf-8")).hexdigest()
                assert many(key) == many.of_text(keys.canonical_json(key)) == whole


class _UnhashableDtype:
    """A tensor-like's dtype that cannot be hashed (readable keys remember dtype names)."""

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return "torch.custom8"


def test_a_dtype_that_cannot_be_hashed_still_names_the_key_dtype() -> None:
    t = FakeTensor(_UnhashableDtype(), (4, 4), (4, 1))  # type: ignore[arg-type]
    for _ in range(2):  # named again each time, never remembered
        assert keys.readable_value(t, False, True) == {
            "dtype": "custom8",
            "shape": [4, 4],
            "stride": "s1",
        }


def test_with_source_keeps_every_other_field_of_the_result() -> None:
    import dataclasses

    from tunedsl.model.config import Config
    from tunedsl.runtime.result import LaunchResult

    result = LaunchResult(
        config=Config(tile=64),
        source="memory",
        key={"args": {"n": "i"}},
        digest="d" * 64,
        site="site-id",
        record=None,
        space=(Config(tile=32), Config(tile=64)),
    )
    changed = result.with_source("rule")
    assert changed == dataclasses.replace(result, source="rule")
    for field in dataclasses.fields(LaunchResult):
        if field.name != "source":
            assert getattr(changed, field.name) is getattr(result, field.name), field.name


def test_canonical_json_is_the_standard_encoding_with_sorted_keys_and_says_so_on_a_cycle() -> None:
    import json

    import pytest

    class Odd:
        def __repr__(self) -> str:
            return "Odd()"

    values = [
        {"b": 1, "a": [1.5, None, True, "é", (2, 3)], "c": {"z": {}, "y": []}},
        {"x": float("nan"), "i": float("inf")},
        {1: 2, 3: [4]},
        "text",
        3,
        [Odd(), {"o": Odd()}],
    ]
    for value in values:
        expected = json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
        assert keys.canonical_json(value) == expected
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        keys.canonical_json(cycle)
