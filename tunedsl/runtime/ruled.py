"""A miss decided by a shipped rule (``model/rule.py``): no record, no tuning, at once.

Called by ``decide.lookup`` after the records missed. The rule named by the site, its
kernel's source, hints and Triton environment decides:

- a key in the rule's range gets the rule's pick (``source="rule"``);
- a key outside it (a size beyond the sweep, another dtype, layout or flag, a shape off the
  swept ones) is tuned where tuning may run (``mode="on"`` and no CUDA-graph capture); where
  it may not, it gets the pick of the nearest family with its sizes clamped into the swept
  range, with one warning per reason, naming it;
- a *stale* rule (measured on another GPU model or Triton version) is not trusted to beat
  tuning: the key is tuned where tuning may run, with one warning naming
  ``tunedsl rules check``; where it may not, its pick still beats the site's default, and is
  launched with one warning.

Where several directories on the path hold the rule, the first measured on this GPU model
and toolchain decides, else the first. A site whose only rules are for another version of its
kernel says so once; one with no rule whose function, kernel and launch have rules, else
shipped records, under another file's name (its script renamed) says so once too. A sweep (a sweep's task, ``precompile --tune``) tunes every miss: no
rule decides there.
A pick is launched only when it is one of the configurations the site's space and
``prune=`` keep for this call, its first launch on the key did not fail (the site notes a
failure with ``note_failed`` and decides the key again), and, on a site with ``verify=``,
when it passes verify; where
it is not, the key is tuned where tuning may run, and where it may not, the rule's next
configuration that passes launches (the site's default when none does).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tunedsl.model.config import Config
from tunedsl.store.records import records_of_renamed_sites
from tunedsl.store.rules import (
    SUFFIX,
    digest_of,
    find_rules,
    measured_text,
    rule_digest,
    rules_decide,
    rules_of_other_kernels,
    rules_of_renamed_sites,
    what_changed,
)
from tunedsl.warn import warn_once

if TYPE_CHECKING:
    from tunedsl.model.rule import Rule
    from tunedsl.runtime.subject import Subject


def rule_pick(
    subject: Subject,
    candidates: Sequence[Config],
    check: Callable[[Config], str | None] | None,
    tuning_allowed: bool,
) -> Config | None:
    """The rule's configuration for ``subject``'s key, or None (no rule, or tune instead)."""
    if not rules_decide():  # a sweep measures every key
        return None
    ctx = subject.context
    digest = subject.rule_digest or rule_digest(
        subject.site_id, ctx["kernel"], ctx["hints"], ctx["env"]
    )
    rules = find_rules(digest)
    if not rules:
        others = rules_of_other_kernels(subject.site_id, digest)
        rules = _line_bound_rules(subject) if others else ()
    if not rules:
        if others:  # shipped for this site, but not for this kernel: say so, once
            _warn_other_kernel(subject, digest, others)
        elif f"rule-renamed:{digest}" not in _renamed_checked:
            _renamed_checked.add(f"rule-renamed:{digest}")
            _warn_renamed(subject)
        return None
    rule, stale = chosen_rule(rules, ctx)
    where = f"rule {digest[:12]} of {subject.site_id}"
    config, in_range = rule.decide(subject.readable)
    if not in_range and not stale and len(rules) > 1:  # a later directory's may cover it
        rule, config, in_range = covering_rule(rules, ctx, subject.readable, rule, config)
    if stale:
        here, toolchain = ctx.get("device", {}).get("name"), ctx.get("toolchain")
        measured = measured_text(rule.device.get("name"), rule.toolchain)
        now = measured_text(here, toolchain)
        if tuning_allowed:
            warn_once(
                f"rule-stale:{digest}",
                f"{where} was measured on {measured}, not on {now}: tuning instead. Refresh "
                "it with `tunedsl rules check` and `tunedsl rules build`",
                stacklevel="user",
            )
            return None
        warn_once(
            f"rule-stale:{digest}",
            f"{where} was measured on {measured}, not on {now}; using its picks while "
            "tuning cannot run. Refresh it with `tunedsl rules check` and `tunedsl rules build`",
            stacklevel="user",
        )
    if in_range and tuning_allowed and rule.swept is not None:
        new = unswept(rule.swept, candidates)
        if new is not None:
            warn_once(
                f"rule-space:{digest}",
                f"{where} comes from a sweep that never timed {new}, which this site's space "
                "and prune= keep for the key: tuning instead. Sweep again and run "
                "`tunedsl rules build`",
                stacklevel="user",
            )
            return None
    if not in_range and tuning_allowed:  # (a stale rule there has returned above)
        return None
    problem = _refused(config, candidates, check, subject.digest)
    # Where tuning may run, the key is tuned; where it may not, the rule's next configuration
    # (in the order the build chose them: each near the best on the most swept keys the ones
    # before it left) beats the site's default, which knows nothing of the key.
    instead = None
    if problem is not None and not tuning_allowed:
        instead = next(
            (
                c
                for c in rule.configs
                if c != config and _refused(c, candidates, check, subject.digest) is None
            ),
            None,
        )
    if tuning_allowed:
        launched = "tuning the key"
    elif instead is None:
        launched = "launching the site's default"
    else:
        launched = f"launching its next configuration, {instead}"
    if not in_range:
        topic, why = rule.outside(subject.readable) or ("", "outside the swept range")
        does = (
            f"so it launches the pick of the nearest swept family and sizes, {config}"
            if problem is None
            else f"and its pick for the nearest swept family and sizes, {config}, {problem}, "
            f"so it {launched.replace('launching', 'launches')}"
        )
        # Once per family and size: a second dtype never swept is not decided silently
        # because a size beyond the sweep warned first (nor each new size warned again).
        warn_once(
            f"rule-range:{digest}:{topic}",
            f"a key outside the range of {where} ({why}); tuning cannot run here, {does}",
            stacklevel="user",
        )
    if problem is None or not in_range:  # (the range's warning named the refused pick)
        return config if problem is None else instead
    warn_once(
        f"rule-refused:{digest}:{config}:{problem.split(' (')[0]}:{instead}",
        f"{where} picked {config}, which {problem}; not using it, {launched}",
        stacklevel="user",
    )
    return instead


# (record digest, configuration) -> the error: a rule's picks whose first launch on the key
# failed (a configuration that cannot compile or run at the key's sizes, which no swept key
# had). Such a pick is refused for that key from then on; bounded, as the sites' tables are
# (a key dropped here whose decision a site also dropped has its pick tried, and noted, again).
FAILED_PICKS: dict[tuple[str, Config], str] = {}
MAX_FAILED_PICKS = 4096
_failed_lock = threading.Lock()


def _line_bound_rules(subject: Subject) -> tuple[Rule, ...]:
    """The rules of ``subject``'s site built when a compiled kernel's source hash was
    Triton's own, lines included: this kernel's, where it starts on the lines it did."""
    from tunedsl.backends.kernel_source import line_bound_source_hash

    info = subject.info
    try:
        old = line_bound_source_hash(subject.kernel, info.constexpr_names, info.defaults)
    except Exception:  # no source to hash: no rule was built for it either
        return ()
    if old is None or old == info.source_hash:
        return ()
    ctx = subject.context
    kernel = {**ctx["kernel"], "source_hash": old}
    return find_rules(rule_digest(subject.site_id, kernel, ctx["hints"], ctx["env"]))


def note_failed(digest: str, config: Config, err: BaseException) -> None:
    """``config``, a rule's pick, failed on its first launch for the key ``digest``."""
    with _failed_lock:  # the same dict throughout: plans hold it
        if len(FAILED_PICKS) >= MAX_FAILED_PICKS:
            for old in list(FAILED_PICKS)[: MAX_FAILED_PICKS // 8]:  # the oldest eighth
                del FAILED_PICKS[old]
        FAILED_PICKS[(digest, config)] = f"{type(err).__name__}: {err}"[:300]


def forget_failed(digest: str, config: Config) -> None:
    """``config`` is not refused for ``digest`` after all: the call failed whatever it launched."""
    with _failed_lock:
        FAILED_PICKS.pop((digest, config), None)


def _refused(
    config: Config,
    candidates: Sequence[Config],
    check: Callable[[Config], str | None] | None,
    digest: str,
) -> str | None:
    """Why ``config`` may not be launched for this key (None: it may): it must be one of
    the candidates, must not have failed on the key's first launch and, on a site with
    verify=, must pass verify."""
    failed = FAILED_PICKS.get((digest, config)) if FAILED_PICKS else None
    if failed is not None:
        return f"fails on this key ({failed})"
    if not _is_candidate(config, candidates):
        return "is not among the configurations this site's space and prune= keep for the key"
    problem = None if check is None else check(config)
    return None if problem is None else f"fails verify= here ({problem})"


# The last rules found and process context, with the rule that decides for them and whether
# it is stale (every key of a site asks with the same two).
_chose: tuple[tuple[Rule, ...], Mapping[str, Any], Rule, bool] | None = None


def chosen_rule(rules: tuple[Rule, ...], ctx: Mapping[str, Any]) -> tuple[Rule, bool]:
    """The first of ``rules`` measured on this GPU model and toolchain, else the first on
    the path; and whether it is stale (measured elsewhere)."""
    global _chose
    memo = _chose
    if memo is not None and memo[0] is rules and memo[1] is ctx:
        return memo[2], memo[3]
    current = current_rules(rules, ctx)
    rule = current[0] if current else rules[0]
    _chose = (rules, ctx, rule, not current)
    return rule, not current


def current_rules(rules: tuple[Rule, ...], ctx: Mapping[str, Any]) -> list[Rule]:
    """Those of ``rules`` measured on this GPU model and toolchain, in path order."""
    here, toolchain = ctx.get("device", {}).get("name"), ctx.get("toolchain")
    return [r for r in rules if r.device.get("name") == here and r.toolchain == toolchain]


def covering_rule(
    rules: tuple[Rule, ...], ctx: Mapping[str, Any], readable: Any, rule: Rule, config: Config
) -> tuple[Rule, Config, bool]:
    """For a key outside the range of ``rule`` (current: measured on this GPU model and
    toolchain; its pick ``config``), the first other current rule of ``rules``, in path
    order, whose range covers the key, with its pick and True; else ``rule``, ``config``
    and False (one directory's rule for small sizes, another's for large ones)."""
    for other in current_rules(rules, ctx):
        if other is rule:
            continue
        picked, in_range = other.decide(readable)
        if in_range:
            return other, picked, True
    return rule, config, False


# The last candidates tuple checked against a rule's swept configurations, and the answer.
_covered: tuple[Sequence[Config], frozenset[Config], Config | None] | None = None


def unswept(swept: frozenset[Config], candidates: Sequence[Config]) -> Config | None:
    """A candidate the rule's sweep never timed (the site's space or prune= grew), or None."""
    global _covered
    if not isinstance(candidates, tuple | list):  # a lazy space: never listed, so unknown
        return None
    memo = _covered
    if memo is not None and memo[0] is candidates and memo[1] is swept:
        return memo[2]
    new = next((c for c in candidates if c not in swept), None)
    if candidates.__class__ is tuple:  # the site's space, shared by its keys
        _covered = (candidates, swept, new)
    return new


# The last candidates tuple seen, as a set: keys of one site share it (the site's space, no
# prune=), so a pick is looked up by hash instead of compared with each configuration.
_members: tuple[Sequence[Config], frozenset[Config]] | None = None


def _is_candidate(config: Config, candidates: Sequence[Config]) -> bool:
    global _members
    if candidates.__class__ is not tuple:  # a pruned list (new per key), or a lazy space
        return config in candidates
    memo = _members
    if memo is None or memo[0] is not candidates:
        memo = _members = (candidates, frozenset(candidates))
    return config in memo[1]


def _warn_other_kernel(subject: Subject, digest: str, others: list[tuple[Any, Rule]]) -> None:
    """One warning for the site's rules on the path that decide nothing for it: built for
    another version of its kernel, or (none of those) this very kernel's rule saved under
    another rule's file name, which the runtime never looks for."""
    ctx = subject.context
    changes = [(p, r, what_changed(r, ctx["kernel"], ctx["hints"], ctx["env"])) for p, r in others]
    path, _rule, changed = next((c for c in changes if c[2]), changes[0])
    if not changed and digest_of(_rule) == digest:  # the kernel's own rule, misnamed
        warn_once(
            f"rule-other-kernel:{digest}",
            f"{path} is a rule for {subject.site_id}, this very kernel, saved under another "
            f"rule's file name; the runtime looks for it as {digest}{SUFFIX}, so it decides "
            "no key of this kernel: rename it (`tunedsl rules check` names each such file)",
            stacklevel="user",
        )
        return
    warn_once(
        f"rule-other-kernel:{digest}",
        f"{path} is a rule for {subject.site_id} built for another version of its "
        f"kernel ({changed or 'its source or launch'} changed since the sweep), so it "
        "decides no key of this kernel; sweep again and run `tunedsl rules build`",
        stacklevel="user",
    )


_renamed_checked: set[str] = set()  # the digests looked for under another file's name


def _warn_renamed(subject: Subject) -> None:
    """One warning where the path has rules, else shipped records, for this site's function,
    kernel and launch under another file's name (the script renamed since the sweep or the
    tuning): they decide nothing."""
    found = rules_of_renamed_sites(subject.site_id, subject.context["kernel"])
    if found:
        path, rule = found[0]
        warn_once(
            f"rule-renamed:{subject.site_id}",
            f"{path} is a rule for {rule.site}, the same function, kernel and launch as "
            f"{subject.site_id} in a file of another name; a site's identity holds its file's "
            "name, so it decides no key here. Sweep this file again and run `tunedsl rules "
            "build`, or give the site `name=` (then sweep and build) so renaming its file keeps "
            "its rules",
            stacklevel="user",
        )
        return
    records = records_of_renamed_sites(subject.site_id, subject.context["kernel"])
    if records:
        path, site = records[0]
        then = "is tuned again" if subject.settings.mode == "on" else "launches the site's default"
        warn_once(
            f"record-renamed:{subject.site_id}",
            f"{path} is a tuning record for {site}, the same function, kernel and launch as "
            f"{subject.site_id} in a file of another name; a site's identity holds its file's "
            f"name, so each key {then} instead. Tune this file again (`tunedsl sweep`, say) and "
            "ship its records, or give the site `name=` (then tune again) so renaming its "
            "file keeps its records",
            stacklevel="user",
        )
