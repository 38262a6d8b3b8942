"""The cache key: what separates one tuning decision from another.

Two forms of the same key:

- the **call key**, a plain tuple built on every launch and looked up in the site's table.
  It holds only what can change from call to call: per argument, a tensor's dtype, shape
  and stride pattern (or only dtype and pattern when the user gave ``key=``, whose value is
  added instead), an int's Triton specialization class, a constexpr's value. Process
  constants (device, toolchain, environment, static hints) stay out of it.
- the **record key**, a readable JSON object with everything in the call key plus the
  process constants, and its sha256 **digest**, which names the record on disk. Keyword
  arguments are sorted by name here, so keyword order never changes a record.

Stride pattern: per dimension ``0`` (broadcast, stride 0), ``1`` (unit stride) or ``s``
(any other stride); ``(4096, 1)`` is ``"s1"``. Ints are keyed by the class Triton itself
specializes on: equal to 1, divisible by 16, or neither, and whether they fit 32 bits.
Floats and bools are keyed by type only, so a changing scale factor never re-tunes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Per-class answer to "is this a tensor?", so the hot path never repeats hasattr checks.
_TENSOR_CLASSES: dict[type, bool] = {}
# stride tuple -> pattern string; a handful of distinct strides ever appear in a process.
_PATTERNS: dict[tuple[int, ...], str] = {}

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def is_tensor(x: object) -> bool:
    cls = x.__class__
    known = _TENSOR_CLASSES.get(cls)
    if known is None:
        known = all(hasattr(x, a) for a in ("data_ptr", "dtype", "stride", "shape"))
        _TENSOR_CLASSES[cls] = known
    return known


def stride_pattern(strides: tuple[int, ...]) -> str:
    pattern = _PATTERNS.get(strides)
    if pattern is None:
        pattern = "".join("0" if s == 0 else "1" if s == 1 else "s" for s in strides)
        _PATTERNS[strides] = pattern
    return pattern


def int_class(x: int) -> str:
    """Triton's specialization of an int argument: ``i1`` (==1), ``i16`` (%16==0) or ``i``;
    then ``L`` when it does not fit 32 bits and ``U`` when it needs an unsigned 64-bit."""
    width = "" if _I32_MIN <= x <= _I32_MAX else ("L" if x < 2**63 else "U")
    if x == 1:
        return "i1" + width
    if x % 16 == 0:
        return "i16" + width
    return "i" + width


def _small_int_class(x: int) -> str:
    # The hot path's version: one comparison chain for the common 32-bit case.
    if _I32_MIN <= x <= _I32_MAX:
        return "i1" if x == 1 else "i16" if x % 16 == 0 else "i"
    return int_class(x)


def _small_int_guard_code(var: str) -> str:
    # Generated code's test that ``var`` is an int of the 32-bit case _small_int_class keys.
    return f"{var}.__class__ is int and {_I32_MIN} <= {var} <= {_I32_MAX}"


def _small_int_class_test_code(var: str, int_cls: str) -> str:
    # Generated code's test that a 32-bit ``var`` has _small_int_class ``int_cls`` (1 is
    # not divisible by 16, so each class is one or two comparisons).
    return {"i1": f"{var} == 1", "i16": f"{var} % 16 == 0"}.get(
        int_cls, f"{var} != 1 and {var} % 16 != 0"
    )


def _small_int_class_code(var: str) -> str:
    # _small_int_class's 32-bit branch as an expression (the key and repeat-check generators).
    return f"('i1' if {var} == 1 else 'i16' if {var} % 16 == 0 else 'i')"


def arg_key(x: Any, with_shape: bool, with_align: bool = False) -> Any:
    """The call-key part for one non-constexpr argument (any class; the slow, general path)."""
    cls = x.__class__
    if cls is int:
        return int_class(x)
    if cls is float:
        return "f"
    if cls is bool:
        return "b"
    if x is None:
        return None
    if is_tensor(x):
        # The raw stride tuple (not its pattern): cheaper here, and two strides with one
        # pattern still share one decision through the record digest.
        return tensor_key(x, with_shape, with_align)
    return ("class", cls.__module__, cls.__qualname__)


def tensor_key(x: Any, with_shape: bool, with_align: bool) -> tuple[Any, ...]:
    key = (x.dtype, x.shape, x.stride()) if with_shape else (x.dtype, x.stride())
    if with_align:
        key += (x.data_ptr() % 16 == 0,)
    return key


def constexpr_key(x: Any) -> Any:
    """A constexpr argument is keyed by type and value (it changes the compiled code);
    ``2``, ``2.0`` and ``True`` compare equal but compile differently, as Triton knows."""
    try:
        hash(x)
    except TypeError:
        return ("unhashable", repr(x))
    return ("c", x.__class__, x)


def prune_value(x: Any) -> Any:
    """The key part of an argument that ``prune`` reads: its type and value (a tensor's
    dtype and shape, which is all prune can see of it without reading its data)."""
    if is_tensor(x):
        return ("t", x.dtype, tuple(x.shape))
    try:
        hash(x)
    except TypeError:
        return ("unhashable", x.__class__, repr(x))
    return (x.__class__, x)


def make_prune_part(
    arg_names: Sequence[str], read: frozenset[str]
) -> Callable[[Sequence[Any], Mapping[str, Any]], tuple[Any, ...]]:
    """The call-key part of a site whose ``prune`` reads ``read``: those arguments' values."""
    wanted = tuple(
        (name, arg_names.index(name) if name in arg_names else -1) for name in sorted(read)
    )

    def part(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
        out = []
        for name, i in wanted:
            if 0 <= i < len(args):
                out.append(prune_value(args[i]))
            elif name in kwargs:
                out.append(prune_value(kwargs[name]))
            else:
                out.append(None)
        return tuple(out)

    return part


def readable_prune(
    arg_names: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any], read: frozenset[str]
) -> dict[str, Any]:
    """The record-key part for the arguments prune reads (by name, JSON)."""
    out: dict[str, Any] = {}
    for name in sorted(read):
        i = arg_names.index(name) if name in arg_names else -1
        if 0 <= i < len(args):
            x = args[i]
        elif name in kwargs:
            x = kwargs[name]
        else:
            continue
        if is_tensor(x):
            out[name] = {"dtype": dtype_name(x.dtype), "shape": list(x.shape)}
        else:
            out[name] = {"type": x.__class__.__name__, "value": json_safe(x)}
    return out


