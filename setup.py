"""What pyproject.toml cannot say: the packages with the gallery's examples mapped from the
top-level ``examples/`` into ``tunedsl/examples`` (so a wheel ships them), and the optional C
part of tunedsl, the fused launch (``tunedsl/runtime/native_fused.c``).

Everything else is in pyproject.toml. The extension is optional: where it cannot be built (no
C compiler, no Python headers) the build warns and installs the pure-Python package, whose
fused launch then stays Python (same decisions, slower; ``tunedsl env`` says which runs).
"""

import hashlib
from pathlib import Path

from setuptools import Extension, find_packages, setup

NATIVE_SOURCE = "tunedsl/runtime/native_fused.c"
# The extension carries a digest of its source, so a checkout whose C file changed after the
# build takes the Python path instead of running the old C (tunedsl/runtime/native.py).
NATIVE_DIGEST = hashlib.sha256((Path(__file__).parent / NATIVE_SOURCE).read_bytes()).hexdigest()

setup(
    packages=[*find_packages(include=["tunedsl", "tunedsl.*"]), "tunedsl.examples"],
    package_dir={"tunedsl.examples": "examples"},
    package_data={"tunedsl": ["py.typed"], "tunedsl.examples": ["*.py"]},
    ext_modules=[
        Extension(
            "tunedsl.runtime._native_fused",
            [NATIVE_SOURCE],
            define_macros=[("TUNEDSL_SOURCE_DIGEST", f'"{NATIVE_DIGEST}"')],
            optional=True,
        )
    ],
)
