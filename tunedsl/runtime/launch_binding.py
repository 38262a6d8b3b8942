"""A call's launch against its kernel's parameters, per configuration (runtime layer).

``miss.variants`` binds each candidate configuration of a new key; here that binding is
checked before any configuration is compiled or timed. The first configuration's launch is
checked in full (arguments, keywords, hints, ``key=`` names, a key that cannot see a
tensor); a later one's launch hints given twice always, and its binding where its keywords
differ from the first's (a ``kwargs=`` function returning ``cfg.as_dict()`` over a list
space whose configurations have other fields): a keyword the kernel lacks, or one given by
position too, is an error naming the configuration, where Triton's interpreter would ignore
it and its GPU launch fail that configuration.
Both run once per configuration on a miss, never on the hot path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunedsl.model.config import Config
from tunedsl.model.hole import HOLE, ReplaceArgs, fill_holes
from tunedsl.runtime import key_mistakes, mistakes, unkeyed


def check_first(
    call: Any, settings: Any, cfg: Config, holes: Any, dyn_kwargs: Mapping[str, Any], site: Any
) -> None:
    """The launch of ``call`` (a ``miss.Call``) under its first configuration ``cfg``
    (bound to ``holes`` and ``dyn_kwargs``) binds to the kernel's parameters; ``site`` is
    the ``miss.SiteView``."""
    from tunedsl.backends import triton as bt
    from tunedsl.model.hints import HINTS, check_hint_twice

    info = bt.kernel_info(call.kernel)
    launch_kwargs = {**call.static_kwargs, **dyn_kwargs}
    kernel_name = info.qualname.rsplit(".", 1)[-1]
    check_hint_twice(launch_kwargs, cfg, settings.hints, site.label, info.arg_names, kernel_name)
    launch_args = fill_holes(call.args, holes) if holes else call.args
    mistakes.check_launch(
        call.kernel,
        info,
        launch_args,
        launch_kwargs,
        site.label,
        bt.launch_option_names,
        [name for name in cfg if name in HINTS],
        _dependent(info.arg_names, call.args, holes, dyn_kwargs),
    )
    key_mistakes.check_key_names(call.key, info, site.label)
    if not site.has_key:
        unkeyed.check(
            info.arg_names,
            call.args,
            call.static_kwargs,
            holes,
            dyn_kwargs,
            bt.storage_address,
            site.label,
        )


def check_later(
    call: Any,
    settings: Any,
    cfg: Config,
    holes: Any,
    dyn_kwargs: Mapping[str, Any],
    first_names: Sequence[str],
    label: str,
) -> None:
    """A later configuration ``cfg``'s launch, checked as the first's was: a launch hint
    given both in its launch and by ``cfg`` or a static hint, always (its fields are not the
    first's); the binding where its configuration-dependent keywords are not the first's
    (``first_names``): the same names bind the same way, so nothing more is done for them."""
    from tunedsl.backends import triton as bt
    from tunedsl.model.hints import HINTS, check_hint_twice

    launch_kwargs = {**call.static_kwargs, **dyn_kwargs}
    if any(name in launch_kwargs for name in HINTS):
        info = bt.kernel_info(call.kernel)
        kernel_name = info.qualname.rsplit(".", 1)[-1]
        where = f"{label}: under {cfg}"
        check_hint_twice(launch_kwargs, cfg, settings.hints, where, info.arg_names, kernel_name)
    if dyn_kwargs.keys() == set(first_names):
        return
    info = bt.kernel_info(call.kernel)
    mistakes.check_launch(
        call.kernel,
        info,
        fill_holes(call.args, holes) if holes else call.args,
        launch_kwargs,
        f"{label}: under {cfg}",
        bt.launch_option_names,
        [name for name in cfg if name in HINTS],
        _dependent(info.arg_names, call.args, holes, dyn_kwargs),
    )


def _dependent(
    names: Sequence[str], args: Sequence[Any], holes: Any, dyn_kwargs: Mapping[str, Any]
) -> set[str]:
    """The parameters whose values depend on the configuration: the holes of ``args`` (every
    positional one when the plain API's ``args=`` function replaces them) and ``dyn_kwargs``."""
    if isinstance(holes, ReplaceArgs):
        return {*names[: len(args)], *dyn_kwargs}
    return {names[i] for i, a in enumerate(args) if a is HOLE and i < len(names)} | set(dyn_kwargs)
