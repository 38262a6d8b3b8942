"""The directories above a cache root or a ``TUNEDSL_RECORDS_PATH`` entry are checked too: a
second local user (uid 65534) who can write to one of them swaps the private directory
below for another of the victim's own (an older application's records), and the victim
must not take its decisions from there. Real files, a real second user (``setpriv``)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import swap_attack
from rel_helpers import REPO, cache_warnings, child_env, only_cache_warnings

from tunedsl.store import paths, records

# The attacker replaces the victim's directory in the shared, open directory by a symbolic
# link to another directory the victim owns (rename and symlink need only write access to
# the directory that holds them, not to what is renamed).
SWAP = """
import os, sys
shared, name, target = sys.argv[1:4]
os.rename(os.path.join(shared, name), os.path.join(shared, name + ".old"))
os.symlink(target, os.path.join(shared, name))
"""


def _precompile(target: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], str]:
    """``tunedsl precompile TARGET`` run from ``/``: the process, and what it said."""
    out = subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", target],
        env=env, capture_output=True, text=True, timeout=300, cwd="/",
    )  # fmt: skip
    return out, out.stdout + out.stderr


def _records_dir(where: Path, site: str) -> None:
    where.mkdir(parents=True, mode=0o700)
    where.chmod(0o700)
    path = where / f"{swap_attack.DIGEST}.json"
    path.write_text(json.dumps(swap_attack.record_json(site)))
    path.chmod(0o600)


@pytest.mark.parametrize("where", ["records_path", "cache_root"])
def test_a_directory_under_a_parent_others_can_write_is_not_trusted(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        shared = base / "apps"  # the victim's, but open to all (not sticky)
        shared.mkdir()
        shared.chmod(0o777)
        app, older = shared / "app", base / "older"
        older.mkdir(mode=0o700)
        app.mkdir(mode=0o700)
        _records_dir(app / "records", "shipped.py:1:1")
        _records_dir(older / "records", "older.py:1:1")
        monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(base / "mine" / "cache"))
        if where == "records_path":
            monkeypatch.setenv("TUNEDSL_RECORDS_PATH", str(app / "records"))
        else:
            monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(app))
        swap_attack.attacker_step(SWAP, str(shared), "app", str(older))
        with cache_warnings() as caught:
            got = records.load_record(swap_attack.DIGEST)
        assert got is None or got.site != "older.py:1:1", "the swapped-in record was used"
        assert got is None
        warned = only_cache_warnings(caught)
        assert len(warned) == 1, warned
        assert f"{shared} is writable by group or others (mode 777)" in warned[0], warned


def test_a_sticky_parent_and_a_symlink_this_user_made_are_trusted(tmp_path: Path) -> None:
    """Above the directory, a sticky directory open to all (``/tmp``) is fine, and so is a
    symbolic link this user made in a trusted directory: the chain is the link's target."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    _records_dir(sticky / "real" / "records", "mine.py:1:1")
    (tmp_path / "link").symlink_to(sticky / "real")
    fd = paths.open_private_dir(tmp_path / "link" / "records", root_may_own=True)
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(sticky / "real" / "records"))
    finally:
        os.close(fd)


