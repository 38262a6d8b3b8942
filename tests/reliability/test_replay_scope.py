"""`precompile --replay` imports the kernel a record names, which runs the file's top-level code.
A record that entered from elsewhere (a bundle, another Redis client) chooses what it names:
replay imports only files under the PATHs given on its command line (none given: the current
directory), a module by name only when its file is such a file, and that exact file, never
what a second search of ``sys.path`` finds. Real files, real subprocesses, a real second user
(``setpriv``) where one plants a file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import swap_attack
from rel_helpers import child_env

ZEN = "Beautiful is better than ugly"  # what `import this`, a stdlib module, prints


def _record(digest: str, module: str, file: str) -> dict[str, object]:
    record = swap_attack.record_json(f"{module}.py:1:1")
    record["digest"] = digest
    record["kernel"] = {"module": module, "qualname": "k", "file": file, "source_hash": "0" * 8}
    return record


def _tunedsl(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv], capture_output=True, text=True, env=env,
        cwd=cwd, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_replay_of_records_from_a_bundle_imports_only_files_under_its_paths(
    tmp_path: Path,
) -> None:
    # A bundle's records named one of this user's own scripts outside the project (its
    # top-level code ran: here it leaves a marker), one found by module name on PYTHONPATH,
    # and a stdlib module with side effects (`this` prints the Zen of Python): replay
    # imported each one.
    project, scripts, lib = tmp_path / "project", tmp_path / "scripts", tmp_path / "lib"
    for d in (project, scripts, lib):
        d.mkdir(mode=0o755)
    ran_file, ran_module = tmp_path / "ran-file", tmp_path / "ran-module"
    (scripts / "deploy.py").write_text(f"open({str(ran_file)!r}, 'w').close()\nk = None\n")
    (lib / "deploy_lib.py").write_text(f"open({str(ran_module)!r}, 'w').close()\nk = None\n")
    by_file = _record("c1" * 32, "deploy", str(scripts / "deploy.py"))
    by_name = _record("c2" * 32, "deploy_lib", str(tmp_path / "gone" / "deploy_lib.py"))
    stdlib = _record("c3" * 32, "this", str(tmp_path / "gone" / "this.py"))
    bundle = tmp_path / "bundle.jsonl"
    lines = [{"tunedsl_records": 2}, by_file, by_name, stdlib]
    bundle.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = child_env(tmp_path / "cache")
    env["PYTHONPATH"] += os.pathsep + str(lib)
    imported = _tunedsl(["cache", "import", str(bundle)], env, project)
    assert imported.returncode == 0, imported.stdout + imported.stderr

    done = _tunedsl(["precompile", "--replay", "--target", "cuda:90"], env, project)
    said = done.stdout + done.stderr
    assert not ran_file.exists(), "replay imported a script a bundle's record named"
    assert not ran_module.exists(), "replay imported a module a bundle's record named"
    assert ZEN not in done.stdout, "replay imported a stdlib module a bundle's record named"
    flat = " ".join(said.split())
    for record, named in (
        (by_file, scripts / "deploy.py"),
        (by_name, lib / "deploy_lib.py"),
        (stdlib, Path(__import__("this").__file__)),
    ):
        digest = str(record["digest"])
        assert f"record {digest[:12]}" in flat, said
        assert f"{named}, outside the directories replay imports from ({project})" in flat, said
    assert "name the file or its directory: tunedsl precompile --replay PATH" in flat, said

    # Named on the command line, the script's directory is the user's choice: imported.
    allowed = _tunedsl(
        ["precompile", "--replay", "--target", "cuda:90", str(scripts), str(lib)], env, project
    )
    assert ran_file.exists(), allowed.stdout + allowed.stderr
    assert ran_module.exists(), allowed.stdout + allowed.stderr


PLANT = """
import sys
open(sys.argv[1], "w").write(f"open({sys.argv[2]!r}, 'w').close()\\nk = 'planted'\\n")
"""


def test_replay_imports_the_module_file_it_checked_not_one_planted_after_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The module a record names was found on sys.path (in a directory of this user's) and its
    # file checked; then imported by name, a second search: a file another user planted in
    # the sticky directory before it on sys.path (a shared working directory, `python -m`)
    # in between ran instead. The attacker plants it right after the check.
    from tunedsl.precompile import replay
    from tunedsl.store import paths

    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as shared:
        mine = shared / "mine"
        mine.mkdir(mode=0o755)
        mine.chmod(0o755)
        name = "tunedsl_replay_race_mod"
        checked = mine / f"{name}.py"
        checked.write_text("k = 'mine'\n")
        checked.chmod(0o644)
        marker = shared / "planted-ran"
        check = paths.untrusted_source
        planted: list[str] = []

        def check_then_plant(path: str, **kw: bool) -> str | None:
            why = check(path, **kw)
            if path == str(checked) and not planted:
                swap_attack.attacker_step(PLANT, str(shared / f"{name}.py"), str(marker))
                planted.append(path)
            return why

        monkeypatch.setattr(paths, "untrusted_source", check_then_plant)
        monkeypatch.setattr(sys, "path", [str(shared), str(mine), *sys.path])
        try:
            info = {"module": name, "qualname": "k", "file": str(shared / "gone.py")}
            kernel = replay._load_kernel(info, {})
        finally:
            sys.modules.pop(name, None)
        assert planted, "the module's file was never checked"
        assert not marker.exists(), "a module planted after the check ran"
        assert kernel == "mine"


@pytest.mark.needs_triton
def test_records_you_measured_replay_from_anywhere_and_the_same_from_a_bundle_do_not(
    tmp_path: Path,
) -> None:
    # The rule keeps replay of your own records: tuned here from a script outside the
    # directory replay runs in, the record replays; the same record exported and imported
    # into another cache (a colleague's bundle) is skipped with the note.
    fixture = Path(__file__).parents[1] / "integration" / "precompile_fixtures" / "replay"
    project, scripts = tmp_path / "project", tmp_path / "scripts"
    for d in (project, scripts):
        d.mkdir(mode=0o755)
    script = scripts / "dsl_tune_scale.py"
    script.write_text((fixture / "dsl_tune_scale.py").read_text())
    env = child_env(tmp_path / "cache", TRITON_CACHE_DIR=str(tmp_path / "triton"))
    tuned = _tunedsl(["run", str(script)], env, project)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    env.pop("TRITON_INTERPRET")
    mine = _tunedsl(["precompile", "--replay", "--target", "cuda:90"], env, project)
    assert mine.returncode == 0, mine.stdout + mine.stderr
    assert "skipped" not in mine.stdout and "dsl_tune_scale.py:" in mine.stdout, mine.stdout

    bundle = tmp_path / "bundle.jsonl"
    exported = _tunedsl(["cache", "export", str(bundle)], env, project)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    other = dict(env, TUNEDSL_CACHE_DIR=str(tmp_path / "other-cache"))
    assert _tunedsl(["cache", "import", str(bundle)], other, project).returncode == 0
    theirs = _tunedsl(["precompile", "--replay", "--target", "cuda:90"], other, project)
    flat = " ".join((theirs.stdout + theirs.stderr).split())
    assert f"names the kernel file {script}, outside the directories" in flat, flat


def test_a_record_from_elsewhere_giving_an_option_triton_reads_a_file_from_is_not_replayed(
    tmp_path: Path,
) -> None:
    # A bundle's record (or another Redis client's) whose configurations give launch options
    # as text: Triton reads the IR in `ir_override`'s file (and links `extern_libs`, passes
    # `ptx_options` to ptxas), so replay compiled what the record's author chose. Such a
    # record is skipped with a note; the same record with numbers and flags alone replays.
    fixture = Path(__file__).parents[1] / "integration" / "precompile_fixtures" / "replay"
    project = tmp_path / "project"
    project.mkdir(mode=0o755)
    script = project / "dsl_tune_scale.py"  # under the directory replay runs in: importable
    script.write_text((fixture / "dsl_tune_scale.py").read_text())
    env = child_env(tmp_path / "cache", TRITON_CACHE_DIR=str(tmp_path / "triton"))
    assert _tunedsl(["run", str(script)], env, project).returncode == 0
    env.pop("TRITON_INTERPRET")
    bundle = tmp_path / "bundle.jsonl"
    assert _tunedsl(["cache", "export", str(bundle)], env, project).returncode == 0
    header, *records = [json.loads(line) for line in bundle.read_text().splitlines()]
    for record in records:
        for result in record["results"]:
            result["options"]["ir_override"] = str(tmp_path / "theirs.ttir")
    forged = tmp_path / "forged.jsonl"
    forged.write_text("".join(json.dumps(line) + "\n" for line in [header, *records]))
    for source, skipped in ((forged, True), (bundle, False)):
        other = dict(env, TUNEDSL_CACHE_DIR=str(tmp_path / f"other-{source.stem}"))
        imported = _tunedsl(["cache", "import", str(source)], other, project)
        assert imported.returncode == 0, imported.stdout + imported.stderr
        done = _tunedsl(["precompile", "--replay", "--target", "cuda:90"], other, project)
        flat = " ".join((done.stdout + done.stderr).split())
        said = "gives the launch option ir_override="
        assert (said in flat) is skipped, flat
        compiled = re.search(r"precompile: compiled (\d+)", flat)
        assert compiled is not None and (int(compiled[1]) > 0) is not skipped, flat
