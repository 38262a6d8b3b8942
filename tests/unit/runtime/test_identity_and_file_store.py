"""Site identity (``model/identity.py``) and ``FileRecordStore`` (the engine's RecordStore
seam over record files), on real files. Pure Python: no torch, no triton."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from tunedsl.engine.seams import RecordStore
from tunedsl.model import identity
from tunedsl.store import paths, records
from tunedsl.store.files import FileRecordStore, default_stores

PLAIN = textwrap.dedent(
    """
    import tunedsl


    def helper():
        tunedsl.autotune_launch(k, space={}, grid=1)


    class Model:
        def forward(self):
            tunedsl.autotune_launch(k, space={}, grid=1)
            autotune_launch(
                k, space={}, grid=1)


    tunedsl.autotune_launch(k, space={}, grid=1)
    """
).lstrip()


def test_plain_api_identity_is_function_kernel_and_ordinal(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text(PLAIN)
    f = str(script)
    ids = [identity.site_id(f, line, 0, "autotune_launch", None) for line in (5, 10, 11, 15)]
    assert ids == [
        "plain.py:helper:autotune_launch",
        "plain.py:Model.forward:autotune_launch",
        "plain.py:Model.forward:autotune_launch#1",
        "plain.py:<module>:autotune_launch",
    ]
    # The same site after lines were added above it: the same identity.
    script.write_text("import os\nimport sys\n" + PLAIN)
    assert identity.site_id(f, 12, 0, "autotune_launch", None) == ids[1]
    assert identity.site_id(f, 12, 0, "autotune_launch", "mine") == "mine"
    assert identity.location("plain.py:Model.forward:autotune_launch").endswith(":12:1")


def test_declared_scope_wins_and_unreadable_files_fall_back_to_the_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.py")
    assert identity.site_id(missing, 7, 2, "k", None) == "gone.py:line 7:k"
    identity.declare(missing, 7, 2, "Outer.inner", 2)
    assert identity.site_id(missing, 7, 2, "k", None) == "gone.py:Outer.inner:k#2"


def _record(digest: str, site: str = "x.py:f:k") -> records.Record:
    return records.Record.from_json(
        {
            "schema": records.SCHEMA_VERSION,
            "site": site,
            "digest": digest,
            "key": {"n": "int"},
            "chosen": {"tile": 16},
            "results": [
                {
                    "config": {"tile": 16},
                    "status": "ok",
                    "median_ms": 1.0,
                    "spread": 0.0,
                    "reps": 1,
                    "min_ms": 1.0,
                }
            ],
            "kernel": {"qualname": "k"},
            "signature": {},
            "device": {},
            "versions": {},
            "context": {},
            "tuning_s": 0.0,
            "timestamp": 0.0,
        }
    )


def test_file_record_store_implements_the_seam(tmp_path: Path) -> None:
    store = FileRecordStore()
    assert isinstance(store, RecordStore) and store.writable
    digest = "5" * 64
    assert store.get(digest) is None
    assert store.put(_record(digest))
    assert store.get(digest) == _record(digest)
    assert [r.digest for r in store.iter_records()] == [digest]
    with store.lock(digest, timeout_s=5) as held:
        assert held
        assert (paths.locks_dir() / f"{digest}.lock").exists()
    assert store.delete(digest)
    assert store.get(digest) is None and not (paths.locks_dir() / f"{digest}.lock").exists()


def test_a_store_of_another_directory_keeps_its_files_and_locks_there(tmp_path: Path) -> None:
    """A writable store over any directory (a node's own cache in the Redis tests): records in
    it, lock files beside it in ``../locks``, nothing in the user's cache."""
    root = tmp_path / "node" / "records"
    store = FileRecordStore(root)
    assert isinstance(store, RecordStore) and store.writable
    digest = "8" * 64
    assert store.put(_record(digest))
    assert (root / f"{digest}.json").is_file()
    assert records.load_record(digest) is None  # not the cache's
    assert store.get(digest) == _record(digest)
    with store.lock(digest, timeout_s=5) as held:
        assert held and (tmp_path / "node" / "locks" / f"{digest}.lock").exists()
    assert store.delete(digest)
    assert store.get(digest) is None and not (root / f"{digest}.json").exists()
    assert not (tmp_path / "node" / "locks" / f"{digest}.lock").exists()


def test_records_path_stores_are_read_only(tmp_path: Path, monkeypatch) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir(mode=0o700)
    digest = "6" * 64
    (shipped / f"{digest}.json").write_text(json.dumps(_record(digest).to_json()))
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", str(shipped))
    cache, extra = default_stores()
    assert cache.writable and not extra.writable and "read-only" in extra.name
    assert extra.get(digest) == _record(digest) and cache.get(digest) is None
    assert not extra.put(_record("7" * 64)) and not extra.delete(digest)
    with extra.lock(digest, timeout_s=1) as held:
        assert held is False
    assert (shipped / f"{digest}.json").exists() and not os.path.exists(
        shipped / f"{'7' * 64}.json"
    )
    assert records.load_record(digest) == _record(digest)  # the module functions agree
