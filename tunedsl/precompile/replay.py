"""``tunedsl precompile --replay``: recompile what the stored tuning records describe.

Each record names its kernel (module, qualname, file, source hash), the Triton type of
every argument and, per configuration, the launch options and config-dependent
constexprs. Replay imports the kernel's module (a DSL script through the import hook,
never as ``__main__``; from the file it checked, never found again by name; for a record
from elsewhere, only a file under the directories replay was given), and cross-compiles every configuration for the session's target
(``--target``, else the current GPU) in parallel, so Triton's cache is warm again, e.g.
after a Triton upgrade. Pure Python until a kernel is compiled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tunedsl.model.config import Config
from tunedsl.model.variant import Kernel
from tunedsl.precompile.summary import describe_error
from tunedsl.precompile.workload import PrecompileSession, SiteReport, import_script
from tunedsl.store import paths
from tunedsl.warn import warn_once

if TYPE_CHECKING:
    from tunedsl.precompile.summary import Summary
    from tunedsl.store.records import ConfigResult, Record


class ImportFailed(Exception):
    """Importing a record's kernel file raised ``cause`` (its top-level code ran)."""

    def __init__(self, filename: str, cause: BaseException) -> None:
        super().__init__(filename)
        self.filename = filename
        self.cause = cause


class OutsideRoots(Exception):
    """A record from elsewhere names a kernel file (or a module whose file is) ``path``,
    outside the directories replay imports from."""

    def __init__(self, what: str, path: str) -> None:
        super().__init__(path)
        self.what, self.path = what, path


def import_roots(paths: Sequence[str]) -> list[str]:
    """Where replay imports a kernel from for a record that came from elsewhere (a bundle,
    another Redis client): the PATHs given on the command line, else the current directory."""
    return [os.path.abspath(p) for p in paths] or [os.getcwd()]


def _check_roots(what: str, path: str, roots: Sequence[str] | None) -> None:
    """Raise OutsideRoots unless ``path`` (as real) lies under one of ``roots`` (None: any)."""
    if roots is None:
        return
    real = os.path.realpath(path)
    for root in map(os.path.realpath, roots):
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return
    raise OutsideRoots(what, path)


def _import_file(path: str, imported: dict[str, Any]) -> Any:
    """``path`` imported as a script (``import_script``), once per replay: ``imported``
    keeps each file's module, or the error its import raised, raised again."""
    if path not in imported:
        try:
            imported[path] = import_script(path)
        except KeyboardInterrupt:
            raise
        except BaseException as err:
            imported[path] = ImportFailed(path, err)
    module = imported[path]
    if isinstance(module, ImportFailed):
        raise module
    return module


def _load_kernel(
    info: dict[str, Any], imported: dict[str, Any], roots: Sequence[str] | None = None
) -> Kernel:
    """The kernel object a record names; raises with the reason when it cannot be found.
    ``imported`` keeps each file's module (or the error its import raised): a file is
    imported once per replay, however many records name it, since importing a script runs
    its top-level code. With ``roots`` (a record from elsewhere), only a file under them is
    imported (OutsideRoots otherwise): the record chooses what it names."""
    module_name = str(info.get("module") or "")
    qualname = str(info.get("qualname") or "")
    filename = info.get("file")
    module = None
    if filename and os.path.exists(str(filename)):
        path = os.path.abspath(str(filename))
        # Importing runs the file's top-level code, and the record may come from a bundle
        # or a shared store: never a file another user could have written.
        why = paths.untrusted_source(path, on_path=True)
        if why is not None:
            raise LookupError(
                f"kernel file {path} not imported: {why}, so its code is not trusted; "
                "replay it only from a file you own that others cannot write (chown, "
                "chmod go-w), or remove this record (tunedsl cache clear ID)"
            )
        _check_roots("the kernel file", path, roots)
        module = _import_file(path, imported)
    elif module_name and module_name != "__main__":
        found = _module_file(module_name)
        if found is None:
            raise LookupError(f"kernel module {module_name} not found")
        _check_roots(f"the kernel module {module_name}, whose file is", found, roots)
        module = sys.modules.get(module_name)
        if module is None:  # that exact file: a second search of sys.path may find another
            if not found.endswith(".py"):
                raise LookupError(
                    f"kernel module {module_name} is {found}, not a Python source file"
                )
            module = _import_file(found, imported)
    if module is None:
        raise LookupError(f"kernel file {filename!r} no longer exists")
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    kernel: Kernel = obj
    return kernel


