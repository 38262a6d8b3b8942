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


def test_a_file_is_named_from_its_package_root_whichever_way_it_is_reached(
    tmp_path: Path,
) -> None:
    """The file part of an identity comes from the file alone (never from ``__name__``):
    the path from its package root; the same file through a link or a relative path is
    the same; same-named files of two packages differ; a project moved keeps its names."""
    for root in (tmp_path / "one", tmp_path / "two"):
        for pkg in ("a", "b"):
            (root / pkg / "sub").mkdir(parents=True)
            for d in (root / pkg, root / pkg / "sub"):
                (d / "__init__.py").write_text("")
            (root / pkg / "sub" / "mm.py").write_text("x = 1\n")
        (root / "mm.py").write_text("x = 1\n")  # a script outside any package
    one = tmp_path / "one"
    assert identity.file_identity(str(one / "a" / "sub" / "mm.py")) == "a/sub/mm.py"
    assert identity.file_identity(str(one / "b" / "sub" / "mm.py")) == "b/sub/mm.py"
    assert identity.file_identity(str(one / "mm.py")) == "mm.py"
    # Moved elsewhere (another checkout, an installed copy): the same names.
    assert identity.file_identity(str(tmp_path / "two" / "a" / "sub" / "mm.py")) == "a/sub/mm.py"
    # Reached through a symbolic link, or relative to the working directory.
    (tmp_path / "link").symlink_to(one / "a" / "sub", target_is_directory=True)
    assert identity.file_identity(str(tmp_path / "link" / "mm.py")) == "a/sub/mm.py"
    cwd = os.getcwd()
    os.chdir(one / "a")
    try:
        assert identity.file_identity(os.path.join("sub", "mm.py")) == "a/sub/mm.py"
    finally:
        os.chdir(cwd)
    # Not a file: the name as given; an IPython cell's without the number of its run.
    assert identity.file_identity("<string>") == "<string>"
    assert identity.file_identity("<ipython-input-3-abc>") == "<ipython-input-abc>"
    # The site identity carries it, and the module names the file can have had.
    site = identity.site_id(str(one / "a" / "sub" / "mm.py"), 1, 0, "k", None)
    assert site == "a/sub/mm.py:<module>:k"
    assert identity.previous_ids(site)[0] == "mm.py:<module>:k"
    assert identity.module_names(str(one / "a" / "sub" / "mm.py"))[:2] == ("a.sub.mm", "mm")


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


def test_a_named_site_never_reads_its_file_and_a_file_is_parsed_once(tmp_path: Path) -> None:
    """name= replaces the identity, so the caller's file is not read; the sites of one file
    share one parse (until the file changes). Watched through Python's audit events in a
    fresh process: ``open`` for reads, ``compile`` for ``ast.parse``."""
    import subprocess
    import sys

    script = tmp_path / "plain.py"
    script.write_text(PLAIN)
    probe = textwrap.dedent(
        f"""
        import json, sys
        from tunedsl.model import identity

        path = {str(script)!r}
        seen = []
        sys.addaudithook(
            lambda event, args: seen.append(event)
            if event in ("open", "compile") and path in (args[0], args[1:2] and args[1])
            else None
        )
        out = {{"named": identity.site_id(path, 5, 0, "autotune_launch", "mine")}}
        out["named_events"] = list(seen)
        out["ids"] = [identity.site_id(path, n, 0, "autotune_launch", None) for n in (5, 10, 11, 15)]
        out["events"] = seen[len(out["named_events"]):]
        with open(path, "a") as fh:
            fh.write("tunedsl.autotune_launch(k, space={{}}, grid=1)\\n")
        seen.clear()
        out["after_edit"] = identity.site_id(path, 16, 0, "autotune_launch", None)
        out["edit_events"] = [e for e in seen if e == "compile"]
        print(json.dumps(out))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["named"] == "mine"
    assert out["named_events"] == []  # nothing read, nothing parsed
    assert out["ids"] == [
        "plain.py:helper:autotune_launch",
        "plain.py:Model.forward:autotune_launch",
        "plain.py:Model.forward:autotune_launch#1",
        "plain.py:<module>:autotune_launch",
    ]
    assert out["events"].count("open") >= 4  # each site reads the file (it may change)
    assert out["events"].count("compile") == 1  # but four sites, one parse
    assert out["after_edit"] == "plain.py:<module>:autotune_launch#1"
    assert out["edit_events"] == ["compile"]  # an edited file is parsed again
