"""Tuning records: schema validation, atomic writes, locking, bad files as misses."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import warnings
from pathlib import Path

import pytest

from tunedsl import warn
from tunedsl.errors import CacheWarning
from tunedsl.model.config import Config
from tunedsl.store import paths, records
from tunedsl.store.records import ConfigResult, InvalidRecord, Record

DIGEST = "ab" * 32


def make_record(digest: str = DIGEST, chosen: Config | None = None) -> Record:
    fast, slow = Config(tile=128, num_warps=4), Config(tile=64, num_warps=4)
    return Record(
        site="k.py:3:4",
        digest=digest,
        key={"args": {"a": {"dtype": "float32", "shape": [4096], "stride": "1"}}},
        chosen=chosen or fast,
        results=(
            ConfigResult(
                fast, "ok", 0.5, 0.02, 40, 0.49, options={"num_warps": 4}, constexprs={"TILE": 128}
            ),
            ConfigResult(
                slow, "ok", 0.9, 0.01, 30, 0.88, options={"num_warps": 4}, constexprs={"TILE": 64}
            ),
            ConfigResult(
                Config(tile=4096, num_warps=4), "failed", reason="compile: out of shared memory"
            ),
        ),
        kernel={"module": "k", "qualname": "vadd", "file": "/k.py", "source_hash": "0" * 64},
        signature={"a": "*fp32", "n": "i32", "TILE": {"constexpr": 128}},
        device={"type": "cuda", "name": "H100"},
        versions={"triton": "3.6.0"},
        context={"env": {}},
        tuning_s=1.5,
        timestamp=1.0e9,
    )


def test_round_trip_through_disk() -> None:
    record = make_record()
    assert records.save_record(record)
    loaded = records.load_record(DIGEST)
    assert loaded == record
    assert loaded.id == DIGEST[:12]
    assert loaded.result_for(Config(tile=64, num_warps=4)).median_ms == 0.9
    # Plain JSON on disk, readable by anything.
    data = json.loads(records.record_path(DIGEST).read_text())
    assert data["schema"] == records.SCHEMA_VERSION and data["chosen"] == {
        "tile": 128,
        "num_warps": 4,
    }


def test_missing_record_is_a_quiet_miss() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert records.load_record("cd" * 32) is None


def _write(text: str, digest: str = DIGEST) -> None:
    root = paths.ensure_private_dir(paths.records_dir())
    (root / f"{digest}.json").write_text(text)


def _mutated(**changes: object) -> str:
    data = make_record().to_json()
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize(
    "text, why",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected dict"),
        (_mutated(schema=99), "schema 99"),
        (_mutated(schema="1"), "schema"),
        (_mutated(results="fast"), "record.results"),
        (_mutated(tuning_s="slow"), "tuning_s"),
        (_mutated(chosen={"tile": 999}), "chosen is not among"),
        (_mutated(chosen={"tile": [1]}), "chosen"),
        (_mutated(digest="ef" * 32), "names another key"),
    ],
)
def test_bad_record_is_a_miss_with_one_warning(text: str, why: str) -> None:
    _write(text)
    warn.forget()
    with pytest.warns(CacheWarning, match=why):
        assert records.load_record(DIGEST) is None
    with warnings.catch_warnings():  # the second load of the same file warns no more
        warnings.simplefilter("error")
        assert records.load_record(DIGEST) is None


def test_result_fields_are_validated() -> None:
    data = make_record().to_json()
    data["results"][0]["median_ms"] = float("nan")
    with pytest.raises(InvalidRecord, match="median_ms"):
        Record.from_json(json.loads(json.dumps(data)))
    data = make_record().to_json()
    data["results"][2]["status"] = "maybe"
    with pytest.raises(InvalidRecord, match="status"):
        Record.from_json(data)


def test_extra_read_only_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / f"{DIGEST}.json").write_text(json.dumps(make_record().to_json()))
    assert records.load_record(DIGEST) is None
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", str(shipped))
    assert records.load_record(DIGEST) == make_record()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_cache_warns_once_and_carries_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(root))
    warn.forget()
    with pytest.warns(CacheWarning, match="cannot write"):
        assert not records.save_record(make_record())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not records.save_record(make_record())


def test_unwritable_cache_path_warns_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(blocker))
    warn.forget()
    with pytest.warns(CacheWarning, match="cannot write"):
        assert not records.save_record(make_record())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not records.save_record(make_record())


def test_atomic_write_leaves_no_temp_files() -> None:
    records.save_record(make_record())
    records.save_record(make_record())
    names = sorted(p.name for p in paths.records_dir().iterdir())
    assert names == [f"{DIGEST}.json"]


def _writer(cache_dir: str, n: int) -> None:
    os.environ["TUNEDSL_CACHE_DIR"] = cache_dir
    for i in range(n):
        with records.record_lock(DIGEST):
            records.save_record(make_record(chosen=Config(tile=64 if i % 2 else 128, num_warps=4)))


def test_two_processes_writing_leave_one_valid_record() -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_writer, args=(os.environ["TUNEDSL_CACHE_DIR"], 20)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    loaded = records.load_record(DIGEST)
    assert loaded is not None and loaded.chosen in (
        Config(tile=64, num_warps=4),
        Config(tile=128, num_warps=4),
    )
    assert [p.name for p in paths.records_dir().iterdir()] == [f"{DIGEST}.json"]


def test_first_save_sweeps_old_writer_temporaries_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a writer killed between write and rename leaves: its mkstemp name, never a record.
    root = paths.ensure_private_dir(paths.records_dir())
    old_tmp = root / f".{DIGEST}.json.k1ll3d.tmp"
    young_tmp = root / f".{DIGEST}.json.l1v3.tmp"  # may belong to a live writer
    stranger = root / ".notes.tmp"  # not a writer's name: not ours to remove
    for path in (old_tmp, young_tmp, stranger):
        path.write_text("{")
    two_hours_ago = os.stat(old_tmp).st_mtime - 7200
    os.utime(old_tmp, (two_hours_ago, two_hours_ago))
    os.utime(stranger, (two_hours_ago, two_hours_ago))
    monkeypatch.setattr(records, "_swept", False)

    assert records.save_record(make_record())
    assert not old_tmp.exists()
    assert young_tmp.exists() and stranger.exists()
    assert records.load_record(DIGEST) == make_record()


def test_cache_clear_removes_every_writer_temporary(tmp_path: Path) -> None:
    import subprocess
    import sys

    assert records.save_record(make_record())
    root = paths.records_dir()
    young_tmp = root / f".{DIGEST}.json.l1v3.tmp"
    young_tmp.write_text("{")
    result = subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", "clear", "--all"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert result.returncode == 0, result.stderr
    assert "removed 1 record" in result.stdout
    assert sorted(p.name for p in root.iterdir()) == []
