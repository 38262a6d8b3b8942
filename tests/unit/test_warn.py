"""The one warn-once of the package (``tunedsl/warn.py``): one warning per topic per process."""

from __future__ import annotations

import sys
import threading
import warnings

import pytest

from tunedsl import warn
from tunedsl.errors import CacheWarning


@pytest.fixture(autouse=True)
def _fresh() -> None:
    warn.forget()


def test_a_topic_warns_once_until_forgotten() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert warn.warn_once("t:a", "first")
        assert not warn.warn_once("t:a", "again")
        assert warn.warn_once("t:b", "another topic")
        warn.forget("t:a")
        assert warn.warn_once("t:a", "after forget")
    assert [str(w.message) for w in caught] == ["first", "another topic", "after forget"]
    assert all(w.category is CacheWarning for w in caught)


def test_forget_by_prefix_keeps_the_other_topics() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warn.warn_once("bytecode:x", "m")
        warn.warn_once("bad:y", "m")
        warn.forget("bytecode:")
        assert warn.warn_once("bytecode:x", "m")
        assert not warn.warn_once("bad:y", "m")


def test_category_and_stacklevel_point_at_the_caller() -> None:
    def library_function() -> None:
        warn.warn_once("t:stack", "from the library", UserWarning)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        library_function()
    (w,) = caught
    assert w.category is UserWarning
    assert (w.filename, w.lineno) == (__file__, line)  # the line that called the library


def test_racing_threads_warn_once() -> None:
    barrier = threading.Barrier(8)
    results: list[bool] = []

    def racer() -> None:
        barrier.wait()
        results.append(warn.warn_once("t:race", "once"))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=racer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results.count(True) == 1
    assert len(caught) == 1
