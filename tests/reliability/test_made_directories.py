"""The directories tunedsl makes for its cache are made only inside directories no other
user can change: a ``HOME`` (kept under ``sudo``, ``su`` without ``-``), ``XDG_CACHE_HOME``
or ``TUNEDSL_CACHE_DIR`` under another user's directory must not have this user create
``tunedsl/`` there, nor wherever a symbolic link that user planted leads. Real files, a
real second user (``setpriv``), a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import swap_attack
from rel_helpers import child_env

# The attacker's own directory, open to all, with `.cache` linking to a directory of a third
# party's (here the victim's own, standing for another user's `~/.cache`).
PLANT = """
import os, sys
home, target = sys.argv[1:3]
os.mkdir(home)
os.chmod(home, 0o777)
os.symlink(target, os.path.join(home, ".cache"))
"""

# One key's lock and record write: the cache root and its locks/ and records/ are made.
TOUCH = """
from tunedsl.store import records
with records.record_lock("ab" * 32, 1) as held:
    print("held", held)
"""


def _run_with_home(home: Path) -> subprocess.CompletedProcess[str]:
    env = child_env("")
    for name in ("TUNEDSL_CACHE_DIR", "XDG_CACHE_HOME"):
        env.pop(name, None)
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-c", TOUCH], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_home_of_another_user_never_has_the_cache_made_through_its_links() -> None:
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        elsewhere = base / "elsewhere"  # where the planted link leads
        elsewhere.mkdir(mode=0o755)
        elsewhere.chmod(0o755)
        home = base / "home"
        swap_attack.attacker_step(PLANT, str(home), str(elsewhere))
        done = _run_with_home(home)
        assert done.returncode == 0, done.stderr
        assert "held False" in done.stdout, done.stdout + done.stderr
        assert os.listdir(elsewhere) == [], "the cache was made through another user's link"
        assert f"{home} is owned by another user (uid 65534)" in done.stderr, done.stderr


def test_a_home_of_another_user_is_left_as_it_is() -> None:
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        home = base / "home"
        swap_attack.attacker_step("import os, sys; os.mkdir(sys.argv[1], 0o777)", str(home))
        done = _run_with_home(home)
        assert done.returncode == 0, done.stderr
        assert "held False" in done.stdout, done.stdout + done.stderr
        assert os.listdir(home) == [], "a directory was made in another user's directory"


def test_a_new_cache_under_a_sticky_directory_and_a_private_one_is_made(
    tmp_path: Path,
) -> None:
    """The usual cases still make the cache: under ``/tmp`` (sticky, open to all) and under
    a directory of this user's, each directory made with mode 0700."""
    with swap_attack.shared_tmp() as base:
        for root in (base / "new" / "cache", tmp_path / "a" / "b" / "cache"):
            env = child_env(root)
            done = subprocess.run(
                [sys.executable, "-c", TOUCH], env=env, capture_output=True, text=True,
                timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert "held True" in done.stdout, done.stdout + done.stderr
            assert oct((root / "locks").stat().st_mode & 0o777) == "0o700"
            assert oct(root.parent.stat().st_mode & 0o777) == "0o700"


def test_gallery_makes_no_report_directory_inside_another_users_directory() -> None:
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        theirs = base / "theirs"
        swap_attack.attacker_step("import os, sys; os.mkdir(sys.argv[1], 0o777)", str(theirs))
        done = subprocess.run(
            [sys.executable, "-m", "tunedsl", "gallery", "--out", str(theirs / "out")],
            env=child_env(base / "cache"), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"{theirs} is owned by another user (uid 65534)" in done.stderr, done.stderr
        assert os.listdir(theirs) == [], "the report directory was made in theirs"


# A run as another user (root, under sudo) left the cache's locks/ behind, owned by that user.
LOCKS_LEFT = """
import os, sys
os.mkdir(sys.argv[1], 0o755)
"""


def test_a_locks_directory_another_user_left_is_named_with_a_fix_that_fits() -> None:
    """The cache root is this user's and private; only its ``locks/`` is another user's.
    The warning named that directory, then told the user to make the root "a directory this
    user owns", which it already was; both lock warnings name a fix for the directory named."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        root = base / "cache"
        root.mkdir()
        root.chmod(0o777)  # open for the attacker's step, then closed
        swap_attack.attacker_step(LOCKS_LEFT, str(root / "locks"))
        root.chmod(0o700)
        script = TOUCH + (
            "from tunedsl.store.locks import file_lock\n"
            "with file_lock('compile') as lock:\n"
            "    print('compile lock', lock)\n"
        )
        done = subprocess.run(
            [sys.executable, "-W", "always", "-c", script], env=child_env(root),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "held False" in done.stdout and "compile lock None" in done.stdout, done.stdout
        said = [line for line in done.stderr.splitlines() if "CacheWarning" in line]
        assert len(said) == 2, done.stderr
        for line in said:
            assert f"{root / 'locks'} is owned by another user (uid 65534)" in line, line
            assert f"make {root} a directory this user owns" not in line, line
            assert "chown it to yourself and chmod go-w" in line, line
            assert "set TUNEDSL_CACHE_DIR to a directory of your own" in line, line
        assert os.listdir(root / "locks") == []
