"""A record store in Redis, shared by every node of a fleet (store layer, redis-py).

``TUNEDSL_REDIS_URL=redis://[:PASSWORD@]HOST:PORT/DB`` (``rediss://`` for TLS) names the
server. Keys carry a prefix and the same digest the record files use, so one decision has
one name everywhere::

    tunedsl:v1:record:<digest>    the record's JSON text (exactly what the file holds)
    tunedsl:v1:lock:<digest>      the tuning lock of that key (its holder and a random
                                  token as JSON, always with an expiry)

The digest already covers the device, the toolchain and the schema, so nodes with another
GPU model or Triton never see each other's decisions. Values are plain JSON validated by
``Record.from_json`` exactly as a file is; nothing is unpickled, and a value that fails
validation is a miss with one ``CacheWarning``. So is a value over the record files' size
limit (its length is asked first, so it is never transferred) and a key of another Redis
type: the server answered, so neither counts as a failure of the server.

A dead or slow Redis never breaks or stalls a launch: connecting and each reply have short
timeouts (0.5 s, or the URL's ``?socket_timeout=``), a request's whole reply four times that,
the first failure (a reply that is not what was asked for included) warns once, and the store
then answers "miss" without trying the network for 30 seconds before it tries again. A server
on this host run by another user is never sent anything, the password included
(``store/redis_peer.py``).

The lock is ``SET key value NX PX ttl``; it is released only by its owner (a Lua
compare-and-delete) and refreshed the same way while held, so a holder that dies frees the
key after one ``ttl`` while a long tuning run keeps it. A lock found without an expiry (left
by hand or by another program) is given one, so it frees the key after one ``ttl`` too. A
waiter prints who holds the lock as the file lock's waiters do (``store/locks.py``).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tunedsl import knobs
from tunedsl.errors import UsageError
from tunedsl.store.locks import WaitNotices, describe_owner, owner_note
from tunedsl.store.records import MAX_RECORD_BYTES, Record
from tunedsl.store.redis_peer import UntrustedServer, connection_class
from tunedsl.warn import warn_once

KEY_PREFIX = "tunedsl:v1:"
DEFAULT_TIMEOUT_S = 0.5  # connect and read, each
DEFAULT_BACKOFF_S = 30.0
DEFAULT_LOCK_TTL_S = 30.0  # a dead holder frees the key after this; a live one refreshes it
DEFAULT_POLL_S = 0.05
# Record values read by one request at most (beyond the first): listing a large store
# never holds more than this in memory at once.
BATCH_BYTES = 8 * 1024 * 1024

# Release and refresh only when the lock still holds our token (another owner may have
# taken it after an expiry).
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
_REFRESH = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
# Take the lock, or give a lock without an expiry one (it would otherwise hold the key
# forever).
_ACQUIRE = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('pttl', KEYS[1]) == -1 then redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
# The lock's value (or its Redis type, when it is not a string) and its time to live.
_HOLDER = """
local t = redis.call('type', KEYS[1]).ok
local v = t
if t == 'string' then v = redis.call('get', KEYS[1]) end
return {t, v, redis.call('pttl', KEYS[1])}
"""
# Record values, each checked before it is read: a string within ARGV[1] bytes is its
# value, a longer one its length (never sent), another type {type}, a missing key nil.
# Stops early, with fewer entries, once ARGV[2] bytes are gathered (the caller goes on).
_READ = """
local out, total = {}, 0
for i, k in ipairs(KEYS) do
  local t = redis.call('type', k).ok
  if t == 'none' then out[i] = false
  elseif t ~= 'string' then out[i] = {t}
  else
    local n = redis.call('strlen', k)
    if n > tonumber(ARGV[1]) then out[i] = n
    else
      if i > 1 and total + n > tonumber(ARGV[2]) then return out end
      total = total + n
      out[i] = redis.call('get', k)
    end
  end
