"""``LaunchResult``: what every tuned launch returns (runtime layer).

The configuration launched, where the decision came from, the key, the record and every
configuration's timing; it renders as a table in Jupyter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tunedsl.model.config import Config

if TYPE_CHECKING:
    from tunedsl.store.records import ConfigResult, Record

SOURCES = ("tuned", "memory", "disk", "rule", "default", "empty")


@dataclass(frozen=True)
class LaunchResult:
    """What a tuned launch did.

    - ``config``: the configuration launched;
    - ``source``: where it came from: ``"tuned"`` (tuned by this call), ``"memory"`` (this
      process decided it earlier), ``"disk"`` (a stored record), ``"rule"`` (a shipped rule
      for keys never tuned: docs/shapes.md), ``"default"`` (no record
      and ``mode`` is ``cached``/``off``: the site's ``default=`` or the space's first),
      ``"empty"`` (the grid is empty under every configuration: nothing launched, nothing
      decided, so the key's next call with work tunes it);
    - ``key``: the cache key in readable form; ``digest``: its sha256 (the record's name);
    - ``record``: the tuning record when there is one (``None`` for defaults);
    - ``space``: the site's configurations, in order (``space[0]`` is the first).
    """

    config: Config
    source: str
    key: Mapping[str, Any]
    digest: str = ""
    site: str = ""
    record: Record | None = field(default=None, repr=False)
    space: tuple[Config, ...] = field(default=(), repr=False)

    @property
    def timings(self) -> dict[Config, ConfigResult]:
        """Per-configuration results of the record (median, spread, reps or failure)."""
        return self.record.timings() if self.record is not None else {}

    def time_ms(self, config: Config | Mapping[str, Any] | None = None) -> float | None:
        """Median time in ms of ``config`` (default: the chosen one); None if not measured."""
        if self.record is None:
            return None
        cfg = (
            self.config
            if config is None
            else (config if isinstance(config, Config) else Config(config))
        )
        result = self.record.result_for(cfg)
        return result.median_ms if result is not None and result.status == "ok" else None

    @property
    def first_config(self) -> Config | None:
        return self.space[0] if self.space else None

    def with_source(self, source: str) -> LaunchResult:
        return self.replaced(source=source)

    def replaced(self, **fields: Any) -> LaunchResult:
        """A copy with ``fields`` changed (made on every miss): not dataclasses.replace, which
        inspects the fields, nor the frozen __init__, which sets each one through
        object.__setattr__."""
        new = object.__new__(LaunchResult)
        new.__dict__.update(self.__dict__, **fields)
        return new

    def _table_rows(self) -> list[tuple[str, str, str]]:
        """(mark, configuration, time) per configuration: the record's, else the space's."""
        rows = []
        results = self.timings
        for cfg in results or self.space:
            r = results.get(cfg)
            mark = "*" if cfg == self.config else ""
            if r is None:
                rows.append((mark, str(cfg), "not measured"))
            elif r.status == "ok" and r.median_ms is not None:
                rows.append((mark, str(cfg), f"{r.median_ms:.4f} ms"))
            else:
                rows.append((mark, str(cfg), f"{r.status}: {r.reason}"))
        return rows

    def _repr_markdown_(self) -> str:
        """Jupyter: the decision and every configuration's time (* marks the chosen one).
        The site id, configurations and failure reasons come from records, which a bundle or
        another Redis client may have written: each is shown as literal text, never as
        Markdown or HTML of its own (a link, an image, a tag, another table cell)."""
        site, config = markdown_code(self.site), markdown_code(str(self.config))
        lines = [f"**tunedsl** {site}: {config} ({markdown_text(self.source)})", ""]
        rows = self._table_rows()
        if rows:
            lines += ["| | configuration | median |", "|---|---|---|"]
            lines += [
                f"| {m} | {markdown_code(c, cell=True)} | {markdown_text(t)} |" for m, c, t in rows
            ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from html import escape

        head = (
            f"<p><b>tunedsl</b> <code>{escape(self.site)}</code>: "
            f"<code>{escape(str(self.config))}</code> ({escape(self.source)})</p>"
        )
        rows = self._table_rows()
        if not rows:
            return head
        body = "".join(
            f"<tr><td>{m}</td><td><code>{escape(c)}</code></td><td>{escape(t)}</td></tr>"
            for m, c, t in rows
        )
        return (
            head + "<table><thead><tr><th></th><th>configuration</th><th>median</th></tr>"
            f"</thead><tbody>{body}</tbody></table>"
        )


# ASCII punctuation: every character Markdown or HTML may read as syntax (CommonMark lets
# each be written as a character reference, which is always the character itself).
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_LINE_BREAKS = str.maketrans({"\r": " ", "\n": " "})


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown text: ASCII punctuation as numeric character references
    (no link, image, emphasis, HTML tag or table cell break can start), line breaks as
    spaces (no new paragraph, heading or table row)."""
    return "".join(f"&#{ord(c)};" if c in _PUNCTUATION else c for c in text.translate(_LINE_BREAKS))


def markdown_code(text: str, cell: bool = False) -> str:
    """``text`` as a Markdown code span, whose content is literal: fenced by more backticks
    than its longest run of them, line breaks as spaces; in a table ``cell``, ``|`` escaped
    (GFM splits cells at a pipe even inside a code span)."""
    text = text.translate(_LINE_BREAKS)
    if cell:
        text = text.replace("|", "\\|")
    longest = run = 0
    for c in text:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
