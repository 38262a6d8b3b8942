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

Every rank must decide the same keys in the same order (as for any collective); a rank that
reaches another key gets a clear error instead of a wrong decision. The exchange runs on a
CPU (gloo) side group whose timeout is ``TUNEDSL_DISTRIBUTED_TIMEOUT`` seconds (default
600), so a rank never waits forever for a rank that died or diverged. Messages are JSON text
in byte tensors: nothing is pickled.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable
from typing import Any

from tunedsl import knobs
from tunedsl.errors import TuningError
from tunedsl.model.config import Config

_side_group: Any = None  # the gloo group for the exchange, made on first use (a collective)
_inside = False  # decide_here re-enters decide(): then it decides alone


def active() -> str | None:
    """The agreement mode when a process group of several ranks is initialised, else None.

    Never imports torch: a program that did not import ``torch.distributed`` has no group.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    if _inside or dist.get_world_size() < 2:
        return None
    mode = knobs.distributed_mode()
    return None if mode == "off" else mode


def _group() -> Any:
    global _side_group
    import torch.distributed as dist

    if _side_group is None:
        timeout = datetime.timedelta(seconds=knobs.distributed_timeout_s())
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
            f"TUNEDSL_DISTRIBUTED_TIMEOUT={knobs.distributed_timeout_s():g} s ({err}); a rank "
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


def decide_together(
    mode: str,
    digest: str,
    decide_here: Callable[[], Any],
    decision_for: Callable[[Config, str, Any], Any],
    lookup_here: Callable[[], Any],
    tune_share: Callable[[list[Config]], tuple[list[Any], str, float]],
    build_record: Callable[[Config, list[Any], str, float], Any],
    space: tuple[Config, ...],
) -> Any:
    """One decision for every rank (see the module docstring). The callables come from
    ``runtime.decide``: ``decide_here`` decides alone (rank 0 under broadcast);
    ``decision_for(config, source, record)`` builds a Decision; ``lookup_here`` is a stored
    decision or the default (no tuning), or None; ``tune_share`` measures some configurations
    (results, timer, seconds); ``build_record`` makes and stores the merged record."""
    import torch.distributed as dist

    from tunedsl.store import records

    rank = dist.get_rank()
    if mode == "allreduce":
        return _allreduce(rank, digest, decision_for, lookup_here, tune_share, build_record, space)
    if rank == 0:
        try:
            decision = decide_here()
        except BaseException as err:
            failed = json.dumps({"digest": digest, "error": f"{type(err).__name__}: {err}"})
            _exchange("decision", lambda: _broadcast_text(failed, 0))
            raise
        record = decision.record
        payload = {
            "digest": digest,
            "config": decision.config.to_json(),
            "source": decision.source,
            "record": record.to_json() if record is not None else None,
        }
        _exchange("decision", lambda: _broadcast_text(json.dumps(payload), 0))
        return decision
    sent = json.loads(_exchange("decision", lambda: _broadcast_text(None, 0)))
    _check_digest(sent, digest)
    if "error" in sent:
        raise TuningError(f"rank 0 failed to decide key {digest[:12]}: {sent['error']}")
    record = records.Record.from_json(sent["record"]) if sent["record"] else None
    if record is not None:
        records.save_record(record)  # this rank's node needs no rank 0 next time
    return decision_for(Config(sent["config"]), "broadcast", record)


def _allreduce(
    rank: int,
    digest: str,
    decision_for: Callable[[Config, str, Any], Any],
    lookup_here: Callable[[], Any],
    tune_share: Callable[[list[Config]], tuple[list[Any], str, float]],
    build_record: Callable[[Config, list[Any], str, float], Any],
    space: tuple[Config, ...],
) -> Any:
    import torch.distributed as dist

    from tunedsl.store import records

    # Rank 0's stored decision (or the default of mode=cached) settles the key for all.
    stored = lookup_here() if rank == 0 else None
    payload: dict[str, Any] = {"digest": digest, "stored": None}
    if stored is not None:
        payload["stored"] = {
            "config": stored.config.to_json(),
            "source": stored.source,
            "record": stored.record.to_json() if stored.record is not None else None,
        }
    sent = json.loads(_exchange("decision", lambda: _broadcast_text(json.dumps(payload), 0)))
    _check_digest(sent, digest)
    if sent["stored"] is not None:
        if rank == 0:
            return stored
        got = sent["stored"]
        record = records.Record.from_json(got["record"]) if got["record"] else None
        return decision_for(Config(got["config"]), got["source"], record)
    world = dist.get_world_size()
    share = list(space[rank::world])
    try:
        results, timer, seconds = tune_share(share) if share else ([], "", 0.0)
        mine = json.dumps({"results": [r.to_json() for r in results], "timer": timer, "s": seconds})
    except Exception as err:
        mine = json.dumps({"error": f"{type(err).__name__}: {err}"})
    texts = _exchange("timings", lambda: _gather_texts(mine))
    merged: dict[Config, Any] = {}
    timer, seconds = "", 0.0
    for peer, text in enumerate(texts):
        got = json.loads(text)
        if "error" in got:
            raise TuningError(f"rank {peer} failed to measure its share: {got['error']}")
        timer = timer or got["timer"]
        seconds = max(seconds, float(got["s"]))
        for i, item in enumerate(got["results"]):
            result = records.ConfigResult.from_json(item, f"rank {peer} result {i}")
            merged.setdefault(result.config, result)
    order = {c: i for i, c in enumerate(space)}
    ok = [r for r in merged.values() if r.status == "ok" and r.median_ms is not None]
    if not ok:
        raise TuningError(f"key {digest[:12]}: no configuration ran on any rank")
    best = min(ok, key=lambda r: (r.median_ms, order.get(r.config, len(order))))
    ordered = sorted(merged.values(), key=lambda r: order.get(r.config, len(order)))
    record = build_record(best.config, ordered, timer, seconds)
    return decision_for(best.config, "tuned", record)


# -- the decider the site uses ------------------------------------------------------------------


def decider(alone: Any) -> Any:
    """``alone`` (``runtime.decide.decide``) when no process group is initialised; else a
    function of the same signature that makes every rank agree. Keys with nothing to
    compare (``mode="off"``, one candidate) are decided alone: every rank gets the same."""
    ranks = active()
    if ranks is None or _inside:
        return alone

    def decide_with_ranks(
        site_id: str,
        kernel: Any,
        info: Any,
        settings: Any,
        readable: dict[str, Any],
        ctx: dict[str, Any],
        digest: str,
        variants_for: Any,
        candidates: Any = None,
        check: Any = None,
    ) -> Any:
        args = (site_id, kernel, info, settings, readable, ctx, digest, variants_for)
        kept = tuple(settings.configs if candidates is None else candidates)
        if settings.mode == "off" or len(kept) == 1:
            return alone(*args, candidates=candidates, check=check)
        return decide_for_ranks(ranks, *args, candidates=candidates, check=check)

    return decide_with_ranks


# -- agreeing on one key -----------------------------------------------


def decide_for_ranks(
    mode: str,
    site_id: str,
    kernel: Any,
    info: Any,
    settings: Any,
    readable: dict[str, Any],
    ctx: dict[str, Any],
    digest: str,
    variants_for: Any,
    candidates: Any = None,
    check: Any = None,
) -> Any:
    """``decide`` for a rank of a process group: the same arguments, one agreed Decision."""
    global _inside
    from tunedsl.runtime import decide as d
    from tunedsl.store import records as store

    args = (site_id, kernel, info, settings, readable, ctx, digest, variants_for)

    def decide_here() -> Any:
        global _inside
        _inside = True
        try:
            return d.decide(*args, candidates=candidates, check=check)
        finally:
            _inside = False

    def decision_for(config: Config, source: str, record: Any) -> Any:
        return d.Decision(config, d._options(config, settings), source, record)

    def lookup_here() -> Any:
        record = None if knobs.force_retune() else store.load_record(digest)
        kept = tuple(settings.configs if candidates is None else candidates)
        usable, _ = d._usable(record, settings, kept)
        if usable and record is not None:
            return decision_for(record.chosen, "disk", record)
        if settings.mode == "cached":
            return decision_for(d._fallback(settings, kept, record), "default", None)
        return None

    def tune_share(configs: list[Config]) -> tuple[list[Any], str, float]:
        from tunedsl.engine.request import TuneRequest
        from tunedsl.runtime.tuner import tune

        variants, infeasible = variants_for(configs)
        failed = [store.ConfigResult(c, "failed", reason=why) for c, why in infeasible.items()]
        if not variants:  # this rank's whole share was dropped: its failures still count
            return failed, "", 0.0
        try:
            outcome = _run_tuner(tune, TuneRequest, variants, infeasible)
        except TuningError as err:
            if not err.failures:
                raise
            # Every configuration of this share failed; other ranks' shares may not.
            names = {repr(c): c for c in configs}
            return (
                [
                    store.ConfigResult(names[k], "failed", reason=why)
                    for k, why in err.failures.items()
                    if k in names
                ],
                "",
                0.0,
            )
        return list(outcome.results), outcome.timer, outcome.tuning_s

    def _run_tuner(tune: Any, request: Any, variants: Any, infeasible: Any) -> Any:
        return tune(
            request(
                kernel=kernel,
                variants=variants,
                infeasible=infeasible,
                restore_value=settings.restore_value,
                reset_to_zero=settings.reset_to_zero,
                verify=settings.verify,
                rtol=settings.rtol,
                atol=settings.atol,
                pre_hook=settings.pre_hook,
                post_hook=settings.post_hook,
                effort=settings.effort,
            )
        )

    def build_record(chosen: Config, results: list[Any], timer: str, seconds: float) -> Any:
        from tunedsl.backends import triton as bt

        variants, _ = variants_for([chosen])
        signature = d.replay_signature(kernel, info, variants[0]) if variants else {}
        record = store.Record(
            site=site_id,
            digest=digest,
            key=readable,
            chosen=chosen,
            results=tuple(results),
            kernel=info.describe(),
            signature=signature,
            device=bt.device_facts(),
            versions=bt.toolchain(),
            context={"hints": ctx["hints"], "env": ctx["env"], "timer": timer, "ranks": mode},
            tuning_s=seconds,
            timestamp=store.now(),
            effort=settings.effort,
        )
        store.save_record(record)
        return record

    return decide_together(
        mode,
        digest,
        decide_here,
        decision_for,
        lookup_here,
        tune_share,
        build_record,
        tuple(settings.configs),
    )
