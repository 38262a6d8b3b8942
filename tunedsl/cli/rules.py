"""``tunedsl rules``: decisions for keys never tuned, built ahead of time from a sweep.

    tunedsl rules build [--site ID ...] [--records DIR ...] --out DIR [--tolerance 0.03]
    tunedsl rules show DIR|FILE ...
    tunedsl rules check DIR|FILE ...

``build`` turns each site's tuning records (the cache's, or ``--records`` directories) into a
rule file in ``--out`` (docs/shapes.md); ship that directory on ``TUNEDSL_RECORDS_PATH``.
``show`` prints rules as tables; ``check`` says which rules were measured on another GPU model
or Triton version than this machine's (stale).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tunedsl.errors import UsageError


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "rules", help="decision rules for keys never tuned: build, show, check"
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="build rules from tuning records")
    build.add_argument("--site", action="append", default=[], help="only this site (repeat)")
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
    for name, text in (("show", "print rules as tables"), ("check", "find stale rules")):
        p = sub.add_parser(name, help=text)
        p.add_argument("paths", nargs="+", metavar="DIR|FILE")
    return parser


def main(args: argparse.Namespace) -> int:
    if args.action == "build":
        return build(args)
    files = _rule_files(args.paths)
    if args.action == "show":
        return show(files)
    return check(files)


def _records(dirs: Sequence[str]) -> Iterable[Any]:
    from tunedsl.store.files import FileRecordStore

    if not dirs:
        yield from FileRecordStore().iter_records()
        return
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            raise UsageError(f"--records {d}: not a directory")
        yield from FileRecordStore(root, writable=False).iter_records()


def _groups(records: Iterable[Any], sites: Sequence[str]) -> dict[tuple[str, str], list[Any]]:
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
        measured = canonical_json([_device(r.device), keyed_toolchain(r.versions)])
        keyed = groups.setdefault((digest, measured), {})
        text = canonical_json(r.key)
        if text not in keyed or keyed[text].timestamp < r.timestamp:
            keyed[text] = r
    return {g: list(v.values()) for g, v in groups.items()}


def _device(device: dict[str, Any]) -> dict[str, Any]:
    return {k: device.get(k) for k in ("type", "name", "capability", "arch")}


def build(args: argparse.Namespace) -> int:
    from tunedsl.model.rule import MAX_CONFIGS, Rule
    from tunedsl.model.rule_build import SweptKey
    from tunedsl.model.rule_build import build as build_rule
    from tunedsl.store.records import keyed_toolchain
    from tunedsl.store.rules import save_rule

    if not 0 <= args.tolerance < 1:
        raise UsageError(f"--tolerance {args.tolerance}: expected a number in [0, 1)")
    if not 1 <= args.max_configs <= MAX_CONFIGS:
        raise UsageError(f"--max-configs {args.max_configs}: expected 1 to {MAX_CONFIGS}")
    groups = _groups(_records(args.records), args.site)
    if not groups:
        where = ", ".join(args.records) or "this user's cache"
        raise UsageError(
            f"no tuning records{' of ' + ', '.join(args.site) if args.site else ''} in {where}: "
            "sweep the shapes first (a @tunedsl.workload under `tunedsl precompile --tune`, "
            "or `tunedsl sweep`)"
        )
    by_digest: dict[str, list[tuple[str, list[Any]]]] = {}
    for (digest, measured), recs in groups.items():
        by_digest.setdefault(digest, []).append((measured, recs))
    out = Path(args.out)
    print(f"{'site':<48} {'keys':>5} {'configs':>7} {'geomean':>8} {'p95':>7} {'max':>7}  file")
    for _digest, found in sorted(by_digest.items()):
        found.sort(key=lambda item: -len(item[1]))
        _measured, recs = found[0]
        first = recs[0]
        for other, skipped in found[1:]:
            print(
                f"  note: {len(skipped)} records of {first.site} measured elsewhere ({other}) "
                "are left out: a rule is measured on one GPU model and toolchain",
                file=sys.stderr,
            )
        keys = [
            SweptKey(
                r.key,
                {c.config: (c.median_ms if c.status == "ok" else None) for c in r.results},
            )
            for r in recs
        ]
        try:
            built = build_rule(keys, args.tolerance, args.max_configs)
        except ValueError as err:
            print(f"  {first.site}: no rule ({err})", file=sys.stderr)
            continue
        ctx = first.context if isinstance(first.context, dict) else {}
        rule = Rule(
            site=first.site,
            kernel={k: first.kernel.get(k) for k in ("qualname", "source_hash")},
            hints=ctx.get("hints"),
            env=ctx.get("env"),
            device=_device(first.device),
            toolchain=keyed_toolchain(first.versions),
            configs=built.configs,
            families=built.families,
            validation=built.validation,
            built=time.time(),
        )
        path = save_rule(rule, out)
        v = built.validation
        print(
            f"{_short(first.site, 48):<48} {len(keys):>5} {len(built.configs):>7} "
            f"{_x(v.get('geomean')):>8} {_x(v.get('p95')):>7} {_x(v.get('max')):>7}  {path.name}"
        )
        if v.get("unmeasured"):
            print(
                f"  note: {v['unmeasured']} held-out picks were never timed on their key "
                "(the records measured a subset); sweep with search='exhaustive' to time them",
                file=sys.stderr,
            )
    return 0


def _x(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else "-"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def _rule_files(paths_: Sequence[str]) -> list[Path]:
    from tunedsl.store.rules import iter_rule_files

    files = iter_rule_files([Path(p) for p in paths_])
    missing = [p for p in paths_ if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
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
        print(f"{path}: not a usable rule: {err}", file=sys.stderr)
        return None


def show(files: Sequence[Path]) -> int:
    bad = 0
    for path in files:
        rule = _load(path)
        if rule is None:
            bad += 1
            continue
        print(f"{path.name}\n{rule.describe()}\n")
    return 1 if bad else 0


def check(files: Sequence[Path]) -> int:
    """Each rule against this machine's GPU model and toolchain."""
    from tunedsl.backends import triton as bt
    from tunedsl.store.records import keyed_toolchain

    here = _device(bt.device_facts())
    toolchain = keyed_toolchain(bt.toolchain())
    stale = bad = 0
    for path in files:
        rule = _load(path)
        if rule is None:
            bad += 1
            continue
        if rule.device.get("name") == here.get("name") and rule.toolchain == toolchain:
            print(f"{path.name}: current ({here.get('name')}, {toolchain})")
            continue
        stale += 1
        print(
            f"{path.name}: stale: measured on {rule.device.get('name')} with {rule.toolchain}, "
            f"this machine is {here.get('name')} with {toolchain}; sweep here and run "
            "`tunedsl rules build` again"
        )
    return 1 if stale or bad else 0
