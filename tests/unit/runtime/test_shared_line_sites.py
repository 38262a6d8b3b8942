"""Two ``autotune_launch`` calls on one line are two sites where Python tells instruction
positions apart (3.11+), and one site with a warning that says so where it does not (3.10).
Pure Python: runs on every Python the front end is tested on."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

from tunedsl.runtime import api

SOURCE = """\
import sys


def autotune_launch(value):
    frame = sys._getframe(1)  # the caller's frame, while it makes this call
    return PLACE(frame, (frame.f_code.co_filename, frame.f_lineno, None))


def both():
    return autotune_launch(1), autotune_launch(2)


def alone():
    return autotune_launch(3)
"""


def _module(tmp_path: Path) -> Any:
    """The calls' module, each call answering the site place ``api`` gives it."""
    path = tmp_path / "shared_line_calls.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("shared_line_calls", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.PLACE = api._call_place  # type: ignore[attr-defined]
    spec.loader.exec_module(module)
    return module


def test_two_calls_on_one_line_are_two_sites_or_one_with_a_warning(tmp_path: Path) -> None:
    module = _module(tmp_path)
    filename, line = module.__file__, 10  # both()'s return line
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        places = list(module.both())
    if sys.version_info >= (3, 11):
        assert places[0] != places[1]
        assert [p[:3] for p in places] == [(filename, line, None)] * 2
        assert not [w for w in caught if "share one site" in str(w.message)]
    else:
        assert places == [(filename, line, None)] * 2
        assert any("share one site" in str(w.message) for w in caught)


def test_a_call_alone_on_its_line_keeps_the_lines_place(tmp_path: Path) -> None:
    module = _module(tmp_path)
    assert module.alone() == (module.__file__, 14, None)