def make_call_key_fn(
    constexpr_positions: frozenset[int],
    constexpr_names: frozenset[str],
    with_shape: bool,
    hole: object,
    with_align: bool = False,
) -> Callable[[Sequence[Any], Mapping[str, Any], Any], tuple[Any, ...]]:
    """Build the per-call key function of one (site, kernel).

    ``hole`` marks positional arguments that depend on the configuration: they are not part
    of the key (the configuration determines them). ``with_align`` adds each tensor's
    16-byte alignment, which Triton specializes on: needed when launches bypass Triton's
    dispatcher. Written for speed: the common classes are tested inline.
    """
    tensor_classes = _TENSOR_CLASSES

    def call_key(args: Sequence[Any], kwargs: Mapping[str, Any], user_key: Any) -> tuple:
        parts: list[Any] = []
        append = parts.append
        extend = parts.extend
        i = -1
        for a in args:
            i += 1
            cls = a.__class__
            if i in constexpr_positions:
                append(constexpr_key(a))
            elif tensor_classes.get(cls):
                # Flattened (no inner tuple to build and hash): a dtype object only ever
                # starts a tensor's run of items, so the layout stays unambiguous.
                if not with_shape:
                    extend(tensor_key(a, with_shape, with_align))
                elif with_align:
                    extend((a.dtype, a.shape, a.stride(), a.data_ptr() % 16 == 0))
                else:
                    extend((a.dtype, a.shape, a.stride()))
            elif cls is int:
                append(_small_int_class(a))
            elif a is hole:
                append(hole)
            elif is_tensor(a):  # first sight of this tensor class
                extend(tensor_key(a, with_shape, with_align))
            else:
                append(arg_key(a, with_shape, with_align))
        if kwargs:
            for name in sorted(kwargs):  # keyword order never changes the key
                a = kwargs[name]
                append(name)
                if name in constexpr_names:
                    append(constexpr_key(a))
                else:
                    append(arg_key(a, with_shape, with_align))
        if not with_shape:
            append(user_key)
        return tuple(parts)

    return call_key


