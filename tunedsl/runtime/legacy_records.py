"""Records of tunedsl 0.1, found and re-stored under a site's new identity (runtime layer).

tunedsl 0.1 named a site ``file:line:col`` and keyed every tool version into the digest;
a site that misses looks for the record 0.1 would have written and moves it, once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tunedsl.model import identity


def migrate(ident: str, digest: str, readable: Any, ctx: dict[str, Any]) -> Any:
    """The record this site stored under its legacy identity and digest (tunedsl 0.1:
    ``file:line:col``, every tool version in the digest), re-stored under ``digest``; None
    when there is none. The old file (and its lock) is removed once the new one is written."""
    from tunedsl.model import keys
    from tunedsl.store import paths
    from tunedsl.store import records as store

    legacy = identity.legacy_of(ident)
    if not legacy:
        return None
    try:
        from tunedsl.backends import triton as bt

        old_ctx = {**ctx, "toolchain": bt.toolchain()}  # 0.1 keyed every version
        old_digest = keys.digest(legacy, readable, old_ctx)
    except Exception:  # a context 0.1 could not have written: nothing to migrate
        return None
    if old_digest == digest:
        return None
    old = store.load_from(paths.records_dir(), old_digest)
    if old is None or old.site != legacy:
        return None
    new = dataclasses.replace(old, site=ident, digest=digest, location=identity.location(ident))
    if store.save_record(new):
        store.remove_record_files(old_digest)
    return new
