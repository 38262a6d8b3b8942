"""Record stores in lookup order: memory, local files, then Redis (store layer, pure Python).

``LayeredStore`` answers the ``RecordStore`` protocol over a list of stores. A lookup tries
this process's memory, then each store in order; a hit in a later writable store is written
through to the earlier writable ones (a Redis hit lands in the local files, so the next
process on this node needs no network). Read-only stores (``TUNEDSL_RECORDS_PATH``: records
shipped with an application) are never copied into the cache, and a shipped record newer
than the cache's record of the same key wins, so an application's updated records reach
the users of its previous release. A new decision is written to every writable store. The lock
takes each store's lock in order (local file lock first, so the processes of one node queue
locally and only one of them contends in Redis).

``get_or_tune`` is the decision pattern every caller uses: look, lock, look again, tune,
store; the loser of a lock race finds the winner's record after the lock.

``default_stores`` builds the list: the files, then Redis when ``TUNEDSL_REDIS_URL`` is set.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tunedsl.store.records import Record, absence_check
from tunedsl.warn import warn_once

#: What a lookup is about: None when a record states it, else which field differs.
Expect = Callable[[Record], str | None]

DEFAULT_LOCK_TIMEOUT_S = 3600.0


class MemoryStore:
    """Decisions of this process (never shared; first in every lookup)."""

    name = "memory"
    writable = True

    def __init__(self) -> None:
        self._records: dict[str, Record] = {}

    def get(self, digest: str) -> Record | None:
        return self._records.get(digest)

    def where(self, digest: str) -> str:
        return f"{digest[:12]} in this process's memory"

    def put(self, record: Record) -> bool:
        self._records[record.digest] = record
        return True

    def delete(self, digest: str) -> bool:
        return self._records.pop(digest, None) is not None

    def iter_records(self) -> Iterator[Record]:
        yield from list(self._records.values())

    @contextlib.contextmanager
    def lock(self, digest: str, timeout_s: float) -> Iterator[bool]:
        yield True  # the process-wide site lock already serialises this process


class LayeredStore:
    """``RecordStore`` over ``stores`` in lookup order, with this process's memory first."""

    name = "layered"
    writable = True

    def __init__(self, stores: Sequence[Any], memory: bool = True) -> None:
        self.stores: list[Any] = ([MemoryStore()] if memory else []) + list(stores)

    def get(self, digest: str, expect: Expect | None = None) -> Record | None:
        """The record of ``digest`` from the first store holding one. ``expect``: what the
        lookup is about (``model.record_identity.checker``); a record that states another
        identity (another device, kernel, Triton or key placed under this digest) is that
        store's miss, with one warning naming where it is and the field that differs."""
        for i, store in enumerate(self.stores):
            record = _checked(store, digest, store.get(digest), expect)
            if record is None:
                continue
            source = store
            if store.writable and not isinstance(store, MemoryStore):
                shipped = self._newer_read_only(digest, record, i, expect)
                if shipped is not None:
                    record, source = shipped
            for earlier in self.stores[:i]:  # write-through: the next lookup is nearer
                # A read-only (shipped) record is never copied into a persistent store: a
                # copy would shadow the update the application ships with its next release.
                if earlier.writable and (source.writable or isinstance(earlier, MemoryStore)):
                    earlier.put(record)
            return record
        return None

    def newest_where(
        self, digest: str, accept: Callable[[Record], bool], expect: Expect | None = None
    ) -> Record | None:
        """The newest record of ``digest`` that ``accept`` takes, from any store (``get``
        answers one store's, the newest over a shipped copy: another store may hold a record
        of the digest that ``get``'s answer hides, such as another space's)."""
        best = None
        for store in self.stores:
            record = _checked(store, digest, store.get(digest), expect)
            if record is not None and accept(record):
                if best is None or record.timestamp > best.timestamp:
                    best = record
        return best

    def absence_check(self) -> Callable[[str, str], bool] | None:
        """A function that says, by one existence test a directory and digest, whether no
        store has the record of either of two digests (True: none has), for as long as the
        environment that named the stores is unchanged; None where a store cannot say so
        without a lookup (this process's memory, Redis). Digests it does not call absent
        are looked up with ``get``."""
        from tunedsl.store.files import FileRecordStore

        if not all(isinstance(store, FileRecordStore) for store in self.stores):
            return None
        return absence_check([store.root for store in self.stores])

    def _newer_read_only(
        self, digest: str, record: Record, index: int, expect: Expect | None = None
    ) -> tuple[Record, Any] | None:
        """The first read-only store after ``index`` holding ``digest``, with its record,
        when that record is newer than ``record``: a shipped record updated since this user's
        copy was made (by tuning, or by an earlier tunedsl that copied shipped records)."""
        for store in self.stores[index + 1 :]:
            if store.writable:
                continue
            shipped = _checked(store, digest, store.get(digest), expect)
            if shipped is None:
                continue
            return (shipped, store) if shipped.timestamp > record.timestamp else None
        return None

    def put(self, record: Record) -> bool:
        """Write to every writable store; True when a persistent one (not memory) took it."""
        kept = False
        for store in self.stores:
            if store.writable and store.put(record) and not isinstance(store, MemoryStore):
                kept = True
        return kept

    def put_each(self, place: Callable[[Any], Record]) -> Record | None:
        """Write ``place(store)`` to every writable store (what goes to a store may depend on
        what it holds); the record the first persistent store took (None: none took one)."""
        kept = None
        for store in self.stores:
            if not store.writable:
                continue
            record = place(store)
            if store.put(record) and kept is None and not isinstance(store, MemoryStore):
                kept = record
        return kept

    def delete(self, digest: str) -> bool:
        return any([s.delete(digest) for s in self.stores if s.writable])

    def iter_records(self) -> Iterator[Record]:
        seen: set[str] = set()
        for store in self.stores:
            for record in store.iter_records():
                if record.digest not in seen:
                    seen.add(record.digest)
                    yield record

    @contextlib.contextmanager
    def lock(self, digest: str, timeout_s: float) -> Iterator[bool]:
        """Every writable store's lock, in order, within ``timeout_s`` in all; True when all
        were held."""
        deadline = time.monotonic() + timeout_s
        held = True
        with contextlib.ExitStack() as stack:
            for store in self.stores:
                if not store.writable or isinstance(store, MemoryStore):
                    continue
                left = max(0.0, deadline - time.monotonic())
                held = stack.enter_context(store.lock(digest, left)) and held
            yield held


