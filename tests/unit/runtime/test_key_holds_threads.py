"""A site's record of what its key= value held is made once, even where threads tuning
other keys of the site miss at once (``runtime/miss.py``)."""

from __future__ import annotations

import threading
import time

from tunedsl.model.settings import ReadRecorder
from tunedsl.runtime import miss


class _Site:
    """The two fields of a site ``miss._not_held`` reads; reading the launch text takes a
    while, as another thread runs meanwhile."""

    has_key = True

    @property
    def launch_text(self) -> str:
        time.sleep(0.2)
        return "TILE=$TILE; key=(n, tag)"


def test_two_threads_missing_at_once_name_a_read_the_key_does_not_hold_once() -> None:
    site = _Site()
    named: list[str] = []

    def tune(n: int) -> None:
        args = ReadRecorder({"n": n, "limit": 16})
        args["n"], args["limit"]  # what prune= read
        named.extend(miss._not_held(site, args, (n, 64)))  # type: ignore[arg-type]

    threads = [threading.Thread(target=tune, args=(n,)) for n in (256, 512)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert named == ["limit"]  # said once, by one of them
