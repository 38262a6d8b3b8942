"""The shapes file of ``tunedsl sweep`` and ``tunedsl rules build|check --script``: a JSON
list of objects, each the keyword arguments of one workload call. Read bounded (a regular
file, never a FIFO or ``/dev/zero``); a file that is not such a list is an error naming the
file, and the entry and line that is no object."""

from __future__ import annotations

import json
from typing import Any

from tunedsl.errors import UsageError

#: The largest shapes file read (a million shapes fit in a few tens of MiB).
MAX_SHAPES_BYTES = 64 * 1024 * 1024

_EXAMPLE = '[{"n": 4096}, {"n": 8192}] (each the keyword arguments of one workload call)'


def read_shapes(path: str | None) -> list[dict[str, Any]]:
    """The shapes file: a JSON list of objects (each the keyword arguments of one call)."""
    if path is None:
        return [{}]
    from tunedsl.store import atomic

    try:  # a regular file of bounded size: never a FIFO that hangs, nor /dev/zero
        text = atomic.read_regular_file(path, MAX_SHAPES_BYTES).decode("utf-8")
        data = json.loads(text)
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
    return data


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
