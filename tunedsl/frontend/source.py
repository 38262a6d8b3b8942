"""Source layer: decoding (PEP 263), offset <-> line/column maps and error construction.

Every later stage works on character offsets into one decoded text; this module turns
them into what users and ``ast`` need: 1-based lines, 0-based character columns for
messages, and UTF-8 byte columns for AST nodes.
"""

from __future__ import annotations

import bisect
import errno
import io
import os
import re
import stat
import tokenize

from tunedsl.errors import TunedslSyntaxError

#: The largest source file read: a module is rarely over a few MiB, and a bigger "file" is
#: not one (a link to /dev/zero would otherwise be read until memory ran out).
MAX_SOURCE_BYTES = 64 * 1024 * 1024


def read_source(path: str) -> bytes:
    """A source file's bytes: a regular file of at most ``MAX_SOURCE_BYTES``, opened without
    blocking; OSError otherwise (``not a regular file`` for a FIFO, a device or a directory,
    which would block or never end)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)  # follows a link, as Python's import does
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        data = fh.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise OSError(errno.EFBIG, f"over the {MAX_SOURCE_BYTES}-byte limit of a source file")
    return data


def unreadable_reason(path: str, err: OSError, instead: str = "", command: str = "") -> str:
    """Why ``read_source(path)`` failed, for a message: ``is a directory`` (with the
    ``command`` that takes its files, where one does), ``is a FIFO`` (or a device, a socket:
    no file of source to read; ``instead`` says what to give instead), else the system's
    reason."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if stat.S_ISDIR(mode):
        files = f"{path.rstrip(os.sep) or os.sep}{os.sep}*.py"
        return f"is a directory; name its files: {command} {files}" if command else "is a directory"
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip
    kind = next((name for test, name in kinds if mode and test(mode)), "")
    if kind or err.errno == errno.EINVAL:
        what = f"is {kind}, not a regular file" if kind else "is not a regular file"
        hint = f"; give a source file{', or ' + instead if instead else ''}"
        return f"{what} (reading it could block or never end){hint}"
    return err.strerror or str(err)


# Python counts lines at \r\n, \r and \n only (str.splitlines knows more separators).
_NEWLINE = re.compile(r"\r\n|\r|\n")
# Blanks, comments and line continuations up to the next token.
_NEXT_TOKEN = re.compile(r"(?:[ \t\f\r\n]+|#[^\r\n]*|\\\r?\n)*")


def detect_encoding(source: bytes) -> str:
    """The codec of a module's bytes (PEP 263: coding cookie or BOM, else UTF-8).

    ``tokenize.detect_encoding`` reads at most two lines; it is the stdlib's PEP 263
    implementation (it raises SyntaxError for an unknown codec or a cookie that contradicts
    a BOM).
    """
    return tokenize.detect_encoding(io.BytesIO(source).readline)[0]


def decode_source(source: str | bytes, filename: str = "<string>") -> str:
    """Text of a module as Python reads it: a coding cookie or BOM picks the codec (PEP 263).

    Undecodable bytes raise ``SyntaxError``, as ``compile()`` does.
    """
    if isinstance(source, str):
        return source
    encoding = detect_encoding(source)
    try:
        return source.decode(encoding)
    except UnicodeDecodeError as err:
        lineno = source.count(b"\n", 0, err.start) + 1
        raise SyntaxError(
            f"Non-UTF-8 code or bytes that do not decode as {encoding} ({err.reason} at byte "
            f"{err.start}); declare the encoding (PEP 263)",
            (filename, lineno, None, None),
        ) from err
    except LookupError as err:
        raise SyntaxError(f"unknown encoding: {encoding}", (filename, 1, None, None)) from err


