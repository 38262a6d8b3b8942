"""A key read by code made for one argument layout: the miss a rule decides, without the walk.

A miss that a rule decides needs three forms of the call's key: the readable record key
(``keys.readable_key``), its canonical JSON text (what the record's digest hashes) and the
rule's features (``rule_features.key_features``: log2 of each size). Calls of one argument
layout (the same classes, dtypes, stride patterns, int classes, alignment and constexpr
values) differ only in their tensors' shapes, so ``make_reader`` writes one function for a
layout that tests the layout and reads the shapes into all three at once; it returns None for
a call of any other layout. A reader is made only where it gives exactly what the general
functions give for the sample call, which is checked when it is made. Pure Python, no torch
or triton: the model layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.model import keys
from tunedsl.model.rule_features import key_features

#: A call's readable key, its canonical JSON text and its rule features; None: another layout.
Reader = Callable[
    [Sequence[Any], Mapping[str, Any]], tuple[dict[str, Any], str, dict[str, float]] | None
]

# Stand-ins for the sizes while the text's fixed parts are made (no real key holds them).
_SENTINEL = 7_340_032_917_000
# Constexpr values a reader compares and writes as literals (their repr is Python and JSON).
_LITERAL = (int, float, bool, str, type(None))
_MISSING = object()


def make_reader(
    arg_names: Sequence[str],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    constexpr_names: frozenset[str],
    defaults: Mapping[str, Any] | None,
    hole: object,
    with_align: bool,
) -> Reader | None:
    """A reader for the layout of this call (a key without ``key=``), or None where the
    layout holds something it does not read (a tuple, a descriptor, an object)."""
    code = _Code(hole, with_align)
    for i, value in enumerate(args):
        name = arg_names[i] if i < len(arg_names) else f"arg{i}"
        code.fetch.append(f"a{i} = args[{i}]")
        if not code.argument(name, f"a{i}", value, name in constexpr_names, defaults):
            return None
    for j, name in enumerate(sorted(kwargs)):
        code.fetch.append(f"k{j} = kwargs.get({name!r}, MISSING)")
        if not code.argument(name, f"k{j}", kwargs[name], name in constexpr_names, defaults):
            return None
    sample = keys.readable_key(
        arg_names, args, kwargs, None, constexpr_names, hole, defaults, with_align
    )
    reader = code.build(len(args), len(kwargs), sample)
    if reader is None:
        return None
    # Exactly the general functions' answer for the sample, or no reader at all.
    got = reader(args, kwargs)
    family, features = key_features(sample)
    if (
        got is None
        or got[0] != sample
        or got[1] != keys.canonical_json(sample)
        or list(got[2].items()) != list(features.items())
        or key_features(got[0])[0] != family
    ):
        return None
    return reader


class _Code:
    """The generated function's parts, argument by argument."""

    def __init__(self, hole: object, with_align: bool) -> None:
        self.env: dict[str, Any] = {"MISSING": _MISSING, "hole": hole, "log2": math.log2}
        self.with_align = with_align
        self.fetch: list[str] = []  # one line per argument: its value in a local
        self.guards: list[str] = []  # the layout's tests, in order
        self.tensor_guards: list[str] = []  # tensors' strides and alignment (after guards)
        self.tensor_vars: list[str] = []
        self.shape_lines: list[str] = []  # the sizes read (after every test)
        self.named: dict[str, str] = {}  # argument name -> its readable form's expression
        self.template: dict[str, Any] = {}  # the readable key, with sentinels for sizes
        self.sizes: dict[str, str] = {}  # a shape's feature path -> the local holding it
        self.size_vars: list[str] = []  # in the order of their sentinels

    def constant(self, name: str, value: Any) -> bool:
        self.named[name] = repr(value)
        self.template[name] = value
        return True

    def argument(
        self,
        name: str,
        var: str,
        value: Any,
        constexpr: bool,
        defaults: Mapping[str, Any] | None,
    ) -> bool:
        cls = value.__class__
        if constexpr:
            if cls not in _LITERAL or (cls is float and not math.isfinite(value)):
                return False
            self.env[f"C_{var}"] = cls
            self.guards.append(f"{var}.__class__ is C_{var} and {var} == {value!r}")
            if defaults and keys.is_default(value, name, defaults):
                return True  # left out of the key, as unpassed
            return self.constant(name, {"constexpr": keys.readable_constexpr(value)})
        if value is self.env["hole"]:
            self.guards.append(f"{var} is hole")
            return self.constant(name, "$")
        if keys.is_tensor(value):
            return self.tensor(name, var, value)
        if cls is int and keys.I32_MIN <= value <= keys.I32_MAX:
            int_cls = keys.small_int_class(value)
            self.guards.append(keys.small_int_guard_code(var))
            self.guards.append(keys.small_int_class_test_code(var, int_cls))
            return self.constant(name, int_cls)
        if cls is float or cls is bool:
            self.guards.append(f"{var}.__class__ is {cls.__name__}")
            return self.constant(name, "f" if cls is float else "b")
        if value is None:
            self.guards.append(f"{var} is None")
            return self.constant(name, None)
        return False

    def tensor(self, name: str, var: str, value: Any) -> bool:
        strides = tuple(value.stride())
        ndim = len(value.shape)
        if len(strides) != ndim or value.dtype.__class__.__hash__ is None:
            return False
        self.env[f"T_{var}"], self.env[f"D_{var}"] = value.__class__, value.dtype
        self.guards.append(f"{var}.__class__ is T_{var} and {var}.dtype is D_{var}")
        self.tensor_vars.append(var)
        pattern = keys.stride_pattern(strides)
        tests = [f"len(st_{var}) == {ndim}"]
        for d, p in enumerate(pattern):
            tests.append(
                {"0": f"st_{var}[{d}] == 0", "1": f"st_{var}[{d}] == 1"}.get(
                    p, f"st_{var}[{d}] != 0 and st_{var}[{d}] != 1"
                )
            )
        aligned = value.data_ptr() % 16 == 0 if self.with_align else True
        if self.with_align:
            tests.append(f"({var}.data_ptr() % 16 == 0) is {aligned}")
        self.tensor_guards.append(" and ".join(tests))
        self.shape_lines.append(f"sh_{var} = {var}.shape")
        self.shape_lines.append(f"if len(sh_{var}) != {ndim}: return None")
        if ndim:
            self.shape_lines.append(f"{''.join(f'{var}_{d}, ' for d in range(ndim))}= sh_{var}")
        dims = [f"{var}_{d}" for d in range(ndim)]
        out = {"dtype": keys.readable_value(value, False, False)["dtype"], "shape": None}
        out["stride"] = pattern
        if not aligned:
            out["aligned"] = False
        sentinels = []
        for d, dim in enumerate(dims):
            self.sizes[f"args.{name}.shape[{d}]"] = dim
            sentinels.append(_SENTINEL + len(self.size_vars))
            self.size_vars.append(dim)
        self.template[name] = {**out, "shape": sentinels}
        parts = [f"{k!r}: {('[' + ', '.join(dims) + ']') if k == 'shape' else repr(v)}"
                 for k, v in out.items()]  # fmt: skip
        self.named[name] = "{" + ", ".join(parts) + "}"
        return True

    def build(self, n_args: int, n_kwargs: int, sample: dict[str, Any]) -> Reader | None:
        if list(sample) != ["args"] or sorted(self.template) != list(sample["args"]):
            return None
        text = keys.canonical_json({"args": dict(sorted(self.template.items()))})
        # The text's fixed parts, between the sizes (in the text's order: sorted names).
        order = []
        for k in range(len(self.size_vars)):
            at = text.find(str(_SENTINEL + k))
            if at < 0 or text.count(str(_SENTINEL + k)) != 1:
                return None
            order.append((at, k))
        fmt, last = [], 0
        for at, k in sorted(order):
            fmt.append(text[last:at].replace("%", "%%") + "%d")
            last = at + len(str(_SENTINEL + k))
        fmt.append(text[last:].replace("%", "%%"))
        self.env["TEXT"] = "".join(fmt)
        text_vars = [self.size_vars[k] for _, k in sorted(order)]
        _, features = key_features(sample)
        feats = []
        for path, x in features.items():
            dim = self.sizes.get(path)
            if dim is not None:
                feats.append(f"{path!r}: (log2({dim}) if {dim} >= 1 else 0.0)")
            else:  # an int's class, a constexpr's size: the layout's tests fix them
                feats.append(f"{path!r}: {x!r}")
        named = ", ".join(f"{n!r}: {self.named[n]}" for n in sorted(self.named))
        guard = " and ".join(f"({g})" for g in self.guards) or "True"
        tensor_guard = " and ".join(f"({g})" for g in self.tensor_guards) or "True"
        lines = [
            "def read(args, kwargs):",
            f"    if len(args) != {n_args} or len(kwargs) != {n_kwargs}:",
            "        return None",
            *(f"    {line}" for line in self.fetch),
            f"    if not ({guard}):",
            "        return None",
            *(f"    st_{v} = {v}.stride()" for v in self.tensor_vars),
            f"    if not ({tensor_guard}):",
            "        return None",
            *(f"    {line}" for line in self.shape_lines),
            f"    return ({{'args': {{{named}}}}}, TEXT % ({''.join(v + ', ' for v in text_vars)}),"
            f" {{{', '.join(feats)}}})",
        ]
        exec(compile("\n".join(lines) + "\n", "<tunedsl key reader>", "exec"), self.env)
        return self.env["read"]  # type: ignore[no-any-return]
