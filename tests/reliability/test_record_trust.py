"""Records get bytecode's trust rule, record files are read safely,
and ``tunedsl cache`` removes only what it wrote and fails clearly. Real files, real
subprocesses (the CLI as a user runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import swap_attack
from rel_helpers import (
    cache_warnings,
    child_env,
    only_cache_warnings,
    record_files,
    run_python,
    write_script,
)

from tunedsl.cli.bundle import read_bundle
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


for n in (40, 50):
    a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
    r = autotune_launch(vadd_kernel, space={"tile": [16, 32]}, effort="quick", name="trust",
                        grid=lambda cfg: (cdiv(n, cfg.tile),),
                        args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})
    assert torch.equal(c, a + b)
    print("RESULT", r.source, r.digest, flush=True)
"""


def _tune(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = write_script(tmp_path / "trust_main.py", TUNE)
    return run_python(script, env, timeout=180)


def _sources(out: subprocess.CompletedProcess[str]) -> list[str]:
    assert out.returncode == 0, out.stderr
    return [line.split()[1] for line in out.stdout.splitlines() if line.startswith("RESULT")]


def cache_cmd(
    env: dict[str, str], *argv: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 1, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tunedsl: error:"), out.stderr
    assert "Traceback" not in out.stderr
    for word in words:
        assert word in lines[0], lines[0]


# -- the trust rule -----------------------------------------------------------------------


@pytest.mark.needs_triton
def test_records_dir_writable_by_others_is_not_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = child_env(cache)
    assert _sources(_tune(tmp_path, env)) == ["tuned", "tuned"]
    assert _sources(_tune(tmp_path, env)) == ["disk", "disk"]
    os.chmod(cache / "records", 0o777)  # anyone could have forged these
    out = _tune(tmp_path, env)
    assert _sources(out) == ["tuned", "tuned"]
    warned = [line for line in out.stderr.splitlines() if "not private to this user" in line]
    assert len(warned) == 1, out.stderr  # one warning, not one per key


@pytest.mark.needs_triton
def test_records_path_dir_owned_or_writable_by_others_is_not_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = child_env(cache)
    _sources(_tune(tmp_path, env))
    shipped = tmp_path / "shipped"
    (cache / "records").rename(shipped)
    env["TUNEDSL_RECORDS_PATH"] = str(shipped)
    assert _sources(_tune(tmp_path, env)) == ["disk", "disk"]
    for p in record_files(cache):
        p.unlink()
    os.chmod(shipped, 0o757)
    out = _tune(tmp_path, env)
    assert _sources(out) == ["tuned", "tuned"]
    assert sum("not private to this user" in line for line in out.stderr.splitlines()) == 1


def test_record_file_symlink_fifo_and_huge_file_are_misses(tmp_path: Path) -> None:
    """A record that is a symbolic link (to another user's file), a FIFO (a read would block
    forever) or a huge file is a miss with one warning, read without following or blocking."""
    root = tmp_path / "records"
    root.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    os.symlink(target, root / f"{'a' * 64}.json")
    os.mkfifo(root / f"{'b' * 64}.json")
    with open(root / f"{'c' * 64}.json", "wb") as fh:
        fh.truncate(records.MAX_RECORD_BYTES + 1)  # sparse: costs no disk
    with cache_warnings() as caught:
        for digest in ("a" * 64, "b" * 64, "c" * 64):
            assert records.load_from(root, digest) is None
    messages = only_cache_warnings(caught)
    assert len(messages) == 3
    assert "symbolic link" in messages[0]
    assert "not a regular file" in messages[1]
    assert "limit" in messages[2]


def test_import_of_dev_zero_and_of_a_fifo_fail_cleanly(tmp_path: Path) -> None:
    """`cache import /dev/zero` ended in an uncaught MemoryError; a FIFO blocked forever."""
    env = child_env(tmp_path / "cache")
    _one_line_error(cache_cmd(env, "import", "/dev/zero"), "not a regular file")
    fifo = tmp_path / "bundle.fifo"
    os.mkfifo(fifo)
    _one_line_error(cache_cmd(env, "import", str(fifo)), "not a regular file")
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(1024 * 1024 * 1024)  # sparse
    _one_line_error(cache_cmd(env, "import", str(big)), "limit")


# -- clear --------------------------------------------------------------------------------


def _fake_record(digest: str) -> dict:
    return {
        "schema": records.SCHEMA_VERSION,
        "site": "x.py:f:k",
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


def test_clear_never_deletes_through_a_symlinked_records_dir(tmp_path: Path) -> None:
    """Another user's symlink `records -> victim/` made `cache clear` delete the victim's
    *.json files."""
    cache = tmp_path / "cache"
    cache.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    theirs = victim / f"{'d' * 64}.json"
    theirs.write_text(json.dumps(_fake_record("d" * 64)))
    (victim / "notes.json").write_text("{}")
    os.symlink(victim, cache / "records")
    out = cache_cmd(child_env(cache), "clear", "--all")
    _one_line_error(out, "not a private directory")
    assert theirs.exists() and (victim / "notes.json").exists()


def test_clear_removes_only_record_files_and_their_locks(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    root = cache / "records"
    root.mkdir(parents=True, mode=0o700)
    (cache / "locks").mkdir(mode=0o700)
    mine = root / f"{'e' * 64}.json"
    mine.write_text(json.dumps(_fake_record("e" * 64)))
    (cache / "locks" / f"{'e' * 64}.lock").write_text("")
    (cache / "locks" / f"{'e' * 64}.lock.owner").write_text("{}")
    stranger = root / "keep-me.json"  # not a name tunedsl writes
    stranger.write_text("not json")
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    os.symlink(outside, root / f"{'f' * 64}.json")
    out = cache_cmd(child_env(cache), "clear", "--all")
    assert out.returncode == 0, out.stderr
    assert not mine.exists()
    assert not list((cache / "locks").iterdir())  # the lock and its owner note went too
    assert stranger.exists() and outside.exists()


def test_clear_all_removes_only_stored_binaries_from_binaries(tmp_path: Path) -> None:
    # TUNEDSL_CACHE_DIR may name a directory that holds more than tunedsl's cache (a project,
    # the home directory): `clear --all` removed every entry of its binaries/ folder, the
    # user's own files and folders too, where records/ lost only tunedsl's record files.
    cache = tmp_path / "project"
    binaries = cache / "binaries"
    (binaries / "tools").mkdir(parents=True)
    os.chmod(cache, 0o700)
    os.chmod(binaries, 0o700)
    entry = binaries / ("a" * 64)  # a stored binary, and a killed writer's temporary
    temporary = binaries / f".{'b' * 16}.k3j2h1.tmp"
    for folder in (entry, temporary):
        folder.mkdir()
        (folder / "manifest.json").write_text("{}")
    (binaries / "tools" / "run.sh").write_text("mine")
    (binaries / "notes.txt").write_text("mine")
    (binaries / ("c" * 64)).write_text("a file, not a stored binary")
    out = cache_cmd(child_env(cache), "clear", "--all")
    assert out.returncode == 0, out.stderr
    assert not entry.exists() and not temporary.exists()
    assert sorted(p.name for p in binaries.iterdir()) == ["c" * 64, "notes.txt", "tools"]
    assert (binaries / "tools" / "run.sh").read_text() == "mine"
    assert "removed 1 stored kernel binary" in out.stdout, out.stdout


def test_clear_empty_filters_and_short_ids_are_usage_errors(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    root = cache / "records"
    root.mkdir(parents=True, mode=0o700)
    rec = root / f"{'ab' * 32}.json"
    rec.write_text(json.dumps(_fake_record("ab" * 32)))
    env = child_env(cache)
    _one_line_error(cache_cmd(env, "clear", "--site", ""), "--site")
    _one_line_error(cache_cmd(env, "clear", "--kernel", ""), "--kernel")
    _one_line_error(cache_cmd(env, "clear", ""), "at least 4 hex digits")
    _one_line_error(cache_cmd(env, "clear", "a"), "at least 4 hex digits")
    _one_line_error(cache_cmd(env, "clear"), "--all")  # nothing named is not "everything"
    _one_line_error(cache_cmd(env, "clear", "--all", "abab"), "--all")
    assert rec.exists()
    assert "removed 1 record" in cache_cmd(env, "clear", "abab").stdout


# -- export errors ------------------------------------------------------------------------


def test_export_errors_are_one_line(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    root = cache / "records"
    root.mkdir(parents=True, mode=0o700)
    (root / f"{'ab' * 32}.json").write_text(json.dumps(_fake_record("ab" * 32)))
    env = child_env(cache)
    _one_line_error(
        cache_cmd(env, "export", str(tmp_path / "missing" / "out.json")), "no directory"
    )
    _one_line_error(cache_cmd(env, "export", str(tmp_path)), "is a directory")
    _one_line_error(cache_cmd(env, "export", str(tmp_path / "b.json"), "cdcd"), "no tuning record")
    assert not (tmp_path / "b.json").exists()
    ok = cache_cmd(env, "export", str(tmp_path / "b.json"), "abab")
    assert ok.returncode == 0 and len(read_bundle(str(tmp_path / "b.json"))) == 1


# -- a second user swapping the chain ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("attacker_owns", ["root", "parent"])
def test_a_second_user_swapping_cache_directories_never_gets_a_record_used(
    attacker_owns: str,
) -> None:
    """Another user who owns the cache root (they created it first), or the directory that
    holds the victim's own root, swaps the records and bytecode directories (or the root
    itself) for symbolic links to their own while the victim loads in a loop: the victim
    never uses their record nor runs their code. With the root theirs, nothing is cached and
    the warning names the root and the fix."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        got = swap_attack.race(base, attacker_owns, loads=3000)
        assert got.swaps > 0
        assert got.seen["attacker"] == 0, got.seen
        assert not got.ran_attacker_code
        if attacker_owns == "root":
            assert got.seen["mine"] == 0 and got.seen["code"] == 0, got.seen  # uncached
            root = base / "shared"
            assert f"{root} is owned by another user (uid {swap_attack.ATTACKER})" in got.stderr
            assert "TUNEDSL_CACHE_DIR" in got.stderr


MAKE_OPEN_DIR = "import os, sys; os.mkdir(sys.argv[1]); os.chmod(sys.argv[1], 0o777)"


@pytest.mark.needs_triton
def test_a_cache_root_another_user_created_is_not_used_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    """The attacker created the cache root first: the victim's tunes run uncached (each
    process tunes again), with warnings naming the root and the fix, and nothing (no
    records, locks or bytecode directory) is made in the attacker's root."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        root = base / "tunedsl-cache"
        swap_attack.attacker_step(MAKE_OPEN_DIR, str(root))
        env = child_env(root)
        for _ in range(2):
            out = _tune(tmp_path, env)
            assert _sources(out) == ["tuned", "tuned"]
            warned = [line for line in out.stderr.splitlines() if "CacheWarning" in line]
            assert warned and all(f"{root} is owned by another user" in w for w in warned)
            assert any("TUNEDSL_CACHE_DIR" in w for w in warned), out.stderr
        assert os.listdir(root) == []  # nothing made there either, not even a directory


def test_import_into_a_cache_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    """The cache root lies under a regular file: `cache import` is one error naming the
    records directory and the fix, not a traceback."""
    bundle = tmp_path / "empty.json"
    bundle.write_text('{"tunedsl_records": 1, "records": []}\n')
    (tmp_path / "a-file").write_text("")
    out = cache_cmd(child_env(tmp_path / "a-file" / "cache"), "import", str(bundle))
    _one_line_error(out, str(tmp_path / "a-file" / "cache" / "records"), "TUNEDSL_CACHE_DIR")


def test_import_into_a_cache_root_another_user_created_makes_nothing_there() -> None:
    """`cache import` with a cache root another user created: one error naming the root's
    owner and the fix; not even the records directory is made in their root."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        root = base / "tunedsl-cache"
        swap_attack.attacker_step(MAKE_OPEN_DIR, str(root))
        bundle = base / "empty.json"
        bundle.write_text('{"tunedsl_records": 1, "records": []}\n')
        out = cache_cmd(child_env(root), "import", str(bundle))
        _one_line_error(out, f"{root} is owned by another user", "TUNEDSL_CACHE_DIR")
        assert os.listdir(root) == []


@pytest.mark.needs_triton
@pytest.mark.parametrize("opened", ["directory", "files"])
def test_rules_build_says_the_records_it_found_were_refused(tmp_path: Path, opened: str) -> None:
    """`rules build --records DIR` where DIR (or its record files) others can write: each
    refusal is a warning, and the error says the records there were refused, not that
    there are none to build from ("sweep the shapes first")."""
    _sources(_tune(tmp_path, child_env(tmp_path / "cache")))
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for path in record_files(tmp_path / "cache"):
        (shipped / path.name).write_bytes(path.read_bytes())
        (shipped / path.name).chmod(0o666 if opened == "files" else 0o644)
    shipped.chmod(0o777 if opened == "directory" else 0o755)
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", "build", "--records", str(shipped),
         "--out", str(tmp_path / "rules")],
        env=child_env(tmp_path / "cache"), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    assert "none of the 2 record files" in out.stderr, out.stderr
    assert "sweep the shapes first" not in out.stderr
    assert "writable by group or others" in out.stderr  # the warning naming the refusal


@pytest.mark.needs_triton
@pytest.mark.parametrize("where", ["platform", "override"])
def test_directories_made_under_umask_0_are_closed_to_others(tmp_path: Path, where: str) -> None:
    # Under `umask 0` every directory tunedsl makes, the missing parents of its cache
    # included (the platform's ~/.cache, which every other program uses too), is closed
    # to others' writes: a world-writable ~/.cache lets another user swap the cache.
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    env = child_env(tmp_path / "unused")
    del env["TUNEDSL_CACHE_DIR"]
    env.pop("XDG_CACHE_HOME", None)
    env["HOME"] = str(home)
    if where == "override":
        env["TUNEDSL_CACHE_DIR"] = str(home / "deep" / "er" / "cache")
    script = write_script(tmp_path / "trust_main.py", TUNE)
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180,
        cwd=str(tmp_path), preexec_fn=lambda: os.umask(0),
    )  # fmt: skip
    assert _sources(out) == ["tuned", "tuned"]
    made = [p for p in home.rglob("*") if p.is_dir()]
    assert any(p.name == "records" for p in made), made
    open_dirs = [f"{p} {p.stat().st_mode & 0o777:o}" for p in made if p.stat().st_mode & 0o022]
    assert open_dirs == []
    # `tunedsl rules build --out` into a path whose parents are missing: the same.
    rules = subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", "build", "--out",
         str(home / "ship" / "it" / "rules")],
        env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
        preexec_fn=lambda: os.umask(0),
    )  # fmt: skip
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert (home / "ship" / "it" / "rules").is_dir()
    made = [p for p in home.rglob("*") if p.is_dir()]
    open_dirs = [f"{p} {p.stat().st_mode & 0o777:o}" for p in made if p.stat().st_mode & 0o022]
    assert open_dirs == []
