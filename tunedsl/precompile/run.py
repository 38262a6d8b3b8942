"""The library function behind ``tunedsl precompile`` (precompile layer): warm every cache.

1. Bytecode: every DSL module under the paths (files, or directories searched recursively) is
   expanded and written to the bytecode cache, so later imports do no parsing.
2. Kernel variants: each file that declares a ``@tunedsl.workload`` is imported (with
   ``__name__ != "__main__"``) and its workloads are called inside ``workload.precompile_mode``;
   every site they reach compiles every configuration for the signatures it sees, in
   parallel. ``target="cuda:90"`` cross-compiles without a GPU; ``tune=True`` (GPU only)
   also tunes and writes the records.
3. ``replay=True``: recompile every (kernel, signature, configuration) in the stored tuning
   records (``replay.py``), e.g. after a Triton upgrade.

``precompile`` returns a ``Summary``; the command (``cli/precompile.py``) parses the
arguments, shows progress and renders the summary.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tunedsl.errors import UsageError
from tunedsl.frontend.source import read_source
from tunedsl.model.config import Config
from tunedsl.precompile.script_import import script_on_path
from tunedsl.precompile.summary import Summary, describe_error
from tunedsl.precompile.workload import (
    PrecompileSession,
    import_script,
    precompile_mode,
    registered_workloads,
)

__all__ = [
    "Summary",
    "iter_python_files",
    "precompile",
    "run_workloads",
    "tune_claimed",
    "tune_on_gpus",
    "warm_bytecode",
]

# A line `@workload` or `@tunedsl.workload`: only such files are imported (never run blindly).
_WORKLOAD_DECORATOR = re.compile(rb"^[ \t]*@(?:tunedsl\.)?workload(?:\(\))?[ \t]*(?:#.*)?$", re.M)
_SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".venv", "venv", "node_modules", ".tox"}


def _bytecode_only() -> str:
    """What a run without kernels to compile did precompile."""
    from tunedsl import bytecode

    if bytecode.writing_enabled():
        return "only bytecode was precompiled"
    return "and the bytecode cache is not written here, so nothing was precompiled"


def iter_python_files(paths: Sequence[str], refused: list[str] | None = None) -> Iterator[str]:
    """Every ``.py`` file under ``paths`` (recursively, sorted; hidden and venv dirs skipped).
    Under a directory only regular files count: a FIFO or device named ``*.py`` would block
    or never end; and only files no other user could have written (the trust rule of
    ``precompile --replay``): one found there is imported and run as this user. Each file
    left out for that is told in ``refused``; a file named itself is the user's choice."""
    from tunedsl.store.paths import untrusted_source

    for path in paths:
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                for name in sorted(files):
                    full = os.path.abspath(os.path.join(root, name))
                    if not (name.endswith(".py") and os.path.isfile(full)):
                        continue
                    why = untrusted_source(full, on_path=True)
                    if why is None:
                        yield full
                    elif refused is not None:
                        refused.append(
                            f"{full}: not imported: {why}, so another user could have written "
                            "it or a module beside it; make it and its directories yours and "
                            "closed to writes by others, or name the file itself to import it "
                            "anyway"
                        )
        elif os.path.isfile(path):
            yield os.path.abspath(path)
        elif os.path.exists(path):
            raise UsageError(f"precompile: {path} is not a regular file or a directory")
        else:
            raise UsageError(f"precompile: no such file or directory: {path}")


def _has_gpu() -> bool:
    from tunedsl.backends.triton_compile import interpreting

    if interpreting():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _check_tune(target: str | None, gpu: bool) -> None:
    """``--tune`` measures on this machine's GPU: say plainly when it cannot, and what to do."""
    if target is not None:
        raise UsageError(
            f"--tune measures kernels on this machine's GPU, so it cannot be combined with "
            f"--target {target}: use --target alone to cross-compile, and --tune on a machine "
            "with that GPU"
        )
    if not gpu:
        from tunedsl.backends.triton_compile import interpreting

        why = (
            "TRITON_INTERPRET=1 runs kernels in Triton's CPU interpreter: unset it and run "
            if interpreting()
            else "this machine has none: run it "
        )
        raise UsageError(
            f"--tune measures kernels on a GPU, and {why}on a machine with a GPU, or leave "
            "--tune out (add --target cuda:90 to cross-compile the kernels here; they are "
            "tuned on the GPU on first use); to try tuning, records and rules here, `tunedsl "
            "sweep --no-ray FILE` runs the workloads through the interpreter and stores their "
            "records (the interpreter's times, not a GPU's)"
        )


def warm_bytecode(files: Sequence[str], summary: Summary) -> list[str]:
    """Expand every DSL file into the bytecode cache; return the files that declare workloads."""
    from tunedsl import bytecode
    from tunedsl.frontend.compile import needs_expansion

    with_workloads = []
    for path in files:
        try:
            source = read_source(path)
        except OSError as err:
            summary.errors.append(f"{path}: cannot read: {err.strerror or err}")
            continue
        if b"tunedsl" in source and needs_expansion(source):
            try:
                summary.bytecode[bytecode.warm(path)] += 1
            except SyntaxError as err:
                summary.bytecode["failed"] += 1
                render = getattr(err, "render", None)
                summary.errors.append(render() if callable(render) else f"{path}: {err}")
                continue
        if _WORKLOAD_DECORATOR.search(source):
            with_workloads.append(path)
    return with_workloads


