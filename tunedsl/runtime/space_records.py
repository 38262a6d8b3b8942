"""A key's record per space (runtime layer): sites that tune one key from different spaces
each keep their own decision.

A record's digest names the site, the kernel, the device, the compiler and the key
(``runtime/decide.py``: ``context``), not the space the choice was made from. Two programs
that tune one site's key with different spaces (a space read from the environment or the
command line, one ``name=`` shared by two scripts, one ``autotune_launch`` kernel and key
with two ``configs=`` lists) would find each other's record, refuse it (it does not cover
their space) and tune again over it, so neither ever hit.

So each record states its space (``context["space"]``: ``space_digest``, of its
configurations as a set, or of a lazy space's axes and constraint: the constraint by what
it computes, ``constraint_text``), and a key holds one record per space: the first space
to tune it writes under the key's digest, each other space under a digest of the key's and its own (``own_digest``). A lookup reads the key's digest
and, where the record there states another space (or none) or there is none, the space's
own digest (before a shipped rule is asked: a measured record of the site's space always
decides over a rule's prediction), then the key's digest in every store (a shipped record
of this space behind the cache's newer one of another). Tuning, ``cache import`` and
``tunedsl sweep`` place a record so in each store, by what that store holds (``put_beside``).

A record of another space never decides this one's key (its timings are still reused when
this space tunes; ``mode="cached"`` still takes its choice when this space has no record).
A record that states no space, written before records stated one, decides the key as it did:
when it covers the candidates (``decide._usable``).
A lazy space's record stating a digest of its constraint's name alone (``repr``, what such
digests held before) is another space's: another constraint of that name may have chosen it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tunedsl.model.canonical import canonical_json

if TYPE_CHECKING:
    from tunedsl.model.settings import Settings
    from tunedsl.runtime.subject import Subject
    from tunedsl.store.layered import Expect, LayeredStore
    from tunedsl.store.records import Record

#: The key of a record's ``context`` that names its space, and the one that lists the
#: configurations of it ``prune=`` dropped for the key (at most ``MAX_PRUNED`` of them).
SPACE = "space"
PRUNED = "pruned"
MAX_PRUNED = 1024

# Settings objects (held, so their ids stay theirs) -> their space's digest.
_digests: dict[int, tuple[Settings, str]] = {}
_MAX_DIGESTS = 64


def space_digest(settings: Settings) -> str:
    """The digest of the space ``settings`` tunes from: its configurations as a set (their
    order is not the space), or a space too large to list by its axes and constraint (what
    the constraint computes with: ``constraint_text``)."""
    known = _digests.get(id(settings))
    if known is not None and known[0] is settings:
        return known[1]
    if settings.large:
        text = "lazy:" + repr(settings.space) + constraint_text(settings.space)
    else:
        text = canonical_json(sorted(c.dumps() for c in settings.configs))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    if len(_digests) >= _MAX_DIGESTS:
        _digests.clear()
    _digests[id(settings)] = (settings, digest)
    return digest


def constraint_text(space: Any) -> str:
    """What a lazy space's constraint computes with, as text alike in every process for the
    same code and values: its code and what it reads, binds or is bound to (``self.ok`` of
    an object with ``hi=128`` is not the one with ``hi=32``), read as a heuristic's function
    is (``backends/heuristic_reads.state_text``), running none of the user's code. Empty for
    a space without one, whose axes (its repr) are all of it. A constraint whose reads
    change as it runs (a counter, a memo table of its own) is another space once they have."""
    import inspect

    from tunedsl.backends.heuristic_reads import cached_function, state_text

    constraint = inspect.getattr_static(space, "constraint", None)
    # (one under ``functools.cache``: its function, whose state its cache is not)
    return "" if constraint is None else "\0constraint:" + state_text(cached_function(constraint))


def made_in(record: Record | None, settings: Settings) -> bool:
    """Whether a decision this process made with ``record`` (for another call key of the
    record's key) is one of ``settings``' space as far as the configurations it was compared
    by cannot tell: a lazy space lists none, so its record must state it (a decision with
    none, a default or a rule's, is decided again: that reads no tuning)."""
    if not settings.large:
        return True
    return record is not None and stated(record) == space_digest(settings)


def stated(record: Record) -> str | None:
    """The space a record states it was tuned from; None for one written before records
    stated it."""
    space = record.context.get(SPACE)
    return space if isinstance(space, str) else None


def own_digest(digest: str, space: str) -> str:
    """Where the record of a key (``digest``) for ``space`` goes when another space's record
    holds the key's digest."""
    return hashlib.sha256((digest + own_tail(space)).encode()).hexdigest()


def own_tail(space: str) -> str:
    """What ``own_digest`` hashes after the key's digest, for ``space`` (made once by a
    caller that works out many keys' own digests)."""
    return f":{SPACE}:{space}"


def find(
    stores: LayeredStore, subject: Subject, found: Record | None, expect: Expect
) -> tuple[Record | None, bool]:
    """The record for ``subject``'s space, given ``found`` (the record under the key's
    digest), and whether it is another space's (whose choice does not decide this key)."""
    if found is None:
        return _alone(stores, subject, expect), False
    space = space_digest(subject.settings)
    theirs = stated(found)
    if theirs == space:
        return found, False
    own = stores.get(own_digest(subject.digest, space), expect=expect)
    if own is not None and stated(own) == space:
        return own, False
    # ``found`` is the newest record of the key's digest over the stores; another store may
    # hold this space's own there all the same (a record shipped for this space behind the
    # cache's later tuning from an earlier space, or the reverse): that one decides.
    behind = stores.newest_where(subject.digest, lambda r: stated(r) == space, expect)
    if behind is not None:
        return behind, False
    return found, theirs is not None


def _alone(stores: LayeredStore, subject: Subject, expect: Expect) -> Record | None:
    """The record of ``subject``'s space under its space's own digest while the key's
    digest holds none (the other space's record there was removed, or this one was imported
    or shipped alone): a measured record of the site's space, which decides before a rule
    would. One in this cache is moved to the key's digest, where the first space to tune a
    key keeps its record; a shipped one is used where it is, never copied into the cache."""
    import os

    from tunedsl.store import paths
    from tunedsl.store import records as store

    space = space_digest(subject.settings)
    own = own_digest(subject.digest, space)
    found = stores.get(own, expect=expect)
    if found is None or stated(found) != space:
        return None
    if not os.path.lexists(store.record_path(own, paths.records_dir())):
        return found
    moved = replace(found, digest=subject.digest)
    if stores.put(moved):
        store.remove_record_files(own)
    return moved


def put_beside(stores: LayeredStore, record: Record, expect: Expect | None = None) -> Record:
    """Write ``record`` (under its key's digest) to every writable store, in each beside a
    record of another space (or of none stated) that store holds for the key: under its
    space's own digest there (``stored_beside``). Each store is placed by what it holds, so
    a record never goes over another space's in Redis because the cache holds none, and
    never stays behind a store's earlier record of its own space because another store
    holds another space's. A record there of another identity (``expect``) is not the key's.
    Returns the record as the first store that took it keeps it (this node's cache)."""

    def place(store: Any) -> Record:
        here = store.get(record.digest)
        if here is not None and expect is not None and expect(here) is not None:
            here = None
        return stored_beside(record, here)

    kept = stores.put_each(place)
    return record if kept is None else kept


def stored_beside(record: Record, here: Record | None) -> Record:
    """``record`` as a store that holds ``here`` under its digest keeps it (``cache
    import``): where ``here`` states another space (or none) and ``record`` states one, under
    its space's own digest, as tuning would have put it, so neither hides the other."""
    space = stated(record)
    if here is None or space is None or stated(here) == space:
        return record
    return replace(record, digest=own_digest(record.digest, space))


def noted(subject: Subject, candidates: Sequence[Any] | None = None) -> dict[str, Any]:
    """The entries of a new record's ``context`` that state what it was tuned from: its
    space and, for a space small enough to list, the configurations of it that ``prune=``
    dropped for the key (``candidates``: what prune kept; None: the whole space), at most
    ``MAX_PRUNED``: no candidates of the key, never timed there, so a rule built from the
    record leaves them out rather than counting them as never timed (``tunedsl rules
    build``)."""
    settings = subject.settings
    out: dict[str, Any] = {SPACE: space_digest(settings)}
    if candidates is not None and not settings.large and len(candidates) < len(settings.configs):
        kept = set(candidates)
        dropped = [c.to_json() for c in settings.configs if c not in kept]
        if len(dropped) <= MAX_PRUNED:
            out[PRUNED] = dropped
    return out


def pruned(record: Record) -> frozenset[Any]:
    """The configurations ``record`` states ``prune=`` dropped for its key (none stated: a
    record of a space too large to list, of more than ``MAX_PRUNED`` dropped, or written
    before records stated them). A damaged entry states nothing."""
    from tunedsl.errors import UsageError
    from tunedsl.model.config import Config

    listed = record.context.get(PRUNED)
    if not isinstance(listed, list) or len(listed) > MAX_PRUNED:
        return frozenset()
    try:
        return frozenset(Config.from_json(c) for c in listed)
    except (UsageError, TypeError, ValueError):  # not configurations (an unhashable value)
        return frozenset()
