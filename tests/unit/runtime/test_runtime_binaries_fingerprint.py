"""The installed-Triton fingerprint that keys stored binaries (no triton needed: a fake
installation with a real ``dist-info/RECORD``)."""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from pathlib import Path

import pytest

from tunedsl.backends.triton_binaries import fingerprint_of


def _entry(site: Path, rel: str) -> str:
    data = (site / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def install(site: Path, version: str = "3.6.0", library: bool = True) -> Path:
    """A wheel-style installation of package ``triton`` under ``site``; returns the package."""
    files = {
        "triton/__init__.py": "__version__ = '3.6.0'\n",
        "triton/compiler/compiler.py": "def compile(): ...\n",
        "triton/backends/nvidia/bin/ptxas": "#!/bin/sh\necho ptxas\n",
    }
    if library:
        files["triton/_C/libtriton.so"] = "\x7fELF binary\n"
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    dist = site / f"triton-{version}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    lines = [_entry(site, rel) for rel in files]
    lines += [f"triton-{version}.dist-info/RECORD,,", "triton/__pycache__/x.pyc,,"]
    (dist / "RECORD").write_text("\n".join(lines) + "\n")
    return site / "triton"


def test_a_wheel_install_has_a_stable_fingerprint(tmp_path: Path) -> None:
    package = install(tmp_path)
    first = fingerprint_of(package, "3.6.0")
    assert first is not None and len(first) == 64
    assert fingerprint_of(package, "3.6.0") == first


def test_the_version_and_a_reinstall_change_it(tmp_path: Path) -> None:
    package = install(tmp_path)
    before = fingerprint_of(package, "3.6.0")
    (package / "compiler" / "compiler.py").write_text("def compile(): return 1\n")
    install_again = tmp_path / "triton-3.6.0.dist-info" / "RECORD"
    text = install_again.read_text().splitlines()
    text[1] = _entry(tmp_path, "triton/compiler/compiler.py")
    install_again.write_text("\n".join(text) + "\n")  # as pip writes it on a reinstall
    after = fingerprint_of(package, "3.6.0")
    assert after is not None and after != before
    assert fingerprint_of(package, "3.6.1") not in (None, after)  # the version is hashed too


def test_a_file_edited_in_place_changes_it(tmp_path: Path) -> None:
    package = install(tmp_path)
    before = fingerprint_of(package, "3.6.0")
    library = package / "_C" / "libtriton.so"
    library.write_text("\x7fELF binarY\n")  # same size, new content: a new mtime
    st = library.stat()
    os.utime(library, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert fingerprint_of(package, "3.6.0") not in (None, before)


def test_a_file_of_another_size_than_installed_means_no_fingerprint(tmp_path: Path) -> None:
    package = install(tmp_path)
    (package / "compiler" / "compiler.py").write_text("def compile(): return 'patched'\n")
    assert fingerprint_of(package, "3.6.0") is None


def test_a_missing_file_means_no_fingerprint(tmp_path: Path) -> None:
    package = install(tmp_path)
    (package / "backends" / "nvidia" / "bin" / "ptxas").unlink()
    assert fingerprint_of(package, "3.6.0") is None


def test_without_a_record_or_its_library_there_is_no_fingerprint(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    (bare / "triton").mkdir(parents=True)
    assert fingerprint_of(bare / "triton", "3.6.0") is None  # a source or editable install
    no_library = install(tmp_path / "nolib", library=False)
    assert fingerprint_of(no_library, "3.6.0") is None


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_an_unreadable_record_means_no_fingerprint(tmp_path: Path) -> None:
    package = install(tmp_path)
    record = tmp_path / "triton-3.6.0.dist-info" / "RECORD"
    record.chmod(0)
    try:
        if os.access(record, os.R_OK):
            pytest.skip("running as root: the file stays readable")
        assert fingerprint_of(package, "3.6.0") is None
    finally:
        record.chmod(0o644)
