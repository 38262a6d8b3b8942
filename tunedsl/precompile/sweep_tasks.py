"""A sweep's tasks (one workload called with one shape), their outcomes, and the progress
line a sweep prints as they finish."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TextIO


@dataclass(frozen=True)
class Task:
    index: int
    script: str
    workload: str  # qualname of the workload function
    shape: dict[str, Any]

    def label(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.shape.items())
        return f"{self.workload}({args})"


@dataclass
class Outcome:
    task: Task
    records: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    attempts: int = 1


class Progress:
    """One line on a terminal (a line per task otherwise): done/total and failures; none
    with ``quiet`` (``TUNEDSL_QUIET=1``), which only counts."""

    def __init__(self, total: int, out: TextIO, *, quiet: bool = False) -> None:
        self.total, self.failed, self.out, self.quiet = total, 0, out, quiet
        self.finished: list[Outcome] = []  # what an interrupted sweep still writes

    @property
    def done(self) -> int:
        return len(self.finished)

    def update(self, outcome: Outcome) -> None:
        self.finished.append(outcome)
        self.failed += outcome.error is not None
        width = 30
        bar = "#" * (width * self.done // max(1, self.total))
        text = f"sweep [{bar:<{width}}] {self.done}/{self.total} task{'s' * (self.total != 1)}"
        if self.failed:
            text += f", {self.failed} failed"
        if self.quiet:
            return
        if self.out.isatty():
            self.out.write("\r" + text + ("\n" if self.done == self.total else ""))
        else:
            self.out.write(f"{text}: {outcome.task.label()}\n")
        self.out.flush()
