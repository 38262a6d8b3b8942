"""``tunedsl rules``: decisions for keys never tuned, built ahead of time from a sweep.

    tunedsl rules build [--site ID ...] [--records DIR ...] --out DIR [--tolerance 0.03]
                        [--script SCRIPT [--shapes FILE] [--workload NAME ...]
                         [--measure-budget SECONDS]]
    tunedsl rules show DIR|FILE ...
    tunedsl rules check DIR|FILE ... [--script SCRIPT [--shapes FILE] [--workload NAME ...]
                        [--sample N] [--bound 1.05] [--measure-budget SECONDS]]

``build`` turns each site's tuning records (the cache's, or ``--records`` directories) into a
rule file in ``--out`` (docs/shapes.md); ship that directory on ``TUNEDSL_RECORDS_PATH``.
Where the records never timed one of the rule's configurations on a swept key, ``--script``
(the sweep's workloads) measures those keys again on this machine's device, within
``--measure-budget`` seconds (the cross-measurement phase); without it the build says which
cells are missing and builds from what the records have. ``show`` prints rules as tables;
``check`` says which rules were measured on another GPU model or Triton version than this
machine's (stale), and with ``--script`` tunes a sample of the shapes here and reports each
key's regret under the rule, failing when a rule's geomean regret is above ``--bound``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tunedsl.cli.cache_select import terminal_text
from tunedsl.cli.rules_measure import check_measure_args
from tunedsl.cli.rules_out import keep_other_gpus_rules, out_dir, write_rule
from tunedsl.cli.rules_out import untrusted as _untrusted
from tunedsl.errors import UsageError


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "rules", help="decision rules for keys never tuned: build, show, check"
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="build rules from tuning records")
    build.add_argument(
        "--site",
        action="append",
        default=[],
        help="only this site, or the sites whose id starts with it (repeat)",
    )
    build.add_argument(
        "--records",
        action="append",
        default=[],
        metavar="DIR",
        help="read records from DIR (repeat; default: this user's cache)",
    )
    build.add_argument("--out", required=True, metavar="DIR", help="where the rule files go")
    build.add_argument(
        "--tolerance",
        type=float,
        default=0.03,
        help="a configuration covers a key within this of its best (default 0.03)",
    )
    build.add_argument(
        "--max-configs", type=int, default=8, help="configurations per rule (1 to 8, default 8)"
    )
    _measure_args(build, "measure the cells the records lack by running SCRIPT's workloads")
    show = sub.add_parser("show", help="print rules as tables")
    show.add_argument("paths", nargs="+", metavar="DIR|FILE", help=_PATHS_HELP)
    check = sub.add_parser("check", help="find stale rules; re-measure their picks here")
    check.add_argument("paths", nargs="+", metavar="DIR|FILE", help=_PATHS_HELP)
    _measure_args(check, "tune a sample of SCRIPT's shapes here and judge the rules' picks")
    check.add_argument(
        "--sample", type=int, default=8, help="shapes tuned for the check (default 8)"
    )
    check.add_argument(
        "--bound",
        type=float,
        default=DEFAULT_BOUND,
        help=f"largest geomean regret a rule may have (default {DEFAULT_BOUND})",
    )
    return parser


DEFAULT_BOUND = 1.05
_PATHS_HELP = (
    "rule files or directories, in TUNEDSL_RECORDS_PATH order: where several hold a rule "
    "for the same site and kernel, the runtime uses the first measured on its GPU model and "
    "Triton version, else the first"
)
DEFAULT_MEASURE_BUDGET_S = 600.0


def _measure_args(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--script", help=f"a script of @tunedsl.workload functions: {text}")
    parser.add_argument("--shapes", help="JSON list of the workloads' keyword arguments")
    workload = "run only this @tunedsl.workload of --script (repeat for several; default: all)"
    parser.add_argument("--workload", action="append", metavar="NAME", help=workload)
    parser.add_argument(
        "--measure-budget",
        type=float,
        default=DEFAULT_MEASURE_BUDGET_S,
        metavar="SECONDS",
        help=f"time for measuring (default {DEFAULT_MEASURE_BUDGET_S:.0f}; a task started ends)",
    )


def main(args: argparse.Namespace) -> int:
    if args.action == "check" or (args.action == "build" and args.script is not None):
        # "This machine" is where `tunedsl run` would use the rules: without a GPU driver,
        # Triton's interpreter (else every rule swept there reads as stale here), where
        # `--script` measures as `tunedsl sweep` does (said once); without it nothing runs.
        # `build --script` measures the cells the records lack there too.
        from tunedsl.autointerp import enable_if_no_gpu

        where = f"tunedsl rules {args.action} --script"
        enable_if_no_gpu(where, announce=args.script is not None)
    if args.action == "build":
        return build(args)
    files = _rule_files(args.paths)
    if args.action == "show":
        return show(files)
    return check(files, args)


def _records(dirs: Sequence[str]) -> Iterable[Any]:
    from tunedsl.store.files import FileRecordStore

    if not dirs:
        yield from FileRecordStore().iter_records()
        return
    for d in dirs:
        if not d.strip():
            raise UsageError("--records is empty: name a directory of tuning records")
        root = Path(d)
        if root.is_file():  # a bundle of `cache export`, most likely: how to read it
            raise UsageError(
                f"--records {d}: a file, not a directory of tuning records; a bundle of "
                f"`tunedsl cache export` is read by importing it into a cache first (`tunedsl "
                f"cache import {d}`, with TUNEDSL_CACHE_DIR set for a cache of its own), then "
                "`tunedsl rules build` without --records"
            )
        if not root.is_dir():
            raise UsageError(f"--records {d}: not a directory")
        yield from FileRecordStore(root, writable=False).iter_records()


def _not_records(root: Path) -> str | None:
    """What ``root`` is instead of a records directory, and which one to pass, or None."""
    from tunedsl.store.rules import SUFFIX

    if (root / "records").is_dir():
        return f"it is a cache: pass --records {root / 'records'}"
    if any(p.name.endswith(SUFFIX) for p in root.iterdir()):
        return (
            f"{root} holds rule files (*{SUFFIX}), not tuning records: pass the records the "
            "sweep wrote (its cache's records/ directory, or a directory of shipped records)"
        )
    return None


def _groups(records: Iterable[Any], sites: Sequence[str]) -> dict[tuple[str, str], list[Any]]:
    from tunedsl.cli.rules_measure import device_of

    """Records by (rule digest, where measured), newest record of each key."""
    from tunedsl.model.keys import canonical_json
    from tunedsl.store.records import keyed_toolchain
    from tunedsl.store.rules import rule_digest

    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        if sites and not any(r.site == s or r.site.startswith(s) for s in sites):
            continue
        ctx = r.context if isinstance(r.context, dict) else {}
        digest = rule_digest(r.site, r.kernel, ctx.get("hints"), ctx.get("env"))
        measured = canonical_json([device_of(r.device), keyed_toolchain(r.versions)])
        keyed = groups.setdefault((digest, measured), {})
        text = canonical_json(r.key)
        if text not in keyed or keyed[text].timestamp < r.timestamp:
            keyed[text] = r
    return {g: list(v.values()) for g, v in groups.items()}


def build(args: argparse.Namespace) -> int:
    from tunedsl.cli.rules_measure import (
        Plan,
        budgeted_note,
        cross_measure,
        leave_out_grown,
        swept_key,
    )
    from tunedsl.model.rule import MAX_CONFIGS
    from tunedsl.model.rule_build import build as build_rule
    from tunedsl.model.rule_build import usable

    if not 0 <= args.tolerance < 1:
        raise UsageError(f"--tolerance {args.tolerance}: expected a number in [0, 1)")
    if not 1 <= args.max_configs <= MAX_CONFIGS:
        raise UsageError(f"--max-configs {args.max_configs}: expected 1 to {MAX_CONFIGS}")
    check_measure_args(args)
    out = out_dir(args.out)
    records = list(_records(args.records))
    groups = _groups(records, args.site)
    if not groups:
        where = ", ".join(args.records) or "this user's cache"
        known = sorted({terminal_text(r.site) for r in records})  # (escape sequences too)
        if args.site and known:  # a misspelled --site: name the sites there are
            from tunedsl.model.options import did_you_mean

            close = did_you_mean(args.site[0], known)
            raise UsageError(
                f"no tuning records of {', '.join(args.site)} in {where}"
                + (f"; did you mean `{close}`?" if close else "")
                + f" (sites with records: {', '.join(known[:10])}"
                + (f", +{len(known) - 10} more" if len(known) > 10 else "")
                + "; `tunedsl cache ls` lists them)"
            )
        for d in args.records if not records else ():
            hint = _not_records(Path(d))
            if hint is not None:
                raise UsageError(f"--records {d}: no tuning records there; {hint}")
        files = sum(len(list(Path(d).glob("*.json"))) for d in args.records)
        if files and not records:  # there, but refused: the warnings above say why
            raise UsageError(
                f"none of the {files} record files in {where} could be used: the warnings "
                "above say why (damaged, or a file or directory others can write)"
            )
        raise UsageError(
            f"no tuning records{' of ' + ', '.join(args.site) if args.site else ''} in {where}: "
            "sweep the shapes first (a @tunedsl.workload under `tunedsl precompile --tune`, "
            "or `tunedsl sweep`)"
        )
    by_digest: dict[str, list[tuple[str, list[Any]]]] = {}
    for (digest, measured), recs in groups.items():
        by_digest.setdefault(digest, []).append((measured, recs))
    plans: list[Plan] = []
    for digest, found in sorted(by_digest.items()):
        found.sort(key=lambda item: -len(item[1]))
        measured, recs = found[0]
        first = recs[0]
        for other, skipped in found[1:]:
            print(
                terminal_text(
                    f"  note: {len(skipped)} records of {first.site} measured elsewhere "
                    f"({other}) are left out: a rule is measured on one GPU model and toolchain"
                ),
                file=sys.stderr,
            )
        keys = usable([swept_key(r) for r in recs])
        if not keys:
            print(
                terminal_text(f"  {first.site}: no rule (no swept key has a successful time)"),
                file=sys.stderr,
            )
            continue
        if note := budgeted_note(first.site, recs):
            print(terminal_text(note), file=sys.stderr)
        plans.append(Plan(digest, measured, first, keys, None, _swept(recs)))
        plans[-1].built = build_rule(keys, args.tolerance, args.max_configs)
    if cross_measure(plans, args) | leave_out_grown(plans):  # (both: each says what it did)
        for plan in plans:
            plan.built = build_rule(plan.keys, args.tolerance, args.max_configs)
    keep_other_gpus_rules(plans, out)
    print(f"{'site':<48} {'keys':>5} {'configs':>7} {'geomean':>8} {'p95':>7} {'max':>7}  file")
    try:
        for plan in plans:
            _save(plan, out)
    except OSError as err:
        raise UsageError(
            f"--out {out}: cannot write rule files there ({err.strerror or err}): name a "
            "directory you can write"
        ) from None
    why = _untrusted(out)
    if why is not None:
        print(
            f"  note: --out {out}: {why}, so the runtime ignores rules there; make it private "
            "(owned by you or root, chmod go-w) before shipping it",
            file=sys.stderr,
        )
    return 0


def _swept(records: Sequence[Any]) -> frozenset[Any] | None:
    """Every configuration the records timed, when each record timed all it had (an
    exhaustive search): then a configuration outside it is one the site gained since."""
    from tunedsl.model.rule import MAX_SWEPT

    if not all(str(r.strategy).rsplit(":", 1)[-1] == "exhaustive" for r in records):
        return None  # a budgeted search timed a subset: no configuration is known new
    configs = frozenset(c.config for r in records for c in r.results)
    return configs if 0 < len(configs) <= MAX_SWEPT else None


def _save(plan: Any, out: Path) -> None:
    from tunedsl.cli.rules_measure import device_of
    from tunedsl.model.rule import Rule
    from tunedsl.model.rule_notes import build_notes
    from tunedsl.store.records import keyed_toolchain

    first, built = plan.first, plan.built
    ctx = first.context if isinstance(first.context, dict) else {}
    kernel = {k: first.kernel.get(k) for k in ("qualname", "source_hash", "launch")}
    kernel = {k: v for k, v in kernel.items() if k != "launch" or v is not None}  # names it too
    rule = Rule(
        site=first.site,
        kernel=kernel,
        hints=ctx.get("hints"),
        env=ctx.get("env"),
        device=device_of(first.device),
        toolchain=keyed_toolchain(first.versions),
        configs=built.configs,
        families=built.families,
        validation=built.validation,
        built=time.time(),
        swept=plan.swept,
    )
    path = write_rule(rule, out)
    v = built.validation
    print(
        f"{_short(terminal_text(first.site), 48):<48} {len(plan.keys):>5} "
        f"{len(built.configs):>7} "
        f"{_x(v.get('geomean')):>8} {_x(v.get('p95')):>7} {_x(v.get('max')):>7}  {path.name}"
    )
    for note in build_notes(first.site, plan.keys, built):
        print(f"  note: {terminal_text(note)}", file=sys.stderr)


def _x(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else "-"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def _rule_files(paths_: Sequence[str]) -> list[Path]:
    from tunedsl.store.rules import SUFFIX, iter_rule_files

    if not all(p.strip() for p in paths_):
        raise UsageError("an empty path: name rule files or directories of them")
    files = iter_rule_files([Path(p) for p in paths_])
    missing = [p for p in paths_ if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
    others = [p for p in paths_ if not Path(p).is_dir() and not p.endswith(SUFFIX)]
    if others:  # never passed over: the runtime would not find such a file either
        raise UsageError(
            f"{', '.join(others)} is not a rule file: rule files are named <digest>{SUFFIX}, "
            "as `tunedsl rules build` writes them (the runtime finds them only by that name)"
        )
    if not files:
        raise UsageError(f"no rule files (*.rule.json) in {', '.join(paths_)}")
    return files


def _load(path: Path) -> Any:
    from tunedsl.model.rule import InvalidRule
    from tunedsl.store.records import InvalidRecord
    from tunedsl.store.rules import read_rule_file

    try:
        return read_rule_file(path)
    except (OSError, InvalidRule, InvalidRecord) as err:
        print(terminal_text(f"{path}: not a usable rule: {err}"), file=sys.stderr)
        return None


def show(files: Sequence[Path]) -> int:
    from tunedsl.store.rules import digest_of, rule_path

    bad = 0
    first: dict[str, Path] = {}
    untrusted = {d: _untrusted(d) for d in {path.parent for path in files}}
    for path in files:
        rule = _load(path)
        if rule is None:
            bad += 1
            continue
        digest = digest_of(rule)
        used = ""
        if untrusted[path.parent] is not None:
            used = (
                f" (never used: {path.parent} is not trusted ({untrusted[path.parent]}); "
                "fix: chown it to yourself or root and chmod go-w)"
            )
        elif path.name != rule_path(path.parent, digest).name:
            used = (
                f" (never used: the runtime looks for it as {rule_path(path.parent, digest).name})"
            )
        elif digest in first:
            used = (
                f" (for the same site and kernel as {first[digest]}, earlier on the path: the "
                "runtime uses the first measured on its GPU and Triton, `rules check` says which)"
            )
        else:
            first[digest] = path
        print(f"{terminal_text(path.name)}{used}\n{rule.describe()}")
        print(f"  note: {terminal_text(why)}\n" if (why := _classes(rule)) else "")
    return 1 if bad else 0


def _classes(rule: Any) -> str | None:
    """Which int arguments the rule's sweep passed only equal to 1 or only 64-bit."""
    from tunedsl.model.rule_unswept import int_classes_swept

    return int_classes_swept(fam.family for fam in rule.families)


