"""Tuning progress: a live line on stderr, and the same events on ``logging.getLogger("tunedsl")``.

The tuner reports what happens to each candidate (compiled, measured, failed) and the end;
this module turns that into

- one status line on stderr, redrawn in place (``compiled 12/48  measured 9/48  best 0.412 ms
  (BLOCK=128, num_warps=4)  3.2 s``), shown only once tuning has taken longer than
  a second (``PROGRESS_AFTER_S``), only when stderr is a terminal, and never with ``TUNEDSL_QUIET=1``; it is
  replaced by a one-line summary when tuning ends;
- a line for a long scan of a space through its constraint (``Scan``), drawn the same
  way and erased when the scan ends;
- log records on the ``tunedsl`` logger for applications (``INFO`` for start and end,
  ``DEBUG`` per candidate), whatever the terminal; each record carries the event in
  ``record.tunedsl_event`` (a dict) so handlers need not parse the text. Records made
  while the tuner holds its measuring lock (``held()``) are handed to logging when it is
  released, so a handler may wait for another thread's tuning.

Nothing here imports torch or triton, and a broken stderr or log handler never stops tuning.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tunedsl import knobs
from tunedsl.warn import warn_once

logger = logging.getLogger("tunedsl")

_REDRAW_S = 0.1  # at most ten redraws a second

#: Seconds of tuning (or scanning) before the progress line appears: quick sites never
#: flicker. Tests set it to 0 to see the line at once.
PROGRESS_AFTER_S = 1.0


class _TerminalLine:
    """A line redrawn in place on a terminal (``\r`` and erase to the end of the line): not
    before ``delay_s`` have passed (``PROGRESS_AFTER_S``: no flicker for quick work), at most
    every ``_REDRAW_S``, never when the stream is not a terminal or ``TUNEDSL_QUIET=1``."""

    def __init__(
        self, stream: TextIO | None, clock: Callable[[], float], delay_s: float | None
    ) -> None:
        self._clock = clock
        self._start = clock()
        self._delay_s = PROGRESS_AFTER_S if delay_s is None else delay_s
        self._last_draw = float("-inf")
        self._drawn = False
        self._stream = stream if stream is not None else sys.stderr
        self._live = _wants_line(self._stream)

    def line(self) -> str:
        raise NotImplementedError

    def _maybe_draw(self) -> None:
        if not self._live:
            return
        now = self._clock()
        if now - self._start < self._delay_s or now - self._last_draw < _REDRAW_S:
            return
        self._last_draw = now
        self._drawn = self._write("\r\x1b[K" + self.line()) or self._drawn

    def _write(self, text: str) -> bool:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # closed or broken stderr: the work goes on silently
            self._live = False
            return False
        return True


class Progress(_TerminalLine):
    """Progress of one tuning run over ``total`` candidates of ``kernel``."""

    def __init__(
        self,
        kernel: str,
        total: int,
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        delay_s: float | None = None,
        points: int | None = None,
    ) -> None:
        self.kernel = kernel
        self.total = total
        self.compiled_n = 0
        self.measured_n = 0
        self.failed_n = 0
        self.best: tuple[float, str] | None = None
        self.strategy = ""
        self.remaining_s: float | None = None
        super().__init__(stream, clock, delay_s)
        self._held: list[tuple[int, str, dict[str, Any]]] | None = None
        # ``points``: a space too large to list, searched (``total`` is then unknown, 0).
        what = (
            f"{total} configuration(s)"
            if points is None
            else f"searching a space of {points:,} points"
        )
        self._event("start", logging.INFO, f"tuning {kernel}: {what}")

    # -- events from the tuner -------------------------------------------------------------

    def compiled(self, config: object) -> None:
        self.compiled_n += 1
        self._event("compiled", logging.DEBUG, f"{self.kernel}: compiled {config}", config)

    def measured(self, config: object, median_ms: float) -> None:
        self.measured_n += 1
        if self.best is None or median_ms < self.best[0]:
            self.best = (median_ms, str(config))
        self._event(
            "measured",
            logging.DEBUG,
            f"{self.kernel}: {config}: {median_ms:.4f} ms",
            config,
            median_ms=median_ms,
        )

    def failed(self, config: object, why: str) -> None:
        self.failed_n += 1
        self._event("failed", logging.DEBUG, f"{self.kernel}: {config}: {why}", config, why=why)

    def searching(self, strategy: str, remaining_s: float | None) -> None:
        """The search's strategy and budget left (``None``: no budget), after each batch."""
        self.strategy = strategy
        self.remaining_s = remaining_s
        self._maybe_draw()

    def finish(self, winner: object | None, median_ms: float | None = None) -> None:
        """Tuning ended (``winner`` None: it failed); the live line becomes a summary."""
        elapsed = self.elapsed()
        if winner is None:
            text = f"tuning {self.kernel}: no configuration succeeded ({elapsed:.1f} s)"
        else:
            ms = f" {median_ms:.4f} ms" if median_ms is not None else ""
            text = f"tuned {self.kernel} in {elapsed:.1f} s: {winner}{ms}"
        self._event("done", logging.INFO, text, winner, median_ms=median_ms)
        if self._drawn:
            self._write("\r\x1b[K" + f"tunedsl: {text}\n")
            self._drawn = False

    @contextmanager
    def held(self) -> Iterator[None]:
        """Log records made inside are emitted when it ends (the live line is not held)."""
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            for level, text, event in held:
                _log(level, text, event)

    # -- rendering ---------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self._clock() - self._start

    def line(self) -> str:
        """The status line as drawn on the terminal (without control characters)."""
        of = f"/{self.total}" if self.total else ""  # 0: a search of unknown length
        parts = [
            f"tunedsl: tuning {self.kernel}",
            f"compiled {self.compiled_n}{of}",
            f"measured {self.measured_n}{of}",
        ]
        if self.failed_n:
            parts.append(f"failed {self.failed_n}")
        if self.best is not None:
            parts.append(f"best {self.best[0]:.4f} ms ({self.best[1]})")
        parts.append(f"{self.elapsed():.1f} s")
        if self.remaining_s is not None:
            parts.append(f"{max(0.0, self.remaining_s):.0f} s left ({self.strategy})")
        return "  ".join(parts)

    def _event(
        self, kind: str, level: int, text: str, config: object = None, **fields: Any
    ) -> None:
        if logger.isEnabledFor(level):
            event = {
                "event": kind,
                "kernel": self.kernel,
                "config": None if config is None else str(config),
                "compiled": self.compiled_n,
                "measured": self.measured_n,
                "failed": self.failed_n,
                "total": self.total,
                "elapsed_s": self.elapsed(),
                **fields,
            }
            if self._held is not None:
                self._held.append((level, text, event))
            else:
                _log(level, text, event)
        if kind != "done":
            self._maybe_draw()