end
return out
"""


def require_redis() -> Any:
    """The ``redis`` module, or a UsageError saying how to install it."""
    try:
        import redis
    except ImportError:
        raise UsageError(
            "TUNEDSL_REDIS_URL is set but the redis client is not installed; "
            "install it with `pip install 'tunedsl[redis]'` (or unset TUNEDSL_REDIS_URL)"
        ) from None
    return redis


redact = knobs.redact_url


@dataclass(frozen=True)
class RedisSettings:
    url: str
    prefix: str = KEY_PREFIX
    timeout_s: float = DEFAULT_TIMEOUT_S
    backoff_s: float = DEFAULT_BACKOFF_S
    lock_ttl_s: float = DEFAULT_LOCK_TTL_S
    poll_s: float = DEFAULT_POLL_S

    @classmethod
    def from_env(cls) -> RedisSettings | None:
        from tunedsl import knobs

        url = knobs.redis_url()
        if not url:
            return None
        return cls(url=url)  # the URL's own ?socket_timeout= wins inside redis-py


def _shown(key: str) -> str:
    """A key name for a message: control characters escaped (whoever can write to Redis
    chooses key names, and a warning goes to a terminal)."""
    return json.dumps(key)[1:-1]


NOT_A_RECORD = object()  # a value too long, or a key of another type


def _shaped(reply: Any, asked: int) -> list[Any]:
    """``_READ``'s reply to ``asked`` keys, checked for its shape: a list of one to ``asked``
    entries, each a value (bytes), a length, a missing key's nil or false, or a one-entry
    list naming a type."""
    if not isinstance(reply, list):
        raise _Malformed(f"{type(reply).__name__} where a list of values was asked for")
    if not 1 <= len(reply) <= asked:
        raise _Malformed(f"{len(reply)} values where 1 to {asked} were asked for")
    for raw in reply:
        if isinstance(raw, list):
            if len(raw) != 1 or not isinstance(raw[0], (bytes, str)):
                raise _Malformed("a list where a key's type was asked for")
        elif raw is not None and not isinstance(raw, (bytes, int)):
            raise _Malformed(f"{type(raw).__name__} where a key's value was asked for")
    return reply


def _holder_shaped(reply: Any) -> tuple[Any, Any, int]:
    """``_HOLDER``'s reply, checked: a type's name, a value and a time to live in ms."""
    if not (isinstance(reply, list) and len(reply) == 3 and isinstance(reply[2], int)):
        raise _Malformed("not a lock's type, value and time to live")
    return reply[0], reply[1], reply[2]


class _Down(Exception):
    """Redis is unreachable (or backing off): the caller treats it as a miss."""


class _Malformed(Exception):
    """A reply of another shape than the request's (no Redis server sends one)."""


class _Refused(_Down):
    """Redis answered this request with an error (a miss, no back-off: it is reachable)."""


