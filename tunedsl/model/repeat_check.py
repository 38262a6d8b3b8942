"""The repeat check: generated code telling whether a call repeats the last call's argument
layout (same tensors' dtypes, shapes, strides and alignment, same int classes), so a hit
skips building its call key. ``RepeatCheckCode`` holds the check's source (compiled by
``compile_repeat_check``) and the same check per argument, which the C fused launch
(``runtime/fused.py``, ``runtime/native_fused.c``) runs itself."""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunedsl.model.keys import (
    I32_MAX,
    I32_MIN,
    constexpr_key,
    is_tensor,
    small_int_class,
    small_int_class_test_code,
    small_int_guard_code,
)


class ArgTest:
    """What one positional argument of a repeat check must be, as codes: the per-argument
    form of ``RepeatCheckCode.test`` for checks written in another language
    (``runtime/native_fused.c`` holds the same numbers)."""

    TENSOR = 0  # a tensor; its alignment is not keyed
    TENSOR_ALIGNED = 1  # a tensor at a 16-byte-aligned address
    TENSOR_UNALIGNED = 2  # a tensor at an address that is not
    INT_ONE = 3  # an int (exactly) equal to 1
    INT_16 = 4  # an int divisible by 16
    INT_OTHER = 5  # an int neither 1 nor divisible by 16
    FLOAT = 6  # a float (exactly)
    NONE = 7
    HOLE = 8  # the runtime's hole marker
    CONSTEXPR = 9  # constexpr_key(arg) equals the sample's


_INT_TESTS = {"i1": ArgTest.INT_ONE, "i16": ArgTest.INT_16, "i": ArgTest.INT_OTHER}


@dataclass(frozen=True)
class ArgCheck:
    """One argument's test: ``test`` an ``ArgTest`` code; for ints ``low``, the lowest value
    allowed (0 where the sample was not negative: the key sees the sign), the highest being
    2**31 - 1; for a constexpr ``expected``, the sample's ``constexpr_key``."""

    test: int
    low: int = 0
    expected: Any = None


@dataclass(frozen=True)
class RepeatCheckCode:
    """The source of a repeat check (``compile_repeat_check``): ``arity`` positional
    arguments are unpacked into ``a0``, ``a1``, ...; ``layout`` tests the tensors among them
    (class, dtype, device, shape, strides); only then may ``pointers`` run, statements that
    read each tensor ``a<i>``'s address into ``p<i>``; then ``test``, over both. The call has
    the sample's call key exactly when all three pass. Names not defined by the generator
    come from ``env``."""

    arity: int
    tensor_positions: tuple[int, ...]
    reads_pointers: bool  # the test compares alignments: ``pointers`` read them
    test: str
    env: Mapping[str, Any]
    # The same test per argument, in structured form (the code above is its Python form).
    arg_checks: tuple[ArgCheck, ...] = ()
    # True for a call whose keyword arguments are not the sample's (``kwargs``): "kwargs"
    # where the sample had none; else equal names, classes and values (see repeat_check_code).
    kwargs_mismatch: str = "kwargs"
    kwargs_sample: Mapping[str, Any] | None = None  # the same test's data: the sample's

    @property
    def names(self) -> str:
        """The unpacking target: ``a0, a1, a2,``."""
        return "".join(f"a{i}, " for i in range(self.arity)).rstrip()

    @property
    def layout(self) -> str:
        return f"check({', '.join(f'a{i}' for i in self.tensor_positions)})"

    @property
    def pointers(self) -> tuple[str, ...]:
        if not self.reads_pointers:
            return ()
        return tuple(f"p{i} = a{i}.data_ptr()" for i in self.tensor_positions)


