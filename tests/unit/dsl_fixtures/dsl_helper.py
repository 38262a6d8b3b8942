"""A DSL module imported by a DSL script; it imports another DSL module in turn."""

import dsl_leaf

from tunedsl import autotune  # noqa: F401 - the macro makes this a DSL module


def describe() -> str:
    return f"helper+{dsl_leaf.NAME}"
