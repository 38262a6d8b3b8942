"""The scan line (``tunedsl.progress.Scan``): nothing for a scan shorter than the delay, a
line redrawn at most ten times a second after it, erased at the end. Time is a clock the
test moves, so nothing depends on the machine's speed; the terminal is a real pty."""

from __future__ import annotations

import os
import pty

import pytest

from tunedsl.progress import Scan


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def read_all(fd: int) -> str:
    os.set_blocking(fd, False)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        out += chunk
    return out.decode()


def test_the_scan_line_waits_for_the_delay_then_redraws_and_is_erased(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TUNEDSL_QUIET", raising=False)
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as terminal:
            clock = Clock()
            scan = Scan("a space of 9 points (fits)", 9, stream=terminal, clock=clock, delay_s=1.0)
            for _ in range(3):  # under the delay: silent
                clock.now += 0.2
                scan.step()
            assert read_all(master) == ""
            clock.now += 0.5
            scan.step()
            scan.step()  # the same instant: not redrawn
            first = read_all(master)
            assert first.count("\x1b[K") == 1
            assert "looking for a valid configuration of a space of 9 points (fits)" in first
            assert "4 of at most 9 points looked at  1.1 s" in first
            scan.close()
            assert read_all(master) == "\r\x1b[K"
    finally:
        os.close(master)
        os.close(slave)


def test_no_line_with_tunedsl_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEDSL_QUIET", "1")
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as terminal:
            scan = Scan("a space", 5, stream=terminal, delay_s=0.0)
            for _ in range(5):
                scan.step()
            scan.close()
            assert read_all(master) == ""
    finally:
        os.close(master)
        os.close(slave)
