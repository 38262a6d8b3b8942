"""A cache tunedsl cannot write (read-only, not a directory, full disk): it runs without
caching, gives correct results, and warns once per store (bytecode, tuning records).

How "read-only" is made real: as a normal user, ``chmod 0500``. Tests here often run as
root, where mode bits do not stop writes; then the child process runs as root *without*
the capabilities that bypass file permissions (``setpriv --bounding-set=-dac_override,...``),
so ``chmod 0500`` binds it like any user. The full disk is a 64 KiB tmpfs, filled up first
(mounting needs root: skipped otherwise, with the reason).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from rel_helpers import (
    cache_warning_lines,
    cache_warnings,
    child_env,
    only_cache_warnings,
    run_tunedsl,
    write_dsl_project,
)

from tunedsl import bytecode
from tunedsl.store import records

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
DROP_DAC = "-dac_override,-dac_read_search,-fowner"


def _check_run(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The run succeeded, tuned every key (no record could be stored) and warned once each."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [line.split() for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert [r[1] for r in results] == ["40", "50", "60"]
    assert all(r[2] == "tuned" for r in results), results
    warnings_ = cache_warning_lines(proc.stderr)
    bytecode_warnings = [w for w in warnings_ if "bytecode cache" in w]
    record_warnings = [w for w in warnings_ if "bytecode cache" not in w]
    assert len(bytecode_warnings) == 1, warnings_
    assert len(record_warnings) == 1, warnings_
    return warnings_


def test_cache_dir_under_a_regular_file_runs_uncached_with_one_warning_each(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    script = write_dsl_project(tmp_path)
    proc = run_tunedsl(script, child_env(blocker / "cache"))
    _check_run(proc)
    assert blocker.read_text().startswith("a file")


def test_cache_dir_under_a_regular_file_in_process(tmp_path: Path, monkeypatch) -> None:
    """Pure part: bytecode writes and record reads/writes, no torch needed."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(blocker / "cache"))
    from test_corrupt_cache import DSL_MODULE, _valid_record

    with cache_warnings() as caught:
        for i in range(3):
            script = tmp_path / f"m{i}.py"
            script.write_text(DSL_MODULE + f"\nVALUE = {i}\n")
            namespace: dict[str, object] = {}
            exec(bytecode.load_or_compile(script.read_bytes(), str(script)), namespace)
            assert namespace["VALUE"] == i
        assert not bytecode.writing_enabled()
    assert len(only_cache_warnings(caught)) == 1, only_cache_warnings(caught)

    with cache_warnings() as caught:
        for digest in ("a" * 64, "b" * 64, "c" * 64):
            assert records.load_record(digest) is None
            with records.record_lock(digest):
                assert not records.save_record(_valid_record(digest))
    assert len(only_cache_warnings(caught)) == 1, only_cache_warnings(caught)


def _read_only_runner() -> list[str]:
    if not IS_ROOT:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot make a read-only directory bind")
    return ["setpriv", f"--bounding-set={DROP_DAC}", f"--inh-caps={DROP_DAC}"]


@pytest.mark.parametrize("populated", [False, True], ids=["empty", "populated"])
def test_read_only_cache_dir_runs_uncached_with_one_warning_each(
    tmp_path: Path, populated: bool
) -> None:
    prefix = _read_only_runner()
    cache = tmp_path / "cache"
    if populated:  # the subdirectories exist (an earlier writable run), all read-only now
        for sub in ("bytecode", "records", "locks"):
            (cache / sub).mkdir(parents=True, mode=0o700)
            (cache / sub).chmod(0o500)
    else:
        cache.mkdir()
    cache.chmod(0o500)
    script = write_dsl_project(tmp_path)
    env = child_env(cache)
    try:
        if prefix:
            proc = subprocess.run(
                [*prefix, *_tunedsl_argv(script)],
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                cwd=str(tmp_path),
            )
        else:
            proc = run_tunedsl(script, env)
        _check_run(proc)
        left = [p for p in cache.rglob("*") if p.is_file()]
        assert left == []
    finally:
        for p in [cache, *cache.rglob("*")]:
            p.chmod(0o700)


