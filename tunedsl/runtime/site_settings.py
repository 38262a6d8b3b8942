"""A site's settings (runtime layer): its literal parts from the expansion (or the first
call of ``autotune_launch``), updated by the ``lazy`` thunk of the call that misses.

The settings are read when a key is decided, never per launch (docs/runtime.md, "Modes"),
with two exceptions: a ``reset_to_zero=`` the thunk computes acts on every launch, so a site
whose thunk gives one reads it on each call (``call_reset.py``); and launch hints the thunk
computes are part of the decision, so a site whose thunk gives them reads them on each call
and keys the call by their values (``call_values.py``); so does a site whose space may
differ from call to call. A site whose ``verify=`` may differ from call to call (as the
expansion or ``autotune_launch`` tells it) reads it on every call too (``verified.py``).
"""

from __future__ import annotations

from typing import Any

from tunedsl import knobs
from tunedsl.model import identity
from tunedsl.model.settings import Settings, environment
from tunedsl.model.settings import resolve as resolve_settings
from tunedsl.model.space import check_placeholders
from tunedsl.runtime import settings_reads


def settings(site: Any, lazy: Any) -> Settings:
    """The settings of ``site`` (a ``runtime/site.py`` ``Site``): its literal parts, updated
    by the ``lazy`` thunk's. Literal ones are resolved once per environment (a literal space
    is not expanded for every key)."""
    memo = site.settings_memo
    if lazy is None and memo is not None and knobs.environ_unchanged(memo[2]):
        return memo[1]  # no variable changed: the knobs read the same
    environ = knobs.environ_snapshot()
    env = environment() if lazy is None else None
    if memo is not None and env is not None and memo[0] == env:
        site.settings_memo = (env, memo[1], environ)
        return memo[1]
    space = site.literal_space
    hints, options = dict(site.literal_hints), dict(site.literal_options)
    if lazy is not None:
        lazy_space, lazy_hints, lazy_options = lazy()
        if lazy_space is not None:
            space = lazy_space
        hints.update(lazy_hints or {})
        options.update(lazy_options or {})
        if "reset_to_zero" in (lazy_options or {}) and site.kernel_text != "autotune_launch":
            site.read_per_call("reset")  # a macro's computed reset_to_zero=: read on every call
        if lazy_hints and not site.hints_computed and site.kernel_text != "autotune_launch":
            site.read_per_call("hints")  # computed launch hints join the key (call_values.py)
        settings_reads.note(site, lazy, lazy_options or {})  # for a notebook's next cell
    out = resolve_settings(space, hints, options, site.label)
    if out.name is not None and out.name != site.site_id:  # a computed name=, or a new one
        site.site_id = identity.renamed(site.site_id, out.name, not site.named, site.label)
        site.named = True
    if not site.placeholders_checked:
        # A literal space was checked as the module compiled, but only against the union
        # of a list space's fields: each configuration must have what the launch reads.
        check_placeholders(site.placeholders, out.configs or (out.default,), site.filename)
        site.placeholders_checked = True
    if env is not None:
        site.settings_memo = (env, out, environ)
    return out
