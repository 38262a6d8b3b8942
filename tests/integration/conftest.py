"""Integration tests run real Triton kernels on the CPU through Triton's interpreter.

TRITON_INTERPRET must be set before triton is imported, so it is set here, at import.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
