"""The shapes file of ``tunedsl sweep`` and ``tunedsl rules build|check --script``: a JSON
list of objects, each the keyword arguments of one workload call. Read bounded (a regular
file, never a FIFO or ``/dev/zero``); a file that is not such a list is an error naming the
file, and the entry and line that is no object. Before any task runs, each entry is checked
against each workload's parameters (``check_arguments``): an argument a workload does not take,
or one it needs and the entry lacks, is an error naming the entry's line, never a
``TypeError`` of each task."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

from tunedsl.errors import UsageError

#: The largest shapes file read (a million shapes fit in a few tens of MiB).
MAX_SHAPES_BYTES = 64 * 1024 * 1024

_EXAMPLE = '[{"n": 4096}, {"n": 8192}] (each the keyword arguments of one workload call)'


class Shapes(list[dict[str, Any]]):
    """The entries of a shapes file, and the file they were read from (its text, to name
    the line an entry starts on). ``path`` None: no shapes file, one call without arguments.
    ``positions``: each entry's place in the file (a :meth:`sample` keeps some of them)."""

    def __init__(
        self,
        entries: list[dict[str, Any]],
        path: str | None,
        text: str = "",
        positions: Sequence[int] | None = None,
    ) -> None:
        super().__init__(entries)
        self.path, self.text = path, text
        self.positions = tuple(range(len(entries)) if positions is None else positions)

    def where(self, index: int) -> str:
        if self.path is None:
            return "no --shapes file, so each workload is called without arguments"
        at = self.positions[index]
        return f"shapes file {self.path}, line {_line_of(self.text, at)}: entry {at + 1}"

    def sample(self, most: int) -> Shapes:
        """At most ``most`` entries spread evenly over the file, each still named by its
        line in the file (``rules check --sample``)."""
        picked = range(0, len(self), max(1, len(self) // most))[:most]
        entries = [self[i] for i in picked]
        return Shapes(entries, self.path, self.text, [self.positions[i] for i in picked])


def read_shapes(path: str | None) -> Shapes:
    """The shapes file: a JSON list of objects (each the keyword arguments of one call)."""
    if path is None:
        return Shapes([{}], None)
    from tunedsl.store import atomic

    try:  # a regular file of bounded size: never a FIFO that hangs, nor /dev/zero
        text = atomic.read_regular_file(path, MAX_SHAPES_BYTES).decode("utf-8")
        data = json.loads(text, object_pairs_hook=_once_each)
    except (OSError, ValueError) as err:  # ValueError: not UTF-8, not JSON, an int too long
        why = err.strerror if isinstance(err, OSError) and err.strerror else err
        if isinstance(err, FileNotFoundError) and path.lstrip().startswith(("[", "{")):
            why = f"{why}; --shapes names a file: write the JSON into one and name it"
        raise UsageError(f"cannot read shapes file {path}: {why}") from None
    except RecursionError:
        raise UsageError(f"cannot read shapes file {path}: JSON nested too deeply") from None
    if not isinstance(data, list):
        raise UsageError(f"shapes file {path} must hold a JSON list of objects, e.g. {_EXAMPLE}")
    bad = next((i for i, d in enumerate(data) if not isinstance(d, dict)), None)
    if bad is not None:
        shown = json.dumps(data[bad])
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise UsageError(
            f"shapes file {path}, line {_line_of(text, bad)}: entry {bad + 1} is {shown}, not "
            f"an object; the file must hold a JSON list of objects, e.g. {_EXAMPLE}"
        )
    if not data:  # a sweep of no task, or nothing measured, would say it succeeded
        raise UsageError(f"shapes file {path} holds no shapes (an empty list): list {_EXAMPLE}")
    return Shapes(data, path, text)


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # JSON keeps the last of a name given twice: one of the two values was never swept.
    names = [name for name, _ in pairs]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise ValueError(f"an object names {twice!r} twice: give each argument once")
    return dict(pairs)


def check_arguments(shapes: Sequence[dict[str, Any]], workloads: Sequence[Any]) -> None:
    """Each entry of ``shapes`` binds to each workload's parameters (``workloads``: objects
    with ``fn`` and ``qualname``), or a ``UsageError`` names the entry, the argument and
    the workload's parameters. A workload whose signature Python cannot read is not checked."""
    signatures: list[tuple[str, inspect.Signature]] = []
    for wl in workloads:
        try:
            signatures.append((wl.qualname, inspect.signature(wl.fn)))
        except (TypeError, ValueError):
            continue
    for index, shape in enumerate(shapes):
        for name, sig in signatures:
            try:
                sig.bind(**shape)
            except TypeError as err:
                raise UsageError(_unbound(shapes, index, shape, name, sig, err)) from None


def _unbound(
    shapes: Sequence[dict[str, Any]],
    index: int,
    shape: dict[str, Any],
    name: str,
    sig: inspect.Signature,
    err: TypeError,
) -> str:
    params = sig.parameters.values()
    where: Callable[[int], str] | None = getattr(shapes, "where", None)
    shown = json.dumps(shape)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    place = where(index) if where is not None else f"shape {index + 1} ({shown})"
    listed = ", ".join(str(p) for p in params) or "none"
    takes, its = f"workload {name}", f"(its parameters: {listed})"
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        known = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        unknown = [k for k in shape if k not in known]
        if unknown:
            return (
                f"{place} passes {unknown[0]}=, which {takes} does not take {its}: rename "
                "it to one of them or remove it from the entry"
            )
    needed = [
        p.name
        for p in params
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in shape
    ]
    if needed and where is not None and getattr(shapes, "path", "") is None:
        return f"{place}, and {takes} needs {needed[0]}= {its}: list its values in a --shapes file"
    if needed:
        return f"{place} gives no {needed[0]}=, which {takes} needs {its}: add it to the entry"
    return f"{place} does not fit {takes} {its}: {err}"


def tasks_left(left: Sequence[tuple[str, dict[str, Any]]], tasks: Sequence[Any]) -> str:
    """What an interrupted sweep says of its (workload, shape) tasks that did not finish (or
    failed): a sweep run again measures every task anew, so the user passes these alone.
    Where every workload is left at each shape left, the shapes alone; else, per workload,
    the ``--workload`` and ``--shapes`` that run only its tasks left (a workload that
    finished a shape is not tuned there again)."""
    by_workload: dict[str, dict[str, dict[str, Any]]] = {}
    for workload, shape in left:  # in the order of the shapes file, each once
        by_workload.setdefault(workload, {}).setdefault(json.dumps(shape, sort_keys=True), shape)
    if not by_workload:
        return ""
    every = {t.workload for t in tasks}
    shapes = {key for per in by_workload.values() for key in per}
    if set(by_workload) == every and all(set(per) == shapes for per in by_workload.values()):
        first = next(iter(by_workload.values()))
        return (
            f"; a sweep run again measures every shape anew: to sweep only the {len(first)} "
            f"shape(s) left, pass this list as --shapes: {json.dumps(list(first.values()))}"
        )
    runs = "; ".join(
        f"--workload {workload} --shapes {json.dumps(list(per.values()))}"
        for workload, per in by_workload.items()
    )
    return (
        "; a sweep run again measures every task anew: to sweep only the tasks left, run it "
        f"once for each of these (the shapes as a file): {runs}"
    )


def _line_of(text: str, index: int) -> int:
    """The line (from 1) where entry ``index`` of the JSON list ``text`` starts (the text
    parsed whole already: each entry before it is decoded again, once)."""
    decode, pos = json.JSONDecoder().raw_decode, text.index("[") + 1
    for i in range(index + 1):
        while text[pos] in " \t\r\n,":
            pos += 1
        if i == index:
            break
        pos = decode(text, pos)[1]
    return text.count("\n", 0, pos) + 1