def specialize_call_key_fn(
    generic: Callable[[Sequence[Any], Mapping[str, Any], Any], tuple[Any, ...]],
    sample_args: Sequence[Any],
    sample_kwargs: Mapping[str, Any],
    constexpr_positions: frozenset[int],
    constexpr_names: frozenset[str],
    with_shape: bool,
    hole: object,
    with_align: bool = False,
) -> Callable[[Sequence[Any], Mapping[str, Any], Any], tuple[Any, ...]]:
    """A key function generated for the argument layout of ``sample_args``/``sample_kwargs``.

    Straight-line code with one class check per argument: about as fast as writing the
    tuple by hand. It returns exactly what ``generic`` returns for the same call (so both
    may serve one table); any call with another layout is handed to ``generic``.
    """
    env: dict[str, Any] = {
        "generic": generic,
        "hole": hole,
        "int_class": int_class,
        "arg_key": arg_key,
        "tensor_key": tensor_key,
        "constexpr_key": constexpr_key,
    }
    guards: list[str] = []
    items: list[str] = []

    def value_code(var: str, value: Any, constexpr: bool, kw: bool) -> str | None:
        cls = value.__class__
        if constexpr:
            return f"constexpr_key({var})"
        if is_tensor(value):
            env[f"T_{var}"] = cls
            guards.append(f"{var}.__class__ is T_{var}")
            if kw or not with_shape:
                return f"tensor_key({var}, {with_shape}, {with_align})" if kw else None
            align = f", {var}.data_ptr() % 16 == 0" if with_align else ""
            return f"{var}.dtype, {var}.shape, {var}.stride(){align}"
        if cls is int:
            guards.append(_small_int_guard_code(var))
            return _small_int_class_code(var)
        if cls is float:
            guards.append(f"{var}.__class__ is float")
            return "'f'"
        if value is hole:
            guards.append(f"{var} is hole")
            return "hole"
        return None

    names = [f"a{i}" for i in range(len(sample_args))]
    for i, value in enumerate(sample_args):
        code = value_code(names[i], value, i in constexpr_positions, kw=False)
        if code is None:
            return generic
        items.append(code)
    kw_names = sorted(sample_kwargs)
    kw_vars = [f"k{i}" for i in range(len(kw_names))]
    for var, name in zip(kw_vars, kw_names, strict=True):
        value = sample_kwargs[name]
        code = value_code(var, value, name in constexpr_names, kw=True)
        if code is None:
            return generic
        items.append(repr(name))
        items.append(code)
    if not with_shape:
        items.append("user_key")
    unpack = f"    {', '.join(names)}, = args\n" if names else ""
    kw_fetch = "".join(
        f"    {var} = kwargs[{name!r}]\n" for var, name in zip(kw_vars, kw_names, strict=True)
    )
    guard = " and ".join(guards) or "True"
    body = (
        "def call_key(args, kwargs, user_key):\n"
        f"    if len(args) != {len(names)} or len(kwargs) != {len(kw_names)}:\n"
        "        return generic(args, kwargs, user_key)\n"
        f"{unpack}"
        "    try:\n"
        + "".join("    " + line + "\n" for line in kw_fetch.splitlines())
        + "    except KeyError:\n"
        "        return generic(args, kwargs, user_key)\n"
        f"    if not ({guard}):\n"
        "        return generic(args, kwargs, user_key)\n"
        f"    return ({''.join(item + ', ' for item in items)})\n"
    )
    if not kw_names:
        body = body.replace(
            "    try:\n    except KeyError:\n        return generic(args, kwargs, user_key)\n", ""
        )
    exec(compile(body, "<tunedsl call key>", "exec"), env)
    return env["call_key"]  # type: ignore[no-any-return]


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
    """The source of a repeat check, for code generators to inline (``make_repeat_check``,
    the runtime's fused launch): ``arity`` positional arguments are unpacked into ``a0``,
    ``a1``, ...; ``layout`` tests the tensors among them (class, dtype, device, shape,
    strides); only then may ``pointers`` run, statements that read each tensor ``a<i>``'s
    address into ``p<i>``; then ``test``, over both. The call has the sample's call key
    exactly when all three pass. Names not defined by the generator come from ``env``."""

    arity: int
    tensor_positions: tuple[int, ...]
    reads_pointers: bool  # the test compares alignments: ``pointers`` read them
    test: str
    env: Mapping[str, Any]
    # The same test per argument, in structured form (the code above is its Python form).
    arg_checks: tuple[ArgCheck, ...] = ()

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
) -> RepeatCheckCode | None:
    """The code of :func:`make_repeat_check` (same arguments), or None where it has none."""
    env: dict[str, Any] = {"hole": hole, "constexpr_key": constexpr_key}
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
        elif cls is int and 0 <= value <= _I32_MAX:  # sizes and strides: tested together
            tests.append(f"{var}.__class__ is int")
            small.append(var)
            int_cls = _small_int_class(value)
            if int_cls == "i16":
                div16.append(var)
            else:
                tests.append(_small_int_class_test_code(var, int_cls))
            arg_checks.append(ArgCheck(_INT_TESTS[int_cls]))
        elif cls is int and _I32_MIN <= value <= _I32_MAX:
            tests.append(_small_int_guard_code(var))
            int_cls = _small_int_class(value)
            tests.append(_small_int_class_test_code(var, int_cls))
            arg_checks.append(ArgCheck(_INT_TESTS[int_cls], low=_I32_MIN))
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
        tests.append(f"0 <= ({' | '.join(small)}) <= {_I32_MAX}")
    if div16:
        tests.append(f"({' | '.join(div16)}) % 16 == 0")
    return RepeatCheckCode(
        arity=len(sample_args),
        tensor_positions=tuple(positions),
        reads_pointers=with_align,
        test=" and ".join(tests) or "True",
        env=env,
        arg_checks=tuple(arg_checks),
    )


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
    """``repeat_check(args, kwargs)`` from its code (false for any keyword argument)."""
    pointers = "".join(f"    {line}\n" for line in code.pointers)
    body = (
        "def repeat_check(args, kwargs):\n"
        f"    if kwargs or len(args) != {code.arity}:\n"
        "        return False\n"
        f"    {code.names} = args\n"
        f"    if not {code.layout}:\n"
        "        return False\n"
        f"{pointers}"
        f"    return {code.test}\n"
    )
    env = dict(code.env)
    exec(compile(body, "<tunedsl repeat check>", "exec"), env)
    return env["repeat_check"]  # type: ignore[no-any-return]


