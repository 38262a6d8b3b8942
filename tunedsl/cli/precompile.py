"""``tunedsl precompile PATH... [--workers N] [--target T] [--tune] [--replay]``: warm every cache.

1. Bytecode: every DSL module under PATH (files, or directories searched recursively) is
   expanded and written to the bytecode cache, so later imports do no parsing.
2. Kernel variants: each file that declares a ``@tunedsl.workload`` is imported (with
   ``__name__ != "__main__"``) and its workloads are called inside
   ``tunedsl.precompile.workload.precompile_mode``; every site they reach compiles every
   configuration for the signatures it sees, in parallel. ``--target cuda:90`` cross-
   compiles without a GPU; ``--tune`` (GPU only) also tunes and writes the records.
3. ``--replay``: recompile every (kernel, signature, configuration) in the stored tuning
   records, e.g. after a Triton upgrade.

Progress (compiled, cached, failed) goes to stderr as plain text, a summary table to
stdout; the exit status is 1 if anything failed. A second run finds everything warm.
The work is ``tunedsl.precompile.run.precompile``; this module parses and renders.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, TextIO

from tunedsl.cli.cache_select import terminal_text
from tunedsl.model.config import Config
from tunedsl.precompile.run import Summary, precompile

__all__ = ["Progress", "Summary", "add_parser", "main", "precompile", "render_table"]

DESCRIPTION = (
    "Warm tunedsl's caches ahead of time: expand every DSL module under PATH into the "
    "bytecode cache, and compile every configuration of every site that the scripts' "
    "@tunedsl.workload functions reach (with --tune: tune them too)."
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "precompile",
        help="warm the bytecode and kernel caches ahead of time",
        description=DESCRIPTION,
    )
    parser.add_argument("paths", metavar="PATH", nargs="*", help="DSL scripts or directories")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="compile threads (default: TUNEDSL_COMPILE_WORKERS or the CPU count)",
    )
    parser.add_argument(
        "--target",
        default=None,
        metavar="T",
        help="cross-compile for this GPU, no GPU needed: cuda:90 (H100), cuda:80 (A100)",
    )
    parser.add_argument(
        "--tune",
        action="store_true",
        help="also tune every site and write the records (needs a GPU)",
    )
    parser.add_argument(
        "--gpus",
        type=int,
        default=None,
        metavar="N",
        help="with --tune: one process per GPU, N of them, sharing the keys "
        "(default: every visible GPU)",
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="recompile every configuration found in the stored tuning records (the kernel "
        "of a record from a bundle or another Redis client is imported only from a file "
        "under the PATHs given, else under the current directory)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as one JSON object on stdout instead of a table",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds one configuration may compile, waiting for another process compiling it "
        "included, --tune's compiles too; its records state it (default: "
        "TUNEDSL_CONFIG_TIMEOUT). A compile limit only: --tune's measurement worker still "
        "answers within TUNEDSL_CONFIG_TIMEOUT (default 60 s)",
    )
    return parser


class Progress:
    """One status line on stderr: rewritten in place on a TTY, else a line now and then;
    none with ``quiet`` (``TUNEDSL_QUIET=1``), which only counts."""

    def __init__(self, stream: TextIO, *, quiet: bool = False) -> None:
        self.stream, self.quiet = stream, quiet
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.counts = {"compiled": 0, "cached": 0, "failed": 0, "interpreted": 0, "tuned": 0}
        self._last = 0.0

    def line(self) -> str:
        c = self.counts
        text = f"precompile: compiled {c['compiled']}  cached {c['cached']}  failed {c['failed']}"
        text += f"  interpreted {c['interpreted']}" if c["interpreted"] else ""
        return text + (f"  tuned {c['tuned']}" if c["tuned"] else "")

    def update(self, site: str, config: Config, outcome: str) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        now = time.monotonic()
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\033[K" + self.line() + f"  [{terminal_text(site)}]")
            self.stream.flush()
        elif now - self._last >= 1.0:
            self._last = now
            print(self.line(), file=self.stream, flush=True)

    def done(self) -> None:
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\033[K")
        print(self.line(), file=self.stream, flush=True)


#: Columns a summary row stays within (a long site label is shortened from the left).
TABLE_WIDTH = 100
_COUNTS = ("compiled", "cached", "failed", "interpreted")


def render_table(summary: Summary) -> str:
    """One row per site and signature with its counts, and under it the key, indented, as
    whole ``name=value`` items (``+N more`` counts the rest; ``--json`` has them all)."""
    b = summary.bytecode
    rows: list[tuple[str, list[str], str]] = [
        (
            "bytecode (DSL modules)",
            [str(b["compiled"]), str(b["cached"]), str(b["failed"]), "-"],
            "",
        )
    ]
    for r in summary.reports:
        # A record's site and key (a bundle's, someone else's): control characters escaped.
        what = terminal_text(_site_text(r.site)) + (" (tuned)" if r.tuned else "")
        counts = [str(r.compiled), str(r.cached), str(len(r.failed)), str(r.interpreted)]
        rows.append((what, counts, terminal_text(_key_text(r.key, TABLE_WIDTH - 2))))
    counts_width = sum(len(c) + 2 for c in _COUNTS)
    width = min(max(len("what"), *(len(w) for w, _, _ in rows)), TABLE_WIDTH - counts_width)
    widths = [width] + [len(c) for c in _COUNTS]
    lines = [
        "  ".join(["what".ljust(width), *_COUNTS]),
        "  ".join("-" * w for w in widths),
    ]
    for what, counts, key in rows:
        cells = [_fit(what, width).ljust(width)]
        cells += [c.rjust(w) for c, w in zip(counts, widths[1:], strict=True)]
        lines.append("  ".join(cells))
        if key:
            lines.append(f"  {key}")
    return "\n".join(lines)


def _fit(text: str, width: int) -> str:
    """``text`` in ``width`` columns: a long path loses its first directories (whole ones
    where it can), never its file name and line."""
    if len(text) <= width:
        return text
    tail = text[len(text) - width + 3 :]
    cut = tail.find("/")
    return "..." + (tail[cut:] if 0 <= cut < tail.find(":") else tail)


def _lines(text: str) -> str:
    """``text`` with the control characters of each line escaped (a record's site, key or
    error could carry escape sequences that rewrite the screen)."""
    return "\n".join(terminal_text(line) for line in text.split("\n"))


def _site_text(site: str) -> str:
    # Sites are labelled by absolute path; relative to the working directory reads better.
    path, sep, rest = site.partition(":")
    if sep and os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:  # another drive on Windows
            rel = path
        if not rel.startswith(".."):
            return f"{rel}{sep}{rest}"
    return site


def _key_items(key: Any) -> list[str]:
    """``name=value`` items of a key: a record's readable key (``args``, ``user_key``,
    ``prune``), a plain mapping, or (from a site that cannot name its arguments) the
    parts of a call key."""
    if isinstance(key, dict) and isinstance(key.get("args"), dict):
        # `key=` and what `prune=` reads first: they are what tells a site's rows apart
        # (the arguments of a site with `key=` are mostly alike), and items past the
        # width are only counted.
        items = [f"key={_value_text(key['user_key'])}"] if "user_key" in key else []
        for name, v in (key.get("prune") or {}).items():
            items.append(f"prune:{name}={_value_text(v)}")
        return items + [f"{name}={_value_text(v)}" for name, v in key["args"].items()]
    if isinstance(key, dict):
        return [f"{k}={_value_text(v)}" for k, v in key.items()]
    if isinstance(key, tuple | list):
        return [_value_text(v) for v in key]
    return [_value_text(key)]


def _value_text(value: Any) -> str:
    """One argument as the key sees it, short: ``float16[64x32]``, ``i16``, a constexpr's
    value, a non-contiguous stride pattern after a slash (``float32[8x8]/1s``)."""
    if isinstance(value, dict):
        if "constexpr" in value:
            return _value_text(value["constexpr"])
        if "dtype" in value:
            text = str(value["dtype"]).removeprefix("torch.")
            if "shape" in value:
                text += "[" + "x".join(str(d) for d in value["shape"]) + "]"
            stride = value.get("stride")
            if isinstance(stride, str) and stride and stride != "s" * (len(stride) - 1) + "1":
                text += f"/{stride}"
            return text
        if "value" in value:
            return _value_text(value["value"])
        return "{" + ", ".join(f"{k}={_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple | list):
        return "(" + ",".join(_value_text(v) for v in value) + ")"
    text = str(value).removeprefix("torch.")
    return text if len(text) <= 40 else text[:37] + "..."


def _key_text(key: Any, width: int = TABLE_WIDTH - 2) -> str:
    """The key in ``width`` columns: whole ``name=value`` items only, never cut inside
    one; items past the width are counted instead (``--json`` has the full key)."""
    if key is None:
        return ""
    items = _key_items(key)
    shown: list[str] = []
    for n, item in enumerate(items):
        rest = len(items) - n - 1
        text = "{" + ", ".join([*shown, item]) + (f", +{rest} more" if rest else "") + "}"
        if len(text) > width:  # the previous round's text, with this item counted, fits
            return "{" + ", ".join([*shown, f"+{rest + 1} more"]) + "}"
        shown.append(item)
    return "{" + ", ".join(shown) + "}"


def tuned_text(summary: Summary) -> str:
    """What ``--tune`` did: keys tuned (records written) and keys a stored record decided."""
    from tunedsl.store import paths

    tuned = sum(r.tuned for r in summary.reports)
    known = sum(1 for r in summary.reports if not r.tuned and r.cached)
    sites = len({r.site for r in summary.reports if r.tuned})
    if not summary.reports:
        return "tuned nothing: no workload called a site"
    text = f"tuned {tuned} key{'s' if tuned != 1 else ''}"
    if tuned:
        text += f" of {sites} site{'s' if sites != 1 else ''} (records in {paths.records_dir()})"
    if known:
        text += f"; {known} already had a record"
    return text


def summary_json(summary: Summary, seconds: float) -> dict[str, Any]:
    """``--json``: everything the table and the notes say, machine-readable."""
    from tunedsl.model.keys import json_safe

    return {
        "ok": not summary.failed,
        "bytecode": dict(summary.bytecode),
        "sites": [
            {
                "site": r.site,
                "key": json_safe(r.key),
                "compiled": r.compiled,
                "cached": r.cached,
                "failed": dict(r.failed),
                "interpreted": r.interpreted,
                "tuned": r.tuned,
                "hint": r.hint,
            }
            for r in summary.reports
        ],
        "workload_files": summary.workload_files,
        "notes": list(summary.notes),
        "errors": list(summary.errors),
        "seconds": round(seconds, 3),
    }


def main(args: argparse.Namespace) -> int:
    if not args.paths and not args.replay:
        print("tunedsl precompile: error: give at least one PATH, or --replay", file=sys.stderr)
        return 2
    if args.workers is not None and args.workers < 1:
        print("tunedsl precompile: error: --workers must be at least 1", file=sys.stderr)
        return 2
    if args.gpus is not None and (args.gpus < 1 or not args.tune):
        print("tunedsl precompile: error: --gpus N needs --tune and N >= 1", file=sys.stderr)
        return 2
    if args.timeout is not None:
        from tunedsl.errors import UsageError
        from tunedsl.knobs import finite_number

        try:
            finite_number(args.timeout, "--timeout", unit=" of seconds")
        except UsageError as err:
            print(f"tunedsl precompile: error: {err}", file=sys.stderr)
            return 2
    # precompile decides about the interpreter itself (compiling is its job): importing the
    # scripts through the import hook (its processes' too) must not turn it on behind
    # --target's back. Only while the command runs: called in a process that goes on (a
    # `tunedsl run` it starts later, its own import hook), each is as it was again after.
    values: dict[str, str | None] = {"TUNEDSL_NO_AUTO_INTERPRET": "1"}
    if args.target:
        from tunedsl import knobs

        # Triton imported in interpreter mode cannot compile; nothing runs here anyway.
        values["TRITON_INTERPRET"] = None
        if knobs.triton_interpret_env():
            print("tunedsl precompile: --target given: ignoring TRITON_INTERPRET", file=sys.stderr)
    from tunedsl.environ import environ_set

    with environ_set(values):
        return _precompile_command(args)


def _precompile_command(args: argparse.Namespace) -> int:
    from tunedsl import knobs
    from tunedsl.errors import UsageError

    if args.target:  # every compile checks it: said once here, before any work
        from tunedsl.backends.triton_cache import check_triton_cache
        from tunedsl.backends.triton_compile import checked_target

        try:
            checked_target(args.target)
            check_triton_cache()
        except UsageError as err:
            print(f"tunedsl precompile: error: {err}", file=sys.stderr)
            return 2

    try:
        quiet = knobs.quiet()  # no progress line, as while tuning; a bad value is named
    except UsageError as err:
        print(f"tunedsl precompile: error: {err}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    progress = Progress(sys.stderr, quiet=quiet)
    gpus = None
    if args.tune:
        from tunedsl.precompile.gpu_shards import visible_gpus

        visible = visible_gpus()
        if args.gpus is not None and args.gpus > len(visible):
            print(f"tunedsl precompile: error: --gpus {args.gpus}: this host shows "
                  f"{len(visible)} GPUs ({visible})", file=sys.stderr)  # fmt: skip
            return 2
        gpus = visible[: args.gpus or len(visible)]
    from tunedsl.errors import Terminated
    from tunedsl.precompile.sigterm import sigterm_as_interrupt

    try:
        # SIGTERM stops it as Ctrl-C does (what is compiled or tuned kept, status 143)
        with sigterm_as_interrupt():
            summary = precompile(
                args.paths,
                workers=args.workers,
                target=args.target,
                tune=args.tune,
                replay=args.replay,
                timeout_s=args.timeout,
                on_result=progress.update,
                gpus=gpus,
            )
    except KeyboardInterrupt as err:
        from tunedsl.backends.compile_pool import exit_now_if_compiling

        status, said = (
            (143, "terminated (SIGTERM)") if isinstance(err, Terminated) else (130, "interrupted")
        )
        print(f"\ntunedsl: {said}", file=sys.stderr)
        exit_now_if_compiling(status)  # running compiles cannot be stopped: leave now
        return status
    progress.done()
    from tunedsl import bytecode

    if summary.bytecode["compiled"] and not bytecode.writing_enabled():
        summary.notes.append(
            "the bytecode cache is not written in this environment (PYTHONDONTWRITEBYTECODE, "
            "python -B or TUNEDSL_SAFE=bytecode), so expanded modules were not stored"
        )
    if args.json:
        import json

        print(json.dumps(summary_json(summary, time.perf_counter() - start), indent=2))
        return 1 if summary.failed else 0
    print(render_table(summary))
    for note in summary.notes:
        print(_lines(f"note: {note}"))
    for r in summary.reports:
        for cfg, why in r.failed.items():
            what = f"{_key_text(r.key)} tune" if cfg == "tune" else cfg  # the key failed
            print(_lines(f"failed: {r.site} {what}: {why}"))
        if r.hint:
            print(_lines(f"hint: {r.site}: {r.hint}"))
    for error in summary.errors:
        print(_lines(f"error: {error}"))
    if args.tune:
        print(tuned_text(summary))
    compiled = summary.bytecode["compiled"] + sum(r.compiled for r in summary.reports)
    cached = summary.bytecode["cached"] + sum(r.cached for r in summary.reports)
    if compiled == 0 and cached and not summary.failed and not summary.notes:
        print(f"everything was already warm: nothing compiled ({cached} cached)")
    print(f"done in {time.perf_counter() - start:.1f} s")
    return 1 if summary.failed else 0
