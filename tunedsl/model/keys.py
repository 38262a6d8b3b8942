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

import contextlib
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.model.canonical import canonical_json as canonical_json
from tunedsl.model.jit_digest import function_digest
from tunedsl.model.key_json import DictItems
from tunedsl.model.key_json import json_safe as json_safe

# Per-class answer to "is this a tensor?", so the hot path never repeats hasattr checks.
_TENSOR_CLASSES: dict[type, bool] = {}
# stride tuple -> pattern string. Bounded: a process that meets a new row length on each call
# (a serving loop) meets a new stride tuple on each.
_PATTERNS: dict[tuple[int, ...], str] = {}
_MAX_PATTERNS = 1024
# dtype -> its name in readable keys (a handful a process).
_DTYPE_NAMES: dict[Any, str] = {}

#: The 32-bit range of Triton's int specialization (wider ints are keyed "L" or "U").
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


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
        if len(_PATTERNS) >= _MAX_PATTERNS:
            _PATTERNS.clear()
        _PATTERNS[strides] = pattern
    return pattern


def int_class(x: int) -> str:
    """Triton's specialization of an int argument: ``i1`` (==1), ``i16`` (%16==0) or ``i``;
    then ``L`` when it does not fit 32 bits and ``U`` when it needs an unsigned 64-bit."""
    width = "" if I32_MIN <= x <= I32_MAX else ("L" if x < 2**63 else "U")
    if x == 1:
        return "i1" + width
    if x % 16 == 0:
        return "i16" + width
    return "i" + width


def small_int_class(x: int) -> str:
    # The hot path's version: one comparison chain for the common 32-bit case.
    if I32_MIN <= x <= I32_MAX:
        return "i1" if x == 1 else "i16" if x % 16 == 0 else "i"
    return int_class(x)


def small_int_guard_code(var: str) -> str:
    # Generated code's test that ``var`` is an int of the 32-bit case small_int_class keys.
    return f"{var}.__class__ is int and {I32_MIN} <= {var} <= {I32_MAX}"


def small_int_class_test_code(var: str, int_cls: str) -> str:
    # Generated code's test that a 32-bit ``var`` has small_int_class ``int_cls`` (1 is
    # not divisible by 16, so each class is one or two comparisons).
    return {"i1": f"{var} == 1", "i16": f"{var} % 16 == 0"}.get(
        int_cls, f"{var} != 1 and {var} % 16 != 0"
    )


def small_int_class_code(var: str) -> str:
    # small_int_class's 32-bit branch as an expression (the key and repeat-check generators).
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
    if isinstance(x, tuple):
        # Triton specializes a tuple argument element by element (a tensor's dtype, an
        # int's class), so the key looks inside it too.
        return ("tuple", cls.__qualname__, *(arg_key(v, with_shape, with_align) for v in x))
    if is_tensor_descriptor(x):
        return descriptor_key(x, with_shape)
    if is_triton_constexpr(x):  # compiled into the kernel, whatever the parameter
        return constexpr_key(x.value)
    if isinstance(x, int):  # an IntEnum member: Triton specializes it as the int it is
        return int_class(x)
    return ("class", cls.__module__, cls.__qualname__)


def is_triton_constexpr(x: Any) -> bool:
    """A ``tl.constexpr(...)`` object (told by its class, so this module needs no Triton)."""
    cls = x.__class__
    return cls.__qualname__ == "constexpr" and cls.__module__.startswith("triton.")


def is_triton_dtype(x: Any) -> bool:
    """``tl.float16`` and the other ``triton.language`` dtypes (told by class, likewise)."""
    return any(
        c.__qualname__ == "dtype" and c.__module__.startswith("triton.")
        for c in x.__class__.__mro__
    )


def is_tensor_descriptor(x: Any) -> bool:
    """A host-side tensor descriptor (``triton.tools.tensor_descriptor.TensorDescriptor``,
    or one of its kind): a tensor ``base`` seen through ``shape``/``strides`` in blocks."""
    return hasattr(x, "block_shape") and is_tensor(getattr(x, "base", None))


def descriptor_key(x: Any, with_shape: bool) -> tuple[Any, ...]:
    # Triton compiles the block shape, dtype and options into the kernel; the shape and
    # strides it is given at run time are keyed as a tensor's are.
    extra = tuple((k, repr(v)) for k, v in _descriptor_options(x))
    shape = tuple(x.shape) if with_shape else None
    return ("desc", x.base.dtype, shape, tuple(x.strides), tuple(x.block_shape), extra)


def _descriptor_options(x: Any) -> list[tuple[str, Any]]:
    # The fields besides those descriptor_key reads itself (padding, layout, ...).
    fields = getattr(x, "__dict__", {})
    return [(k, v) for k, v in sorted(fields.items()) if k not in _DESCRIPTOR_FIELDS]


_DESCRIPTOR_FIELDS = frozenset({"base", "shape", "strides", "block_shape"})


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
                append(small_int_class(a))
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
            guards.append(small_int_guard_code(var))
            return small_int_class_code(var)
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