def _module_file(module_name: str) -> str | None:
    """The file importing ``module_name`` runs (None: not found), found without importing
    anything and checked: raise LookupError when it, a package on the way (an ``evil.py``
    planted in a shared working directory), or a directory of a namespace package (a package
    without ``__init__.py``, whose portions any directory on ``sys.path`` may add:
    ``evilns/mod.py`` in ``/tmp``) could have been written by another user."""
    import importlib.machinery

    parts = module_name.split(".")
    search: Any = None  # sys.path
    origin: str | None = None
    for depth in range(1, len(parts) + 1):
        if depth > 1 and search is None:
            return None  # below a module, not a package: the import fails
        name = ".".join(parts[:depth])
        loaded = sys.modules.get(name)
        if loaded is not None:
            search = getattr(loaded, "__path__", None)
            origin = getattr(loaded, "__file__", None)
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, search)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return None
        origin = spec.origin if spec.origin and os.path.isfile(spec.origin) else None
        places = [origin] if origin else []
        places += list(spec.submodule_search_locations or ())
        for place in places:
            why = paths.untrusted_source(place)
            if why is not None:
                raise LookupError(
                    f"kernel module {module_name} not imported: {why}, so its code is not trusted"
                )
        search = spec.submodule_search_locations
    return origin


def _count(
    report: SiteReport,
    session: PrecompileSession,
    result: ConfigResult,
    what: str,
    failure: str | None = None,
) -> None:
    """Count one configuration's replay in ``report`` and say it (``session.emit``)."""
    if what == "failed":
        if result.status == "ok" and failure is not None:  # only a regression is a failure
            report.failed[str(result.config)] = failure
    elif what == "cached":
        report.cached += 1
    else:
        report.compiled += 1
    session.emit(report.site, result.config, what)


def replay_jobs(
    record: Record, kernel: Kernel, target: Any
) -> list[tuple[ConfigResult, Callable[[], object]]]:
    """(config, zero-argument compile) for every configuration of one record."""
    from tunedsl.backends.triton_compile import compile_signature

    types: dict[str, str] = {}
    static: dict[str, Any] = {}
    # Per parameter: "*fp16", "*fp16:D" (Triton's specialisation suffix) or {"constexpr": v}.
    for name, value in record.signature.items():
        if isinstance(value, dict) and "constexpr" in value:
            static[name] = value["constexpr"]
        else:
            types[name] = str(value)
    out: list[tuple[ConfigResult, Callable[[], object]]] = []
    interpreted = record.device.get("type") == "interpreter"
    for result in record.results:
        constexprs = _triton_functions(kernel, {**static, **dict(result.constexprs)})
        options = dict(result.options)
        if interpreted:  # the interpreter's options leave occupancy out: the target's
            options = _target_options(result.config, record.context, target, options)
            result = dataclasses.replace(result, options=options)  # the binary it names

        def run(
            constexprs: dict[str, Any] = constexprs, options: dict[str, Any] = options
        ) -> object:
            return compile_signature(kernel, types, constexprs, options, target=target)

        out.append((result, run))
    return out


def _triton_functions(kernel: Kernel, static: dict[str, Any]) -> dict[str, Any]:
    """``static`` with each Triton function a record names (a ``tl.constexpr`` epilogue,
    ``"@jit leaky_relu <digest>"``) replaced by that function: the global of that name in
    the kernel's module, if it still has that digest; raises LookupError otherwise. A Triton
    dtype (``OUT_DTYPE=tl.float16``), recorded as its name ``"triton.language.float16"``,
    is that dtype again."""
    from tunedsl.model.keys import is_triton_dtype, readable_constexpr

    fn: Any = kernel
    while fn is not None and not inspect.isfunction(fn):
        fn = getattr(fn, "fn", None)  # @triton.heuristics -> JITFunction -> function
    scope = getattr(fn, "__globals__", {})
    out = dict(static)
    for name, value in static.items():
        if isinstance(value, str) and value.startswith(_DTYPE_PREFIX):
            import triton.language as tl

            dtype = getattr(tl, value[len(_DTYPE_PREFIX) :], None)
            out[name] = dtype if is_triton_dtype(dtype) else value
        if not (isinstance(value, str) and value.startswith("@jit ")):
            continue
        qualname = value.split(" ")[1]
        found: Any = scope.get(qualname.split(".")[0])
        for part in qualname.split(".")[1:]:
            found = getattr(found, part, None)
        if found is None or readable_constexpr(found) != value:
            module = getattr(fn, "__module__", "?")
            raise LookupError(
                f"`{name}` is the Triton function `{qualname}`, which module {module} no "
                "longer defines at its top level with the same source; tune the site again "
                "(or define the function at the module's top level)"
            )
        out[name] = found
    return out


#: How a record names a Triton dtype given as a constexpr (its repr).
_DTYPE_PREFIX = "triton.language."