class SourceText:
    """One decoded module with the maps between offsets, lines and columns."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        starts = [0]
        starts.extend(m.end() for m in _NEWLINE.finditer(text))
        self.line_starts = starts

    def line_col(self, offset: int) -> tuple[int, int]:
        """(1-based line, 0-based character column) of a character offset."""
        index = bisect.bisect_right(self.line_starts, offset) - 1
        return index + 1, offset - self.line_starts[index]

    def line_text(self, lineno: int) -> str:
        """The text of a 1-based line, without its line ending."""
        if lineno < 1 or lineno > len(self.line_starts):
            return ""
        start = self.line_starts[lineno - 1]
        end = self.line_starts[lineno] if lineno < len(self.line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def byte_col(self, offset: int) -> tuple[int, int]:
        """(1-based line, UTF-8 byte column) of a character offset, as ``ast`` counts them."""
        lineno, col = self.line_col(offset)
        start = self.line_starts[lineno - 1]
        prefix = self.text[start:offset]
        return lineno, col if prefix.isascii() else len(prefix.encode("utf-8"))

    def offset(self, lineno: int, byte_col: int) -> int:
        """The character offset of an ``ast`` position (1-based line, UTF-8 byte column)."""
        return self.line_starts[lineno - 1] + self.char_col(lineno, byte_col)

    def char_col(self, lineno: int, byte_col: int) -> int:
        """The character column of a UTF-8 byte column on a line."""
        line = self.line_text(lineno)
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def error(
        self, message: str, start: int, end: int | None = None, hint: str | None = None
    ) -> TunedslSyntaxError:
        """A DSL error at the character span ``start:end`` (the caret covers it on one line)."""
        lineno, col = self.line_col(start)
        end_col = None
        if end is not None and end > start:
            end_line, end_col = self.line_col(end)
            if end_line != lineno:
                end_col = len(self.line_text(lineno))
        return TunedslSyntaxError(
            message,
            filename=self.filename,
            lineno=lineno,
            col=col,
            source_line=self.line_text(lineno),
            hint=hint,
            end_col=end_col,
        )

    def python_error(
        self,
        err: SyntaxError,
        seen_text: str | None = None,
        clamp: tuple[int, int] | None = None,
        *,
        byte_columns: bool = False,
    ) -> SyntaxError:
        """Python's own error, moved back onto the user's text.

        ``seen_text`` is the (length-preserving) text Python parsed, whose columns may
        differ from the user's where non-ASCII text was blanked; ``byte_columns`` says the
        error's columns are UTF-8 byte columns (from AST positions). ``clamp`` is the span
        Python parsed on its own: an error in the wrapper text around it moves to the span's
        start, or to the first token after it, where Python would have reported it.
        """
        lineno = err.lineno
        if lineno is None:
            return type(err)(err.msg, (self.filename, None, None, None))
        col = None
        end_lineno = getattr(err, "end_lineno", None)
        end_col = None
        end_offset = getattr(err, "end_offset", None)
        if byte_columns:
            if err.offset is not None:
                col = self.char_col(lineno, err.offset - 1)
            if end_lineno is not None and end_offset is not None and end_offset > 0:
                end_col = self.char_col(end_lineno, end_offset - 1)
        else:
            if err.offset is not None:
                col = self._user_col(lineno, err.offset - 1, seen_text)
            if end_lineno is not None and end_offset is not None and end_offset > 0:
                end_col = self._user_col(end_lineno, end_offset - 1, seen_text)
        if clamp is not None:
            here = (lineno, col or 0)
            if here < self.line_col(clamp[0]):
                lineno, col = self.line_col(clamp[0])
                end_lineno = end_col = None
            elif here >= self.line_col(clamp[1]):
                after = _NEXT_TOKEN.match(self.text, clamp[1])
                lineno, col = self.line_col(after.end() if after else clamp[1])
                end_lineno, end_col = lineno, col + 1
        line = self.line_text(lineno)
        details = (
            self.filename,
            lineno,
            None if col is None else col + 1,
            line + "\n" if line else None,
            end_lineno,
            None if end_col is None else end_col + 1,
        )
        return type(err)(err.msg, details)

    def _user_col(self, lineno: int, col: int, seen_text: str | None) -> int:
        if seen_text is None or seen_text is self.text:
            return col
        seen_line = SourceText(seen_text, self.filename).line_text(lineno)[:col]
        if seen_line.isascii() and self.line_text(lineno).isascii():
            return col
        return self.char_col(lineno, len(seen_line.encode("utf-8")))


def describe_syntax_error(err: SyntaxError, filename: str, source: bytes | None = None) -> str:
    """``err`` as Python prints it, on lines ending in a newline. Python's compile() says
    "source code string cannot contain null bytes" (or that the encoding is missing, for a
    UTF-16 file) without a file or line: then the file, and the line of the first NUL byte,
    are named, with the likely cause."""
    import traceback

    if err.lineno is not None or isinstance(err, TunedslSyntaxError):
        return "".join(traceback.format_exception_only(type(err), err))
    where = filename
    if source is not None and b"\0" in source:
        line = source.count(b"\n", 0, source.index(b"\0")) + 1
        where += f":{line}"
    return (
        f"{where}: {type(err).__name__}: {err.msg}; is it a text file (Python source saved as "
        "UTF-8, not UTF-16 or a binary file)?\n"
    )
