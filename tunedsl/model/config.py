"""``Config``: one point of a search space, frozen, hashable, read as ``cfg.tile``.

Fields are stored as ordinary instance attributes so that ``cfg.tile`` (evaluated by the
site's ``bind`` on every launch) is a plain attribute read with no Python-level hook; only
a *missing* field reaches ``__getattr__``, which names the fields that exist.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from tunedsl.errors import UsageError
from tunedsl.model.keys import is_triton_constexpr
from tunedsl.model.options import did_you_mean

# Values a configuration field may hold: JSON scalars, so records round-trip exactly.
JSON_SCALARS = (bool, int, float, str, type(None))


def check_field(name: object, value: object, where: str) -> None:
    """Raise UsageError unless ``name`` is a public identifier and ``value`` a JSON scalar."""
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise UsageError(
            f"{where}: field name {name!r} must be an identifier not starting with '_'"
        )
    check_value(value, f"{where}: field {name!r}", name)


def check_value(value: object, what: str, name: str = "field") -> None:
    """Raise UsageError unless ``value`` is a JSON scalar; ``what`` names where it is."""
    if not isinstance(value, JSON_SCALARS):
        numpy = type(value).__module__ == "numpy"  # np.int64(64), from list(arr) or arr[0]
        hint = "; for numpy values write arr.tolist() or int(v)" if numpy else ""
        if type(value).__module__.startswith("torch"):  # torch.tensor([64, 128]) as an axis
            hint = "; for a tensor's values write t.tolist() or int(t)"
        if _is_dtype(value):  # torch.float16 or tl.float16 as an axis: its name is the value
            dtype = repr(value).rpartition(".")[2]
            hint = (
                f"; give a dtype by its name ({dtype!r}) and pass getattr(tl, ${name}) to "
                f"the kernel (getattr(tl, cfg.{name}) in autotune_launch)"
            )
        elif is_triton_constexpr(value):  # a `tl.constexpr` global: BIG = tl.constexpr(128)
            hint = f"; it is a tl.constexpr: write its .value ({getattr(value, 'value', None)!r})"
        elif isinstance(value, (tuple, list)) and value:  # Kernel Tuner's (16, 16) block shapes
            one = ", ".join(f"{f'{name}_{i}'!r}: {v!r}" for i, v in enumerate(value))
            hint = (
                "; a value of several parts is one field per part, kept together by a list "
                f"space: space=[{{{one}}}, ...]"
            )
        raise UsageError(
            f"{what} has value {value!r} of type {type(value).__name__}; "
            "configuration values must be JSON scalars (int, float, str, bool or None)" + hint
        )
    if isinstance(value, float) and value != value:  # NaN never equals itself: unhashable key
        raise UsageError(f"{what} is NaN")


def _is_dtype(value: object) -> bool:
    """A PyTorch or Triton dtype (told by class, without importing either)."""
    cls = type(value)
    return cls.__name__ == "dtype" and cls.__module__.split(".")[0] in ("torch", "triton")


#: The launch options a ``triton.Config`` carries where it names none (Triton 3), for the
#: fix a configuration without one names.
_TRITON_CONFIG_DEFAULTS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1}

#: The attribute of the ``AttributeError``/``KeyError`` of a field a configuration lacks:
#: ``(configuration, name)``.
MISSING_FIELD = "tunedsl_missing_field"


class Config:
    """An immutable mapping of field names to JSON scalar values.

    >>> cfg = Config(tile=256, num_warps=4)
    >>> cfg.tile
    256
    >>> Config.from_json(cfg.to_json()) == cfg
    True
    """

    __slots__ = ("__dict__", "_hash", "_items")

    def __init__(self, mapping: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        merged = dict(mapping or {})
        merged.update(fields)
        for name, value in merged.items():
            check_field(name, value, "Config")
            if name in _RESERVED:
                raise UsageError(
                    f"Config: field name {name!r} is reserved (a Config method); rename it"
                )
        setattr_ = object.__setattr__
        for name, value in merged.items():
            setattr_(self, name, value)
        # Equality and hashing ignore field order: {"a":1,"b":2} is {"b":2,"a":1}. The type
        # is part of a value's identity so that 1, 1.0 and True stay distinct configurations.
        items = tuple(sorted((n, type(v).__name__, v) for n, v in merged.items()))
        setattr_(self, "_items", items)
        setattr_(self, "_hash", hash(items))

    # -- reading -----------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup failed: the field does not exist.
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._missing(AttributeError(self._no_field(name)), name)

    def __getitem__(self, name: str) -> Any:
        try:
            return self.__dict__[name]
        except KeyError:
            raise self._missing(KeyError(self._no_field(name)), name) from None

    def _missing(self, err: Exception, name: str) -> Exception:
        # Marked with the configuration and the name read, for the one who knows the space
        # (``runtime/launch_checks.field_of_others``: a list space's other configurations).
        setattr(err, MISSING_FIELD, (self, name))
        return err

    def _no_field(self, name: str) -> str:
        fields = ", ".join(self.__dict__) or "(none)"
        close = None
        if isinstance(name, str):  # `meta["TILE"]` from a triton.autotune grid: `tile`
            same = [f for f in self.__dict__ if f.lower() == name.lower()]
            close = same[0] if same else did_you_mean(name, self.__dict__)
        hint = f"; did you mean {close!r}?" if close else ""
        if not close and not hasattr(Config, str(name)):  # triton.autotune's META["N"]
            hint = (
                " (it holds the space's fields, not the call's arguments as Triton's META "
                "does: use those directly)"
            )
        if name in _TRITON_CONFIG_DEFAULTS:  # a launch option some configurations leave out
            default = _TRITON_CONFIG_DEFAULTS[name]
            hint = (
                f" (a triton.Config without it has {name}={default}: read it as "
                f"cfg.get({name!r}, {default}))"
            )
        if name in ("kwargs", "all_kwargs") and self.__dict__:  # triton.Config's attributes
            first = next(iter(self.__dict__))
            hint = f" (it is not a triton.Config: read a field as cfg.{first} or cfg[{first!r}])"
        return f"configuration {self!r} has no field {name!r}{hint}; its fields are: {fields}"

    def __contains__(self, name: object) -> bool:
        return name in self.__dict__

    def __iter__(self) -> Iterator[str]:
        return iter(self.__dict__)

    def __len__(self) -> int:
        return len(self.__dict__)

    def keys(self) -> list[str]:  # dict(cfg), {**cfg} and f(**cfg) read a mapping by these
        return list(self.__dict__)

    def values(self) -> list[Any]:
        return list(self.__dict__.values())

    def items(self) -> list[tuple[str, Any]]:
        return list(self.__dict__.items())

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def get(self, name: str, default: Any = None) -> Any:
        return self.__dict__.get(name, default)

    def replace(self, **changes: Any) -> Config:
        return Config(self.__dict__, **changes)

    # -- immutability and identity -------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(_frozen(name))

    def __setitem__(self, name: str, value: Any) -> None:  # triton.Config's c.kwargs[name] = v
        raise TypeError(_frozen(name))

    def __delitem__(self, name: str) -> None:
        raise TypeError(f"Config is frozen: cannot delete {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Config is frozen: cannot delete {name!r}")

    def __hash__(self) -> int:
        return self._hash  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return self._items == other._items  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={v!r}" for n, v in self.__dict__.items())
        return f"Config({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Config, (dict(self.__dict__),))

    # -- JSON ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """A plain dict of the fields (order kept), for ``json.dumps``."""
        return dict(self.__dict__)

    def dumps(self) -> str:
        """Canonical text (sorted keys): the same configuration always gives the same text."""
        return json.dumps(self.__dict__, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: object) -> Config:
        """Rebuild from ``to_json()`` output; raise UsageError on anything else."""
        if not isinstance(data, dict):
            raise UsageError(f"a configuration must be a JSON object, not {type(data).__name__}")
        return cls(data)


def _frozen(name: str) -> str:
    return (
        f"Config is frozen: cannot set {name!r}; make a changed copy, "
        f"cfg.replace({name}=...) (a prune= returns the copies in its list)"
    )


_RESERVED = frozenset(n for n in vars(Config) if not n.startswith("_"))


def as_config(value: Config | Mapping[str, Any], where: str) -> Config:
    """Accept a Config or a mapping (for example ``default={"tile": 256}``)."""
    if isinstance(value, Config):
        return value
    if isinstance(value, Mapping):
        return Config(value)
    if is_triton_config(value):
        raise UsageError(
            f"{where}: a triton.Config; give tunedsl's configuration as a dict of its fields: "
            f"{triton_config_fields(value)!r}{triton_pre_hook_note(value)}"
        )
    raise UsageError(f"{where}: expected a dict of fields or a Config, not {value!r}")


def is_triton_config(item: object) -> bool:
    """A ``triton.Config`` (``triton.autotune``'s), known by its class without importing."""
    cls = item.__class__
    return cls.__name__ == "Config" and cls.__module__.startswith("triton.")


def triton_config_fields(item: Any) -> dict[str, Any]:
    """A ``triton.Config``'s keyword arguments and launch options, as one dict."""
    hints = ("num_warps", "num_stages", "num_ctas", "maxnreg")
    options = {h: getattr(item, h, None) for h in hints}
    return {**dict(item.kwargs), **{h: v for h, v in options.items() if v is not None}}


def triton_pre_hook_note(item: Any) -> str:
    """For a ``triton.Config`` with a ``pre_hook``: where its work goes in tunedsl."""
    if getattr(item, "pre_hook", None) is None:
        return ""
    return (
        "; its pre_hook runs before every launch under triton.autotune, while tunedsl's "
        "pre_hook= runs only while tuning (which puts the arguments back after each try): "
        "do the hook's work before the call (out.zero_())"
    )