def _target_options(
    config: Config, context: dict[str, Any], target: Any, recorded: dict[str, Any]
) -> dict[str, Any]:
    """``config``'s launch options on ``target``, as a launch there has them (``occupancy``
    made a register cap, which the interpreter's launches leave out); ``recorded`` where
    the hints cannot be made concrete for it."""
    from tunedsl.backends.triton_compile import cross_target_facts
    from tunedsl.errors import UsageError
    from tunedsl.model.hints import InfeasibleConfig, hint_fields, launch_options

    hints = context.get("hints")
    static = hints if isinstance(hints, dict) else {}
    # What the launch passed by keyword (tutorial 02's `num_stages=` to a parameter of that
    # name) is an option too, as in Triton's launch; the hints are made the target's.
    fields = hint_fields(config, static)
    passed = {k: v for k, v in recorded.items() if k not in fields}
    try:
        return passed | launch_options(config, static, cross_target_facts(target))
    except (InfeasibleConfig, UsageError, ValueError, TypeError):
        return recorded


def _stale_reason(kernel: Kernel, record: Record) -> str | None:
    """Why a record no longer matches the kernel's current source (None if it does)."""
    from tunedsl.backends import triton as bt
    from tunedsl.backends.kernel_source import line_bound_source_hash, with_defaults

    try:
        info = bt.kernel_info(kernel)
    except Exception:  # no way to tell: compile what the record describes
        return None
    current = {info.source_hash}
    # A record made on a GPU before the lines were left out holds Triton's own hash.
    with contextlib.suppress(Exception):
        current.add(line_bound_source_hash(kernel, info.constexpr_names, info.defaults) or "")
    # A record made under the interpreter holds the interpreter's hash (the kernel's source
    # and the Triton functions it calls, with the parameters' defaults); one made before
    # helpers were hashed, the source.
    with contextlib.suppress(OSError, TypeError):
        interpreted = bt.interpreted_source_hash(kernel)
        current.add(interpreted)
        current.add(with_defaults(interpreted, info.constexpr_names, info.defaults))
        plain: Any = kernel
        text = inspect.getsource(getattr(plain, "fn", plain))
        current.add(hashlib.sha256(text.encode("utf-8")).hexdigest())
    recorded = record.kernel.get("source_hash")
    if recorded and recorded not in current:
        return "the kernel's source changed since it was tuned (the record no longer applies)"
    return None


def _unrebuilt_reason(record: Record, target: Any) -> str | None:
    """Why replay cannot rebuild the record's launch (None if it can): an argument the record
    keeps only as a repr (a ``@triton.jit`` function passed as an epilogue, or another
    object), as the types of a tuple without their values, or as a type Triton does not
    compile from (a host ``TensorDescriptor`` tuned under the interpreter)."""
    from tunedsl.backends import compat
    from tunedsl.backends.triton_compile import parse_target, target_name

    for name, value in record.signature.items():
        if isinstance(value, dict) and "constexpr" in value:
            kept = value["constexpr"]
            if not (
                isinstance(kept, str) and (kept.startswith("JITFunction(") or " at 0x" in kept)
            ):
                continue
            what = f"is an object ({kept}) a record keeps only by name"
        elif isinstance(value, str) and value != "tuple":
            if compat.is_signature_type(value.partition(":")[0]):
                continue
            what = f"is recorded as {value!r}, a type Triton does not compile from"
        else:
            what = "is a tuple, whose values a record does not keep"
        return (
            f"argument `{name}` {what}, so replay cannot rebuild its launch; compile the "
            f"script's @workload instead: tunedsl precompile --target {target_name(parse_target(target))} SCRIPT"
        )
    return None


def _other_backend_reason(record: Record, target: Any) -> str | None:
    """Why the record's specialization does not fit ``target`` (None if it does): it is the
    one a launch on the record's backend computes (under the interpreter, CUDA's), and
    another backend specializes arguments otherwise (HIP adds a buffer-range fact to a
    pointer, ``*fp32:DS`` for CUDA's ``*fp32:D``), so replay would build binaries no launch
    there loads. CUDA's does not depend on the architecture: any ``cuda:`` target replays."""
    from tunedsl.backends.triton_compile import parse_target, target_name

    kind = record.device.get("type")
    made_for = "cuda" if kind == "interpreter" else kind
    target = parse_target(target)
    specialized = any(isinstance(v, str) and ":" in v for v in record.signature.values())
    if not specialized or made_for not in ("cuda", "hip") or made_for == target.backend:
        return None
    where = "under the interpreter" if kind == "interpreter" else f"on a {made_for} GPU"
    return (
        f"it was tuned {where}, so it holds the specialization a {made_for} launch computes "
        f"for its arguments, and a {target.backend} launch specializes them otherwise: replay "
        "would build binaries no launch there loads; compile the script's @workload instead: "
        f"tunedsl precompile --target {target_name(target)} SCRIPT"
    )


