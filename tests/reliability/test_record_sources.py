"""Records from elsewhere (a bundle, a shipped directory, a file another user could write)
never decide for good, and `tunedsl cache` says what it did. Real tuning in subprocesses,
real files, the CLI as a user runs it, a real second user where one is the attacker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from rel_helpers import (
    TWO_KEYS,
    child_env,
    record_files,
    run_python,
    tuned_and_shipped,
    write_script,
)

from tunedsl.store import records

TUNE = """
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


n = 40
a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
r = autotune_launch(vadd_kernel, space={"tile": [16, 32]}, effort="quick", name="sources",
                    grid=lambda cfg: (cdiv(n, cfg.tile),),
                    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})
assert torch.equal(c, a + b)
print("RESULT", r.source, r.config.tile, r.digest, flush=True)
"""


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[str, int, str]:
    return _stderr_of(tmp_path, env)[0]


def _stderr_of(tmp_path: Path, env: dict[str, str]) -> tuple[tuple[str, int, str], str]:
    """Run the site once: (its source, its tile, the key's digest), and its stderr."""
    script = write_script(tmp_path / "sources_main.py", TUNE)
    out = run_python(script, env, timeout=180)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    _, source, tile, digest = line.split()
    return (source, int(tile), digest), out.stderr


def cache_cmd(env: dict[str, str], *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _tuned_record(tmp_path: Path) -> dict:
    """A real record of the site, tuned once in a scratch cache."""
    scratch = tmp_path / "scratch-cache"
    source, _, digest = _run(tmp_path, child_env(scratch))
    assert source == "tuned"
    return json.loads((scratch / "records" / f"{digest}.json").read_text())


def _poisoned(record: dict) -> dict:
    """Every configuration of the space 'failed', and a choice outside the space."""
    out = json.loads(json.dumps(record))
    for result in out["results"]:
        result.update(status="failed", reason="forged failure")
        for field in ("median_ms", "spread", "reps", "min_ms"):
            result.pop(field, None)
    outside = {"tile": 999}
    out["results"].append(
        {"config": outside, "status": "ok", "median_ms": 0.001, "spread": 0.0, "reps": 9,
         "min_ms": 0.001, "options": {}, "constexprs": {}}
    )  # fmt: skip
    out["chosen"] = outside
    return out


def _choosing(record: dict, tile: int, timestamp: float) -> dict:
    out = json.loads(json.dumps(record))
    out["chosen"] = {"tile": tile}
    out["timestamp"] = timestamp
    return out


def _write_dir(root: Path, record: dict) -> Path:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = root / f"{record['digest']}.json"
    path.write_text(json.dumps(record))
    return path


# -- a poisoned record is a hint, never a verdict -----------------------------------------


@pytest.mark.needs_triton
@pytest.mark.parametrize("via", ["shipped", "bundle", "redis"])
def test_a_record_failing_every_configuration_does_not_stop_the_site(
    tmp_path: Path, via: str
) -> None:
    poison = _poisoned(_tuned_record(tmp_path))
    cache = tmp_path / "cache"
    env = child_env(cache)
    server = None
    if via == "shipped":
        env["TUNEDSL_RECORDS_PATH"] = str(_write_dir(tmp_path / "shipped", poison).parent)
    elif via == "bundle":
        bundle = tmp_path / "poison.json"
        bundle.write_text(json.dumps({"tunedsl_records": 1, "records": [poison]}))
        assert cache_cmd(env, "import", str(bundle)).returncode == 0
    else:
        pytest.importorskip("redis")
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
        from redis_server import RedisServer

        (tmp_path / "redis").mkdir()
        server = RedisServer(tmp_path / "redis")
        server.client().set(f"tunedsl:v1:record:{poison['digest']}", json.dumps(poison))
        env["TUNEDSL_REDIS_URL"] = server.url
    try:
        source, tile, digest = _run(tmp_path, env)
        assert source == "tuned" and tile in (16, 32)
        # What this process measured is remembered: no forged failure, no outside choice.
        mine = json.loads((cache / "records" / f"{digest}.json").read_text())
        assert mine["chosen"] in ({"tile": 16}, {"tile": 32})
        assert all(r["status"] == "ok" for r in mine["results"]), mine["results"]
        if server is not None:  # the fleet's value is replaced too
            shared = json.loads(server.client().get(f"tunedsl:v1:record:{digest}"))
            assert shared["chosen"] == mine["chosen"]
        assert _run(tmp_path, env)[0] == "disk"
    finally:
        if server is not None:
            server.stop()


# -- shipped records of a script since renamed -----------------------------------------------


@pytest.mark.needs_triton
def test_shipped_records_of_a_script_since_renamed_are_named_once_not_passed_over(
    tmp_path: Path,
) -> None:
    # Records shipped on TUNEDSL_RECORDS_PATH, the script renamed since (mmbias.py ->
    # mm_linear.py): its site is a new site (a site's identity holds its file's name), so
    # the records decide nothing. mode="cached" launched the default and mode="on" tuned
    # again, both in silence, where shipped rules say so; now one warning names a record
    # and the fix, and a hit costs nothing more (the look is made once, on a miss).
    original, ship = tuned_and_shipped(tmp_path, "mm_bias.py")
    (tmp_path / "b").mkdir()
    renamed = write_script(tmp_path / "b" / "mm_linear.py", TWO_KEYS)

    def serve(script: Path, cache: str, **extra: str) -> subprocess.CompletedProcess[str]:
        env = child_env(tmp_path / cache, TUNEDSL_RECORDS_PATH=str(ship), **extra)
        out = run_python(script, env, timeout=180)
        assert out.returncode == 0, out.stderr
        return out

    same = serve(original, "c0", TUNEDSL_AUTOTUNE="cached")  # its own name: the records
    assert same.stdout.split() == ["RESULT", "disk"] * 2 and "Warning" not in same.stderr
    for mode, source, then in (
        ("cached", "default", "each key launches the site's default"),
        ("on", "tuned", "each key is tuned again"),
    ):
        out = serve(renamed, f"c-{mode}", TUNEDSL_AUTOTUNE=mode)
        assert out.stdout.split() == ["RESULT", source] * 2, out.stdout
        warned = [line for line in out.stderr.splitlines() if "Warning" in line]
        assert len(warned) == 1, out.stderr  # one for the site, not one per key
        assert warned[0].startswith(f"{renamed}:"), warned  # at the user's line
        assert (
            f"{ship}/" in warned[0]
            and ".json is a tuning record for mm_bias.py:<module>:autotune_launch, the same "
            "function, kernel and launch as mm_linear.py:<module>:autotune_launch in a file of "
            f"another name; a site's identity holds its file's name, so {then}"
            in warned[0]
        ), warned
        assert "`name=`" in warned[0], warned


# -- a record file others can write is refused ---------------------------------------------


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A directory the second user can reach (pytest's own is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="tunedsl-sources-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.needs_triton
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv")
def test_a_record_file_writable_by_others_is_refused(tmp_path: Path, open_tmp: Path) -> None:
    cache = open_tmp / "cache"
    cache.mkdir(mode=0o755)
    env = child_env(cache)
    source, tile, digest = _run(tmp_path, env)
    assert source == "tuned"
    (cache / "records").chmod(0o755)  # the directory passes the trust rule
    path = cache / "records" / f"{digest}.json"
    path.chmod(0o666)
    other = 32 if tile == 16 else 16
    forged = _choosing(json.loads(path.read_text()), other, 2.0e9)
    attacker = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
         f"open({str(path)!r}, 'w').write({json.dumps(forged)!r})"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert attacker.returncode == 0, attacker.stderr
    (source, _, _), stderr = _stderr_of(tmp_path, env)
    assert source == "tuned", "the rewritten record was used"
    warned = [line for line in stderr.splitlines() if str(path) in line]
    assert len(warned) == 1 and "chmod go-w" in warned[0], stderr
    # Tuning replaced it with a file of this user's only.
    mode = path.stat().st_mode & 0o777
    assert not mode & 0o022 and path.stat().st_uid == os.getuid()


# -- shipped records: the newer one wins, and nothing is copied into the cache ------------


@pytest.mark.needs_triton
def test_an_updated_shipped_record_wins_over_the_previous_release(tmp_path: Path) -> None:
    real = _tuned_record(tmp_path)
    shipped = tmp_path / "shipped"
    cache = tmp_path / "cache"
    env = child_env(cache, TUNEDSL_RECORDS_PATH=str(shipped))
    _write_dir(shipped, _choosing(real, 16, 1.0e9))
    assert _run(tmp_path, env)[:2] == ("disk", 16)
    assert record_files(cache) == []  # not copied: the shipped directory stays the source
    _write_dir(shipped, _choosing(real, 32, 1.1e9))  # the next release of the application
    assert _run(tmp_path, env)[:2] == ("disk", 32)
    # A copy an earlier tunedsl made in the cache is older than the update: the update wins.
    _write_dir(cache / "records", _choosing(real, 16, 1.0e9))
    assert _run(tmp_path, env)[:2] == ("disk", 32)
    # A record this user made after the shipped one keeps its choice.
    _write_dir(cache / "records", _choosing(real, 16, 1.2e9))
    assert _run(tmp_path, env)[:2] == ("disk", 16)


def test_ls_marks_the_record_that_a_newer_shipped_record_shadows(tmp_path: Path) -> None:
    digest = "ab" * 32
    fake = _fake_record(digest)
    cache = tmp_path / "cache"
    _write_dir(cache / "records", {**fake, "timestamp": 1.0e9})
    _write_dir(tmp_path / "shipped", {**fake, "timestamp": 1.1e9})
    env = child_env(cache, TUNEDSL_RECORDS_PATH=str(tmp_path / "shipped"))
    out = cache_cmd(env, "ls", "--json")
    assert out.returncode == 0, out.stderr
    rows = {row["read_only"]: row for row in json.loads(out.stdout)}
    assert rows[False]["shadowed"] and not rows[True]["shadowed"]


@pytest.mark.parametrize("spelled", ["same", "trailing-slash", "relative"])
def test_a_records_path_naming_the_caches_own_records_is_not_a_second_source(
    tmp_path: Path, spelled: str
) -> None:
    # TUNEDSL_RECORDS_PATH holding the cache's own records/ (one list of directories kept for
    # every machine): each record was listed twice, once as a read-only copy "shadowed by
    # another record", itself.
    cache = tmp_path / "cache"
    _write_dir(cache / "records", _fake_record("ab" * 32))
    entry = {
        "same": str(cache / "records"),
        "trailing-slash": f"{cache / 'records'}/",
        "relative": "cache/records",
    }[spelled]
    env = child_env(cache, TUNEDSL_RECORDS_PATH=entry)
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", "ls", "--json"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(row["read_only"], row["shadowed"]) for row in rows] == [(False, False)], rows


# -- cache clear ---------------------------------------------------------------------------


def _fake_record(digest: str, site: str = "x.py:f:k") -> dict:
    return {
        "schema": records.SCHEMA_VERSION, "site": site, "digest": digest,
        "key": {"n": "int"}, "chosen": {"tile": 16},
        "results": [{"config": {"tile": 16}, "status": "ok", "median_ms": 1.0,
                     "spread": 0.0, "reps": 1, "min_ms": 1.0}],
        "kernel": {"qualname": "k"}, "signature": {}, "device": {}, "versions": {},
        "context": {}, "tuning_s": 0.0, "timestamp": 0.0,
    }  # fmt: skip


def test_clear_needs_all_to_remove_everything(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    rec = _write_dir(cache / "records", _fake_record("ab" * 32))
    env = child_env(cache)
    out = cache_cmd(env, "clear")
    assert out.returncode == 1 and "--all" in out.stderr and "Traceback" not in out.stderr
    assert rec.exists()
    mixed = cache_cmd(env, "clear", "--all", "abab")
    assert mixed.returncode == 1 and "--all" in mixed.stderr
    assert rec.exists()
    done = cache_cmd(env, "clear", "--all")
    assert done.returncode == 0 and "removed 1 record" in done.stdout
    assert not rec.exists()


def test_clear_says_when_its_selection_matches_no_record(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    rec = _write_dir(cache / "records", _fake_record("ab" * 32, site="pkg/model.py:f:k"))
    env = child_env(cache)
    typo = cache_cmd(env, "clear", "--site", "modle.py")
    assert typo.returncode == 1 and rec.exists()
    assert "removed 0 records: none matches --site 'modle.py'" in typo.stdout
    assert "tunedsl cache ls" in typo.stdout
    # An id that matches nothing fails as `cache show` of it does.
    bad_id = cache_cmd(env, "clear", "cdcd")
    shown = cache_cmd(env, "show", "cdcd")
    assert bad_id.returncode == shown.returncode == 1 and rec.exists()
    assert "removed 0 records: none matches cdcd" in bad_id.stdout
    done = cache_cmd(env, "clear", "--site", "model.py")
    assert done.returncode == 0
    assert done.stdout.strip() == "removed 1 record" and not rec.exists()


def test_clear_of_a_shipped_record_says_it_is_read_only_and_where(tmp_path: Path) -> None:
    # `cache ls` lists TUNEDSL_RECORDS_PATH's records; `clear --site`/`clear ID` of one said
    # "none matches ... (`tunedsl cache ls` lists the records)", pointing at the listing that
    # shows it matching instead of at why nothing went (clear works on the cache only).
    cache, ship = tmp_path / "cache", tmp_path / "ship"
    shipped = _write_dir(ship, _fake_record("ab" * 32, site="pkg/model.py:f:k"))
    env = child_env(cache, TUNEDSL_RECORDS_PATH=str(ship))
    for asked, named in ((("--site", "model.py"), "--site 'model.py'"), (("abab",), "abab")):
        out = cache_cmd(env, "clear", *asked)
        assert out.returncode == 1 and shipped.exists(), out.stdout + out.stderr
        assert out.stdout.splitlines() == [
            f"removed 0 records: none in the cache matches {named}; 1 record that matches is "
            f"shipped, read-only, in {ship} (TUNEDSL_RECORDS_PATH), and `cache clear` removes "
            "the cache's records only: remove it from that directory, or take the directory "
            "off TUNEDSL_RECORDS_PATH"
        ], out.stdout
    # One in the cache too: that one goes, and the shipped one is said to stay.
    own = _write_dir(cache / "records", _fake_record("cd" * 32, site="pkg/model.py:f:k"))
    out = cache_cmd(env, "clear", "--site", "model.py")
    assert out.returncode == 0 and not own.exists() and shipped.exists(), out.stdout
    assert out.stdout.splitlines() == [
        "removed 1 record",
        f"kept 1 record that matches, shipped, read-only, in {ship} (TUNEDSL_RECORDS_PATH): "
        "`cache clear` removes the cache's records only: remove it from that directory, or "
        "take the directory off TUNEDSL_RECORDS_PATH",
    ], out.stdout


def test_clear_reports_only_the_binaries_it_removed(tmp_path: Path) -> None:
    """Through a symbolic link nothing is removed, and the output says so."""
    cache = tmp_path / "cache"
    cache.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("a" * 64, "b" * 64, "c" * 64):  # named as stored binaries are
        (elsewhere / name).mkdir()
        (elsewhere / name / "kernel.bin").write_bytes(b"x")
    os.symlink(elsewhere, cache / "binaries")
    out = cache_cmd(child_env(cache), "clear", "--all")
    assert out.returncode == 0, out.stderr
    assert len(list(elsewhere.iterdir())) == 3
    assert "removed 3" not in out.stdout
    assert "symbolic link" in out.stdout + out.stderr
    # A real binaries directory: the count is what went.
    os.unlink(cache / "binaries")
    shutil.copytree(elsewhere, cache / "binaries")
    (cache / "binaries").chmod(0o700)
    out = cache_cmd(child_env(cache), "clear", "--all")
    assert "removed 3 stored kernel binaries" in out.stdout, out.stdout
    assert not (cache / "binaries").exists() or not list((cache / "binaries").iterdir())


def test_clear_all_removes_stopped_compiles_and_tritons_key_and_nothing_else(
    tmp_path: Path,
) -> None:
    """``clear --all`` removes the cache's verdicts on compiles stopped over shared memory
    (and a killed writer's temporary file of one) and the stored Triton key, and leaves any
    other file in ``stopped/``; through a symbolic link it removes nothing."""
    cache = tmp_path / "cache"
    stopped = cache / "stopped"
    stopped.mkdir(parents=True)
    for p in (cache, stopped):
        p.chmod(0o700)
    verdicts = [stopped / f"{c * 64}.json" for c in "ab"]
    for v in verdicts:
        v.write_text('{"required": 49152, "limit": 1024}')
    temporary = stopped / f".{'c' * 64}.json.0123456789ab.tmp"
    temporary.write_text("{")
    mine = stopped / "notes.json"
    mine.write_text("{}")
    (cache / "triton_key.json").write_text("{}")
    out = cache_cmd(child_env(cache), "clear", "--all")
    assert out.returncode == 0, out.stderr
    assert "removed 2 verdicts on compiles over shared memory" in out.stdout, out.stdout
    assert "removed the stored Triton key" in out.stdout, out.stdout
    assert sorted(p.name for p in stopped.iterdir()) == ["notes.json"]
    assert not (cache / "triton_key.json").exists()
    # A symbolic link in its place: nothing is followed.
    shutil.rmtree(stopped)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{'d' * 64}.json").write_text("{}")
    os.symlink(elsewhere, stopped)
    out = cache_cmd(child_env(cache), "clear", "--all")
    assert out.returncode == 0, out.stderr
    assert [p.name for p in elsewhere.iterdir()] == [f"{'d' * 64}.json"]


# -- bundles stream, and a damaged line is skipped -------------------------------------------


def test_export_import_round_trip_is_exact_and_a_damaged_line_is_skipped(tmp_path: Path) -> None:
    first = tmp_path / "first"
    made = []
    for i in range(12):
        rec = {**_fake_record(f"{i:02x}" * 32, site=f"s{i}.py:f:k"), "timestamp": 1.0e9 + i}
        made.append(records.Record.from_json(rec))
        records.save_record(made[-1], first / "records")
    bundle = tmp_path / "bundle.jsonl"
    out = cache_cmd(child_env(first), "export", str(bundle))
    assert out.returncode == 0 and "exported 12 records" in out.stdout, out.stderr
    lines = bundle.read_text().splitlines()
    assert len(lines) == 13  # a header, then one record a line

    second = tmp_path / "second"
    out = cache_cmd(child_env(second), "import", str(bundle))
    assert out.returncode == 0 and "imported 12 records" in out.stdout, out.stderr
    for rec in made:
        copy = records.read_record_file(second / "records" / f"{rec.digest}.json")
        assert copy == rec and copy.to_json() == rec.to_json()

    lines[5] = lines[5][: len(lines[5]) // 2]  # torn
    lines[7] = '{"schema": 1, "digest": "zz"}'  # not a record
    bundle.write_text("\n".join(lines) + "\n")
    third = tmp_path / "third"
    out = cache_cmd(child_env(third), "import", str(bundle))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert "imported 10 records" in out.stdout
    assert f"{bundle}:6" in out.stderr and f"{bundle}:8" in out.stderr, out.stderr
    assert len(record_files(third)) == 10


def test_a_bundle_of_the_previous_format_still_imports(tmp_path: Path) -> None:
    rec = _fake_record("cd" * 32)
    bundle = tmp_path / "old.json"
    bundle.write_text(json.dumps({"tunedsl_records": 1, "records": [rec]}, indent=1))
    cache = tmp_path / "cache"
    out = cache_cmd(child_env(cache), "import", str(bundle))
    assert out.returncode == 0 and "imported 1 record" in out.stdout, out.stderr
    assert records.read_record_file(cache / "records" / f"{'cd' * 32}.json").digest == "cd" * 32


def test_a_records_path_entry_that_is_no_directory_is_named(tmp_path: Path) -> None:
    # TUNEDSL_RECORDS_PATH naming a bundle file (records meant to be imported) or a directory
    # that is not there was passed over in silence: every key tuned, with nothing saying the
    # shipped records were never read.
    from rel_helpers import run_tunedsl, write_dsl_project

    script = write_dsl_project(tmp_path)
    bundle = tmp_path / "records.jsonl"
    bundle.write_text("")
    missing = tmp_path / "no-such-dir"
    env = child_env(tmp_path / "cache", TUNEDSL_RECORDS_PATH=f"{bundle}{os.pathsep}{missing}")
    out = run_tunedsl(script, env)
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stderr.splitlines() if "TUNEDSL_RECORDS_PATH" in line]
    assert len(said) == 2, out.stderr
    assert str(bundle) in said[0] and f"tunedsl cache import {bundle}" in said[0], said
    assert str(missing) in said[1] and "does not exist" in said[1], said
