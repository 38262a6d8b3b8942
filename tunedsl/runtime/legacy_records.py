"""Records written under a site's older identities, found and re-stored under its current
one (runtime layer).

Three older forms are looked for when a site misses (a record of the site's space under its
space's own digest is the current identity's: ``runtime/space_records.py`` finds it):

- on a GPU, the kernel's source hash as Triton's own hash (which covers the line each of
  its functions starts on) where it is now that hash less the lines: a record stored so,
  for the kernel where it is now, is the same kernel's, lines and all;
- keyed by the kernel's module name (``<base name>:<scope>:<kernel>`` with the module in
  the digest): that name was ``__main__`` under ``tunedsl run`` and ``python -m``, the
  stem under ``tunedsl precompile``, the dotted name under ``import``; each of them is
  tried, so a record written any of those ways is found;
- tunedsl 0.1's ``file:line:col`` with every tool version in the digest (the same module
  names).

A record found is stored under the current digest and its old file (and lock) is removed
from this machine's records directory, so ``tunedsl cache ls`` shows one row. Neither older
digest held a site's launch text (a DSL site's ``blocks=`` and ``$`` arguments, an
``autotune_launch`` call's ``grid=``, ``args=``, ``kwargs=`` and ``key=``), nor did the
current identity's digest before ``autotune_launch`` calls had one (a fourth form, tried
first), so such a record is moved only from its own file, unchanged since the record was
measured; otherwise the key is tuned again (a launch edited since, a call inserted above
that took the old call's ordinal, or a file of the same name elsewhere, would be served a
decision measured on another launch).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from tunedsl.model import identity
from tunedsl.model.key_digest import KeyDigest

if TYPE_CHECKING:
    from tunedsl.runtime.subject import Subject
    from tunedsl.store.layered import LayeredStore


def migrate(subject: Subject, stores: LayeredStore) -> Any:
    """The record ``subject``'s site stored under an older identity and digest, re-stored
    under ``subject.digest``; None when there is none, and then, once per site, one warning
    where records of another version of its kernel are shipped (or, in ``cached`` mode,
    in the cache): they decide no key of it."""
    found = _migrate(subject, stores)
    if found is None and subject.site_id not in _looked:
        _looked.add(subject.site_id)
        _say_other_kernels(subject)
    return found


_looked: set[str] = set()  # the sites whose records of another kernel were looked for


def _say_other_kernels(subject: Subject) -> None:
    """One warning where the shipped records (in ``cached`` mode, the cache's too) hold
    records of ``subject``'s site measured on another version of its kernel, naming one
    and what changed: the key is tuned again, or launches the default, in silence else."""
    from tunedsl.store import paths
    from tunedsl.store import records as store
    from tunedsl.store.rules import kernel_changes
    from tunedsl.warn import warn_once

    if paths.records_kept_apart() is not None:  # a sweep's task tunes every key
        return
    cached = subject.settings.mode == "cached"
    roots = [*([paths.records_dir()] if cached else []), *store.extra_record_dirs()]
    kernel = subject.context["kernel"]
    found = store.records_of_other_kernels(subject.site_id, kernel, roots)
    if not found:
        return
    path, source_hash, launch = found[0]
    was = {"source_hash": source_hash, "launch": launch}
    changed = ", ".join(kernel_changes(was, kernel, "it was measured"))
    then = "launches the site's default" if cached else "is tuned again"
    warn_once(
        f"record-other-kernel:{subject.site_id}",
        f"{path} is a tuning record for {subject.site_id} measured on another version of "
        f"its kernel ({changed} changed since), so it decides no key of this kernel: each "
        f"key {then} instead. Tune the kernel as it is now (`tunedsl sweep`, say) and ship "
        "its records (or rules: `tunedsl rules build`)",
        stacklevel="user",
    )


def _migrate(subject: Subject, stores: LayeredStore) -> Any:
    from tunedsl.model.record_identity import checker
    from tunedsl.store import records as store

    line_bound = _with_lines(subject, stores)
    if line_bound is not None:
        return line_bound
    # An older identity keyed the same device, kernel source, Triton and key.
    expect = checker(subject.context, subject.readable)
    for old_site, old_ctx in _older(subject):
        try:
            old_digest = KeyDigest(old_site, old_ctx)(subject.readable)
        except Exception:  # a context the older version could not have written
            continue
        if old_digest == subject.digest:
            continue
        old = stores.get(old_digest, expect=expect)
        if old is None or old.site != old_site:
            continue
        if not _same_launch(subject, old):
            return None  # tuned again, under the launch as it is written now
        launch = subject.context["kernel"].get("launch")  # what it was measured on, it is
        new = dataclasses.replace(
            old,
            site=subject.site_id,
            digest=subject.digest,
            kernel=old.kernel if launch is None else {**old.kernel, "launch": launch},
            location=identity.location(subject.site_id) or old.location,
        )
        if stores.put(new):
            store.remove_record_files(old_digest)
        return new
    return None


def _with_lines(subject: Subject, stores: LayeredStore) -> Any:
    """The record of ``subject``'s key stored when a compiled kernel's source hash was
    Triton's own (lines included), re-stored under ``subject.digest``; None when there is
    none, or it is another space's."""
    from tunedsl.backends.kernel_source import line_bound_source_hash
    from tunedsl.model.record_identity import checker
    from tunedsl.runtime import space_records
    from tunedsl.store import records as store

    info = subject.info
    try:
        old_hash = line_bound_source_hash(subject.kernel, info.constexpr_names, info.defaults)
    except Exception:  # no source to hash: nothing was stored under it either
        return None
    if old_hash is None or old_hash == info.source_hash:
        return None
    kernel = {**subject.context["kernel"], "source_hash": old_hash}
    old_ctx = {**subject.context, "kernel": kernel}
    old_digest = KeyDigest(subject.site_id, old_ctx)(subject.readable)
    expect = checker(old_ctx, subject.readable)  # the device, Triton and key of this lookup
    was = dataclasses.replace(subject, context=old_ctx, digest=old_digest)
    old, foreign = space_records.find(stores, was, stores.get(old_digest, expect=expect), expect)
    if old is None or foreign or old.site != subject.site_id:
        return None
    new = dataclasses.replace(
        old,
        digest=subject.digest,
        kernel={**old.kernel, "source_hash": info.source_hash},
        location=identity.location(subject.site_id) or old.location,
    )
    if stores.put(new):
        store.remove_record_files(old.digest)
    return new


def _same_launch(subject: Subject, old: Any) -> bool:
    """Whether ``old``, written under an identity whose digest had no launch text, was
    measured on the launch the site has now: its ``blocks=`` and ``$`` arguments. Only the
    file can tell: the record's own file (``location``), unchanged since it was measured.
    A site whose digest holds no launch text (its file could not be read) has none to check."""
    import os

    if subject.context["kernel"].get("launch") is None:
        return True
    here = identity.location(subject.site_id).rsplit(":", 2)[0]
    there = str(old.location).rsplit(":", 2)[0]
    try:
        return os.path.samefile(here, there) and os.stat(here).st_mtime <= float(old.timestamp)
    except (OSError, ValueError):  # no location, or a file gone: nothing shows it is the same
        return False


def _older(subject: Subject) -> list[tuple[str, dict[str, Any]]]:
    """(identity, context) pairs an older tunedsl wrote this site's key under, newest first."""
    by_base_name, legacy = identity.previous_ids(subject.site_id)
    if not by_base_name:
        return []
    ctx = subject.context
    info = subject.info
    out: list[tuple[str, dict[str, Any]]] = []
    if ctx["kernel"].get("launch") is not None:  # this identity, before its digest held it
        unlaunched = {k: v for k, v in ctx["kernel"].items() if k != "launch"}
        out.append((subject.site_id, {**ctx, "kernel": unlaunched}))
    modules = dict.fromkeys((info.module, "__main__", *identity.module_names(info.file)))
    kernel = {k: v for k, v in ctx["kernel"].items() if k not in ("file", "launch")}
    for module in modules:
        out.append((by_base_name, {**ctx, "kernel": {**kernel, "module": module}}))
    if legacy:
        from tunedsl.backends import triton as bt

        toolchain = bt.toolchain()  # 0.1 keyed every version
        for module in modules:
            old = {**ctx, "kernel": {**kernel, "module": module}, "toolchain": toolchain}
            out.append((legacy, old))
    return out
