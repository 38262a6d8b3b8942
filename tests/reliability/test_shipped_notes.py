"""Shipped records that decide nothing say so: records of a kernel edited since, and a
``TUNEDSL_RECORDS_PATH`` entry one directory too high. Real tuning in subprocesses, real
files, the scripts as a user runs them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rel_helpers import TWO_KEYS, child_env, run_python, tuned_and_shipped, write_script


def _serve(script: Path, cache: Path, **extra: str) -> tuple[list[str], list[str]]:
    """The sources of the script's two keys, and its warnings' lines."""
    out = run_python(script, child_env(cache, **extra), timeout=180)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()[1::2], [x for x in out.stderr.splitlines() if "Warning" in x]


@pytest.mark.needs_triton
def test_shipped_records_of_a_kernel_edited_since_are_named_once_not_passed_over(
    tmp_path: Path,
) -> None:
    # Records shipped on TUNEDSL_RECORDS_PATH (or kept in the cache), the kernel's body edited
    # since: they decide nothing for it. mode="cached" launched the default for every key and
    # mode="on" tuned every key again, both in silence, where a shipped rule of the same edit
    # says so; now one warning per site names a record and what changed.
    script, ship = tuned_and_shipped(tmp_path, "vadd_app.py")
    same, warned = _serve(script, tmp_path / "c0", TUNEDSL_RECORDS_PATH=str(ship),
                          TUNEDSL_AUTOTUNE="cached")  # fmt: skip
    assert same == ["disk", "disk"] and warned == [], warned  # unedited: its records, silent
    (tmp_path / "b").mkdir()
    edited = write_script(
        tmp_path / "b" / "vadd_app.py", TWO_KEYS.replace("mask = offs < n", "mask = n > offs")
    )
    for mode, source, then in (
        ("cached", "default", "each key launches the site's default"),
        ("on", "tuned", "each key is tuned again"),
    ):
        sources, warned = _serve(edited, tmp_path / f"c-{mode}", TUNEDSL_RECORDS_PATH=str(ship),
                                 TUNEDSL_AUTOTUNE=mode)  # fmt: skip
        assert sources == [source, source]
        assert len(warned) == 1, warned  # one for the site, not one per key
        assert warned[0].startswith(f"{edited}:"), warned  # at the user's line
        assert (
            f"{ship}/" in warned[0]
            and ".json is a tuning record for vadd_app.py:<module>:autotune_launch measured on "
            "another version of its kernel (the kernel's source or a function or value it "
            f"reads changed since), so it decides no key of this kernel: {then} instead"
            in warned[0]
        ), warned
    # The cache's own records of the older kernel, in mode="cached": said too.
    sources, warned = _serve(edited, tmp_path / "tuned", TUNEDSL_AUTOTUNE="cached")
    assert sources == ["default", "default"] and len(warned) == 1, warned
    assert f"{tmp_path / 'tuned' / 'records'}/" in warned[0], warned
    # mode="on" tunes the edited kernel in its own cache without a word (an edit being made).
    sources, warned = _serve(edited, tmp_path / "tuned", TUNEDSL_AUTOTUNE="on")
    assert sources == ["tuned", "tuned"] and warned == [], warned


@pytest.mark.needs_triton
def test_a_records_path_entry_one_directory_too_high_names_the_one_below(tmp_path: Path) -> None:
    # TUNEDSL_RECORDS_PATH naming the cache root that `cache import` filled (its records are
    # in records/), or the directory above a shipped one: nothing was read and nothing said.
    # Now one warning names the entry and the directory to name instead.
    script, ship = tuned_and_shipped(tmp_path, "vadd_app.py")
    app = tmp_path / "app"
    app.mkdir(mode=0o700)
    (app / "empty").mkdir(mode=0o700)
    shutil.copytree(ship, app / "shipped")
    for entry, below in ((tmp_path / "tuned", tmp_path / "tuned" / "records"),
                         (app, app / "shipped")):  # fmt: skip
        sources, warned = _serve(script, tmp_path / f"c-{entry.name}",
                                 TUNEDSL_RECORDS_PATH=str(entry), TUNEDSL_AUTOTUNE="cached")  # fmt: skip
        assert sources == ["default", "default"] and len(warned) == 1, warned
        assert warned[0].startswith(f"{script}:"), warned
        assert (
            f"TUNEDSL_RECORDS_PATH names {entry}, which holds no record or rule file, but "
            f"{below} does:"
            in warned[0]
            and warned[0].endswith(f"name {below} instead")
        ), warned
    # The directory itself, or an empty one: no word.
    for entry, source in ((app / "shipped", "disk"), (app / "empty", "default")):
        sources, warned = _serve(script, tmp_path / f"d-{entry.name}",
                                 TUNEDSL_RECORDS_PATH=str(entry), TUNEDSL_AUTOTUNE="cached")  # fmt: skip
        assert sources == [source, source] and warned == [], warned
