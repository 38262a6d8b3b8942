"""Measuring for ``tunedsl rules``: the cross-measurement phase of ``build`` and the picks
``check`` judges, both by running a script's workloads here (``precompile/remeasure.py``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedsl.cli.cache_select import terminal_text
from tunedsl.errors import UsageError


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def device_of(device: dict[str, Any]) -> dict[str, Any]:
    return {k: device.get(k) for k in ("type", "name", "capability", "arch")}


@dataclass
class Plan:
    """One rule being built: its records' group and swept keys, and the rule so far."""

    digest: str
    measured: str  # where its records were measured (device and toolchain)
    first: Any  # a record of the group (site, kernel, context, device, versions)
    keys: list[Any]
    built: Any
    swept: frozenset[Any] | None = None  # every configuration the sweep timed (model/rule.py)
    # The keys measured here: their records state the site's space now (a configuration they
    # lack is outside the key's space, not one the space gained since the sweep).
    remeasured: set[int] = field(default_factory=set)


def times_of(record: Any) -> dict[Any, float | None]:
    return {c.config: (c.median_ms if c.status == "ok" else None) for c in record.results}


def swept_key(record: Any) -> Any:
    """A record as a swept key of a rule: its times, the configurations prune= dropped for
    the key (no candidates there: never timed, and no cell to measure), and whether it timed
    every candidate of the key (then one it lacks is outside the key's space)."""
    from tunedsl.model.rule_build import SweptKey
    from tunedsl.runtime.space_records import pruned

    return SweptKey(record.key, times_of(record), pruned(record), exhaustive(record))


def exhaustive(record: Any) -> bool:
    """``record`` came from an exhaustive search: it timed every candidate of its key."""
    return str(record.strategy).rsplit(":", 1)[-1] == "exhaustive"


def check_measure_args(args: argparse.Namespace) -> None:
    """``--measure-budget``, ``--shapes`` and ``--script`` of ``rules build`` and ``check``,
    checked before any work."""
    from tunedsl.knobs import finite_number

    finite_number(args.measure_budget, "--measure-budget", zero_ok=True, unit=" of seconds")
    if args.workload and args.script is None:
        raise UsageError("--workload needs --script: the script whose workloads it names")
    if args.shapes is not None and args.script is None:
        raise UsageError("--shapes needs --script: the workloads the shapes are arguments of")
    if args.script is not None:
        from tunedsl.frontend.source import read_source, unreadable_reason

        try:
            read_source(args.script)  # a FIFO or a device is named, never waited on
        except OSError as err:
            raise UsageError(
                f"--script {args.script}: {unreadable_reason(args.script, err)}"
            ) from None
    if args.shapes is not None:
        # Read now, not once a cell needs measuring: a bad shapes file is never passed over.
        from tunedsl.precompile.shapes import read_shapes

        read_shapes(args.shapes)


def _needed(p: Plan) -> list[tuple[int, Any]]:
    """The cells a plan's rule needs that its records lack: of the rule's configurations,
    and of a space grown since some keys were swept (``model.rule_build.grown_cells``)."""
    from tunedsl.model.rule_build import grown_cells, missing_cells

    cells = missing_cells(p.keys, p.built.configs)
    return cells + [cell for cell in grown_cells(p.keys) if cell not in cells]


def cross_measure(plans: list[Plan], args: argparse.Namespace) -> bool:
    """The cross-measurement phase: the (key, configuration) cells the rules need and the
    records lack, measured by running the script's workloads here. True when any was."""
    from tunedsl.model.keys import canonical_json
    from tunedsl.model.rule_build import with_cells

    cells = {id(p): _needed(p) for p in plans}
    total = sum(len(c) for c in cells.values())
    if not total:
        return False
    why = _cannot_measure_for(plans, args)
    if why is not None:
        out = sum(p.keys[i].outside(c) for p in plans for i, c in cells[id(p)])
        print(
            f"  note: the records never timed {total} (key, configuration) cells the rules "
            f"need, and they cannot be measured: {why}; building from what the records have"
            + (
                f" ({out} of them outside their key's space as its record states it: a pick "
                "of one is counted as outside, not as never timed)"
                if out
                else ""
            )
            + ". The cells:",
            file=sys.stderr,
        )
        _print_cells(plans, cells)
        return False
    from tunedsl.precompile import remeasure
    from tunedsl.precompile.shapes import read_shapes

    wanted = {
        (p.digest, p.measured, canonical_json(p.keys[i].readable))
        for p in plans
        for i, _ in cells[id(p)]
    }

    def enough(records: list[Any]) -> bool:
        return wanted <= {where_of(r) for r in records}

    done = remeasure.measure(
        args.script, read_shapes(args.shapes), args.measure_budget, enough, args.workload
    )
    found = {where_of(r): swept_key(r) for r in done.records}
    for p in plans:
        for i, k in enumerate(p.keys):
            got = found.get((p.digest, p.measured, canonical_json(k.readable)))
            if got is not None:  # its cells, and whether they are all of the key's candidates
                p.keys[i] = with_cells(k, got.times, got.pruned, got.complete)
                p.remeasured.add(i)
    left = {id(p): _needed(p) for p in plans}
    still = sum(len(c) for c in left.values())
    print(
        f"  cross-measurement: {done.ran} workload calls in {done.seconds:.0f} s measured "
        f"{total - still} of the {total} cells the records lacked"
        + (f"; {done.left} calls not run (--measure-budget)" if done.left else ""),
        file=sys.stderr,
    )
    for failure in done.failures:
        print(f"  measuring failed: {failure}", file=sys.stderr)
    if still:
        print(
            f"  note: {still} cells are still missing (no shape of --shapes reached the key, "
            "the budget ran out, or the configuration left the site's space):",
            file=sys.stderr,
        )
        _print_cells(plans, left)
    return still < total


