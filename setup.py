"""What pyproject.toml cannot say: the packages with the gallery's examples mapped from the
top-level ``examples/`` into ``tunedsl/examples`` (so a wheel ships them), and the optional C
part of tunedsl, the fused launch (``tunedsl/runtime/native_fused.c``).

Everything else is in pyproject.toml. The extension is optional: where it cannot be built (no
C compiler, no Python headers) the build warns and installs the pure-Python package, whose
fused launch then stays Python (same decisions, slower; ``tunedsl env`` says which runs).
"""

from setuptools import Extension, find_packages, setup

setup(
    packages=[*find_packages(include=["tunedsl", "tunedsl.*"]), "tunedsl.examples"],
    package_dir={"tunedsl.examples": "examples"},
    package_data={"tunedsl": ["py.typed"], "tunedsl.examples": ["*.py"]},
    ext_modules=[
        Extension(
            "tunedsl.runtime._native_fused",
            ["tunedsl/runtime/native_fused.c"],
            optional=True,
        )
    ],
)
