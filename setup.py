"""The optional C part of tunedsl: the fused launch (``tunedsl/runtime/native_fused.c``).

Everything else is in pyproject.toml. The extension is optional: where it cannot be built (no
C compiler, no Python headers) the build warns and installs the pure-Python package, whose
fused launch then stays Python (same decisions, slower; ``tunedsl env`` says which runs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tunedsl.runtime._native_fused",
            ["tunedsl/runtime/native_fused.c"],
            optional=True,
        )
    ]
)