def _foreign_option_reason(record: Record) -> str | None:
    """Why a record from elsewhere (a bundle, another Redis client) is not replayed: a launch
    option it gives as text or a list. Triton reads a file (``ir_override``,
    ``extern_libs``) or passes flags to ``ptxas`` (``ptx_options``) from such values, so
    only numbers and flags of someone else's record are compiled; None where it has none."""
    for result in record.results:
        for name, value in result.options.items():
            if value is None or isinstance(value, (bool, int, float)):
                continue
            return (
                f"it came from elsewhere (a bundle, another Redis client) and gives the launch "
                f"option {name}={value!r}; an option of someone else's record is compiled "
                "only as a number or a flag, since Triton may read a file or pass flags to "
                "ptxas from it. If you trust it, tune the site here instead"
            )
    return None


def current_target() -> Any:
    from tunedsl.backends import compat

    return compat.current_target()


def replay_records(
    session: PrecompileSession, summary: Summary, roots: Sequence[str] | None = None
) -> None:
    """Recompile every record's configurations; append reports and errors to ``summary``.
    A record this user measured on this host imports the kernel it names; one from
    elsewhere (``measured_by`` is cleared as it enters: a bundle, another Redis client), only
    a file under ``roots`` (default ``import_roots(())``, the current directory)."""
    from tunedsl.backends.compile_pool import CompileJob, compile_stream
    from tunedsl.backends.triton_compile import is_cache_hit
    from tunedsl.store import records

    target = session.target or current_target()
    roots = list(roots) if roots is not None else import_roots(())
    me = records.this_user()
    # A binary already compiled for an earlier configuration (the same kernel, signature,
    # options and constexprs): None, or why it failed.
    seen: dict[str, str | None] = {}
    imported: dict[str, Any] = {}
    unimportable: dict[str, list[str]] = {}  # file -> the ids of its records
    for path in records.iter_record_files():
        try:
            record = records.read_record_file(path)
        except (OSError, ValueError) as err:
            warn_once(f"bad:{path}", f"ignoring tuning record {path}: {err}")
            continue
        try:
            mine = record.measured_by == me
            kernel = _load_kernel(record.kernel, imported, None if mine else roots)
        except OutsideRoots as outside:
            summary.notes.append(
                f"record {record.id} ({record.site}) skipped: it came from elsewhere (a "
                f"bundle, another Redis client) and names {outside.what} {outside.path}, "
                f"outside the directories replay imports from ({', '.join(roots)}); importing "
                "it would run its top-level code. If you trust it, name the file or its "
                "directory: tunedsl precompile --replay PATH"
            )
            continue
        except ImportFailed as failed:
            unimportable.setdefault(failed.filename, []).append(record.id)
            continue
        except Exception as err:
            summary.errors.append(
                f"record {record.id} ({record.site}): cannot load kernel: {describe_error(err)}"
            )
            continue
        report = SiteReport(f"{record.site} [record {record.id}]", record.key)
        stale = (
            _stale_reason(kernel, record)
            or _unrebuilt_reason(record, target)
            or _other_backend_reason(record, target)
            or (None if mine else _foreign_option_reason(record))
        )
        if stale is not None:
            summary.notes.append(f"record {record.id} ({record.site}) skipped: {stale}")
            continue
        jobs = []
        results: dict[Config, tuple[ConfigResult, str]] = {}
        same: list[tuple[ConfigResult, str]] = []  # the binary of a configuration queued before
        try:
            replayed = replay_jobs(record, kernel, target)
        except LookupError as err:
            summary.errors.append(f"record {record.id} ({record.site}): {err}")
            continue
        for result, run in replayed:
            marker = json.dumps(
                [record.kernel, record.signature, result.options, result.constexprs],
                sort_keys=True,
                default=str,
            )
            if marker in seen or any(m == marker for _, m in results.values()):
                same.append((result, marker))
                continue
            results[result.config] = (result, marker)
            jobs.append(CompileJob(result.config, run))
        for job, outcome in compile_stream(
            jobs, workers=session.workers, timeout_s=session.timeout_s
        ):
            result, marker = results[job.config]
            failure = None
            if isinstance(outcome, BaseException):
                failure = f"{type(outcome).__name__}: {outcome}"
                _count(report, session, result, "failed", failure)
            else:
                _count(report, session, result, "cached" if is_cache_hit(outcome) else "compiled")
            seen[marker] = failure
        for result, marker in same:  # as its binary went: it failed too, or it is built
            failure = seen.get(marker)
            _count(report, session, result, "cached" if failure is None else "failed", failure)
        summary.reports.append(report)
    for filename, ids in unimportable.items():
        cause = imported[filename].cause
        count = f"{len(ids)} record{'s' if len(ids) > 1 else ''} ({', '.join(ids)})"
        summary.errors.append(
            f"{filename}: cannot replay its {count}: importing it to find the kernel ran its "
            f"top-level code, which raised {describe_error(cause)}; keep a script's "
            'own work under `if __name__ == "__main__":`'
        )
