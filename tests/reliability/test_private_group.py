"""A directory or file writable by its group is closed to other users where that group is
yours alone: the user-private group that ``useradd``/``adduser`` make for each user, whose
directories ``umask 002`` (Ubuntu's default for such users) makes ``775`` and files ``664``.
Code is imported from there (``precompile DIR``, ``--replay``, a child process's import
path: ``store/paths.py``'s ``untrusted_place`` and ``untrusted_source``). A group another
user is in (listed, or as their primary group) stays refused. Real groups (``groupadd``),
a real second user (uid 65534), real ``tunedsl precompile`` processes."""

from __future__ import annotations

import grp
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import rel_helpers
from rel_helpers import child_env

from tunedsl.store import paths
from tunedsl.store.local_peer import private_group

MINE = """
import os

from tunedsl import workload


@workload
def mine():
    open(os.path.join(os.path.dirname(__file__), "mine-ran"), "w").close()
"""


@pytest.fixture
def own_group() -> Iterator[str]:
    with rel_helpers.own_group() as name:
        yield name


def umask_002_project(tmp_path: Path, group: str) -> Path:
    """A project directory (and one above it) as ``umask 002`` makes them: 775, its script
    664, of ``group``."""
    work = tmp_path / "work"
    project = work / "project"
    project.mkdir(parents=True)
    script = project / "mine.py"
    script.write_text(MINE.lstrip())
    for made, mode in ((work, 0o775), (project, 0o775), (script, 0o664)):
        shutil.chown(made, group=group)
        made.chmod(mode)
    return project


def precompile(target: Path, cache: Path) -> tuple[int, str]:
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", str(target)],
        env=child_env(cache), capture_output=True, text=True, timeout=300, cwd="/",
    )  # fmt: skip
    return out.returncode, out.stdout + out.stderr


def test_a_group_is_private_only_while_no_other_user_is_in_it(own_group: str) -> None:
    gid = grp.getgrnam(own_group).gr_gid
    assert private_group(gid)
    rel_helpers.share_group(own_group)  # uid 65534 listed in it
    assert not private_group(gid)


def test_a_group_that_is_another_users_primary_group_is_not_private(own_group: str) -> None:
    gid = grp.getgrnam(own_group).gr_gid
    other = pwd.getpwuid(65534)
    if shutil.which("usermod") is None:
        pytest.skip("needs usermod to change a user's primary group")
    subprocess.run(["usermod", "-g", own_group, other.pw_name], check=True, timeout=30)
    try:
        assert not private_group(gid)
    finally:
        subprocess.run(["usermod", "-g", str(other.pw_gid), other.pw_name], check=True)
    assert private_group(gid)
    # Nor is a group this user is not in, with no member at all (a system group).
    assert not private_group(other.pw_gid)


@pytest.mark.needs_triton
def test_precompile_imports_a_project_writable_only_by_your_own_group(
    tmp_path: Path, own_group: str
) -> None:
    project = umask_002_project(tmp_path, own_group)
    assert paths.untrusted_source(str(project / "mine.py"), on_path=True) is None
    code, said = precompile(project, tmp_path / "cache")
    assert code == 0, said
    assert (project / "mine-ran").exists(), said


@pytest.mark.needs_triton
def test_precompile_refuses_a_project_writable_by_a_group_another_user_is_in(
    tmp_path: Path, own_group: str
) -> None:
    rel_helpers.share_group(own_group)
    project = umask_002_project(tmp_path, own_group)
    code, said = precompile(project, tmp_path / "cache")
    assert code == 1, said
    assert not (project / "mine-ran").exists(), said
    why = f"{project / 'mine.py'} is writable by group or others (mode 664)"
    assert f"{project / 'mine.py'}: not imported: {why}" in said, said
