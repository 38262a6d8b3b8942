"""One ``Launcher`` for every call key of a site that Triton specializes alike.

A site's call keys differ in what Triton never sees (a tensor's shape and strides, the value
of a ``key=``) as well as in what it specializes on. Two keys that agree on the second part
and launch the same configuration launch the same compiled kernel, so they can share one
``Launcher``: a new key's first launch then takes the direct path the earlier key's first
launch set up, instead of Triton's JIT and binder, and no new launcher is built. This is
what makes a miss that a rule or a record decides cheap once its configuration has run.

The specialization is worked out from the call as the call key refines it
(``triton_launch.keyed_exactly``): per argument a tensor's dtype and 16-byte alignment, an
int's class (``keys.int_class``), a float's or bool's type, None, a constexpr's type and
value, and the keyword arguments' names. An argument of any other class is keyed by its
class, and its launcher always takes Triton's JIT, which is exact whatever the value. A
call whose configuration-dependent keyword arguments differ (a constexpr such as
``EVEN=n % $tile == 0``) gets a launcher of its own: they are part of the key, as a
launcher's direct path takes only the keyword arguments of its first launch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunedsl.backends.triton import KernelInfo, kernel_info
from tunedsl.backends.triton_launch import Launcher
from tunedsl.model.hole import HOLE
from tunedsl.model.keys import arg_key, constexpr_key, is_tensor

#: The launchers kept per site (a bound on what a site with endless new specializations holds).
MAX_SHARED = 1024


def specialization(
    info: KernelInfo, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[Any, ...]:
    """What Triton specializes this call on, as the call key refines it (an argument of a
    class the key does not refine is keyed by its class: its launcher takes Triton's JIT)."""
    names = info.arg_names
    parts: list[Any] = []
    for i, value in enumerate(args):
        parts.append(_part(info, names[i] if i < len(names) else "", value))
    for name in sorted(kwargs):
        parts += (name, _part(info, name, kwargs[name]))
    return tuple(parts)


def _part(info: KernelInfo, name: str, value: Any) -> Any:
    if name in info.value_keyed:
        return constexpr_key(value)
    if is_tensor(value):  # a tensor's shape and strides never reach Triton
        return (value.dtype, value.data_ptr() % 16 == 0)
    return value if value is HOLE else arg_key(value, with_shape=False)


class SharedLaunchers:
    """The launchers of one site, by kernel, configuration, launch options, stored-binary
    use and specialization."""

    def __init__(self) -> None:
        self._by_key: dict[Any, Launcher] = {}

    def launcher(
        self,
        kernel: Any,
        config: Any,
        options: Mapping[str, Any],
        args: Sequence[Any],
        static_kwargs: Mapping[str, Any],
        bind: Callable[[Any], Any],
        stored_binary: bool,
        spec: tuple[Any, ...] | None = None,
        bound: tuple[Any, Any, Any] | None = None,
    ) -> Launcher:
        """A launcher for this call of ``config`` (``bind(config)``: its holes, keyword
        arguments and grid): the one an earlier call key of the same specialization and
        keyword arguments has, else a new one (kept for the next). ``spec``: the call's
        ``specialization``, and ``bound``: ``bind(config)``, where the caller knows them."""
        try:
            if spec is None:
                spec = specialization(kernel_info(kernel), args, static_kwargs)
            holes, dyn_kwargs, _ = bind(config) if bound is None else bound
            dyn = (
                tuple([(k, v.__class__, v) for k, v in sorted(dyn_kwargs.items())])
                if dyn_kwargs
                else ()
            )
            options_key = tuple(sorted(options.items()))
            key = (kernel, config, options_key, stored_binary, spec, bool(holes), dyn)
            found = self._by_key.get(key)
        except Exception:  # a value that cannot be hashed: this call key's own launcher
            return Launcher(kernel, options, args, static_kwargs, stored_binary)
        if found is None:
            if len(self._by_key) >= MAX_SHARED:
                self._by_key.clear()
            found = self._by_key[key] = Launcher(
                kernel, options, args, static_kwargs, stored_binary
            )
        return found

    def forget(self, kernel: Any) -> None:
        """Drop the launchers of ``kernel`` (a kernel the site no longer keeps)."""
        for key in [key for key in self._by_key if key[0] is kernel]:
            del self._by_key[key]