def _tunedsl_argv(script: Path) -> list[str]:
    import sys

    return [sys.executable, "-W", "always", "-m", "tunedsl", "run", str(script)]


@contextlib.contextmanager
def _full_tmpfs(where: Path) -> Iterator[Path]:
    if not IS_ROOT or shutil.which("mount") is None:
        pytest.skip("a full disk is simulated with a tiny tmpfs, which needs root to mount")
    where.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        # Fill it: every later write fails (the last flush or the close raises ENOSPC).
        with contextlib.suppress(OSError), open(where / "filler", "wb", buffering=0) as filler:
            while True:
                filler.write(b"\0" * 4096)
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_full_disk_runs_uncached_with_one_warning_each(tmp_path: Path) -> None:
    with _full_tmpfs(tmp_path / "disk") as disk:
        script = write_dsl_project(tmp_path)
        proc = run_tunedsl(script, child_env(disk / "cache"))
        _check_run(proc)
        # Failed writes leave nothing behind: no temp files, no torn entries.
        left = [p.name for p in disk.rglob("*") if p.is_file() and p.name != "filler"]
        assert [n for n in left if not n.endswith(".lock")] == []


def test_the_warning_points_at_the_users_line_names_the_directory_and_the_fix(
    tmp_path: Path,
) -> None:
    """Not at ``contextlib.py`` (the key lock is a context manager) or any other frame of
    tunedsl: at the site's line in the user's module."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    cache = blocker / "cache"
    script = write_dsl_project(tmp_path)
    proc = run_tunedsl(script, child_env(cache))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [w for w in cache_warning_lines(proc.stderr) if "bytecode cache" not in w]
    assert len(lines) == 1, proc.stderr  # one unwritable cache is one warning
    kernels = str(tmp_path / "rel_dsl_kernels.py")
    for line in lines:
        assert line.startswith(f"{kernels}:"), line  # the autotune(...) line of the module
        assert "cannot lock the tuning cache" in line
        assert "kept for this process only" in line and "may be" not in line
        assert f"make {cache} a directory this user owns and can write" in line
        assert "or set TUNEDSL_CACHE_DIR to one" in line
    shown = proc.stderr.splitlines()  # the source line under the warning is the site's
    assert "autotune(" in shown[shown.index(lines[0]) + 1]


def test_a_record_that_cannot_be_written_is_reported_at_the_callers_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    from test_corrupt_cache import _valid_record

    from tunedsl.errors import CacheWarning

    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(blocker / "cache"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not records.save_record(_valid_record("d" * 64))  # this line is the caller's
    (warning,) = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert warning.filename == __file__
    text = str(warning.message)
    assert f"cannot write tuning records to {blocker / 'cache' / 'records'}" in text
    assert "kept for this process only, and every new process tunes again" in text
    assert f"make {blocker / 'cache'} a directory this user owns" in text


def test_cache_import_onto_a_full_disk_is_one_line_and_leaves_nothing_torn(
    tmp_path: Path,
) -> None:
    import json
    import sys

    from test_corrupt_cache import _valid_record

    bundle = tmp_path / "bundle.jsonl"
    lines = [json.dumps({"tunedsl_records": 2})]
    lines += [json.dumps(_valid_record(f"{i:02x}" * 32).to_json()) for i in range(20)]
    bundle.write_text("\n".join(lines) + "\n")
    with _full_tmpfs(tmp_path / "disk") as disk:
        cache = disk / "cache"
        proc = subprocess.run(
            [sys.executable, "-m", "tunedsl", "cache", "import", str(bundle)],
            env=child_env(cache), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stdout + proc.stderr
        out = proc.stderr.strip().splitlines()
        assert len(out) == 1 and out[0].startswith("tunedsl: error:"), proc.stderr
        assert "No space left on device" in out[0] and str(cache) in out[0], out[0]
        assert "imported 0 of the bundle's records" in out[0], out[0]
        left = [p for p in disk.rglob("*") if p.is_file() and p.name != "filler"]
        assert left == []
