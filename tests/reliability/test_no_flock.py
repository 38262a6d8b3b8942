"""A cache on a filesystem without file locks (Lustre mounted without ``-o flock``, NFS
without its lock service): ``flock`` fails there with ENOLCK, EOPNOTSUPP or ENOSYS (on
ENOSYS, filelock 3.20 raises ``NotImplementedError``; later releases, 4.x included, fall
back to a lock file of their own unless told not to). No such
filesystem is mounted here, so each child process gets, through a ``sitecustomize`` on its
path, an ``fcntl.flock`` that fails with that real errno for files in the cache's
``locks/`` (and calls the real one for every other file); the rest is real: real processes,
a real tuning under the interpreter, real cross-compiles for ``cuda:90``."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import TUNE_VADD, child_env, write_script

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
PRECOMPILED = REPO / "tests" / "integration" / "precompile_fixtures" / "good" / "standin_vadd.py"

# What flock(2) answers on a filesystem without file locks, for the cache's lock files.
SITECUSTOMIZE = """
import fcntl, os
_real = fcntl.flock
_errno = int(os.environ["NO_FLOCK_ERRNO"])
_under = os.path.join(os.environ["TUNEDSL_CACHE_DIR"], "locks") + os.sep


def flock(fd, operation):
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        where = ""
    if where.startswith(_under):
        raise OSError(_errno, os.strerror(_errno))
    return _real(fd, operation)


fcntl.flock = flock
"""


NO_FLOCK = [errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS]


def _env(tmp_path: Path, err: int) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    write_script(site / "sitecustomize.py", SITECUSTOMIZE)
    env = child_env(tmp_path / "cache", NO_FLOCK_ERRNO=str(err))
    env["PYTHONPATH"] = os.pathsep.join((str(site), env["PYTHONPATH"]))
    return env


def _named_once(stderr: str, cache: Path) -> None:
    # filelock's own fallback (ENOSYS): a marker file that a killed process leaves behind,
    # each later waiter waiting out its limit; its warning named no fix.
    assert "falling back to SoftFileLock" not in stderr, stderr[-3000:]
    said = [line for line in stderr.splitlines() if "does not support file locks" in line]
    assert len(said) == 1, stderr[-3000:]
    assert "CacheWarning" in said[0] and str(cache / "locks") in said[0], said
    assert "TUNEDSL_CACHE_DIR" in said[0] and "local filesystem" in said[0], said


@pytest.mark.parametrize("err", NO_FLOCK, ids=errno.errorcode.get)
def test_tuning_with_a_cache_without_file_locks_tunes_and_names_the_fix(
    tmp_path: Path, err: int
) -> None:
    # The key's lock failed with a raw OSError, reported as "make <cache> a directory this
    # user owns and can write": advice that changes nothing on such a filesystem.
    env = _env(tmp_path, err)
    script = write_script(tmp_path / "tune.py", TUNE_VADD)
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and "TUNED" in out.stdout, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    _named_once(out.stderr, tmp_path / "cache")
    assert list((tmp_path / "cache" / "records").glob("*.json")), "no record was written"


@pytest.mark.parametrize("err", NO_FLOCK, ids=errno.errorcode.get)
def test_compiling_with_a_cache_without_file_locks_compiles_and_names_the_fix(
    tmp_path: Path, err: int
) -> None:
    # The compile lock's OSError went up through the compile: every variant failed with a
    # raw "[Errno 37] No locks available".
    env = _env(tmp_path, err)
    env.pop("TRITON_INTERPRET")  # cross-compiles for cuda:90 need no GPU
    env.update(
        TRITON_CACHE_DIR=str(tmp_path / "triton-cache"),
        TRITON_DEFAULT_FP_FUSION="1",
        TUNEDSL_COMPILE_WORKERS="2",
    )
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", "--target", "cuda:90",
         str(PRECOMPILED)],
        env=env, capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    _named_once(out.stderr, tmp_path / "cache")


def test_the_filelock_releases_that_cannot_be_told_not_to_fall_back_are_not_installed() -> None:
    """filelock 3.24 to 3.29 switch to their marker-file lock on ENOSYS whatever they are
    told (they take ``fallback_to_soft=False`` and ignore it; the tests above fail under
    3.24.0 and 3.29.7): tunedsl's requirement admits none of them, and still admits 3.20.4
    (which raises ``NotImplementedError``) and the releases that honour the option."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    requirements = pytest.importorskip("packaging.requirements")

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (req,) = [
        requirements.Requirement(r) for r in project["dependencies"] if r.startswith("filelock")
    ]
    falling_back = ["3.24.0", "3.24.3", "3.25.2", "3.28.0", "3.29.0", "3.29.7"]
    assert not [v for v in falling_back if req.specifier.contains(v)], str(req)
    assert all(req.specifier.contains(v) for v in ("3.20.4", "3.23.0", "3.30.0", "4.0.0")), req