def check(files: Sequence[Path], args: argparse.Namespace) -> int:
    """Each rule against this machine's GPU model and toolchain; with ``--script``, each
    rule's picks against tuning a sample of the shapes here."""
    from tunedsl.backends import triton as bt
    from tunedsl.cli.rules_measure import device_of, remeasure_picks
    from tunedsl.precompile.remeasure import cannot_measure
    from tunedsl.store.records import keyed_toolchain
    from tunedsl.store.rules import digest_of, measured_text, rule_path

    check_measure_args(args)
    if args.sample < 1:
        raise UsageError(f"--sample {args.sample}: expected at least 1 shape")
    if not args.bound >= 1:
        raise UsageError(f"--bound {args.bound}: expected a regret of at least 1.0")
    facts = bt.device_facts()
    why = cannot_measure(facts) if args.script is not None else None
    if why is not None:  # before judging: without a backend here every rule reads as stale
        print(f"cannot re-measure the rules' picks: {why}", file=sys.stderr)
        return 1
    here = device_of(facts)
    toolchain = keyed_toolchain(bt.toolchain())
    stale = bad = 0
    rules: dict[str, tuple[Path, Any]] = {}
    untrusted = {d: _untrusted(d) for d in {path.parent for path in files}}
    for where, why in sorted(untrusted.items()):
        if why is not None:
            print(
                f"{where}: not trusted ({why}): the runtime ignores the rules in it; fix: "
                "chown it to yourself or root and chmod go-w",
                file=sys.stderr,
            )
    found: dict[str, list[tuple[Path, Any]]] = {}
    for path in files:
        if untrusted[path.parent] is not None:
            bad += 1
            continue
        rule = _load(path)
        if rule is None:
            bad += 1
            continue
        digest = digest_of(rule)
        if path.name != rule_path(path.parent, digest).name:
            bad += 1
            print(
                terminal_text(
                    f"{path.name}: never used: the runtime looks for this rule as "
                    f"{rule_path(path.parent, digest).name}; rename it, or build it again"
                )
            )
            continue
        found.setdefault(digest, []).append((path, rule))

    def current(rule: Any) -> bool:
        return bool(rule.device.get("name") == here.get("name") and rule.toolchain == toolchain)

    for digest, candidates in found.items():
        # As at run time: the first measured here, else the first on the path.
        path, rule = next((c for c in candidates if current(c[1])), candidates[0])
        rules[digest] = (path, rule)
        for other, its in candidates:
            if other != path:  # a later current rule decides the keys outside path's range
                said = (
                    f"used only for the keys outside the range of {path}"
                    if current(its) and current(rule)
                    else f"not used: the runtime uses {path} for {rule.site} here"
                )
                print(terminal_text(f"{other}: {said}"))
        if current(rule):
            now = measured_text(here.get("name"), toolchain).replace(" with ", ", ", 1)
            print(terminal_text(f"{path.name}: current ({now})"))
        else:
            stale += 1
            print(
                terminal_text(
                    f"{path.name}: stale: measured on "
                    f"{measured_text(rule.device.get('name'), rule.toolchain)}, this machine "
                    f"is {measured_text(here.get('name'), toolchain)}; sweep here and run "
                    "`tunedsl rules build` again"
                )
            )
        if why := _classes(rule):  # what it decides, current or not
            print(terminal_text(f"  note: {why}"))
    failed = stale + bad
    if args.script is None or not rules:
        return 1 if failed else 0
    return 1 if remeasure_picks(rules, args) or failed else 0