def run_workloads(files: Sequence[str], session: PrecompileSession, summary: Summary) -> None:
    """Import each file (not as ``__main__``) and call its workloads inside the session."""
    for path in files:
        try:
            module = import_script(path)
        except KeyboardInterrupt:
            raise
        except BaseException as err:
            summary.errors.append(f"{path}: import failed: {describe_error(err)}")
            continue
        for wl in registered_workloads(module.__name__):
            skipped, calls = session.skipped, session.calls
            needed = _required_parameters(wl.fn)
            if needed:  # its sizes come from `tunedsl sweep --shapes`
                summary.notes.append(
                    f"{wl.filename}:{wl.line}: workload {wl.qualname} takes "
                    f"{', '.join(f'{n}=' for n in needed)} without defaults, so precompile (which "
                    "calls a workload without arguments) skipped it: give them defaults, or "
                    "sweep it with `tunedsl sweep --shapes FILE`"
                )
                continue
            try:
                with script_on_path(path):  # for a neighbour it imports when called
                    wl.fn()
                if session.calls == calls:
                    summary.notes.append(
                        f"{wl.filename}:{wl.line}: workload {wl.qualname} reached no "
                        "autotune(...) or autotune_launch site, so nothing of it was compiled "
                        "(precompile calls a workload without arguments: give its parameters "
                        "defaults that call the sites)"
                    )
            except KeyboardInterrupt:
                raise
            except BaseException as err:
                # Without --tune a site compiles and does not launch, nor does a key another
                # GPU's process tunes: a check of its output sees memory nothing wrote.
                unlaunched = (
                    "without --tune, sites compile and do not launch"
                    if not session.tune
                    else "on several GPUs, a key another GPU's process tunes is not launched "
                    "in this one"
                    if session.skipped > skipped
                    else None
                )
                why = (
                    f" ({unlaunched}, so the workload's outputs are never written: check "
                    'results outside workloads, e.g. under `if __name__ == "__main__":`)'
                    if isinstance(err, AssertionError) and unlaunched
                    else " (a site that launches nothing returns None here, not a "
                    "LaunchResult: read a result's .config only `if res is not None`)"
                    if unlaunched and "'NoneType'" in str(err) and session.calls > calls
                    else ""
                )
                summary.errors.append(
                    f"{wl.filename}:{wl.line}: workload {wl.qualname} failed: "
                    f"{describe_error(err)}{why}"
                )


def _required_parameters(fn: Any) -> list[str]:
    """The parameters of ``fn`` a call without arguments would miss."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the call itself will say
        return []
    return [
        p.name
        for p in params
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


@contextlib.contextmanager
def _isolate_by_default(tune: bool) -> Iterator[None]:
    """``--tune`` measures in isolated workers (a crashing configuration must not end a long
    sweep) unless ``TUNEDSL_ISOLATE`` says otherwise; the environment is restored after the
    last of the precompiles running in this process ends (threads of their own may overlap).
    The variable is the process's: while it is set, other threads' tunings measure in
    isolated workers too (slower, the same choices)."""
    global _isolating
    with _isolating_lock:
        if not tune or (_isolating == 0 and "TUNEDSL_ISOLATE" in os.environ):
            set_here = False
        else:
            set_here, _isolating = True, _isolating + 1
            os.environ["TUNEDSL_ISOLATE"] = "1"
    try:
        yield
    finally:
        if set_here:
            with _isolating_lock:
                _isolating -= 1
                if _isolating == 0:
                    os.environ.pop("TUNEDSL_ISOLATE", None)


#: The precompiles of this process that set ``TUNEDSL_ISOLATE`` and are still running.
_isolating = 0
_isolating_lock = threading.Lock()


def tune_claimed(
    paths: Sequence[str],
    claims: str,
    *,
    workers: int | None = None,
    timeout_s: float | None = None,
) -> Summary:
    """One GPU's share of ``precompile(tune=True)`` on several GPUs (run in that GPU's
    process): the workloads of ``paths``, tuning only the keys this process claims first in
    the ``claims`` directory that every GPU's process shares."""
    from tunedsl.precompile.gpu_shards import ClaimDir

    summary = Summary()
    with_workloads = [p for p in iter_python_files(paths) if _declares_workload(p)]
    with (
        _isolate_by_default(True),
        precompile_mode(
            None, True, workers=workers, timeout_s=timeout_s, shard=ClaimDir(claims)
        ) as session,
    ):
        run_workloads(with_workloads, session, summary)
        summary.reports.extend(session.reports)
    return summary