def where_of(record: Any) -> tuple[str, str, str]:
    """A record's (rule digest, where measured, key), as ``_groups`` sorts records."""
    from tunedsl.model.keys import canonical_json
    from tunedsl.store.records import keyed_toolchain
    from tunedsl.store.rules import rule_digest

    ctx = record.context if isinstance(record.context, dict) else {}
    digest = rule_digest(record.site, record.kernel, ctx.get("hints"), ctx.get("env"))
    measured = canonical_json([device_of(record.device), keyed_toolchain(record.versions)])
    return digest, measured, canonical_json(record.key)


def _cannot_measure_for(plans: Sequence[Plan], args: argparse.Namespace) -> str | None:
    from tunedsl.backends import triton as bt
    from tunedsl.model.keys import canonical_json
    from tunedsl.precompile.remeasure import cannot_measure
    from tunedsl.store.records import keyed_toolchain

    if args.script is None:
        return "give --script (the sweep's workloads) and --shapes to measure them here"
    facts = bt.device_facts()
    why = cannot_measure(facts)
    if why is not None:
        return why
    here = canonical_json([device_of(facts), keyed_toolchain(bt.toolchain())])
    elsewhere = sorted({p.measured for p in plans if p.measured != here})
    if elsewhere:
        return f"the records were measured on {', '.join(elsewhere)}, this machine is {here}"
    return None


def _print_cells(plans: Sequence[Plan], cells: dict[int, list[tuple[int, Any]]]) -> None:
    lines = [
        f"    {_short(p.first.site, 40)}: {key_text(p.keys[i].readable)} x {config}"
        for p in plans
        for i, config in cells[id(p)]
    ]
    for line in lines[:_MAX_LINES]:
        print(terminal_text(line), file=sys.stderr)  # a record's site or key: escaped
    if len(lines) > _MAX_LINES:
        print(f"    ... and {len(lines) - _MAX_LINES} more", file=sys.stderr)


_MAX_LINES = 40


def key_text(readable: Any) -> str:
    """A key's sizes as a person reads them (``args.a.shape[0]=300``), then what else tells
    it from a key of the same sizes (a flag, a dtype, an int equal to 1 or 64-bit; stride
    patterns and 32-bit ints left out)."""
    import json

    from tunedsl.model.rule_features import INT32, int_class_part, key_features, show_feature

    family, features = key_features(readable)
    parts = [show_feature(f, v) for f, v in sorted(features.items())]
    for k, v in sorted(json.loads(family).items()):
        text = int_class_part(k, v)
        if k.endswith(".stride") if text is None else v == INT32:
            continue  # a tensor's stride pattern; an int's usual class (its alignment above)
        parts.append(
            f"{k} is {text}" if text else f"{k}={json.dumps(v) if v.__class__ is not str else v}"
        )
    return ", ".join(parts) or family


