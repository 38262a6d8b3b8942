"""Values worked out from the environment, kept until a variable changes (knobs.per_environ)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tunedsl import knobs


def test_a_value_of_the_environment_is_worked_out_again_only_when_a_variable_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str | None] = []

    @knobs.per_environ
    def value() -> str | None:
        seen.append(os.environ.get("ENVIRON_TEST_VARIABLE"))
        return seen[-1]

    monkeypatch.delenv("ENVIRON_TEST_VARIABLE", raising=False)
    assert value() is None and value() is None and len(seen) == 1
    monkeypatch.setenv("ENVIRON_TEST_VARIABLE", "a")
    assert value() == "a" and value() == "a" and len(seen) == 2
    monkeypatch.setenv("ENVIRON_TEST_VARIABLE", "b")
    assert value() == "b" and len(seen) == 3
    monkeypatch.setenv("SOME_OTHER_VARIABLE", "1")  # any change: it cannot know what fn reads
    assert value() == "b" and len(seen) == 4
    monkeypatch.delenv("ENVIRON_TEST_VARIABLE")
    assert value() is None and len(seen) == 5


def test_a_snapshot_compares_unchanged_until_a_variable_is_set_changed_or_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENVIRON_TEST_VARIABLE", "a")
    snapshot = knobs.environ_snapshot()
    assert knobs.environ_unchanged(snapshot)
    monkeypatch.setenv("ENVIRON_TEST_VARIABLE", "a")  # set to the same value: unchanged
    assert knobs.environ_unchanged(snapshot)
    monkeypatch.setenv("ENVIRON_TEST_VARIABLE", "b")
    assert not knobs.environ_unchanged(snapshot)
    snapshot = knobs.environ_snapshot()
    monkeypatch.delenv("ENVIRON_TEST_VARIABLE")
    assert not knobs.environ_unchanged(snapshot)
    assert not knobs.environ_unchanged(None)


def test_within_a_scope_a_snapshot_found_unchanged_is_not_compared_again_and_after_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    monkeypatch.setenv("ENVIRON_TEST_VARIABLE", "a")
    snapshot = knobs.environ_snapshot()
    assert knobs.environ_snapshot() is snapshot  # equal snapshots are one object
    knobs.environ_checks(True)
    try:
        assert knobs.environ_unchanged(snapshot)
        # Another thread changes a variable: this scope goes on with what it found...
        changer = threading.Thread(target=os.environ.__setitem__, args=("SOME_OTHER", "1"))
        changer.start()
        changer.join()
        assert knobs.environ_unchanged(snapshot)
        # ...while that thread (no scope open) and the next scope see the change.
        seen: list[bool] = []
        reader = threading.Thread(target=lambda: seen.append(knobs.environ_unchanged(snapshot)))
        reader.start()
        reader.join()
        assert seen == [False]
    finally:
        knobs.environ_checks(False)
        del os.environ["SOME_OTHER"]
    monkeypatch.setenv("ENVIRON_TEST_VARIABLE", "b")
    assert not knobs.environ_unchanged(snapshot)  # closed: compared again
    knobs.environ_checks(True)
    try:
        assert not knobs.environ_unchanged(snapshot)  # a change before the scope is seen
    finally:
        knobs.environ_checks(False)


def test_a_relative_cache_dir_is_resolved_when_set_not_at_each_use(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    monkeypatch.chdir(one)
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", "cache")
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", os.pathsep.join(["shipped", str(tmp_path)]))
    assert knobs.cache_dir_override() == str(one / "cache")
    assert knobs.records_path() == [str(one / "shipped"), str(tmp_path)]
    monkeypatch.chdir(two)  # the program changes directory: the caches stay
    assert knobs.cache_dir_override() == str(one / "cache")
    assert knobs.records_path() == [str(one / "shipped"), str(tmp_path)]
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", "other")  # set again: resolved where it is set
    assert knobs.cache_dir_override() == str(two / "other")
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", "cache")
    assert knobs.cache_dir_override() == str(two / "cache")


def test_a_cache_dir_of_blanks_is_the_default_cache_not_a_directory_named_by_blanks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``TUNEDSL_CACHE_DIR=" "`` (a variable set from an empty one, with a space) is read as
    unset, as ``TUNEDSL_CACHE_DIR=`` is: it made a directory named " " wherever the program
    ran."""
    from tunedsl.store import paths

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", "  ")
    root = paths.cache_root()
    assert root.is_relative_to(tmp_path / "xdg"), root
    paths.ensure_private_dir(paths.records_dir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["xdg"]
