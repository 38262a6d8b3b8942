"""``Summary``: everything one precompile run did, for the table and the exit status."""

from __future__ import annotations

from dataclasses import dataclass, field

from tunedsl.precompile.workload import SiteReport


@dataclass
class Summary:
    """Everything one precompile run did, for the table and the exit status."""

    bytecode: dict[str, int] = field(
        default_factory=lambda: {"compiled": 0, "cached": 0, "failed": 0}
    )
    errors: list[str] = field(default_factory=list)  # file-level failures, rendered
    reports: list[SiteReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    workload_files: int = 0  # files that declare a @tunedsl.workload

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(r.failed for r in self.reports)
