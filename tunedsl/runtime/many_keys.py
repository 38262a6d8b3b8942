"""A site that has tuned many distinct keys in one process (runtime layer): one warning at
the user's line naming what differs between the keys it tuned, and the fix that fits.

Keys that differ in size (a tensor's shape without ``key=``, the ``key=`` value) are
bucketed by a coarser ``key=`` or decided by a rule; keys that differ in what Triton
compiles apart (a constexpr's value, a dtype, a stride pattern, 16-byte alignment, an int's
class, None or a tensor) stay apart whatever ``key=`` is: each is its own kernel, tuned once
per value, and decided without tuning only by tuning it ahead. Runs on a tuning miss only,
and compares the keys once, when the warning is due.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunedsl.model.canonical import canonical_json
from tunedsl.warn import warn_once

#: A site that has tuned this many distinct keys in one process says once how to stop it:
#: each new key costs a full tune (seconds on a GPU), most often in a loop over sizes.
MANY_TUNED_KEYS = 16
_tuned_keys: dict[str, dict[str, Any]] = {}  # site id -> readable key by digest (up to MANY)

_ABSENT = object()  # a part a key does not hold (a constexpr at its default, say)
_SHOWN = 3  # values shown of a part that differs


def note_tuned(site_id: str, digest: str, readable: Any, label: str, has_key: bool) -> None:
    """The site ``site_id`` (``label``: its place) tuned the key of ``digest`` (``readable``:
    its JSON form); at ``MANY_TUNED_KEYS`` distinct keys, one warning at the user's line
    with what differs and the fixes (a sweep, which tunes every key on purpose, is not told)."""
    from tunedsl.store.rules import rules_decide

    tuned = _tuned_keys.setdefault(site_id, {})
    if len(tuned) >= MANY_TUNED_KEYS or digest in tuned:
        return
    tuned[digest] = readable
    count = len(tuned)
    if count < MANY_TUNED_KEYS or not rules_decide():
        return
    warn_once(
        f"many-keys:{site_id}",
        f"{label}: this site has tuned {count} distinct keys in this process, each a full tune "
        f"(seconds on a GPU)" + advice(list(tuned.values()), has_key),
        UserWarning,
        stacklevel="user",
    )


def advice(keys: Sequence[Any], has_key: bool) -> str:
    """What differs between ``keys`` (readable keys) and how to tune fewer of them."""
    sizes, prune, compiled = differences(keys)
    parts = [*sizes, *prune, *compiled]
    if not parts:  # the arguments and key= agree: the digest's process part changed
        return (
            ": their arguments and key= agree, so they differ in the site's settings, space= "
            "or environment (Triton's variables, the device), each decided on its own"
        )
    out = [f"; they differ in {_joined(parts)}."]
    # Sizes differ, but so do the values prune= reads, on every key: a coarser key= (or
    # key= where there is none) cannot group any two of them.
    exact = bool(sizes and prune) and len(_distinct([_prune_part(k) for k in keys])) == len(keys)
    if sizes and not exact:
        bucket = (
            "make key= coarser, so that nearby sizes share a value"
            if has_key
            else "bucket the sizes with key=, so that nearby sizes share a decision"
        )
        out.append(
            f" The calls vary in size and every new size tunes again: to stop it, {bucket} "
            '(e.g. key=triton.next_power_of_2(n), docs/runtime.md "The cache key"), or sweep '
            "the sizes once and ship a rule that decides new ones without tuning "
            "(docs/shapes.md)."
        )
    if exact:
        out.append(
            " Each value prune= reads is a key of its own, whatever key= is, so a coarser key= "
            "cannot group these calls: make prune= read something coarse that key= holds "
            "(bucket = triton.next_power_of_2(n), key=bucket, prune= reading bucket), or "
            "nothing: let prune= decide from the configurations alone."
        )
    elif prune:
        out.append(
            " Each value prune= reads is a key of its own: let prune= decide from the "
            "configurations alone, or key= on what it reads."
        )
    if compiled:
        each = "of its values" if len(compiled) == 1 else "value of these"
        out.append(
            f" Each {each} is its own kernel "
            "(Triton compiles it apart, so it stays in the key whatever key= is) and is tuned "
            "once per value. To have the values you expect decided without tuning, tune them "
            "ahead: run them once under `tunedsl sweep` (or `tunedsl precompile --tune`) and "
            "ship its records, or a rule built from that sweep, which also decides sizes and int "
            "constexprs between the swept ones (docs/shapes.md)."
        )
    return "".join(out).rstrip(".")


def differences(keys: Sequence[Any]) -> tuple[list[str], list[str], list[str]]:
    """The parts in which ``keys`` differ, each named: sizes (a shape, the ``key=`` value),
    values ``prune=`` reads, and what Triton compiles apart (a constexpr, a dtype, a stride
    pattern, alignment, an int's class, None or not)."""
    dicts = [k if isinstance(k, Mapping) else {} for k in keys]
    sizes: dict[str, list[str]] = {}  # what differs ("the shape of {}") -> the arguments
    compiled: dict[str, list[str]] = {}
    users = _distinct([d.get("user_key", _ABSENT) for d in dicts])
    if users[1:]:
        sizes[f"the key= value ({len(users)} distinct)"] = []
    reads = [d.get("prune") or {} for d in dicts]
    prune = [
        f"`{name}`, which prune= reads"
        for name in _names(reads)
        if _distinct([r.get(name, _ABSENT) for r in reads])[1:]
    ]
    args = [d.get("args") or {} for d in dicts]
    for name in _names(args):
        _argument(f"`{name}`", [a.get(name, _ABSENT) for a in args], sizes, compiled)
    return _named(sizes), prune, _named(compiled)


def _prune_part(key: Any) -> Any:
    return key.get("prune") or {} if isinstance(key, Mapping) else {}


def _named(parts: Mapping[str, list[str]]) -> list[str]:
    """Each sort of difference once, with the arguments it is found in: "the int class of
    `M` and `sxm` (...)"."""
    return [sort.format(_joined(names)) if names else sort for sort, names in parts.items()]


def _argument(
    name: str, values: list[Any], sizes: dict[str, list[str]], compiled: dict[str, list[str]]
) -> None:
    """Note what differs among one argument's readable values (``readable_value``'s forms)."""
    distinct = _distinct(values)
    if not distinct[1:]:
        return
    if any(isinstance(v, Mapping) and "constexpr" in v for v in distinct):
        shown = [v["constexpr"] if isinstance(v, Mapping) else v for v in distinct]
        compiled.setdefault(f"the constexpr {{}} ({_values(shown)})", []).append(name)
        return
    kinds = {_kind(v) for v in distinct}
    if len(kinds) > 1:
        sort = (
            "whether {} is passed"
            if "absent" in kinds
            else "whether {} is None"
            if "None" in kinds
            else "the type of {}"
        )
        compiled.setdefault(sort, []).append(name)
        return
    (kind,) = kinds
    if kind == "tuple":
        lengths = {len(v) for v in distinct}
        if len(lengths) > 1:
            compiled.setdefault("the length of {}", []).append(name)
            return
        for i in range(lengths.pop()):
            _argument(f"{name}[{i}]", [v[i] for v in distinct], sizes, compiled)
    elif kind == "tensor" or kind == "descriptor":
        parts = [v.get("descriptor", v) if kind == "descriptor" else v for v in distinct]
        _tensor(name, parts, sizes, compiled)
    else:
        sort = "the int class of {} (1, a multiple of 16, or another)"
        compiled.setdefault(sort if kind == "int" else "the type of {}", []).append(name)


def _tensor(
    name: str,
    parts: list[Mapping[str, Any]],
    sizes: dict[str, list[str]],
    compiled: dict[str, list[str]],
) -> None:
    def differ(field: str) -> list[Any]:
        found = _distinct([p.get(field, _ABSENT) for p in parts])
        return found if found[1:] else []

    if differ("shape"):
        sizes.setdefault("the shape of {}", []).append(name)
    dtypes = differ("dtype")
    if dtypes:
        compiled.setdefault(f"the dtype of {{}} ({_values(dtypes)})", []).append(name)
    if differ("stride"):
        sort = "the stride pattern of {} (which strides are 0, 1 or other)"
        compiled.setdefault(sort, []).append(name)
    if differ("aligned"):
        compiled.setdefault("whether {} is 16-byte aligned", []).append(name)
    if differ("block"):
        compiled.setdefault("the block shape of {}", []).append(name)


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    if value is _ABSENT:
        return "absent"
    if isinstance(value, list):
        return "tuple"
    if isinstance(value, Mapping):
        return "descriptor" if "descriptor" in value else "tensor"
    if isinstance(value, str) and value[:1] == "i" and value.rstrip("LU") in ("i", "i1", "i16"):
        return "int"
    return str(value)  # "f", "b", "$" or a class name


def _distinct(values: Sequence[Any]) -> list[Any]:
    """``values`` without repeats, in first-seen order (JSON forms compared as text)."""
    seen: dict[str, Any] = {}
    for v in values:
        seen.setdefault("" if v is _ABSENT else canonical_json(v), v)
    return list(seen.values())


def _names(parts: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(name for part in parts for name in part))


def _values(values: Sequence[Any]) -> str:
    # Shown in a sort's text, which names its arguments through str.format: braces doubled.
    shown = ["its default" if v is _ABSENT else str(v) for v in values[:_SHOWN]]
    shown = [v.replace("{", "{{").replace("}", "}}") for v in shown]
    return ", ".join(shown) + (", ..." if len(values) > _SHOWN else "")


def _joined(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
