"""The fingerprint under which Triton's key is kept (``backends/triton_key_cache.py``): any
change to a file of the package changes it; bytecode caches do not; an installation whose
library it cannot see has none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tunedsl.backends.triton_key_cache import fingerprint, fingerprint_of


def _package(root: Path) -> Path:
    for rel, text in (
        ("__init__.py", ""),
        ("compiler/compiler.py", "x = 1\n"),
        ("backends/nvidia/compiler.py", "y = 2\n"),
        ("_C/libtriton.so", "\0" * 64),
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_every_change_to_a_file_of_the_package_changes_the_fingerprint(tmp_path: Path) -> None:
    root = _package(tmp_path / "triton")
    before = fingerprint_of(str(root), "3.9.0")
    assert before is not None and before == fingerprint_of(str(root), "3.9.0")
    assert fingerprint_of(str(root), "3.9.1") != before

    (root / "compiler" / "__pycache__").mkdir()
    (root / "compiler" / "__pycache__" / "compiler.cpython-311.pyc").write_bytes(b"pyc")
    assert fingerprint_of(str(root), "3.9.0") == before  # bytecode caches are not Triton

    compiler = root / "compiler" / "compiler.py"
    st = compiler.stat()
    compiler.write_text("x = 3\n")  # the same size
    os.utime(compiler, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    edited = fingerprint_of(str(root), "3.9.0")
    assert edited not in (None, before)

    (root / "backends" / "plugin").mkdir()
    (root / "backends" / "plugin" / "compiler.py").write_text("")  # a backend installed into it
    assert fingerprint_of(str(root), "3.9.0") not in (None, before, edited)


def test_an_installation_without_its_library_in_view_has_no_fingerprint(tmp_path: Path) -> None:
    root = _package(tmp_path / "triton")
    (root / "_C" / "libtriton.so").unlink()
    assert fingerprint_of(str(root), "3.9.0") is None
    assert fingerprint_of(str(tmp_path / "triton.zip" / "triton"), "3.9.0") is None


@pytest.mark.needs_triton
def test_the_installed_triton_has_a_fingerprint() -> None:
    assert fingerprint() is not None


def test_a_change_under_a_linked_directory_changes_the_fingerprint(tmp_path: Path) -> None:
    # A Triton installed from its sources for development links its backends and language
    # extras into the package (triton/backends/nvidia -> third_party/nvidia/backend);
    # triton_key() hashes the files it reaches through the link.
    root = _package(tmp_path / "triton")
    outside = tmp_path / "third_party" / "amd" / "backend"
    outside.mkdir(parents=True)
    (outside / "compiler.py").write_text("z = 1\n")
    (root / "backends" / "amd").symlink_to(outside, target_is_directory=True)
    (root / "backends" / "loop").symlink_to(root, target_is_directory=True)  # a cycle ends
    before = fingerprint_of(str(root), "3.9.0")
    assert before is not None

    (outside / "compiler.py").write_text("z = 22\n")
    assert fingerprint_of(str(root), "3.9.0") not in (None, before)
