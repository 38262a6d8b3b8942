"""The innermost DSL module of the import chain probe_main -> dsl_helper -> dsl_leaf."""

from tunedsl import autotune  # noqa: F401

NAME = "leaf"