def hashable_user_key(value: Any) -> Any:
    """A ``key=`` as looked up and stored: lists, str-keyed dicts as tuples (of pairs), other
    dicts as ``DictItems``, sets as frozensets; ``1.0``, ``True`` as ``1``; NaN as one NaN."""
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            pairs = [(hashable_user_key(k), hashable_user_key(v)) for k, v in value.items()]
            return DictItems(sorted(pairs, key=lambda kv: canonical_json(json_safe(kv[0]))))
        value = sorted(value.items())
    if isinstance(value, list | tuple):
        return tuple(hashable_user_key(v) for v in value)
    if isinstance(value, set):
        return frozenset(hashable_user_key(v) for v in value)
    if is_numpy_scalar(value):  # np.int64(3) is the key 3, in memory and on disk
        value = value.item()
    if isinstance(value, float) and value != value:
        return _NAN  # equal to itself (one object): a NaN key= is found again in memory
    return int(value) if isinstance(value, bool | float) and value % 1 == 0 else value


_NAN = float("nan")


def is_numpy_scalar(value: Any) -> bool:
    """A numpy number (``np.int64(3)``, ``np.float32(0.5)``), told by its class, so this
    module needs no numpy."""
    return value.__class__.__module__ == "numpy" and getattr(value, "ndim", None) == 0


class KernelToken:
    """Prefix of the call keys of a site's second, third... kernel (the first has none)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<kernel {self.index}>"


# -- readable form ---------------------------------------------------------------------------


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def readable_constexpr(x: Any) -> Any:
    """A constexpr's JSON form; a Triton function (an epilogue) is its name and a hash of its
    source and of the Triton functions it calls (``model/jit_digest``), alike in every
    process (its repr: an address, or on a GPU a name only)."""
    try:
        fn = getattr(x, "fn", None)
    except Exception:  # a __getattr__ raising another error (an attribute-style dict)
        fn = None
    if inspect.isfunction(fn):
        return f"@jit {fn.__qualname__} {_source_digest(fn)}"
    if x.__class__ is float and x == 0.0:
        # -0.0 as 0.0: they are equal and hash alike, so the call key, and Triton's own cache
        # of compiled kernels, hold one of them for both; so does the record key.
        return 0.0
    return json_safe(x)


@functools.lru_cache(maxsize=256)
def _source_digest(fn: Any) -> str:
    return function_digest(fn, lambda v: is_triton_constexpr(v) or is_triton_dtype(v))


def readable_value(x: Any, constexpr: bool, with_shape: bool, with_align: bool = False) -> Any:
    """JSON description of one argument as the key sees it; ``with_align``: a tensor not
    16-byte aligned gets ``"aligned": false``, as the call key tells it apart."""
    if constexpr:
        return {"constexpr": readable_constexpr(x)}
    tensor = _TENSOR_CLASSES.get(x.__class__)  # is_tensor, inline: asked per argument a miss
    if tensor is None:
        tensor = is_tensor(x)
    if tensor:
        dtype = x.dtype
        try:
            name = _DTYPE_NAMES[dtype]
        except (KeyError, TypeError):  # new, or a tensor-like's unhashable dtype
            name = dtype_name(dtype)
            with contextlib.suppress(TypeError):
                _DTYPE_NAMES[dtype] = name
        out: dict[str, Any] = {"dtype": name}
        if with_shape:
            out["shape"] = list(x.shape)
        strides = tuple(x.stride())
        pattern = _PATTERNS.get(strides)
        out["stride"] = stride_pattern(strides) if pattern is None else pattern
        if with_align and x.data_ptr() % 16 != 0:
            out["aligned"] = False
        return out
    if x.__class__ is int:
        return int_class(x)
    if x.__class__ is float:
        return "f"
    if x.__class__ is bool:
        return "b"
    if x is None:
        return None
    if isinstance(x, tuple):
        return [readable_value(v, False, with_shape, with_align) for v in x]
    if is_tensor_descriptor(x):
        desc = readable_value(x.base, False, False)
        if with_shape:
            desc["shape"] = list(x.shape)
        desc["stride"] = stride_pattern(tuple(x.strides))
        desc["block"] = list(x.block_shape)
        desc.update((k, json_safe(v)) for k, v in _descriptor_options(x))
        return {"descriptor": desc}
    if is_triton_constexpr(x):
        return {"constexpr": readable_constexpr(x.value)}
    if isinstance(x, int):  # an IntEnum member: keyed as its int, as Triton specializes it
        return int_class(x)
    return x.__class__.__name__


def readable_key(
    arg_names: Sequence[str],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    user_key: Any,
    constexpr_names: frozenset[str],
    hole: object,
    defaults: Mapping[str, Any] | None = None,
    with_align: bool = False,
) -> dict[str, Any]:
    """The key as JSON: arguments by parameter name, sorted, plus the user's key. A constexpr
    passed at its default (of its type: 2, 2.0, True compile apart) is left out, as unpassed."""
    with_shape, named = user_key is None, {}
    passed = [(arg_names[i] if i < len(arg_names) else f"arg{i}", a) for i, a in enumerate(args)]
    for name, a in [*passed, *kwargs.items()]:
        if defaults and name in constexpr_names and is_default(a, name, defaults):
            continue
        named[name] = (
            "$" if a is hole else readable_value(a, name in constexpr_names, with_shape, with_align)
        )
    user = {} if with_shape else {"user_key": json_safe(user_key)}
    return {"args": dict(sorted(named.items())), **user}


def is_default(value: Any, name: str, defaults: Mapping[str, Any]) -> bool:
    with contextlib.suppress(Exception):  # an __eq__ that raises, or returns an array
        return name in defaults and type(value) is type(d := defaults[name]) and bool(value == d)
    return False