def hashable_user_key(value: Any) -> Any:
    """Lists and dicts in a user ``key=`` become tuples so the key can be looked up."""
    if isinstance(value, list | tuple):
        return tuple(hashable_user_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), hashable_user_key(v)) for k, v in value.items()))
    return value


# -- readable form ---------------------------------------------------------------------------


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def readable_value(x: Any, constexpr: bool, with_shape: bool) -> Any:
    """JSON description of one argument as the key sees it."""
    if constexpr:
        return {"constexpr": json_safe(x)}
    if is_tensor(x):
        out: dict[str, Any] = {"dtype": dtype_name(x.dtype)}
        if with_shape:
            out["shape"] = list(x.shape)
        out["stride"] = stride_pattern(tuple(x.stride()))
        return out
    if x.__class__ is int:
        return int_class(x)
    if x.__class__ is float:
        return "f"
    if x.__class__ is bool:
        return "b"
    if x is None:
        return None
    return x.__class__.__name__


def readable_key(
    arg_names: Sequence[str],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    user_key: Any,
    constexpr_names: frozenset[str],
    hole: object,
) -> dict[str, Any]:
    """The key as JSON: arguments by parameter name, sorted, plus the user's key."""
    with_shape = user_key is None
    named: dict[str, Any] = {}
    for i, a in enumerate(args):
        name = arg_names[i] if i < len(arg_names) else f"arg{i}"
        if a is hole:
            named[name] = "$"
            continue
        named[name] = readable_value(a, name in constexpr_names, with_shape)
    for name, a in kwargs.items():
        named[name] = readable_value(a, name in constexpr_names, with_shape)
    out: dict[str, Any] = {"args": dict(sorted(named.items()))}
    if not with_shape:
        out["user_key"] = json_safe(user_key)
    return out


def json_safe(value: Any) -> Any:
    """A JSON-able stand-in for ``value`` (tuples become lists, unknown objects their repr)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return (
            value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
        )
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    return repr(value)


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=repr)


def digest(site_id: str, record_key: Mapping[str, Any], context: Mapping[str, Any]) -> str:
    """sha256 naming a record: the site, the readable key and the process context."""
    text = canonical_json({"site": site_id, "key": record_key, "context": context})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
