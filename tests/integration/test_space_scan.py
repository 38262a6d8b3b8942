"""A space far too large to list whose constraint rejects everything: the site stops after a
bounded number of constraint calls with an error naming the constraint and the fix (it used
to test all 10^7 points, twice, in silence), and a scan that takes longer than a second
shows a progress line on a terminal (a real pty). Nothing here depends on the machine's
speed: bounds are counted in constraint calls, and the progress line is asked for at once
(``progress.PROGRESS_AFTER_S = 0``).
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from search_kernels import vadd_split

from tunedsl import Space, autotune_launch, cdiv
from tunedsl.errors import UsageError
from tunedsl.model.config import Config

BOUND = 2 * 10_000  # points in order, then as many drawn at random
CAP = 10 * BOUND  # a whole-space scan is stopped here, so a regression fails, never hangs


def huge_space(constraint) -> Space:
    return Space({name: list(range(10)) for name in "abcdef"}, TILE=[16, 32], constraint=constraint)


def test_a_site_stops_a_constraint_that_rejects_everything_after_a_bounded_scan() -> None:
    calls = []

    def fits_registers(cfg: Config) -> bool:
        calls.append(1)
        if len(calls) > CAP:
            raise AssertionError("the whole space is being scanned")
        return False

    n = 256
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    with pytest.raises(UsageError) as info:
        autotune_launch(
            vadd_split,
            space=huge_space(fits_registers),
            grid=lambda cfg: (cdiv(n, cfg.TILE),),
            args=(a, b, c, n),
            kwargs=lambda cfg: {"TILE": cfg.TILE, "SPLIT": 1},
            name="rejects-all",
        )
    text = str(info.value)
    assert "constraint test_a_site_stops" in text and "fits_registers" in text
    assert "rejected the first 10,000 of its 2,000,000 configurations" in text
    assert "loosen it, or narrow the axes" in text
    assert len(calls) == BOUND  # once, not once per way the site asks


SCRIPT = """
import sys
import tunedsl.progress
from tunedsl import Space
from tunedsl.errors import UsageError
from tunedsl.model.settings import resolve

calls = 0

def fits_registers(cfg):
    global calls
    calls += 1
    if calls > CAP:
        sys.exit("the whole space is being scanned")
    return False

tunedsl.progress.PROGRESS_AFTER_S = 0  # the line at once: no test waits for a second
space = Space({name: list(range(10)) for name in "abcdefg"}, constraint=fits_registers)
try:
    resolve(space, {}, {}, "kernels.py:12")
except UsageError as err:
    print("ERROR", err, file=sys.stderr)
""".replace("CAP", str(CAP))


def run_on_a_terminal(tmp_path: Path, **env: str) -> tuple[int, str]:
    base = {k: v for k, v in os.environ.items() if k != "TUNEDSL_QUIET"}
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, cwd=tmp_path,
        env={**base, **env},
    )  # fmt: skip
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return proc.wait(timeout=300), seen.decode(errors="replace")


def test_a_long_scan_shows_progress_on_a_terminal(tmp_path: Path) -> None:
    code, text = run_on_a_terminal(tmp_path)
    assert code == 0, text
    assert (
        "\x1b[Ktunedsl: looking for a valid configuration of a space of 10,000,000 points" in text
    )
    assert "(fits_registers)" in text and "points looked at" in text
    assert "ERROR kernels.py:12: the space's constraint fits_registers rejected" in text
    # The line is erased before the error is printed.
    assert text.rindex("\r\x1b[K") < text.index("ERROR")


def test_tunedsl_quiet_hides_the_scan_line_but_not_the_error(tmp_path: Path) -> None:
    code, text = run_on_a_terminal(tmp_path, TUNEDSL_QUIET="1")
    assert code == 0, text
    assert "looking for a valid configuration" not in text
    assert "ERROR kernels.py:12: the space's constraint fits_registers rejected" in text