def test_a_symlink_another_user_owns_on_the_way_is_not_followed() -> None:
    """In a sticky directory another user may plant a symbolic link where the victim's path
    goes: it is refused, even though its target is the victim's own private directory."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        mine = base / "mine"
        _records_dir(mine / "records", "mine.py:1:1")
        plant = "import os, sys; os.symlink(sys.argv[1], sys.argv[2])"
        swap_attack.attacker_step(plant, str(mine), str(base / "planted"))
        with pytest.raises(paths.UntrustedDir, match="symbolic link owned by another user"):
            paths.open_private_dir(base / "planted" / "records", root_may_own=True)


# -- tunedsl gallery --out -------------------------------------------------------------------

# The attacker's report directory, with the log the gallery will write planted as a link to
# a file of the victim's.
PLANT_LOG = """
import os, sys
out, victim = sys.argv[1:3]
os.makedirs(os.path.join(out, "logs"))
os.chmod(out, 0o777)
os.symlink(victim, os.path.join(out, "logs", "hello.log"))
"""


def _gallery(examples: Path, out: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "gallery", "--examples", str(examples),
         "--out", str(out), "--timeout", "120"],
        env=child_env(cache), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_gallery_never_writes_through_another_users_report_directory() -> None:
    """`tunedsl gallery --out DIR` where DIR is another user's (a shared /tmp name they
    made first): one error naming DIR, why and the fix; the victim's file that their link
    points at is untouched, and no example runs."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        victim = base / "victim-notes.txt"
        victim.write_text("keep me\n")
        victim.chmod(0o600)
        examples = base / "examples"
        examples.mkdir(mode=0o700)
        (examples / "hello.py").write_text("print('ran the example')\n")
        out = base / "report"
        swap_attack.attacker_step(PLANT_LOG, str(out), str(victim))
        done = _gallery(examples, out, base / "cache")
        assert victim.read_text() == "keep me\n", "the gallery wrote through the planted link"
        assert done.returncode == 1, (done.stdout, done.stderr)
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"tunedsl: error: --out {out}: not private to you"), done.stderr
        assert f"{out} is owned by another user (uid {swap_attack.ATTACKER})" in last
        assert "Traceback" not in done.stderr


def test_gallery_never_writes_through_a_link_another_user_planted_at_out() -> None:
    """`tunedsl gallery --out DIR` where DIR is a link another user planted (in a shared
    /tmp) to a directory of the victim's own: refused before anything is written there."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        victims = base / "victim-dir"
        victims.mkdir(mode=0o700)
        examples = base / "examples"
        examples.mkdir(mode=0o700)
        (examples / "hello.py").write_text("print('ran the example')\n")
        out = base / "report"
        plant = "import os, sys; os.symlink(sys.argv[1], sys.argv[2])"
        swap_attack.attacker_step(plant, str(victims), str(out))
        done = _gallery(examples, out, base / "cache")
        assert os.listdir(victims) == [], "the gallery wrote through the planted link"
        assert done.returncode == 1, (done.stdout, done.stderr)
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"tunedsl: error: --out {out}: not private to you"), done.stderr
        assert f"{out} is a symbolic link owned by another user" in last
        assert "ran the example" not in done.stdout + done.stderr


PLANT_EXAMPLE = """
import os, sys
with open(os.path.join(sys.argv[1], "aaa_planted.py"), "w") as fh:
    fh.write("open(__file__ + '.ran', 'w').close()\\n")
"""


def test_gallery_never_runs_an_example_another_user_could_have_written(tmp_path: Path) -> None:
    """`tunedsl gallery --examples DIR` where DIR is shared (sticky, open to all, as /tmp):
    another user's script planted there ran as the victim. Every script there is refused
    (a module beside one could be planted too), each named with why and the fix."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as examples:
        (examples / "hello.py").write_text("print('ran the example')\n")
        swap_attack.attacker_step(PLANT_EXAMPLE, str(examples))
        planted = examples / "aaa_planted.py"
        done = _gallery(examples, tmp_path / "report", tmp_path / "cache")
        assert not Path(f"{planted}.ran").exists(), "another user's example ran"
        assert "ran the example" not in done.stdout + done.stderr
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert f"{planted}: not run:" in done.stderr and "a directory of yours" in done.stderr
        assert f"{examples / 'hello.py'}: not run:" in done.stderr
        assert "no example there can be trusted" in done.stderr.strip().splitlines()[-1]
        assert "Traceback" not in done.stderr


