"""Find the gallery's examples and run each in a fresh ``tunedsl run`` subprocess.

Each example runs in its own process group with a timeout, its output goes to a log file,
and its result comes back through the JSON file named by its ``--gallery-result`` argument. One
example failing, hanging or printing a wrong result never stops the others.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tunedsl.backends.python_child import module_argv
from tunedsl.errors import UsageError
from tunedsl.gallery.kit import RESULT_FLAG
from tunedsl.gallery.result import ExampleResult, ResultError, load_result

Status = Literal["ok", "wrong", "failed", "timeout"]

LOG_TAIL_CHARS = 2000


@dataclass(frozen=True)
class ExampleRun:
    """How one example's subprocess went, and the result it handed back (if any)."""

    name: str
    path: Path
    status: Status
    returncode: int | None
    seconds: float
    result: ExampleResult | None
    message: str
    log_path: Path

    @property
    def passed(self) -> bool:
        return self.status == "ok"


def default_examples_dir() -> Path:
    """The gallery's examples: ``tunedsl/examples`` inside an installed wheel, the top-level
    ``examples/`` beside the package in a checkout."""
    import tunedsl

    package = Path(tunedsl.__file__).resolve().parent
    candidates = (package / "examples", package.parent / "examples")
    for candidate in candidates:
        if (candidate / "vector_add.py").is_file():
            return candidate
    raise UsageError(
        f"cannot find the examples shipped with tunedsl (looked in {candidates[0]} and "
        f"{candidates[1]}); this installation is incomplete: reinstall tunedsl, or pass "
        "--examples DIR"
    )


def discover(examples_dir: Path, only: Sequence[str] = ()) -> list[Path]:
    """The example scripts in ``examples_dir`` (``*.py`` not starting with ``_``), sorted.

    ``only`` keeps the named ones (``vector_add`` or ``vector_add.py``); an unknown name is an
    error that lists the available names.
    """
    if not examples_dir.is_dir():
        raise UsageError(f"--examples {examples_dir}: not a directory")
    scripts = sorted(p for p in examples_dir.glob("*.py") if not p.name.startswith("_"))
    if not scripts:
        raise UsageError(f"--examples {examples_dir}: no example scripts (*.py) in it")
    if not only:
        return scripts
    by_name = {p.stem: p for p in scripts}
    chosen = []
    for name in only:
        stem = name[:-3] if name.endswith(".py") else name
        if stem not in by_name:
            raise UsageError(
                f"--only {name}: no such example in {examples_dir}; available: "
                + ", ".join(sorted(by_name))
            )
        if by_name[stem] not in chosen:
            chosen.append(by_name[stem])
    return chosen


def trusted(scripts: Sequence[Path]) -> tuple[list[Path], list[str]]:
    """The scripts no other user could have written, and a note for each left out: each runs
    as this user with its directory first on ``sys.path`` (the trust rule of
    ``tunedsl precompile DIR``)."""
    from tunedsl.store.paths import untrusted_source

    kept, notes = [], []
    for script in scripts:
        why = untrusted_source(str(script), on_path=True)
        if why is None:
            kept.append(script)
        else:
            notes.append(
                f"{script}: not run: {why}, so another user could have written it or a module "
                "beside it; copy the examples into a directory of yours that others cannot "
                "write, and pass that as --examples"
            )
    return kept, notes


def example_env(interpret: bool) -> dict[str, str]:
    """The environment of one example's subprocess."""
    env = dict(os.environ)
    # The report needs every configuration's time, so tune even if a record exists,
    # unless the user said otherwise.
    env.setdefault("TUNEDSL_FORCE_RETUNE", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return env


def run_example(script: Path, out_dir: Path, *, timeout_s: float, interpret: bool) -> ExampleRun:
    """Run one example with ``tunedsl run`` in a fresh process; never raises for its failures."""
    name = script.stem
    result_path = out_dir / "results" / f"{name}.json"
    log_path = out_dir / "logs" / f"{name}.log"
    result_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.unlink(missing_ok=True)  # a stale result must not pass for this run's
    # The example writes its result where --gallery-result says (gallery/kit.py).
    # Imports come from this process's path, not from the example's directory first.
    command = module_argv("tunedsl", "run", str(script), RESULT_FLAG, str(result_path))
    start = time.monotonic()
    with open(log_path, "wb") as log:
        # Own process group: on a timeout the example and its compile workers go together.
        proc = subprocess.Popen(
            command,
            cwd=script.parent,
            env=example_env(interpret),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_dies_with(os.getpid()),
        )
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            returncode = None
        except BaseException:
            # Ctrl-C reaches only the gallery (the example has its own session): stop it too.
            _kill_group(proc)
            raise
    seconds = time.monotonic() - start
    if returncode is None:
        return ExampleRun(
            name, script, "timeout", None, seconds, None,
            f"did not finish within {timeout_s:g} s (killed)", log_path,
        )  # fmt: skip
    try:
        result: ExampleResult | None = load_result(result_path)
    except ResultError as err:
        result = None
        why = str(err)
    if result is not None and not result.correct:
        return ExampleRun(
            name, script, "wrong", returncode, seconds, result, result.check_message, log_path
        )
    if returncode != 0:
        message = f"exit status {returncode}: {_last_line(log_path)}"
        return ExampleRun(name, script, "failed", returncode, seconds, result, message, log_path)
    if result is None:
        return ExampleRun(name, script, "failed", returncode, seconds, None, why, log_path)
    return ExampleRun(name, script, "ok", returncode, seconds, result, "", log_path)


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _dies_with(parent: int) -> Callable[[], None]:
    """Run in the example's process before it starts (Linux): SIGKILL when the gallery dies.
    In its own session, nothing else ends it when the gallery is killed (SIGKILL, SIGTERM)."""

    def arm() -> None:
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            except (OSError, AttributeError):
                pass
        if os.getppid() != parent:  # the gallery died before the signal was armed
            os._exit(1)

    return arm


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _last_line(log_path: Path) -> str:
    """The last non-empty line of a log (usually the exception), for a one-line reason."""
    try:
        text = log_path.read_bytes()[-LOG_TAIL_CHARS:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def run_gallery(
    scripts: Sequence[Path],
    out_dir: Path,
    *,
    timeout_s: float,
    interpret: bool,
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> list[ExampleRun]:
    """Run every script in turn, reporting progress; return one ExampleRun per script."""
    runs = []
    width = max(len(s.stem) for s in scripts) if scripts else 0
    for i, script in enumerate(scripts, 1):
        progress(f"[{i}/{len(scripts)}] {script.stem:<{width}} running ...")
        run = run_example(script, out_dir, timeout_s=timeout_s, interpret=interpret)
        detail = run.message
        if run.passed and run.result is not None:
            detail = ", ".join(f"{k}={v}" for k, v in run.result.config.items())
        progress(
            f"[{i}/{len(scripts)}] {script.stem:<{width}} {run.status.upper():<7} "
            f"{run.seconds:6.1f} s  {detail}"
        )
        runs.append(run)
    return runs