def remeasure_picks(rules: dict[str, tuple[Path, Any]], args: argparse.Namespace) -> bool:
    """Tune a sample of the shapes here; print each key's regret under its rule. True when
    a rule is off (geomean regret above the bound, a pick that failed) or went unmeasured."""
    import math
    import statistics

    from tunedsl.model.rule_features import key_features
    from tunedsl.precompile import remeasure
    from tunedsl.precompile.shapes import read_shapes
    from tunedsl.runtime.space_records import pruned
    from tunedsl.store.rules import what_changed

    # The sample keeps each entry's line in the file: a bad entry is named where it is.
    sample = read_shapes(args.shapes).sample(args.sample)
    done = remeasure.measure(args.script, sample, args.measure_budget, only=args.workload)
    for failure in done.failures:
        print(f"  measuring failed: {failure}", file=sys.stderr)
    regrets: dict[str, list[float]] = {d: [] for d in rules}
    # Keys outside a rule's range are tuned where tuning may run: their nearest picks are
    # shown, not judged with the rule.
    outside: dict[str, list[float]] = {d: [] for d in rules}
    for record in sorted(done.records, key=lambda r: sorted(key_features(r.key)[1].items())):
        digest = where_of(record)[0]
        if digest not in rules:
            continue
        path, rule = rules[digest]
        pick, in_range = rule.decide(record.key)
        times = {c: t for c, t in times_of(record).items() if t is not None}
        if not times:
            continue
        best = min(times, key=lambda c: times[c])
        t = times.get(pick)
        regret = math.inf if t is None else t / times[best]
        (regrets if in_range else outside)[digest].append(regret)
        pick_text = f"{t:.4f} ms" if t is not None else "failed here"
        if t is None and pick in pruned(record):  # no candidate of the key: never launched
            pick_text = "dropped by prune= for this key (refused at run time: the key is tuned)"
        print(
            f"  {path.name[:12]} {key_text(record.key)}: pick {pick} {pick_text}, best {best} "
            f"{times[best]:.4f} ms: {regret:.3f}x"
            + ("" if in_range else " (outside its range: tuned where tuning may run, not judged)")
        )
    # Sites the script reached under another rule name: an edited kernel, hints or environment.
    elsewhere = {r.site: r for r in done.records if where_of(r)[0] not in rules}
    off = False
    judged = {r.site: p.name for d, (p, r) in rules.items() if regrets[d]}
    for digest, (path, rule) in rules.items():
        found = regrets[digest]
        if not found and rule.site in judged:  # a rule of the kernel before an edit, say
            off = True
            print(
                f"{path.name}: unchecked: built for another version of "
                f"{terminal_text(rule.site)} than {judged[rule.site]}, which the script "
                "reached, so the runtime never uses this rule; remove it"
            )
            continue
        if not found and rule.site in elsewhere:
            off = True
            now = elsewhere[rule.site]
            ctx = now.context if isinstance(now.context, dict) else {}
            changed = what_changed(rule, now.kernel, ctx.get("hints"), ctx.get("env"))
            print(
                f"{path.name}: unchecked: the script's {terminal_text(rule.site)} is not the "
                f"kernel this rule was built for ({changed or 'its source or launch'} changed "
                "since), so the runtime never uses this rule; sweep and run `tunedsl rules "
                "build` again"
            )
            continue
        if not found:
            off = True
            reached = (
                f"the {len(outside[digest])} sampled keys that reached its site are outside "
                "its range: give --shapes within the swept sizes"
                if outside[digest]
                else f"no sampled shape reached its site ({done.ran} workload calls run, "
                f"{done.left} left by --measure-budget)"
            )
            print(f"{path.name}: unchecked: {reached}")
            continue
        geomean = math.exp(statistics.fmean(math.log(r) for r in found))
        summary = (
            f"{len(found)} keys tuned here: regret geomean {geomean:.3f}x, max {max(found):.3f}x"
        )
        if geomean <= args.bound:
            print(f"{path.name}: {summary}, within {args.bound:.3f}x")
            continue
        off = True
        print(
            f"{path.name}: off: {summary}, above {args.bound:.3f}x; sweep here and run "
            "`tunedsl rules build` again"
        )
    return off


def budgeted_note(site: str, records: Sequence[Any]) -> str | None:
    """A note for a rule whose records come from a budgeted search (``random``, ``pattern``,
    ``model``): it timed a subset of the space on each key, so a regret of 1.000x only says
    the pick is the best of what it timed. None when every record searched exhaustively (or
    predates the field)."""
    searched = [str(r.strategy).rsplit(":", 1)[-1] for r in records if r.strategy]
    partial = sorted(s for s in searched if s != "exhaustive")
    if not partial:
        return None
    return (
        f"  note: {site}: {len(partial)} of {len(records)} swept keys come from a budgeted "
        f"search ({', '.join(sorted(set(partial)))}), which timed only some configurations: "
        "the regrets compare the picks with the best it timed, not with the space's best; "
        "sweep with search='exhaustive' to time them all"
    )


def leave_out_grown(plans: Sequence[Plan]) -> bool:
    """Leave out of each plan's rule the configurations of a space grown since some keys
    were swept that are still untimed on those keys (``model.rule_build.grown_cells``: no
    --script, or measuring did not reach them), with a note: the rule never picks one (a
    key never timed with it would be decided as if it had lost there), and the runtime tunes
    a site whose space keeps one. True when any was left out."""
    from tunedsl.model.rule_build import SweptKey, grown_cells, usable

    changed = False
    for p in plans:
        cells = [(i, c) for i, c in grown_cells(p.keys) if i not in p.remeasured]
        if not cells:
            continue
        grown = {c for _, c in cells}
        keys = [
            SweptKey(
                k.readable,
                {c: t for c, t in k.times.items() if c not in grown},
                k.pruned - grown,
                k.complete,
            )
            for k in p.keys
        ]
        if not usable(keys):  # no key timed another configuration: nothing to build from
            continue
        p.keys, changed = usable(keys), True
        p.swept = None if p.swept is None else p.swept - grown or None
        shown = ", ".join(map(str, sorted(grown, key=str)[:4])) + (
            ", ..." if len(grown) > 4 else ""
        )
        print(
            terminal_text(
                f"  note: {p.first.site}: {len(grown)} configuration(s) timed on only some "
                f"swept keys ({shown}; the space grew since the others were swept) are left "
                f"out of the rule: {len(cells)} cells untimed, on {len({i for i, _ in cells})} "
                "keys. The rule never picks them, and a site whose space keeps one is tuned, "
                "not decided; give --script with the sweep's shapes (--shapes) to measure "
                "them here, or sweep the grown space at every size, and build again"
            ),
            file=sys.stderr,
        )
    return changed