class RedisRecordStore:
    """``RecordStore`` over one Redis server (``tunedsl.engine.seams.RecordStore``)."""

    name = "redis"
    writable = True

    def __init__(self, settings: RedisSettings) -> None:
        if not settings.url.startswith(("redis://", "rediss://", "unix://")):
            raise UsageError(
                f"TUNEDSL_REDIS_URL={redact(settings.url)!r} is not a Redis URL; "
                "expected redis://[:PASSWORD@]HOST:PORT/DB"
            )
        self.settings = settings
        self._redis = require_redis()
        try:  # parsed now (no connection is made): a bad port or option is the user's to fix
            self._redis.ConnectionPool.from_url(settings.url)
        except ValueError as err:
            raise UsageError(
                f"TUNEDSL_REDIS_URL={redact(settings.url)!r} is not a valid Redis URL "
                f"({err}); expected redis://[:PASSWORD@]HOST:PORT/DB"
            ) from None
        self._client: Any = None
        self._down_until = 0.0
        self._mutex = threading.Lock()

    @classmethod
    def from_env(cls) -> RedisRecordStore | None:
        settings = RedisSettings.from_env()
        return None if settings is None else cls(settings)

    # -- connection and failures -------------------------------------------------------

    def _key(self, kind: str, digest: str) -> str:
        return f"{self.settings.prefix}{kind}:{digest}"

    def available(self) -> bool:
        """False while backing off after a failure."""
        return time.monotonic() >= self._down_until

    def _conn(self) -> Any:
        if not self.available():
            raise _Down
        with self._mutex:
            if self._client is None:
                from redis.backoff import NoBackoff
                from redis.retry import Retry

                t = self.settings.timeout_s
                # No retries: redis-py retries failed connections by default, which would
                # multiply the time a dead server costs a launch.
                self._client = self._redis.Redis.from_url(
                    self.settings.url,
                    connection_class=connection_class(self.settings.url),
                    socket_connect_timeout=t,
                    socket_timeout=t,
                    retry_on_timeout=False,
                    retry=Retry(NoBackoff(), 0),
                )
            return self._client

    def _failed(self, err: BaseException, how: str = "is unreachable") -> _Down:
        """Start the back-off and warn (once per server per process)."""
        self._down_until = time.monotonic() + self.settings.backoff_s
        warn_once(
            f"redis:{self.settings.url}",
            f"Redis record store {redact(self.settings.url)} {how} ({_shown(str(err))}); using "
            f"local records only, trying again in {self.settings.backoff_s:g} s",
        )
        return _Down()

    def _run(self, op: Any) -> Any:
        """``op(client)``; a Redis or socket error becomes ``_Down`` after one warning.
        An authentication error is reported the same way (with its message). An error
        reply to this one request (out of memory, a read-only replica) is ``_Refused``:
        one warning, no back-off."""
        client = self._conn()
        try:
            return op(client)
        except self._redis.ResponseError as err:
            warn_once(
                f"redis-reply:{self.settings.url}:{type(err).__name__}",
                f"Redis record store {redact(self.settings.url)} refused a request "
                f"({_shown(str(err))}); treating it as a miss",
            )
            raise _Refused() from None
        except UntrustedServer as err:
            raise self._failed(err, "is not used") from None
        except (self._redis.RedisError, OSError) as err:
            raise self._failed(err) from None
        # A reply no Redis sends for the request (its parser or ours cannot read it).
        except (
            _Malformed,
            TypeError,
            ValueError,
            LookupError,
            AttributeError,
            RecursionError,
        ) as err:
            raise self._failed(err, "answered with a reply that is not a Redis reply") from None

    def check(self) -> None:
        """PING now (ignoring any back-off); a UsageError naming the server when it fails.
        For commands that address the server on purpose (``tunedsl cache --remote``)."""
        self._down_until = 0.0
        try:
            self._conn().ping()
        except (TypeError, ValueError, LookupError, AttributeError, RecursionError) as err:
            raise UsageError(
                f"the Redis record store {redact(self.settings.url)} (TUNEDSL_REDIS_URL) "
                f"answered with a reply that is not a Redis reply ({_shown(str(err))})"
            ) from None
        except UntrustedServer as err:
            raise UsageError(
                f"the Redis record store {redact(self.settings.url)} (TUNEDSL_REDIS_URL) is "
                f"not used: {err}"
            ) from None
        except (self._redis.RedisError, OSError) as err:
            raise UsageError(
                f"cannot reach the Redis record store {redact(self.settings.url)}: "
                f"{_shown(str(err))}; check TUNEDSL_REDIS_URL (and its password)"
            ) from None

    # -- records -----------------------------------------------------------------------

    def _parse(self, key: str, raw: Any, digest: str | None) -> Record | None:
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
            record = Record.from_json(json.loads(text))
        # ValueError: bad UTF-8 or JSON, an invalid record, an int past Python's digit limit
        except (ValueError, RecursionError) as err:
            warn_once(f"bad:redis:{key}", f"ignoring tuning record {_shown(key)} in Redis: {err}")
            return None
        if digest is not None and record.digest != digest:
            warn_once(
                f"bad:redis:{key}", f"ignoring tuning record {_shown(key)}: it names another key"
            )
            return None
        return record.from_elsewhere()  # another node's failures are hints here

    def _read(self, keys: list[str]) -> list[Any]:
        """The values of the first of ``keys`` (at least one; see ``_READ``), each a
        string's bytes, None (missing) or ``NOT_A_RECORD`` (too long or of another type:
        one warning)."""
        reply = self._run(
            lambda c: _shaped(
                c.eval(_READ, len(keys), *keys, MAX_RECORD_BYTES, BATCH_BYTES), len(keys)
            )
        )
        out: list[Any] = []
        for key, raw in zip(keys, reply, strict=False):
            if isinstance(raw, int):
                warn_once(
                    f"bad:redis:{key}",
                    f"ignoring tuning record {_shown(key)} in Redis: it holds {raw} bytes, over the "
                    f"limit of {MAX_RECORD_BYTES} bytes for a record",
                )
                raw = NOT_A_RECORD
            elif isinstance(raw, list):
                kind = raw[0].decode("utf-8", "replace") if isinstance(raw[0], bytes) else raw[0]
                warn_once(
                    f"bad:redis:{key}",
                    f"ignoring Redis key {_shown(key)}: it holds a {_shown(kind)}, not a tuning record (a "
                    "string of JSON); delete it to store a record there",
                )
                raw = NOT_A_RECORD
            out.append(raw)
        return out

    def get(self, digest: str) -> Record | None:
        key = self._key("record", digest)
        try:
            raw = self._read([key])[0]
        except _Down:
            return None
        return None if raw is None or raw is NOT_A_RECORD else self._parse(key, raw, digest)

    def where(self, digest: str) -> str:
        """The Redis key a record of ``digest`` is read from (for warnings)."""
        return f"Redis key {_shown(self._key('record', digest))}"

    def put(self, record: Record) -> bool:
        text = json.dumps(record.to_json(), indent=1)
        key = self._key("record", record.digest)
        try:
            return bool(self._run(lambda c: c.set(key, text)))
        except _Down:
            return False

    def put_raw(self, digest: str, text: str) -> bool:
        """Store ``text`` as is under ``digest`` (tests: a damaged value)."""
        try:
            return bool(self._run(lambda c: c.set(self._key("record", digest), text)))
        except _Down:
            return False

    def delete(self, digest: str) -> bool:
        try:
            return bool(self._run(lambda c: c.delete(self._key("record", digest))))
        except _Down:
            return False

    def iter_entries(self) -> Iterator[tuple[str, Record | None]]:
        """Every key under the prefix with its record (None: not a valid record, too long,
        or of another type)."""
        pattern = self._key("record", "*")
        try:
            keys = self._run(
                lambda c: sorted(
                    k.decode() if isinstance(k, bytes) else str(k)
                    for k in c.scan_iter(match=pattern, count=500)
                )
            )
        except _Down:
            return
        start = 0
        while start < len(keys):
            batch = keys[start : start + 200]
            try:
                values = self._read(batch)
            except _Down:
                return
            start += len(values)
            for key, raw in zip(batch, values, strict=False):
                if raw is NOT_A_RECORD:
                    yield key, None
                elif raw is not None:
                    yield key, self._parse(key, raw, key.rsplit(":", 1)[-1])

    def iter_records(self) -> Iterator[Record]:
        for _, record in self.iter_entries():
            if record is not None:
                yield record

    def delete_keys(self, keys: list[str]) -> int:
        if not keys:
            return 0
        try:
            return int(self._run(lambda c: int(c.delete(*keys))))
        except _Down:
            return 0

    # -- the lock ----------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, digest: str, timeout_s: float) -> Iterator[bool]:
        """Hold ``tunedsl:v1:lock:<digest>``: True when held; False when ``timeout_s`` passed
        or Redis is down (the caller then tunes without it, never stalls). While waiting,
        who holds it is printed as for the file lock (``locks.WaitNotices``)."""
        key = self._key("lock", digest)
        # The value names the holder for waiters; its random token makes it unique.
        token = json.dumps({**owner_note(), "token": secrets.token_hex(16)})
        ttl_ms = max(1, int(self.settings.lock_ttl_s * 1000))
        notices = WaitNotices(
            f"key {digest[:12]}", f"Redis key {key} at {redact(self.settings.url)}", timeout_s
        )
        held = False
        try:
            while True:
                if self._run(lambda c: c.eval(_ACQUIRE, 1, key, token, ttl_ms)):
                    held = True
                    break
                if notices.waited() >= timeout_s:
                    notices.gave_up(self._holder(key))
                    break
                if notices.due():
                    notices.waiting(self._holder(key))
                time.sleep(self.settings.poll_s)
        except _Down:
            held = False
        if not held:
            yield False
            return
        stop = threading.Event()
        keeper = threading.Thread(
            target=self._keep, args=(key, token, ttl_ms, stop), daemon=True, name="tunedsl-lock"
        )
        keeper.start()
        try:
            yield True
        finally:
            stop.set()
            keeper.join()
            with contextlib.suppress(_Down):
                self._run(lambda c: c.eval(_RELEASE, 1, key, token))

    def _holder(self, key: str) -> str:
        """Who holds the lock ``key``, in words, with when it expires."""
        try:
            kind, value, pttl = self._run(lambda c: _holder_shaped(c.eval(_HOLDER, 1, key)))
        except _Down:
            return "an unknown process (Redis did not answer)"
        kind = kind.decode("utf-8", "replace") if isinstance(kind, bytes) else str(kind)
        if kind == "none":
            return "nobody (just released)"
        if kind != "string":
            who = f"a Redis {kind} (not a tuning lock)"
        else:
            try:
                who = describe_owner(json.loads(value))
            except (TypeError, ValueError, RecursionError):
                who = "an unknown process"
        return who + (f", expires in {pttl / 1000:.0f} s unless renewed" if pttl >= 0 else "")

    def _keep(self, key: str, token: str, ttl_ms: int, stop: threading.Event) -> None:
        """Refresh the lock's expiry while it is held (a third of the TTL apart)."""
        while not stop.wait(ttl_ms / 3000):
            try:
                if not self._run(lambda c: c.eval(_REFRESH, 1, key, token, ttl_ms)):
                    return  # expired and taken by another owner: nothing to keep
            except _Down:
                return
