"""Ranks that agree: one tuning decision for every rank of a ``torch.distributed`` job
(runtime layer; ``torch.distributed`` is only looked at when the program imported it).

Ranks that tune independently pick different configurations (timings differ by a few
percent from GPU to GPU), and collectives whose kernels differ can deadlock. When a process
group is initialised, the site decides every new key through ``decider(decide)``:

- ``TUNEDSL_DISTRIBUTED=broadcast`` (default): rank 0 decides as a lone process would
  (stored record or tuning) and sends the decision; the other ranks use it (``source`` is
  ``"broadcast"``) and store its record in their own caches.
- ``allreduce``: the candidates are split across the ranks, each rank measures its share,
  the timings are gathered on every rank, and every rank picks the same winner (the
  fastest successful configuration, ties broken by space order) and stores the same record.
- ``off``: every rank decides alone.

It is a thin layer over the decide seam: ``broadcast`` calls ``decide`` on rank 0;
``allreduce`` asks ``decide.lookup`` on rank 0 whether the key needs tuning, then every rank
runs ``decide.tune_and_record`` with a tuner that measures the rank's share and gathers
the others' (``_shared_tuner``), so looking up, tuning, recording and storing are
``decide``'s own. A space too large to list is searched by rank 0 and broadcast.

Every rank must decide the same keys in the same order (as for any collective); a rank that
reaches another key gets a clear error instead of a wrong decision. The exchange runs on a
CPU (gloo) side group whose timeout is ``TUNEDSL_LOCK_TIMEOUT`` seconds (default
600), so a rank never waits forever for a rank that died or diverged. Messages are JSON text
in byte tensors: nothing is pickled.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tunedsl import knobs
from tunedsl.errors import TuningError
from tunedsl.model.config import Config
from tunedsl.runtime.launch_effect import launches_nothing

if TYPE_CHECKING:
    from tunedsl.runtime.subject import Subject

_side_group: Any = None  # the gloo group for the exchange, made on first use (a collective)
_inside = False  # decide_here re-enters decide(): then it decides alone
_available: bool | None = None  # torch.distributed.is_available()


def active() -> str | None:
    """The agreement mode when a process group of several ranks is initialised, else None.

    Never imports torch: a program that did not import ``torch.distributed`` has no group.
    """
    global _available
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    if _available is None:  # how PyTorch was built: asked once (this is asked on every miss)
        _available = bool(dist.is_available())
    if not _available or not dist.is_initialized():
        return None
    if _inside or dist.get_world_size() < 2:
        return None
    mode = knobs.distributed_mode()
    return None if mode == "off" else mode


def _group() -> Any:
    global _side_group
    import torch.distributed as dist

    if _side_group is None:
        timeout = datetime.timedelta(seconds=knobs.lock_timeout_s())
        _side_group = dist.new_group(backend="gloo", timeout=timeout)
    return _side_group


def _broadcast_text(text: str | None, src: int) -> str:
    """``text`` of rank ``src`` on every rank (UTF-8 bytes in tensors, never pickles)."""
    import torch
    import torch.distributed as dist

    group = _group()
    data = (text or "").encode("utf-8")
    size = torch.tensor([len(data)], dtype=torch.int64)
    dist.broadcast(size, src=src, group=group)
    buf = (
        torch.frombuffer(bytearray(data), dtype=torch.uint8)
        if dist.get_rank() == src and data
        else torch.zeros(int(size.item()), dtype=torch.uint8)
    )
    dist.broadcast(buf, src=src, group=group)
    return bytes(buf.tolist()).decode("utf-8")


def _gather_texts(text: str) -> list[str]:
    """Every rank's ``text``, in rank order, on every rank."""
    import torch
    import torch.distributed as dist

    group = _group()
    world = dist.get_world_size()
    data = text.encode("utf-8")
    size = torch.tensor([len(data)], dtype=torch.int64)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(sizes, size, group=group)
    longest = max(int(s.item()) for s in sizes)
    mine = torch.zeros(longest, dtype=torch.uint8)
    if data:
        mine[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    bufs = [torch.zeros(longest, dtype=torch.uint8) for _ in range(world)]
    dist.all_gather(bufs, mine, group=group)
    return [
        bytes(b[: int(s.item())].tolist()).decode("utf-8") for b, s in zip(bufs, sizes, strict=True)
    ]


def _exchange(what: str, op: Callable[[], Any]) -> Any:
    try:
        return op()
    except RuntimeError as err:  # gloo timeout, a peer gone
        import torch.distributed as dist

        raise TuningError(
            f"rank {dist.get_rank()}: no {what} from the other ranks within "
            f"TUNEDSL_LOCK_TIMEOUT={knobs.lock_timeout_s():g} s ({err}); a rank "
            "died, or the ranks launch different keys (set TUNEDSL_DISTRIBUTED=off to let "
            "every rank tune alone)"
        ) from None


def _check_digest(sent: dict[str, Any], digest: str) -> None:
    if sent.get("digest") != digest:
        import torch.distributed as dist

        raise TuningError(
            f"rank {dist.get_rank()} is deciding key {digest[:12]} but rank 0 decided "
            f"{str(sent.get('digest'))[:12]}: the ranks launch different keys in a different "
            "order; launch the same shapes on every rank, or set TUNEDSL_DISTRIBUTED=off"
        )


def _decision(config: Config, source: str, record: Any, settings: Any) -> Any:
    from tunedsl.runtime import decide as d

    return d.Decision(config, d.decision_options(config, settings), source, record)


def _payload(decision: Any) -> dict[str, Any]:
    record = decision.record
    return {
        "config": decision.config.to_json(),
        "source": decision.source,
        "record": record.to_json() if record is not None else None,
    }


def _received(sent: dict[str, Any], source: str | None, settings: Any) -> Any:
    """The Decision another rank sent; its record is stored in this rank's own caches."""
    from tunedsl.runtime.decide import record_stores
    from tunedsl.store import records

    record = records.Record.from_json(sent["record"]) if sent["record"] else None
    if record is not None:
        record_stores().put(record)  # this rank's node needs no rank 0 next time
    return _decision(Config(sent["config"]), source or sent["source"], record, settings)


# -- the decider the site uses ------------------------------------------------------------------


def decider(alone: Any) -> Any:
    """``alone`` (``runtime.decide.decide``) when no process group is initialised; else a
    function of the same signature that makes every rank agree. Keys with nothing to
    compare (``mode="off"``, one candidate) are decided alone: every rank gets the same."""
    ranks = active()
    if ranks is None or _inside:
        return alone

    def decide_with_ranks(
        subject: Subject, variants_for: Any, candidates: Any = None, check: Any = None
    ) -> Any:
        args = (subject, variants_for)
        settings = subject.settings
        kept = settings.configs if candidates is None else candidates
        if not settings.large:
            kept = tuple(kept)
        if settings.mode == "off" or len(kept) == 1:
            return alone(*args, candidates=candidates, check=check)
        if ranks == "allreduce" and not settings.large:
            return _allreduce(alone, args, kept, check)
        # A space too large to list cannot be split by rank: rank 0 searches it alone.
        return _broadcast(alone, args, candidates, check)

    return decide_with_ranks


def _alone(alone: Any, *args: Any, **kwargs: Any) -> Any:
    """``decide`` as a lone process (the re-entry guard keeps it from asking the ranks)."""
    global _inside
    _inside = True
    try:
        return alone(*args, **kwargs)
    finally:
        _inside = False


def _broadcast(alone: Any, args: tuple[Any, ...], candidates: Any, check: Any) -> Any:
    """Rank 0 decides as a lone process would (stored record or tuning) and sends it."""
    import torch.distributed as dist

    digest, settings = args[0].digest, args[0].settings
    if dist.get_rank() == 0:
        try:
            decision = _alone(alone, *args, candidates=candidates, check=check)
        except BaseException as err:
            failed = json.dumps({"digest": digest, "error": f"{type(err).__name__}: {err}"})
            _exchange("decision", lambda: _broadcast_text(failed, 0))
            raise
        payload = json.dumps({"digest": digest, **_payload(decision)})
        _exchange("decision", lambda: _broadcast_text(payload, 0))
        return decision
    sent = json.loads(_exchange("decision", lambda: _broadcast_text(None, 0)))
    _check_digest(sent, digest)
    if "error" in sent:
        raise TuningError(f"rank 0 failed to decide key {digest[:12]}: {sent['error']}")
    if sent["source"] == "empty":  # rank 0's call launched nothing: its fallback here too
        return _received(sent, _empty_here(args[1], candidates, settings), settings)
    return _received(sent, "broadcast", settings)


def _allreduce(alone: Any, args: tuple[Any, ...], candidates: Any, check: Any) -> Any:
    """Rank 0's stored decision (or the default of ``mode="cached"``) settles the key for
    all; else every rank tunes its share of the candidates through ``tune_and_record`` with
    a tuner that gathers every rank's timings, so every rank records the same choice."""
    import torch.distributed as dist

    from tunedsl.runtime import decide as d

    subject, variants_for = args
    settings, digest = subject.settings, subject.digest
    rank = dist.get_rank()
    stored = None
    empty = False
    if rank == 0:
        said: list[bool] = []

        def nothing() -> bool:  # bound once, whoever asks first
            if not said:
                said.append(launches_nothing(variants_for, candidates))
            return said[0]

        stored, _ = d.lookup(subject, candidates, check, nothing=nothing)
        empty = stored.source == "empty" if stored is not None else nothing()
        stored = None if empty else stored
    mine = {"digest": digest, "stored": _payload(stored) if stored is not None else None}
    mine["empty"] = empty
    sent = json.loads(_exchange("decision", lambda: _broadcast_text(json.dumps(mine), 0)))
    _check_digest(sent, digest)
    if sent["stored"] is not None:
        return stored if rank == 0 else _received(sent["stored"], None, settings)
    if sent.get("empty"):  # rank 0's call launches nothing: no rank tunes, its fallback
        cfg = d.fallback(settings, candidates, None)
        source = "empty" if rank == 0 else _empty_here(variants_for, candidates, settings)
        return d.Decision(cfg, d.decision_options(cfg, settings, subject.target), source, None)
    died = _died_on_any_rank(digest, settings)
    record = d.tune_and_record(
        subject,
        variants_for,
        {},
        candidates=candidates,
        tune=_shared_tuner(rank, dist.get_world_size(), digest, died),
        note={"ranks": "allreduce"},
    )
    return _decision(record.chosen, "tuned", record, settings)


def _empty_here(variants_for: Any, candidates: Any, settings: Any) -> str:
    """The source of rank 0's "empty" decision on another rank: "empty" (nothing launched,
    nothing kept) where this rank's call launches nothing too, else "broadcast": a call of
    the same ``key=`` bucket that does launch work runs rank 0's fallback, kept as sent."""
    kept = settings.configs if candidates is None else candidates
    return "empty" if launches_nothing(variants_for, tuple(kept)) else "broadcast"


def _died_on_any_rank(digest: str, settings: Any) -> tuple[dict[str, Any], ...]:
    """What the in-flight files of processes that died tuning ``digest`` name, read by
    every rank before the candidates are split and gathered on every rank: ranks sharing
    a cache directory take each file once, whichever rank reads it first, and a rank whose
    share holds the configuration a dead rank was launching must know it too."""
    from tunedsl.store.inflight import died_in_launch

    mine = [] if settings.isolate else died_in_launch(digest)
    texts = _exchange("in-flight files", lambda: _gather_texts(json.dumps(mine)))
    return tuple(entry for text in texts for entry in json.loads(text))


def _shared_tuner(
    rank: int, world: int, digest: str, died: tuple[dict[str, Any], ...] = ()
) -> Callable[[Any], Any]:
    """A ``runtime.tuner.tune`` for one rank: it tunes every ``world``-th candidate from
    ``rank``, gathers every rank's results, and returns the same outcome on every rank (the
    fastest successful configuration, ties broken by space order); ``died``: the deaths
    every rank read before the split (``_died_on_any_rank``)."""

    def tune_shared(req: Any) -> Any:
        from dataclasses import replace

        from tunedsl.runtime.tuner import TuneOutcome, tune
        from tunedsl.store import records

        share = list(req.variants[rank::world])
        infeasible = dict(req.infeasible) if rank == 0 else {}  # the same on every rank
        failed = [records.ConfigResult(c, "failed", reason=why) for c, why in infeasible.items()]
        try:
            if share:
                out = tune(replace(req, variants=share, infeasible=infeasible, died=died))
                got = {"results": [r.to_json() for r in out.results], "timer": out.timer,
                       "s": out.tuning_s, "measured": out.measured, "strategy": out.strategy}  # fmt: skip
            else:
                got = {"results": [r.to_json() for r in failed], "timer": "", "s": 0.0}
        except TuningError as err:
            if not err.failures:  # every configuration of this share failed: they still count
                got = {"error": f"{type(err).__name__}: {err}"}
            else:
                by_name = {repr(v.config): v.config for v in share} | {
                    repr(c): c for c in infeasible
                }
                results = [
                    records.ConfigResult(by_name[k], "failed", reason=why)
                    for k, why in err.failures.items()
                    if k in by_name
                ]
                got = {"results": [r.to_json() for r in results], "timer": "", "s": 0.0}
        except Exception as err:
            got = {"error": f"{type(err).__name__}: {err}"}
        texts = _exchange("timings", lambda: _gather_texts(json.dumps(got)))
        merged: dict[Config, Any] = {}
        timer, seconds, measured, strategy = "", 0.0, 0, ""
        for peer, text in enumerate(texts):
            theirs = json.loads(text)
            if "error" in theirs:
                raise TuningError(f"rank {peer} failed to measure its share: {theirs['error']}")
            timer = timer or theirs["timer"]
            seconds = max(seconds, float(theirs["s"]))
            measured += int(theirs.get("measured", 0))
            strategy = strategy or theirs.get("strategy", "")
            for i, item in enumerate(theirs["results"]):
                result = records.ConfigResult.from_json(item, f"rank {peer} result {i}")
                merged.setdefault(result.config, result)
        order = {v.config: i for i, v in enumerate(req.variants)}
        ok = [r for r in merged.values() if r.status == "ok" and r.median_ms is not None]
        if not ok:
            raise TuningError(f"key {digest[:12]}: no configuration ran on any rank")
        best = min(ok, key=lambda r: (r.median_ms, order.get(r.config, len(order))))
        ordered = sorted(merged.values(), key=lambda r: order.get(r.config, len(order)))
        return TuneOutcome(
            best.config, ordered, seconds, timer, measured, strategy=strategy or "exhaustive"
        )

    return tune_shared
