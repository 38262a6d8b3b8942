"""``tunedsl cache ... --remote``: the same actions on the Redis record store
(``TUNEDSL_REDIS_URL``) instead of this machine's record files.

    tunedsl cache ls --remote [--json]         records in Redis (invalid values on stderr)
    tunedsl cache show ID --remote [--json]    one record
    tunedsl cache clear ID... | --kernel NAME | --site TEXT | --all  --remote
    tunedsl cache export FILE [ID...] --remote a bundle, as ``tunedsl cache export``
    tunedsl cache import FILE --remote         validate every record, then add them

Bundles are read and written by ``cli/bundle.py`` for both, so records move freely between
a machine's files and the fleet's Redis. Arguments are checked by the local command's own
code (``cli/cache_select.py``), and a record's text is escaped for the terminal the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tunedsl.cli.bundle import read_bundle, write_bundle
from tunedsl.cli.cache_select import check_id, clear_selection, no_match, terminal_text
from tunedsl.errors import UsageError


def remote_store() -> Any:
    """The store of ``TUNEDSL_REDIS_URL``, reachable now, or a UsageError saying why not."""
    from tunedsl.store.redis_store import RedisRecordStore

    store = RedisRecordStore.from_env()
    if store is None:
        raise UsageError(
            "--remote needs TUNEDSL_REDIS_URL=redis://[:PASSWORD@]HOST:PORT/DB (the Redis "
            "record store)"
        )
    store.check()
    return store


def main(args: argparse.Namespace) -> int:
    handler = {"ls": ls, "show": show, "clear": clear, "export": export, "import": import_}
    return handler[args.cache_command](args)


def _entries(store: Any) -> tuple[list[tuple[str, Any]], list[str]]:
    good, bad = [], []
    for key, record in store.iter_entries():
        if record is None:
            bad.append(key)
        else:
            good.append((key, record))
    return good, bad


def _summary(record: Any, key: str) -> dict[str, Any]:
    return {
        "id": record.id,
        "digest": record.digest,
        "site": record.site,
        "kernel": record.kernel.get("qualname"),
        "chosen": record.chosen.to_json(),
        "device": record.device.get("name"),
        "configs": len(record.results),
        "tuning_s": record.tuning_s,
        "timestamp": record.timestamp,
        "key": key,
    }


def ls(args: argparse.Namespace) -> int:
    store = remote_store()
    good, bad = _entries(store)
    rows = [_summary(r, k) for k, r in good]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        if not rows:
            print("no tuning records in Redis")
        for row in rows:
            chosen = ", ".join(f"{k}={v}" for k, v in row["chosen"].items())
            print(
                terminal_text(
                    f"{row['id']}  {row['site']}  {row['kernel']}  [{chosen}]  {row['device']}"
                )
            )
    for key in bad:
        print(terminal_text(f"invalid: {key}"), file=sys.stderr)
    return 0


def _find(store: Any, ident: str) -> Any:
    prefix = check_id(ident)
    hits = [r for _, r in _entries(store)[0] if r.digest.startswith(prefix)]
    if not hits:
        raise UsageError(
            f"no tuning record with id {ident!r} in Redis; `tunedsl cache ls --remote` lists them"
        )
    if len(hits) > 1:
        raise UsageError(f"record id {ident!r} is ambiguous ({len(hits)} records)")
    return hits[0]


def show(args: argparse.Namespace) -> int:
    record = _find(remote_store(), args.id)
    if args.json:
        print(json.dumps(record.to_json(), indent=1))
        return 0
    print(f"record {record.id} (Redis)")
    print(terminal_text(f"  site:    {record.site}"))
    print(
        terminal_text(f"  kernel:  {record.kernel.get('qualname')} ({record.kernel.get('file')})")
    )
    print(f"  key:     {json.dumps(record.key)}")
    print(terminal_text(f"  device:  {record.device.get('name')} ({record.device.get('type')})"))
    print(f"  chosen:  {record.chosen}")
    for r in sorted(record.results, key=lambda r: (r.status != "ok", r.median_ms or 0.0)):
        mark = "*" if r.config == record.chosen else " "
        if r.status == "ok":
            print(f"  {mark} {r.config!s:<50} {r.median_ms:10.4f} ms")
        else:
            print(terminal_text(f"  {mark} {r.config!s:<50} {r.status}: {r.reason}"))
    return 0


def clear(args: argparse.Namespace) -> int:
    ids, everything = clear_selection(args)
    store = remote_store()
    good, bad = _entries(store)
    keys = []
    for key, record in good:
        if ids and not any(record.digest.startswith(i) for i in ids):
            continue
        if args.kernel is not None and record.kernel.get("qualname") != args.kernel:
            continue
        if args.site is not None and args.site not in record.site:
            continue
        keys.append(key)
    if everything:
        keys.extend(bad)  # clearing everything removes invalid values too
    removed = store.delete_keys(keys)
    missed = no_match(args, removed, " --remote")
    print(f"removed {removed} record{'s' if removed != 1 else ''} from Redis" + missed)
    return 1 if missed else 0  # a selection that matched nothing fails, as `show ID` does


def export(args: argparse.Namespace) -> int:
    ids = [check_id(i) for i in args.ids]
    good, _ = _entries(remote_store())
    picked = [r for _, r in good if not ids or any(r.digest.startswith(i) for i in ids)]
    for ident in ids:
        if not any(r.digest.startswith(ident) for r in picked):
            raise UsageError(
                f"no tuning record with id {ident!r} in Redis; `tunedsl cache ls --remote` "
                "lists them"
            )
    if write_bundle(args.file, picked):
        print(f"exported {len(picked)} record{'s' if len(picked) != 1 else ''} from Redis")
    return 0


def import_(args: argparse.Namespace) -> int:
    from tunedsl.runtime.space_records import stored_beside

    store = remote_store()
    newest: dict[str, Any] = {}  # a key listed twice (bundles joined): its newest record
    for record in read_bundle(args.file):
        # A record of another space than Redis holds for the key goes beside it, under its
        # space's own digest, as tuning would have put it (``runtime/space_records.py``).
        record = stored_beside(record, store.get(record.digest))
        if record.digest not in newest or record.timestamp >= newest[record.digest].timestamp:
            newest[record.digest] = record
    parsed = list(newest.values())
    if not getattr(args, "overwrite", False):  # a key tuned since the bundle was made stays
        newer = {r.digest for r in parsed if _newer_there(store, r)}
        parsed = [r for r in parsed if r.digest not in newer]
    else:
        newer = set()
    failed = [r.id for r in parsed if not store.put(r)]
    if failed:
        raise UsageError(f"Redis refused {len(failed)} record(s) ({', '.join(failed[:5])})")
    kept = (
        f"; kept {len(newer)} record{'s' if len(newer) != 1 else ''} newer than the bundle's "
        "(--overwrite replaces them)"
    )
    print(
        f"imported {len(parsed)} record{'s' if len(parsed) != 1 else ''} into Redis"
        + (kept if newer else "")
    )
    return 0


def _newer_there(store: Any, incoming: Any) -> bool:
    there = store.get(incoming.digest)
    return there is not None and there.timestamp > incoming.timestamp
