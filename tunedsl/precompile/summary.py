"""``Summary``: everything one precompile run did, for the table and the exit status."""

from __future__ import annotations

import os
import sysconfig
import traceback
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


def describe_error(err: BaseException) -> str:
    """One line for a failed import or workload: a DSL error as rendered, else the
    exception's type and message at the user's last frame."""
    render = getattr(err, "render", None)
    if callable(render):
        return str(render())
    from tunedsl.runtime.mistakes import is_own_file

    # The user's last frame: a mistake tunedsl reports is raised in tunedsl's own code, and
    # a failed check in a library's (torch.testing): the user's line called it.
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not is_own_file(f.filename)]
    libraries = tuple(
        os.path.join(p, "") for k, p in sysconfig.get_paths().items() if k.endswith("lib")
    )
    mine = [f for f in frames if not os.path.abspath(f.filename).startswith(libraries)]
    frames = mine or frames
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(err).__name__}: {err}{where}"