def _checked(
    store: Any, digest: str, record: Record | None, expect: Expect | None
) -> Record | None:
    """``record`` when it states the identity ``expect`` wants (or nothing is expected);
    else None, with one warning naming where the record is and the field that differs."""
    if record is None or expect is None:
        return record
    problem = expect(record)
    if problem is None:
        return record
    where = store.where(digest) if hasattr(store, "where") else f"{digest[:12]} in {store.name}"
    warn_once(
        f"identity:{where}",
        f"ignoring tuning record {where}: it is not about this call ({problem}); a record "
        "of another device, kernel, Triton or key was stored under this key's digest, so "
        "the key is decided as if it had no record. Remove that record to silence this",
    )
    return None


def get_or_tune(
    store: Any,
    digest: str,
    tune: Callable[[], Record],
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    usable: Callable[[Record], bool] = lambda _: True,
) -> tuple[Record, str]:
    """The record of ``digest`` and where it came from (``"stored"`` or ``"tuned"``).

    Look; on a miss take the lock, look again (the lock's previous holder may just have
    stored it), else ``tune()`` and store the result in every layer. A lock that could not
    be taken in time (or a Redis that is down) means tuning without it, never waiting.
    """
    record = store.get(digest)
    if record is not None and usable(record):
        return record, "stored"
    with store.lock(digest, lock_timeout_s):
        record = store.get(digest)
        if record is not None and usable(record):
            return record, "stored"
        record = tune()
        store.put(record)
    return record, "tuned"


def default_stores() -> list[Any]:
    """The persistent stores in lookup order: the cache's record files and the read-only
    ``TUNEDSL_RECORDS_PATH`` directories, then Redis when ``TUNEDSL_REDIS_URL`` is set.
    Within ``paths.records_kept_in`` (a sweep task): that directory's files alone."""
    from tunedsl.store import files, paths

    if paths.records_kept_apart() is not None:
        return [files.FileRecordStore()]
    out: list[Any] = list(files.default_stores())
    redis_store = _redis_store()
    if redis_store is not None:
        out.append(redis_store)
    return out


# One Redis store per settings for the whole process: its back-off after a failure (a dead
# or slow server is skipped for 30 seconds) must outlive one lookup.
_redis_stores: dict[Any, Any] = {}
_redis_lock = threading.Lock()


def _redis_store() -> Any:
    from tunedsl import knobs

    if not knobs.redis_url():  # no Redis: its client module is never imported
        return None
    from tunedsl.store.redis_store import RedisRecordStore, RedisSettings

    settings = RedisSettings.from_env()
    if settings is None:
        return None
    with _redis_lock:
        store = _redis_stores.get(settings)
        if store is None:
            store = _redis_stores[settings] = RedisRecordStore(settings)
        return store


def default_layered(memory: bool = True) -> LayeredStore:
    return LayeredStore(default_stores(), memory=memory)