def _log(level: int, text: str, event: dict[str, Any]) -> None:
    """Hand one record to logging. A handler that raises (logging lets an error of ``emit``
    through) is passed over as a broken stderr is, with one warning: it never stops a
    tuning, loses its choice or replaces its error. An interrupt goes through."""
    try:
        logger.log(level, text, extra={"tunedsl_event": event})
    except Exception as err:
        warn_once(
            f"log-handler:{type(err).__name__}",
            f"a handler of the 'tunedsl' logger raised {err!r} on a tuning event; tunedsl "
            "goes on without that record (fix the handler's emit(), or remove the handler)",
            UserWarning,
            stacklevel="user",
        )


def _wants_line(stream: TextIO) -> bool:
    if knobs.quiet():  # a bad value is an error naming the variable, like every knob
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Scan(_TerminalLine):
    """A line for a long look through a space, its constraint tested point by point (its
    listing, or the first valid configuration of one too large to list): drawn as the tuning line is
    (on a terminal, after ``PROGRESS_AFTER_S``, never with ``TUNEDSL_QUIET=1``) and
    erased when the scan ends, so a scan longer than a second is never silent."""

    def __init__(
        self,
        what: str,
        limit: int,
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        delay_s: float | None = None,
    ) -> None:
        self.what = what
        self.limit = limit  # the most points the scan looks at
        self.looked = 0
        super().__init__(stream, clock, delay_s)

    def step(self) -> None:
        """One more point looked at."""
        self.looked += 1
        self._maybe_draw()

    def line(self) -> str:
        return (
            f"tunedsl: looking for a valid configuration of {self.what}: "
            f"{self.looked:,} of at most {self.limit:,} points looked at  "
            f"{self._clock() - self._start:.1f} s"
        )

    def close(self) -> None:
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False
