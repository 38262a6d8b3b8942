"""Security of the caches: nothing from a cache is unpickled or trusted unchecked.

- tuning records are plain JSON validated against the schema; a record whose choice is not in
  the space (or has the wrong types) is not used; pickle payloads in a record do nothing;
- bytecode is loaded only from a directory private to the user and only under its content
  hash (wrong key, group/world-writable directory or file, another owner, symlink: refused);
- ``tunedsl cache import`` validates the whole bundle first: a malformed or hostile bundle
  is a clear error and imports nothing.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import REPO, cache_warnings, load_json, only_cache_warnings

from tunedsl import bytecode
from tunedsl.store import paths, records

PACKAGE = REPO / "tunedsl"
UNPICKLERS = {
    ("pickle", "load"),
    ("pickle", "loads"),
    ("pickle", "Unpickler"),
    ("cloudpickle", "load"),
    ("cloudpickle", "loads"),
    ("dill", "load"),
    ("dill", "loads"),
    ("shelve", "open"),
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("jsonpickle", "decode"),
}


def _calls(tree: ast.AST) -> list[tuple[str, str, int]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            found.append((node.value.id, node.attr, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                found.append((node.module.split(".")[0], alias.name, node.lineno))
    return found


# The exceptions: pipes between a process and its own child, which no one else holds, never
# a file or a cache. The isolated measurement worker unpickles what its parent writes to its
# stdin (the kernel by value); the forked compile workers and their parent unpickle
# each other's jobs and answers (``backends/compile_processes.py``).
PIPE_UNPICKLERS = {
    ("cloudpickle", "loads", "isolated_worker.py"),
    ("pickle", "loads", "compile_processes.py"),
}


def test_no_unpickling_anywhere_in_tunedsl() -> None:
    offenders = []
    # The shipped examples are DSL scripts (`$name`), not Python: they run only as user code.
    files = sorted(p for p in PACKAGE.rglob("*.py") if "examples" not in p.parts)
    assert len(files) > 20
    for path in files:
        for module, attr, line in _calls(ast.parse(path.read_text(), str(path))):
            if (module, attr, path.name) in PIPE_UNPICKLERS:
                continue
            if (module, attr) in UNPICKLERS:
                offenders.append(f"{path.relative_to(REPO)}:{line}: {module}.{attr}")
            if module == "marshal" and attr in ("load", "loads") and path.name != "bytecode.py":
                offenders.append(f"{path.relative_to(REPO)}:{line}: marshal.{attr}")
    assert offenders == []


def test_marshal_runs_only_after_the_entry_is_verified() -> None:
    """bytecode.py's one marshal.loads comes after the key and payload-digest checks."""
    source = (PACKAGE / "bytecode.py").read_text()
    tree = ast.parse(source)
    loads = [line for mod, attr, line in _calls(tree) if (mod, attr) == ("marshal", "loads")]
    assert len(loads) == 1
    lines = source.splitlines()
    before = "\n".join(lines[: loads[0] - 1])
    assert "entry_key != key" in before
    assert "payload_digest" in before and "hashlib.sha256(payload).digest()" in before


