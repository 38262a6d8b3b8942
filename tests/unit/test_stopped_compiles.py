"""Verdicts on compiles stopped over a GPU's shared memory (``backends/stopped_compiles.py``):
kept in the cache's ``stopped/``; what does not make sense there is a miss, never a verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunedsl.backends import stopped_compiles


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(stopped_compiles, "_known", {})
    return tmp_path / "cache" / "stopped"


def test_a_verdict_is_read_back_by_a_process_that_did_not_make_it(cache: Path) -> None:
    key = stopped_compiles.digest(("kernel", {"BM": 64}, 1024))
    assert stopped_compiles.known(key) is None
    stopped_compiles.remember(key, 49152, 1024)
    stopped_compiles._known.clear()  # as a new process
    assert stopped_compiles.known(key) == (49152, 1024)
    assert (cache / f"{key}.json").stat().st_mode & 0o077 == 0
    assert cache.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    "text",
    [
        '{"required": 1000, "limit": 1024}',  # fits: no stop would have happened
        '{"required": 5000, "limit": 0}',
        '{"required": 5000.0, "limit": 1024}',
        '{"required": true, "limit": 0}',
        '{"required": 5000}',
        "[5000, 1024]",
        "",
        "x" * 300,
    ],
)
def test_a_verdict_that_makes_no_sense_is_a_miss(cache: Path, text: str) -> None:
    key = stopped_compiles.digest(("kernel", text))
    cache.mkdir(parents=True, mode=0o700)
    cache.parent.chmod(0o700)
    (cache / f"{key}.json").write_text(text)
    (cache / f"{key}.json").chmod(0o600)
    assert stopped_compiles.known(key) is None


def test_a_verdict_in_a_directory_others_can_write_is_a_miss(cache: Path) -> None:
    key = stopped_compiles.digest(("kernel", "open"))
    stopped_compiles.remember(key, 49152, 1024)
    stopped_compiles._known.clear()
    cache.chmod(0o777)
    assert stopped_compiles.known(key) is None
