"""Golden files: tests/golden/NAME.py expands to tests/golden/NAME.expected.

Re-accept changed output with ``TUNEDSL_ACCEPT_GOLDEN=1 pytest tests/unit/frontend`` and
review the diff; bump ``GRAMMAR_VERSION`` when the expansion of the same input changes.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from tunedsl.frontend.compile import compile_source, expand_source, expand_to_ast

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
INPUTS = sorted(GOLDEN.glob("*.py"))
ACCEPT = os.environ.get("TUNEDSL_ACCEPT_GOLDEN") == "1"


def test_there_are_golden_files() -> None:
    assert len(INPUTS) >= 5


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.stem)
def test_expansion_matches_golden(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    filename = f"golden/{path.name}"
    got = expand_source(source, filename) + "\n"
    if sys.version_info < (3, 11):  # 3.10's ast.unparse writes an argument-less `lambda :`
        got = got.replace("lambda :", "lambda:")
    expected_path = path.with_suffix(".expected")
    if ACCEPT:
        expected_path.write_text(got, encoding="utf-8")
    assert expected_path.exists(), f"no {expected_path.name}: run with TUNEDSL_ACCEPT_GOLDEN=1"
    assert got == expected_path.read_text(encoding="utf-8")
    # the expanded text is plain Python, and the code object builds
    compile(got, filename, "exec", dont_inherit=True)
    compile_source(source, filename)


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.stem)
def test_every_generated_node_points_into_the_source(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = expand_to_ast(source, str(path))
    for node in ast.walk(tree):
        if "lineno" not in node._attributes or isinstance(node, ast.arguments):
            continue
        lineno = getattr(node, "lineno", None)
        assert lineno is not None, f"{type(node).__name__} has no position"
        assert 1 <= lineno <= node.end_lineno <= len(lines)  # type: ignore[attr-defined]
        line_bytes = len(lines[lineno - 1].encode("utf-8"))
        assert 0 <= node.col_offset <= line_bytes  # type: ignore[attr-defined]