def test_cache_export_and_sweep_bundle_never_write_into_another_users_directory() -> None:
    """A bundle written into a directory another user made (a shared /tmp name they took
    first), or through their link to it: they could replace the bundle before `tunedsl cache
    import` reads it back. Refused, naming the directory, before anything is written or
    swept; a directory of the user's own beside it is written."""
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        theirs, link = base / "bundles", base / "linked"
        plant = (
            "import os, sys; os.mkdir(sys.argv[1]); os.chmod(sys.argv[1], 0o777); "
            "os.symlink(sys.argv[1], sys.argv[2])"
        )
        swap_attack.attacker_step(plant, str(theirs), str(link))
        env = child_env(base / "cache")
        script = REPO / "tests" / "integration" / "sweep_fixtures" / "sweep_vadd.py"
        for where, why in (
            (theirs, f"{theirs} is owned by another user"),
            (link, f"{link} is a symbolic link owned by another user"),
        ):
            for argv, said in (
                (["cache", "export", str(where / "records.json")], "cannot export to"),
                (["sweep", "--no-ray", "--bundle", str(where / "s.json"), str(script)], "--bundle"),
            ):
                done = subprocess.run(
                    [sys.executable, "-m", "tunedsl", *argv],
                    env=env, capture_output=True, text=True, timeout=300,
                )  # fmt: skip
                assert done.returncode == 1, (argv, done.stdout, done.stderr)
                assert f"{said} {where}/" in done.stderr, done.stderr
                assert "another user could redirect or replace it" in done.stderr
                assert why in done.stderr and "Traceback" not in done.stderr
        assert os.listdir(theirs) == []
        mine = base / "mine"
        mine.mkdir(mode=0o700)
        done = subprocess.run(
            [sys.executable, "-m", "tunedsl", "cache", "export", str(mine / "records.json")],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0 and (mine / "records.json").is_file(), done.stderr


def test_gallery_makes_its_report_directory_private_under_umask_0(tmp_path: Path) -> None:
    """A report directory the gallery creates is of mode 700 whatever the umask (under
    ``umask 0`` it would otherwise be open to all, and then refused)."""
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "hello.py").write_text("print('ran the example')\n")
    out = tmp_path / "new" / "report"
    done = subprocess.run(
        [sys.executable, "-c", "import os, sys; os.umask(0); from tunedsl.cli import main; "
         "sys.exit(main(sys.argv[1:]))", "gallery", "--examples", str(examples), "--out",
         str(out), "--timeout", "120"],
        env=child_env(tmp_path / "cache"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "not private" not in done.stderr, done.stderr
    assert (out / "report.md").is_file(), done.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert stat.S_IMODE(out.parent.stat().st_mode) == 0o700


PLANTED = """
import os, sys
project = sys.argv[1]
with open(os.path.join(project, "planted.py"), "w") as fh:
    fh.write(
        "import os\\n"
        "from tunedsl import workload\\n"
        "open(os.path.join(os.path.dirname(__file__), 'pwned'), 'w').close()\\n"
        "@workload\\n"
        "def w():\\n"
        "    pass\\n"
    )
"""

MINE = """
import os

from tunedsl import workload


@workload
def mine():
    open(os.path.join(os.path.dirname(__file__), "mine-ran"), "w").close()
"""


@pytest.mark.needs_triton
def test_precompile_of_a_directory_never_imports_a_file_another_user_could_write() -> None:
    # `tunedsl precompile DIR` imported every file of DIR declaring a workload, and ran it as
    # the user: another user's file in a shared (sticky) project directory ran as root.
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as project:
        mine = project / "mine.py"
        mine.write_text(MINE.lstrip())
        swap_attack.attacker_step(PLANTED, str(project))
        env = child_env(project / "cache")
        out, said = _precompile(str(project), env)
        assert not (project / "pwned").exists(), "another user's file ran"
        planted = project / "planted.py"
        assert out.returncode == 1, said
        assert f"{planted}: not imported" in said and "owned by another user" in said, said
        assert "name the file itself" in said, said
        assert "Traceback" not in said


# The victim's own script in the shared directory imports a module by name; the attacker
# plants one of that name beside it, and one more script of the victim's, reached through
# the attacker's symbolic link.
MINE_IMPORTING = """
from tunedsl import workload

import tunedsl_planted_neighbour  # found beside the script: its directory is on sys.path


@workload
def mine():
    pass
"""

PLANT_NEIGHBOUR = """
import os, sys
project, elsewhere = sys.argv[1:3]
with open(os.path.join(project, "tunedsl_planted_neighbour.py"), "w") as fh:
    fh.write("open(__file__ + '.ran', 'w').close()\\n")
os.symlink(elsewhere, os.path.join(project, "linked.py"))
"""


@pytest.mark.needs_triton
def test_precompile_of_a_directory_never_imports_beside_what_another_user_can_plant(
    tmp_path: Path,
) -> None:
    # A script of this user's in a sticky directory open to all was imported with that
    # directory on sys.path: a module another user planted beside it under a name the
    # script imports ran as this user. A directory's scripts are imported only from a
    # directory closed to others, through no symbolic link another user owns.
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as project:
        (project / "mine.py").write_text(MINE_IMPORTING.lstrip())
        (project / "mine.py").chmod(0o644)
        elsewhere = tmp_path / "own" / "linked.py"
        elsewhere.parent.mkdir()
        elsewhere.write_text(MINE_IMPORTING.lstrip())
        swap_attack.attacker_step(PLANT_NEIGHBOUR, str(project), str(elsewhere))
        out, said = _precompile(str(project), child_env(tmp_path / "cache"))
        ran = project / "tunedsl_planted_neighbour.py.ran"
        assert not ran.exists(), "a module another user planted beside the script ran"
        assert out.returncode == 1, said
        for name in ("mine.py", "linked.py"):
            assert f"{project / name}: not imported" in said, said
        assert f"{project} is writable by group or others (mode 1777)" in said, said
        assert "Traceback" not in said


def test_replay_never_imports_a_kernel_file_beside_what_another_user_can_plant() -> None:
    # A record naming this user's own kernel file in a sticky directory open to all: replay
    # imported it with that directory on sys.path, and a module another user planted there
    # under a name the file imports ran as this user.
    from tunedsl.precompile import replay

    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as project:
        mine = project / "mine_kernels.py"
        mine.write_text(MINE_IMPORTING.lstrip())
        mine.chmod(0o644)
        swap_attack.attacker_step(PLANT_NEIGHBOUR, str(project), str(mine))
        info = {"file": str(mine), "module": "mine_kernels", "qualname": "mine"}
        with pytest.raises(LookupError, match=r"is writable by group or others \(mode 1777\)"):
            replay._load_kernel(info, {})
        assert not (project / "tunedsl_planted_neighbour.py.ran").exists()


# The attacker copies the victim's compiled code (staged by the test: a pyc header that
# matches the victim's source, and code that leaves a marker) into the victim's
# `__pycache__`, which is open to writes by others: Python runs it instead of the source.
PLANT_PYC = """
import shutil, sys
shutil.copyfile(sys.argv[1], sys.argv[2])
"""


@pytest.mark.needs_triton
@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_precompile_and_replay_never_run_code_another_user_put_in_pycache(mode: int) -> None:
    # A project directory closed to others passed the trust check, but its `__pycache__`
    # (made open to all, as under `umask 0`; sticky or not, a pyc not yet written can be
    # made there) was never looked at: the import ran the other user's pyc instead of the
    # checked source, as this user, under `precompile DIR` and `precompile --replay`.
    from tunedsl.precompile import replay

    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        project = base / "project"
        project.mkdir(mode=0o755)
        project.chmod(0o755)
        mine = project / "mine_kernels.py"
        mine.write_text(MINE.lstrip())
        mine.chmod(0o644)
        (project / "__pycache__").mkdir()
        (project / "__pycache__").chmod(mode)
        marker = base / "pwned"
        pyc = swap_attack.stage_pyc(mine, base / "staged.pyc", marker)
        swap_attack.attacker_step(PLANT_PYC, str(base / "staged.pyc"), pyc)
        out, said = _precompile(str(project), child_env(base / "cache"))
        assert not marker.exists(), "another user's pyc ran under precompile DIR"
        assert out.returncode == 1, said
        assert f"{mine}: not imported" in said, said
        why = f"{project / '__pycache__'} is writable by group or others (mode {mode:o})"
        assert why in said, said
        assert "Traceback" not in said
        info = {"file": str(mine), "module": "mine_kernels", "qualname": "mine"}
        with pytest.raises(LookupError, match="__pycache__ is writable by group or others"):
            replay._load_kernel(info, {})
        assert not marker.exists(), "another user's pyc ran under precompile --replay"


@pytest.mark.needs_triton
def test_a_script_named_itself_runs_its_source_not_a_pyc_another_user_put_beside_it() -> None:
    # A script of this user's in a shared sticky directory, named itself (the user's choice:
    # it is imported as named): its import read the pyc in the `__pycache__` another user
    # made beside it, and ran their code as this user, where `python FILE` runs the source.
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as project:
        mine = project / "mine.py"
        mine.write_text(MINE.lstrip())
        mine.chmod(0o644)
        marker = project / "pwned"
        pyc = swap_attack.stage_pyc(mine, project / "staged.pyc", marker)
        swap_attack.attacker_step(swap_attack.PLANT_PYCACHE, str(project / "staged.pyc"), pyc)
        out, said = _precompile(str(mine), child_env(project / "cache"))
        assert not marker.exists(), "another user's pyc ran instead of the script"
        assert (project / "mine-ran").exists(), said  # the script's own workload ran
        assert out.returncode == 0, said


MINE_WITH_HELPER = """
import os

from tunedsl import workload

import tunedsl_prefix_helper  # beside the script: compiled under the pycache prefix


@workload
def mine():
    open(os.path.join(os.path.dirname(__file__), "mine-ran"), "w").close()
"""

MAKE_OPEN_DIR = """
import os, sys
os.mkdir(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
"""

PLANT_UNDER_PREFIX = """
import os, shutil, sys
os.makedirs(os.path.dirname(sys.argv[2]))
shutil.copyfile(sys.argv[1], sys.argv[2])
"""


@pytest.mark.needs_triton
def test_precompile_and_replay_never_run_a_pyc_another_user_put_under_the_pycache_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With PYTHONPYCACHEPREFIX set, Python reads every module's compiled code from a mirror
    # of its directory under the prefix, not from the `__pycache__` beside it. The project
    # passed the trust check, but the prefix (a shared directory another user made) was
    # never looked at: a module the script imports ran the other user's pyc as this user.
    from tunedsl.precompile import replay

    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        project = base / "project"
        project.mkdir(mode=0o755)
        project.chmod(0o755)
        mine = project / "mine_kernels.py"
        mine.write_text(MINE_WITH_HELPER.lstrip())
        helper = project / "tunedsl_prefix_helper.py"
        helper.write_text("VALUE = 1\n")
        for path in (mine, helper):
            path.chmod(0o644)
        prefix, marker = base / "pycache-prefix", base / "pwned"
        swap_attack.attacker_step(MAKE_OPEN_DIR, str(prefix))
        with monkeypatch.context() as patched:
            patched.setattr(sys, "pycache_prefix", str(prefix))
            pyc = swap_attack.stage_pyc(helper, base / "staged.pyc", marker, "VALUE = 1")
        swap_attack.attacker_step(PLANT_UNDER_PREFIX, str(base / "staged.pyc"), pyc)

        env = child_env(base / "cache", PYTHONPYCACHEPREFIX=str(prefix))
        out, said = _precompile(str(project), env)
        assert not marker.exists(), "another user's pyc under the prefix ran under precompile DIR"
        assert out.returncode == 1, said
        assert f"{mine}: not imported" in said and f"{helper}: not imported" in said, said
        assert f"{prefix} is owned by another user (uid {swap_attack.ATTACKER})" in said, said
        assert "point PYTHONPYCACHEPREFIX at a directory of your own" in said, said
        assert "Traceback" not in said

        monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
        monkeypatch.setattr(sys, "path", list(sys.path))
        info = {"file": str(mine), "module": "mine_kernels", "qualname": "mine"}
        try:
            with pytest.raises(LookupError, match="PYTHONPYCACHEPREFIX"):
                replay._load_kernel(info, {})
        finally:
            for name in ("mine_kernels", "tunedsl_prefix_helper"):
                sys.modules.pop(name, None)
        assert not marker.exists(), "another user's pyc under the prefix ran under --replay"

        own = base / "own-prefix"  # a prefix of this user's own: the project is imported
        own.mkdir(mode=0o700)
        out, said = _precompile(str(project), {**env, "PYTHONPYCACHEPREFIX": str(own)})
        assert out.returncode == 0, said
        assert (project / "mine-ran").exists(), said
        assert not marker.exists()


# A module named like one the package imports, put by another user in the shared directory
# that holds the package (its root): it leaves a marker, then fails the import.
PLANT_TOP_LEVEL = """
import sys
path, marker = sys.argv[1:3]
with open(path, "w") as fh:
    fh.write(f"open({marker!r}, 'w').close()\\nraise ImportError('planted')\\n")
"""


@pytest.mark.needs_triton
def test_a_package_in_a_shared_directory_never_puts_that_directory_on_sys_path() -> None:
    # A package of this user's in a shared sticky directory (`/tmp/pkgx/`, closed to others):
    # its module was imported by its dotted name with the package's root (`/tmp`, open to
    # all) first on sys.path, so the module's own `import torch` ran a `torch.py` another
    # user put there, as this user: under `precompile DIR`, `precompile FILE` and replay.
    from tunedsl.precompile import replay

    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        pkg = base / "pkgx"
        pkg.mkdir(mode=0o755)
        pkg.chmod(0o755)
        kern = pkg / "kern.py"
        (pkg / "__init__.py").write_text("")
        kern.write_text("import torch\n" + MINE.lstrip())
        for path in pkg.iterdir():
            path.chmod(0o644)
        marker = base / "pwned"
        swap_attack.attacker_step(PLANT_TOP_LEVEL, str(base / "torch.py"), str(marker))
        env = child_env(base / "cache")
        for target in (pkg, kern):
            out, said = _precompile(str(target), env)
            assert not marker.exists(), f"another user's torch.py ran under precompile {target}"
            assert out.returncode == 1, said
            assert f"a package whose root {base} would go on sys.path" in said, said
            assert f"{base} is writable by group or others (mode 1777)" in said, said
            assert not (pkg / "mine-ran").exists()
        info = {"file": str(kern), "module": "pkgx.kern", "qualname": "mine"}
        try:
            with pytest.raises(replay.ImportFailed) as failed:
                replay._load_kernel(info, {})
            assert "would go on sys.path" in str(failed.value.cause)
        finally:
            for name in ("pkgx", "pkgx.kern"):
                sys.modules.pop(name, None)
        assert not marker.exists(), "another user's torch.py ran under precompile --replay"


# A package directory that shadows the victim's module of the same name (a package is found
# before a module): `pkgx/helper/__init__.py` is imported for `pkgx.helper`.
PLANT_SHADOW = """
import os, sys
package, marker = sys.argv[1:3]
os.mkdir(package)
with open(os.path.join(package, "__init__.py"), "w") as fh:
    fh.write(f"open({marker!r}, 'w').close()\\n")
"""


@pytest.mark.needs_triton
def test_a_package_directory_others_can_write_never_has_its_modules_imported() -> None:
    # The module's own directory passed the check, but the package above it was open to
    # others (sticky, as a shared project directory made with `chmod 1777`): the module's
    # `from pkgx import helper` ran a package directory another user made beside helper.py.
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        root = base / "project"
        pkg, sub = root / "pkgx", root / "pkgx" / "sub"
        sub.mkdir(parents=True)
        for path in (pkg, sub):
            (path / "__init__.py").write_text("")
        (pkg / "helper.py").write_text("VALUE = 1\n")
        kern = sub / "kern.py"
        kern.write_text("from pkgx import helper\n" + MINE.lstrip())
        for path in (root, sub):
            path.chmod(0o755)
        pkg.chmod(0o1777)
        marker = base / "pwned"
        swap_attack.attacker_step(PLANT_SHADOW, str(pkg / "helper"), str(marker))
        env = child_env(base / "cache")
        for target in (sub, kern):
            out, said = _precompile(str(target), env)
            assert not marker.exists(), f"another user's package ran under precompile {target}"
            assert out.returncode == 1, said
            assert f"{kern} not imported: it is a module of a package in {pkg}" in said, said
            assert f"{pkg} is writable by group or others (mode 1777)" in said, said
        for planted in (pkg / "helper" / "__init__.py", pkg / "helper"):
            planted.unlink() if planted.is_file() else planted.rmdir()
        pkg.chmod(0o755)  # closed to others: the package's module is imported
        out, said = _precompile(str(sub), env)
        assert out.returncode == 0, said
        assert (sub / "mine-ran").exists(), said
