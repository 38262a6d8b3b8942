"""Which stored timeouts stand (``runtime/timeouts.py``): a timeout stands under the limit it
was made under or a smaller one; a larger limit measures it again (a worker's silence only
where the site measures in a worker); a record stating no limits keeps its timeouts.
The compile timeout is the compile pool's own (a job past its limit), its reason as the
tuner records it."""

from __future__ import annotations

import time

import pytest

from tunedsl.backends.compile_pool import CompileJob, compile_stream
from tunedsl.backends.inprocess import reason
from tunedsl.model.config import Config
from tunedsl.runtime import timeouts
from tunedsl.store.records import ConfigResult, Record

FAST, COMPILED_LONG, SILENT, BROKEN = (Config(BLOCK=b) for b in (16, 32, 64, 128))


def _compile_timeout() -> str:
    """The reason of a configuration whose compile ran past its limit (``host_compile``)."""
    job = CompileJob(COMPILED_LONG, lambda: time.sleep(0.5))
    ((_, err),) = list(compile_stream([job], workers=1, timeout_s=0.05))
    assert isinstance(err, BaseException)
    return "compile: " + reason(err)


def _record(limits: dict[str, object] | None) -> Record:
    results = (
        ConfigResult(FAST, "ok", 0.5, 0.01, 10, 0.49),
        ConfigResult(COMPILED_LONG, "failed", reason=_compile_timeout()),
        ConfigResult(SILENT, "failed", reason="run: timeout: no answer after 1 s (a hang?)"),
        ConfigResult(BROKEN, "failed", reason="compile: out of resources: shared memory"),
    )
    context = {} if limits is None else {timeouts.LIMITS: limits}
    return Record(site="k.py:1:1", digest="0" * 64, key={}, chosen=FAST, results=results,
                  kernel={}, signature={}, device={}, versions={}, context=context,
                  tuning_s=1.0, timestamp=1.0)  # fmt: skip


def _kept(record: Record, isolated: bool = True) -> set[Config]:
    read = timeouts.current(record, isolated)
    assert read is not None
    return {r.config for r in read.results}


EVERY = {FAST, COMPILED_LONG, SILENT, BROKEN}


def test_timeouts_stand_under_the_limit_they_were_made_under_or_a_smaller_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "1")
    record = _record({"compile_s": 1.0, "answer_s": 1.0})
    assert _kept(record) == EVERY
    assert timeouts.current(record, True) is record
    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "0.5")
    assert _kept(record) == EVERY
    assert timeouts.noted() == {"limits": {"compile_s": 0.5, "answer_s": 0.5}}


def test_a_larger_limit_measures_its_timeouts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A larger limit lifts the timeouts it bounds: a compile's, the compile limit; a
    worker's silence, either (a request that compiles waits both). Other failures stand."""
    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "30")
    assert _kept(_record({"compile_s": 1.0, "answer_s": 1.0})) == {FAST, BROKEN}
    assert _kept(_record({"compile_s": 30.0, "answer_s": 1.0})) == {FAST, COMPILED_LONG, BROKEN}
    assert _kept(_record({"compile_s": 1.0, "answer_s": 30.0})) == {FAST, BROKEN}
    # measured in the caller's process, a worker's silence may be a hang nothing would stop
    assert _kept(_record({"compile_s": 1.0, "answer_s": 1.0}), isolated=False) == {
        FAST, SILENT, BROKEN,
    }  # fmt: skip
    monkeypatch.delenv("TUNEDSL_CONFIG_TIMEOUT")  # the defaults: 300 s to compile, 60 to answer
    assert _kept(_record({"compile_s": 300.0, "answer_s": 60.0})) == EVERY


def test_no_stated_limit_keeps_the_timeouts_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record stating no limits (written before records stated them), or a limit that is
    not a finite number, keeps its timeouts out, as records did: what they were made under
    is unknown, and a worker's silence may be a hang."""
    monkeypatch.setenv("TUNEDSL_CONFIG_TIMEOUT", "1000")
    assert _kept(_record(None)) == EVERY
    assert _kept(_record({"compile_s": "1", "answer_s": None})) == EVERY
    assert _kept(_record({"compile_s": float("inf"), "answer_s": True})) == EVERY
    assert _kept(_record({"compile_s": 1.0})) == {FAST, BROKEN}
    assert timeouts.current(None, True) is None
