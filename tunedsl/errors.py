"""Errors and warnings of tunedsl: one root exception, every message says what and where.

Every exception here pickles (it may cross a process boundary from a compile worker), so
each defines ``__reduce__`` from its constructor arguments.
"""

from __future__ import annotations

import os
from typing import Any


class TunedslError(Exception):
    """Root of every error tunedsl raises on purpose."""


class TunedslSyntaxError(SyntaxError, TunedslError):
    """A DSL error with the place it happened: ``file:line:col``, the line, a caret and a hint.

    ``lineno`` is 1-based and ``offset`` is the 1-based column, as for ``SyntaxError``;
    ``col`` is the 0-based column for convenience.
    """

    def __init__(
        self,
        message: str,
        filename: str | None = None,
        lineno: int | None = None,
        col: int | None = None,
        source_line: str | None = None,
        hint: str | None = None,
        end_col: int | None = None,
    ) -> None:
        self.msg_only = message
        self.hint = hint
        self.col = col
        self.end_col = end_col
        offset = None if col is None else col + 1
        end_offset = None if end_col is None else end_col + 1
        full = message if not hint else f"{message}\n  hint: {hint}"
        details = (filename, lineno, offset, source_line, lineno, end_offset)
        super().__init__(full, details)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (
                self.msg_only,
                self.filename,
                self.lineno,
                self.col,
                self.text,
                self.hint,
                self.end_col,
            ),
        )

    def render(self) -> str:
        """The error as a user should read it: location, source line, caret, message, hint."""
        where = f"{self.filename or '<unknown>'}:{self.lineno or '?'}:{(self.col or 0) + 1}"
        lines = [f"{where}: error: {self.msg_only}"]
        if self.text:
            text = self.text.rstrip("\n")
            lines.append(f"    {text}")
            if self.col is not None:
                end = self.col + 1
                if self.end_col is not None and self.end_col > self.col:
                    end = self.end_col
                # Under the character on a terminal: a tab stays a tab, a wide character
                # takes two columns, a combining mark none.
                lines.append(
                    "    "
                    + _blank_like(text[: self.col])
                    + "^" * max(1, len(_blank_like(text[self.col : end])))
                )
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


def _blank_like(text: str) -> str:
    """Blanks as wide on a terminal as ``text``: tabs kept, two spaces for an East Asian
    wide character, nothing for a combining mark or a format character."""
    if text.isascii():
        return "".join(c if c == "\t" else " " for c in text)
    import unicodedata

    out = []
    for c in text:
        if c == "\t":
            out.append(c)
        elif unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf"):
            continue
        else:
            out.append("  " if unicodedata.east_asian_width(c) in ("W", "F") else " ")
    return "".join(out)


class TuningError(TunedslError):
    """Tuning could not choose a configuration (for example: every configuration failed)."""

    def __init__(
        self, message: str, failures: dict[str, str] | None = None, key: Any = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.failures = dict(failures or {})
        self.key = key  # the readable key being decided, when known (a site's miss sets it)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.failures, self.key))

    def __str__(self) -> str:
        if not self.failures:
            return self.message
        rows = "\n".join(f"  {cfg}: {why}" for cfg, why in self.failures.items())
        return f"{self.message}\n{rows}"


class UsageError(TunedslError, ValueError):
    """Bad arguments to the runtime API or the CLI; the message names what and how to fix it."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, where tunedsl turned it into an interrupt to stop cleanly (``tunedsl sweep``,
    ``tunedsl precompile --tune``): handled as Ctrl-C is, and the command exits with status
    143."""


class CacheWarning(UserWarning):
    """A cache entry could not be used or written; tunedsl carries on without it."""


class UntestedTritonWarning(UserWarning):
    """The installed Triton is outside the tested versions: tunedsl uses only its public API."""


def at_site(err: BaseException, label: str) -> BaseException:
    """``err`` (a ``UsageError`` or ``TuningError`` a site's miss raised) with its message
    starting at ``label``, the site's ``file:line:col (kernel)``, as every site error does;
    other exceptions, and messages that already start there, are left as they are."""
    if isinstance(err, TuningError):
        if not err.message.startswith(label):
            err.message = f"{label}: {err.message}"
            err.args = (err.message, *err.args[1:])
    elif isinstance(err, UsageError) and err.args and isinstance(err.args[0], str):
        if not err.args[0].startswith(label):
            err.args = (f"{label}: {err.args[0]}", *err.args[1:])
    return err


def callable_name(fn: Any) -> str:
    """How a message names a user's function: its qualified name, or for a lambda
    ``<lambda at file.py:12>`` (a lambda written in a macro's option sits inside the
    expansion's own lambdas, whose qualified name means nothing to the user)."""
    code = getattr(fn, "__code__", None)
    # (by its code: a lambda Dynamo rebuilt is named by its qualified name)
    if code is not None and getattr(code, "co_name", None) == "<lambda>":
        return f"<lambda at {os.path.basename(code.co_filename)}:{code.co_firstlineno}>"
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)