class _Evil:
    """Unpickling this would create the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _pickle_b64(marker: Path) -> str:
    return base64.b64encode(pickle.dumps(_Evil(marker))).decode()


def test_pickle_payloads_in_a_record_do_nothing(tmp_path: Path) -> None:
    from test_corrupt_cache import _valid_record

    marker = tmp_path / "pwned"
    payload = _pickle_b64(marker)
    raw = pickle.dumps(_Evil(marker)).decode("latin-1")
    digest = "e" * 64
    data = _valid_record(digest).to_json()
    data["kernel"] = {"qualname": payload, "py/reduce": [{"py/type": "pathlib.Path.touch"}]}
    data["signature"] = {"n": raw}
    data["context"] = {"__reduce__": payload, "pickle": raw}
    data["results"][0]["options"] = {"num_warps": payload}
    data["results"][0]["constexprs"] = {"TILE": raw}
    data["key"] = {"$pickle": payload}
    paths.ensure_private_dir(paths.records_dir())
    records.record_path(digest).write_text(json.dumps(data))

    record = records.load_record(digest)  # valid by the schema: payloads are just strings
    assert record is not None
    assert record.kernel["qualname"] == payload
    assert not marker.exists()
    # A payload where the schema wants a configuration value is a wrong type: rejected.
    data["chosen"] = {"TILE": {"py/reduce": payload}}
    records.record_path(digest).write_text(json.dumps(data))
    with cache_warnings() as caught:
        assert records.load_record(digest) is None
    assert len(only_cache_warnings(caught)) == 1
    assert not marker.exists()


@pytest.mark.needs_triton
@pytest.mark.parametrize(
    "chosen, why",
    [
        ({"TILE": 4096}, "a configuration that is not in the space"),
        ({"TILE": "32"}, "the right value with the wrong type (str, not int)"),
        ({"TILE": 32, "EXTRA": 1}, "a configuration with an extra field"),
        ({"TILE": 32.0}, "a float where the space has an int"),
    ],
)
def test_a_record_choosing_outside_the_space_is_not_used(chosen: dict, why: str) -> None:
    import torch
    from rel_kernels import vadd

    from tunedsl import autotune_launch

    n = 40

    def call(tag: str):
        a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.zeros(n)
        options = dict(
            space={"TILE": [16, 32]},
            grid=lambda cfg: ((n + cfg.TILE - 1) // cfg.TILE,),
            args=(a, b, c, n),
            kwargs=lambda cfg: {"TILE": cfg.TILE},
            effort="quick",
            name=f"outside-{json.dumps(chosen)}",
        )
        # Two call sites (sites are per code location) sharing one name: the second one
        # has no in-memory decision and must read the (forged) record.
        if tag == "first":
            launch = autotune_launch(vadd, **options)
        else:
            launch = autotune_launch(vadd, **options)
        assert torch.equal(c, a + b), tag
        return launch

    first = call("first")
    path = records.record_path(first.digest)
    data = load_json(path)
    # The forged choice is also listed as a successful result: valid by the schema alone.
    forged = dict(data["results"][0], config=chosen, status="ok")
    data["results"].append(forged)
    data["chosen"] = chosen
    path.write_text(json.dumps(data))

    with cache_warnings() as caught:
        again = call("again")
    assert again.source == "tuned", why  # the forged choice was not launched
    assert again.config.TILE in (16, 32) and isinstance(again.config.TILE, int)
    assert len(only_cache_warnings(caught)) == 1, only_cache_warnings(caught)
    assert records.Record.from_json(load_json(path)).chosen == again.config


# -- bytecode ------------------------------------------------------------------------------

MODULE = "from tunedsl import autotune, cdiv\nVALUE = {value}\n"


def _entry_for(tmp_path: Path, value: int) -> tuple[bytes, str, Path]:
    script = tmp_path / f"mod{value}.py"
    script.write_text(MODULE.format(value=value))
    source = script.read_bytes()
    bytecode.load_or_compile(source, str(script))
    key = bytecode.cache_key(source, str(script))
    entry = bytecode.entry_path(key)
    assert entry.is_file()
    return source, str(script), entry


def _loaded_value(source: bytes, filename: str) -> tuple[object, list[str]]:
    with cache_warnings() as caught:
        code = bytecode.lookup(source, filename)
    value = None
    if code is not None:
        namespace: dict[str, object] = {}
        exec(code, namespace)
        value = namespace["VALUE"]
    return value, only_cache_warnings(caught)


def test_an_entry_renamed_to_another_key_is_not_loaded(tmp_path: Path) -> None:
    _, _, entry1 = _entry_for(tmp_path, 1)
    src2, file2, entry2 = _entry_for(tmp_path, 2)
    shutil.copyfile(entry1, entry2)  # module 1's code planted under module 2's key
    entry2.chmod(0o600)
    value, warned = _loaded_value(src2, file2)
    assert value is None
    assert len(warned) == 1 and "wrong key" in warned[0]
    with cache_warnings() as caught:  # the same refusal again, then the rebuild
        assert bytecode.load_or_compile(src2, file2) is not None
    assert len(only_cache_warnings(caught)) == 1
    assert _loaded_value(src2, file2) == (2, [])


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o720], ids=oct)
def test_a_group_or_world_writable_bytecode_dir_is_not_used(tmp_path: Path, mode: int) -> None:
    source, filename, entry = _entry_for(tmp_path, 3)
    directory = entry.parent
    directory.chmod(mode)
    try:
        value, warned = _loaded_value(source, filename)
        assert value is None
        assert len(warned) == 1 and "not private" in warned[0]
        with cache_warnings() as caught:  # nothing written there either, no second warning
            bytecode.load_or_compile(source, filename)
        assert only_cache_warnings(caught) == []
    finally:
        directory.chmod(0o700)


def test_a_group_writable_entry_file_is_not_loaded(tmp_path: Path) -> None:
    source, filename, entry = _entry_for(tmp_path, 4)
    entry.chmod(0o666)
    value, warned = _loaded_value(source, filename)
    assert value is None and len(warned) == 1 and "writable" in warned[0]


def test_a_symlinked_entry_is_not_loaded(tmp_path: Path) -> None:
    source, filename, entry = _entry_for(tmp_path, 5)
    target = tmp_path / "elsewhere.tbc"
    entry.rename(target)
    entry.symlink_to(target)
    value, warned = _loaded_value(source, filename)
    assert value is None and len(warned) == 1 and "symbolic link" in warned[0]


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root"
)
def test_entries_owned_by_another_user_are_not_loaded(tmp_path: Path) -> None:
    source, filename, entry = _entry_for(tmp_path, 6)
    os.chown(entry, 65534, -1)  # nobody
    value, warned = _loaded_value(source, filename)
    assert value is None and len(warned) == 1 and "another user" in warned[0]
    bytecode.reset()
    os.chown(entry, os.getuid(), -1)
    os.chown(entry.parent, 65534, -1)  # the directory itself belongs to someone else
    value, warned = _loaded_value(source, filename)
    assert value is None and len(warned) == 1 and "not private" in warned[0]


@pytest.mark.parametrize("mode", [0o770, 0o757], ids=oct)
def test_a_cache_root_writable_by_others_is_not_trusted_below_it(tmp_path: Path, mode: int) -> None:
    """The whole chain from the cache root is checked, not only the bytecode directory:
    another user who can write to the root could swap the private directory below it."""
    source, filename, entry = _entry_for(tmp_path, 7)
    root = paths.cache_root()
    assert entry.parent.parent == root and paths.is_private_dir(entry.parent)
    root.chmod(mode)
    try:
        value, warned = _loaded_value(source, filename)
        assert value is None
        assert len(warned) == 1, warned
        assert f"{root} is writable by group or others (mode {mode:o})" in warned[0]
        assert "TUNEDSL_CACHE_DIR" in warned[0]
        assert not paths.is_private_dir(entry.parent)
    finally:
        root.chmod(0o700)
    bytecode.reset()
    assert _loaded_value(source, filename) == (7, [])


def test_a_symlinked_bytecode_dir_is_not_followed(tmp_path: Path) -> None:
    source, filename, entry = _entry_for(tmp_path, 8)
    moved = tmp_path / "moved-bytecode"
    entry.parent.rename(moved)
    entry.parent.symlink_to(moved)  # a private target, but not the directory that was made
    value, warned = _loaded_value(source, filename)
    assert value is None
    assert len(warned) == 1 and "is a symbolic link or not a directory" in warned[0]


# -- tunedsl cache import --------------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(cwd),
        env=dict(os.environ),
    )


def _bundle(*items: object) -> str:
    return json.dumps({"tunedsl_records": 1, "records": list(items)})


def _hostile_bundles(tmp_path: Path) -> dict[str, tuple[str | bytes, str]]:
    from test_corrupt_cache import _valid_record

    good = _valid_record("1" * 64).to_json()
    traversal = dict(good, digest="../../../../tmp/evil")
    wrong_type = dict(good, results="many")
    outside = dict(good, chosen={"TILE": 4096})
    pickled = base64.b64encode(pickle.dumps(_Evil(tmp_path / "pwned"))).decode()
    return {
        "not_json": ("{not json", "cannot read bundle"),
        "binary": (b"\x80\x04\x95" + pickle.dumps(_Evil(tmp_path / "pwned")), "cannot read bundle"),
        "a_pickle_string": (json.dumps(pickled), "not a tunedsl records bundle"),
        "wrong_version": (json.dumps({"tunedsl_records": 99, "records": []}), "not a tunedsl"),
        "records_not_a_list": (json.dumps({"tunedsl_records": 1, "records": {}}), "must be a list"),
        "path_traversal_digest": (_bundle(good, traversal), "record 1 is invalid: record.digest"),
        "wrong_type": (_bundle(good, wrong_type), "record 1 is invalid: record.results"),
        "choice_not_a_result": (_bundle(outside, good), "record 0 is invalid: record.chosen"),
        "deeply_nested": (
            '{"tunedsl_records": 1, "records": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "cannot read bundle",
        ),
    }


def test_cache_import_rejects_hostile_bundles_and_imports_nothing(tmp_path: Path) -> None:
    bundles = _hostile_bundles(tmp_path)
    for name, (content, expected) in bundles.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        proc = _cli("import", str(path), cwd=tmp_path)
        assert proc.returncode == 1, (name, proc.stdout, proc.stderr)
        assert expected in proc.stderr, (name, proc.stderr)
        assert "Traceback" not in proc.stderr, (name, proc.stderr)
        assert (
            "nothing imported" in proc.stderr
            or "cannot read" in proc.stderr
            or ("not a tunedsl" in proc.stderr or "must be a list" in proc.stderr)
        )
        assert list(records.iter_record_files()) == [], name  # all or nothing
    assert not (tmp_path / "pwned").exists()
    assert not Path("/tmp/evil.json").exists()


def test_cache_import_keeps_a_newer_local_record_unless_told_to_overwrite(tmp_path: Path) -> None:
    """An older bundle does not throw away a key this user tuned since (it replaced every
    record it held, newer or not); a key the cache lacks, or holds an older record of, is
    imported; ``--overwrite`` replaces them all."""
    import dataclasses

    from test_corrupt_cache import _valid_record

    newer_here = dataclasses.replace(_valid_record("4" * 64), timestamp=2000.0, tuning_s=9.0)
    older_here = dataclasses.replace(_valid_record("5" * 64), timestamp=500.0, tuning_s=9.0)
    assert records.save_record(newer_here) and records.save_record(older_here)
    bundle = tmp_path / "old.json"
    shipped = [dataclasses.replace(_valid_record(d * 64), timestamp=1000.0) for d in "456"]
    bundle.write_text(_bundle(*(r.to_json() for r in shipped)))
    proc = _cli("import", str(bundle), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 records; kept 1 local record newer than the bundle's" in proc.stdout
    assert records.load_record("4" * 64) == newer_here
    assert records.load_record("5" * 64) == shipped[1]
    assert records.load_record("6" * 64) == shipped[2]
    proc = _cli("import", "--overwrite", str(bundle), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "imported 3 records" in proc.stdout and "kept" not in proc.stdout
    assert records.load_record("4" * 64) == shipped[0]


def test_cache_import_of_a_bundle_listing_a_key_twice_keeps_its_newest_record(
    tmp_path: Path,
) -> None:
    """Bundles joined list a key twice: the newest line is the key's record, with or without
    ``--overwrite`` (which replaces only the cache's own), and is not a local record kept."""
    import dataclasses

    from test_corrupt_cache import _valid_record

    newest = dataclasses.replace(_valid_record("7" * 64), timestamp=3000.0)
    oldest = dataclasses.replace(_valid_record("7" * 64), timestamp=1000.0, tuning_s=9.0)
    bundle = tmp_path / "twice.json"
    bundle.write_text(_bundle(newest.to_json(), oldest.to_json()))
    for flags in ([], ["--overwrite"]):
        proc = _cli("import", *flags, str(bundle), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert records.load_record("7" * 64) == newest, flags
        assert "kept" not in proc.stdout, (flags, proc.stdout)


def test_cache_import_of_a_valid_bundle_round_trips(tmp_path: Path) -> None:
    from test_corrupt_cache import _valid_record

    bundle = tmp_path / "ok.json"
    bundle.write_text(_bundle(_valid_record("2" * 64).to_json(), _valid_record("3" * 64).to_json()))
    proc = _cli("import", str(bundle), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 records" in proc.stdout
    assert records.load_record("2" * 64) == _valid_record("2" * 64)
    mode = stat.S_IMODE(os.stat(paths.records_dir()).st_mode)
    assert mode & 0o077 == 0  # the records directory it created is private