def repeat_check_code(
    sample_args: Sequence[Any],
    constexpr_positions: frozenset[int],
    hole: object,
    with_align: bool,
    layout_check: Callable[[Sequence[Any]], Callable[..., bool] | None],
    sample_kwargs: Mapping[str, Any] | None = None,
) -> RepeatCheckCode | None:
    """The code of :func:`make_repeat_check` (same arguments), or None where it has none.

    ``sample_kwargs``, the call's keyword arguments computed per call from its arguments
    (``BLOCK=triton.next_power_of_2(n)``): a call passes only with the same names and
    values of the same classes (ints, floats, strings, bools, None). Equal values give the
    call key the sample had, whether the kernel takes them as constexprs (the key holds the
    value) or not (the key holds less); any other value is a miss of this check, and the
    call key decides."""
    env: dict[str, Any] = {"hole": hole, "constexpr_key": constexpr_key}
    kwargs_mismatch = "kwargs"
    if sample_kwargs:
        mismatch = _kwargs_mismatch(sample_kwargs, env)
        if mismatch is None:
            return None
        kwargs_mismatch = mismatch
    tests: list[str] = []
    arg_checks: list[ArgCheck] = []
    tensors: list[Any] = []
    positions: list[int] = []
    aligned: list[str] = []
    small: list[str] = []  # non-negative 32-bit ints
    div16: list[str] = []  # ... of them divisible by 16
    for i, value in enumerate(sample_args):
        var = f"a{i}"
        cls = value.__class__
        if i in constexpr_positions:
            env[f"E_{var}"] = constexpr_key(value)
            tests.append(f"constexpr_key({var}) == E_{var}")
            arg_checks.append(ArgCheck(ArgTest.CONSTEXPR, expected=env[f"E_{var}"]))
        elif value is hole:
            tests.append(f"{var} is hole")
            arg_checks.append(ArgCheck(ArgTest.HOLE))
        elif is_tensor(value):
            tensors.append(value)
            positions.append(i)
            if not with_align:
                arg_checks.append(ArgCheck(ArgTest.TENSOR))
            elif value.data_ptr() % 16 == 0:
                aligned.append(f"p{i}")
                arg_checks.append(ArgCheck(ArgTest.TENSOR_ALIGNED))
            else:
                tests.append(f"p{i} % 16 != 0")
                arg_checks.append(ArgCheck(ArgTest.TENSOR_UNALIGNED))
        elif cls is int and 0 <= value <= I32_MAX:  # sizes and strides: tested together
            tests.append(f"{var}.__class__ is int")
            small.append(var)
            int_cls = small_int_class(value)
            if int_cls == "i16":
                div16.append(var)
            else:
                tests.append(small_int_class_test_code(var, int_cls))
            arg_checks.append(ArgCheck(_INT_TESTS[int_cls]))
        elif cls is int and I32_MIN <= value <= I32_MAX:
            tests.append(small_int_guard_code(var))
            int_cls = small_int_class(value)
            tests.append(small_int_class_test_code(var, int_cls))
            arg_checks.append(ArgCheck(_INT_TESTS[int_cls], low=I32_MIN))
        elif cls is float:
            tests.append(f"{var}.__class__ is float")
            arg_checks.append(ArgCheck(ArgTest.FLOAT))
        elif value is None:
            tests.append(f"{var} is None")
            arg_checks.append(ArgCheck(ArgTest.NONE))
        else:
            return None
    if not tensors:
        return None  # nothing slow to skip: the generated key function is as fast
    check = layout_check(tensors)
    if check is None:
        return None
    env["check"] = check
    if aligned:  # one test for all: the OR of 16-byte-aligned addresses is aligned
        tests.insert(0, f"({' | '.join(aligned)}) % 16 == 0")
    # After every class test (| needs ints): the OR of ints is in [0, 2**31) exactly when
    # each is (a negative one makes it negative: rejected, the key decides such a call),
    # and divisible by 16 exactly when each is.
    if small:
        tests.append(f"0 <= ({' | '.join(small)}) <= {I32_MAX}")
    if div16:
        tests.append(f"({' | '.join(div16)}) % 16 == 0")
    return RepeatCheckCode(
        arity=len(sample_args),
        tensor_positions=tuple(positions),
        reads_pointers=with_align,
        test=" and ".join(tests) or "True",
        env=env,
        arg_checks=tuple(arg_checks),
        kwargs_mismatch=kwargs_mismatch,
        kwargs_sample=dict(sample_kwargs) if sample_kwargs else None,
    )


_KWARG_CLASSES = (int, float, str, bool)
_MISSING = object()


def _kwargs_mismatch(sample: Mapping[str, Any], env: dict[str, Any]) -> str | None:
    """The test, true for keyword arguments unlike ``sample``'s (a float zero of the other
    sign included: the fused launch passes the sample's); None where a value is of a class
    this check does not compare (a tensor, a tuple: the call key decides)."""
    tests = [f"len(kwargs) != {len(sample)}"]
    env["MISSING"] = _MISSING
    for i, (name, value) in enumerate(sample.items()):
        if value is None:
            tests.append(f"kwargs.get({name!r}, MISSING) is not None")
            continue
        if value.__class__ not in _KWARG_CLASSES:
            return None
        env[f"KC{i}"], env[f"KV{i}"] = value.__class__, value
        get = f"kwargs.get({name!r}, MISSING)"
        tests.append(f"{get}.__class__ is not KC{i} or {get} != KV{i}")
        if value.__class__ is float and value == 0.0:  # -0.0 == 0.0: the sign tells them
            env["copysign"] = math.copysign
            tests[-1] += f" or copysign(1.0, {get}) != {math.copysign(1.0, value)!r}"
    return " or ".join(tests)


def make_repeat_check(
    sample_args: Sequence[Any],
    constexpr_positions: frozenset[int],
    hole: object,
    with_align: bool,
    layout_check: Callable[[Sequence[Any]], Callable[..., bool] | None],
) -> Callable[[Sequence[Any], Mapping[str, Any]], bool] | None:
    """A check that a call has the call key ``sample_args`` had, without building the key.

    For the hot path's common case, a serving loop calling one site with the same layout
    every step: instead of reading each tensor's dtype, shape and stride from Python (a
    binding call each), ``layout_check(tensors)`` checks them all in one C call (the
    backend's, which may reject more than the key would, never less); alignment and int
    classes are compared to the sample's. True means exactly that the call key
    (``with_shape``, no keyword arguments) equals the sample's. None where the layout has
    an argument this check does not cover (keyword arguments, a user ``key=``, bools,
    tuples, ints beyond 32 bits, ...) or the backend has no layout check.
    """
    code = repeat_check_code(sample_args, constexpr_positions, hole, with_align, layout_check)
    return None if code is None else compile_repeat_check(code)


def compile_repeat_check(
    code: RepeatCheckCode,
) -> Callable[[Sequence[Any], Mapping[str, Any]], bool]:
    """``repeat_check(args, kwargs)`` from its code."""
    pointers = "".join(f"    {line}\n" for line in code.pointers)
    body = (
        "def repeat_check(args, kwargs):\n"
        f"    if len(args) != {code.arity} or {code.kwargs_mismatch}:\n"
        "        return False\n"
        f"    {code.names} = args\n"
        f"    if not {code.layout}:\n"
        "        return False\n"
        f"{pointers}"
        f"    return {code.test}\n"
    )
    env = dict(code.env)
    exec(compiled(body, "<tunedsl repeat check>"), env)
    return env["repeat_check"]  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=512)
def compiled(body: str, filename: str) -> types.CodeType:
    """``compile(body, filename, "exec")``, once per text: the generated code of a layout
    names its values (``env``), so every key of one layout (each new size a key) has the
    same text, and its first hit costs a function made from the code, not a compile."""
    return compile(body, filename, "exec")