def tune_on_gpus(
    paths: Sequence[str],
    gpus: Sequence[str],
    *,
    workers: int | None = None,
    timeout_s: float | None = None,
) -> Summary:
    """``precompile(tune=True)`` with one process per GPU of ``gpus`` sharing the keys
    (``gpu_shards``); their reports and errors merged into one ``Summary``, each
    error naming the GPU it happened on."""
    from tunedsl.precompile.gpu_shards import run_jobs
    from tunedsl.precompile.workload import SiteReport
    from tunedsl.store.scratch import scratch_dir

    summary = Summary()
    with scratch_dir("tunedsl-claims-") as claims:
        job = {"tune": {"paths": [os.path.abspath(p) for p in paths], "claims": str(claims),
                        "workers": workers, "timeout_s": timeout_s}}  # fmt: skip
        answers = run_jobs(gpus, job)
    for gpu in gpus:
        answer = answers.get(gpu, {"error": "no answer"})
        if "error" in answer:
            summary.errors.append(f"GPU {gpu}: {answer['error']}")
            continue
        for item in answer["reports"]:
            failed = {k: f"on GPU {gpu}: {v}" for k, v in item.pop("failed").items()}
            summary.reports.append(SiteReport(**item, failed=failed))
        summary.errors.extend(f"on GPU {gpu}: {e}" for e in answer["errors"])
    return summary


def _declares_workload(path: str) -> bool:
    try:
        return bool(_WORKLOAD_DECORATOR.search(read_source(path)))
    except OSError:
        return False


def precompile(
    paths: Sequence[str],
    *,
    workers: int | None = None,
    target: str | None = None,
    tune: bool = False,
    replay: bool = False,
    timeout_s: float | None = None,
    on_result: Callable[[str, Config, str], None] | None = None,
    gpus: Sequence[str] | None = None,
) -> Summary:
    """Warm the caches for the DSL files under ``paths``; returns what happened.
    ``on_result(site, config, outcome)`` hears about each configuration as it ends
    ("compiled", "cached", "failed" or "interpreted"). With ``tune`` and more than one of
    ``gpus`` (``CUDA_VISIBLE_DEVICES`` entries): one process per GPU, each tuning the keys
    it claims first (``gpu_shards.tune_on_gpus``). Like the command, it never turns Triton's
    interpreter on by itself (the import hook that imports the scripts leaves it alone)."""
    from tunedsl.autointerp import left_alone

    with left_alone():
        return _precompile(paths, workers, target, tune, replay, timeout_s, on_result, gpus)


def _precompile(
    paths: Sequence[str],
    workers: int | None,
    target: str | None,
    tune: bool,
    replay: bool,
    timeout_s: float | None,
    on_result: Callable[[str, Config, str], None] | None,
    gpus: Sequence[str] | None,
) -> Summary:
    summary = Summary()
    files = list(iter_python_files(paths, summary.errors))
    with_workloads = warm_bytecode(files, summary)
    summary.workload_files = len(with_workloads)
    if target is not None and not with_workloads and not replay:
        summary.notes.append(
            f"--target {target}: no file under the given paths declares a @tunedsl.workload, "
            "so no kernel was compiled (only bytecode); add a workload that calls your "
            "kernels with representative arguments (docs/precompile.md, 'Workloads'), or "
            "pass --replay to recompile the stored records"
        )
    gpu = _has_gpu()
    if tune:
        _check_tune(target, gpu)
    if tune and gpus is not None and len(gpus) > 1:
        shared = tune_on_gpus(paths, gpus, workers=workers, timeout_s=timeout_s)
        summary.reports.extend(shared.reports)
        summary.errors.extend(shared.errors)
        if on_result is not None:
            for r in shared.reports:
                for outcome in ("tuned",) * r.tuned + ("cached",) * r.cached:
                    on_result(r.site, Config(), outcome)
        return summary
    with (
        _isolate_by_default(tune),
        precompile_mode(
            target, tune, workers=workers, timeout_s=timeout_s, on_result=on_result
        ) as session,
    ):
        if target is None and not gpu:
            from tunedsl.backends.triton_compile import interpreting

            if interpreting():
                summary.notes.append(
                    "TRITON_INTERPRET=1: kernels run in Triton's CPU interpreter, so there is "
                    f"nothing to compile; {_bytecode_only()} (pass --target cuda:90 to "
                    "cross-compile kernels)"
                )
                run_workloads(with_workloads, session, summary)  # still checks the workloads
                if replay:  # the interpreter has no GPU target to compile the records for
                    summary.notes.append(
                        "--replay: nothing to recompile in Triton's CPU interpreter; pass "
                        "--target cuda:90 to recompile the records' configurations for a GPU"
                    )
                    replay = False
            elif with_workloads or replay:
                summary.notes.append(
                    f"no GPU and no --target: nothing to compile, {_bytecode_only()} (pass "
                    "--target cuda:90 to cross-compile kernels without a GPU)"
                )
                with_workloads, replay = [], False
        else:
            run_workloads(with_workloads, session, summary)
        if replay:
            from tunedsl.precompile.replay import import_roots, replay_records

            replay_records(session, summary, import_roots(paths))
        summary.reports.extend(session.reports)
    return summary
