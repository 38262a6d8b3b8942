"""What the sdist and the wheel carry, built the way pip builds them
(the sdist from the checkout, the wheel from the unpacked sdist)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

BUILD = """
import sys
from setuptools import build_meta
print(getattr(build_meta, sys.argv[1])(sys.argv[2]))
"""


def _build(hook: str, out: Path, cwd: Path, env: dict[str, str] | None = None) -> Path:
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, hook, str(out)],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    if env is not None:  # the test reads the build's warnings
        (out / "build.log").write_text(proc.stdout + proc.stderr)
    return out / proc.stdout.strip().splitlines()[-1]


NEW_ENOUGH = (
    "import sys, setuptools; sys.exit(0 if int(setuptools.__version__.split('.')[0]) >= 77 else 3)"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    # pyproject.toml's build requirement; pip would fetch it, this test uses what is here.
    if subprocess.run([sys.executable, "-c", NEW_ENOUGH], capture_output=True).returncode:
        pytest.skip("needs setuptools>=77 (the build requirement) in this environment")
    out = tmp_path_factory.mktemp("dist")
    sdist = _build("build_sdist", out, REPO)
    with tarfile.open(sdist) as tar:
        tar.extractall(out / "src", filter="data")
    (unpacked,) = (out / "src").iterdir()
    wheel = _build("build_wheel", out, unpacked)
    return sdist, wheel


def test_the_sdist_carries_what_a_packager_needs(built) -> None:
    sdist, _ = built
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    for needed in (
        "tests/conftest.py",
        "tests/unit/test_packaging.py",
        "docs/running.md",
        "grammar",
        "CHANGELOG.md",
        "examples/vector_add.py",
        "pyproject.toml",
        "setup.py",
        "tunedsl/runtime/native_fused.c",  # the C part, built when the sdist is installed
    ):
        assert needed in names or any(n.startswith(needed + "/") for n in names), needed
    assert not any("__pycache__" in n for n in names)


def test_the_wheel_ships_the_examples_and_declares_the_cpu_path(built) -> None:
    from tunedsl import __version__

    _, wheel = built
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = zf.read(meta_name).decode()
    examples = {Path(n).name for n in names if n.startswith("tunedsl/examples/")}
    assert {"vector_add.py", "matmul.py", "softmax.py"} <= examples
    requires = re.findall(r"^Requires-Dist: ([^;\n]+)$", meta, re.M)
    assert "numpy>=1.24" in requires  # Triton's interpreter needs it
    assert "torch>=2.10" in requires and "triton>=3.6" in requires
    assert "cloudpickle>=2" in requires  # used by the isolated measurement workers
    assert f"Version: {__version__}" in meta  # one source: tunedsl.__version__
    for minor in (10, 11, 12, 13):
        assert f"Classifier: Programming Language :: Python :: 3.{minor}" in meta
    assert "Project-URL: Source, https://" in meta


def test_the_wheel_is_a_platform_wheel_carrying_the_built_extension(built) -> None:
    _, wheel = built
    assert not wheel.name.endswith("-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert [n for n in names if n.startswith("tunedsl/runtime/_native_fused.")], names


def test_without_a_c_compiler_the_package_still_builds_pure_python(built, tmp_path: Path) -> None:
    """The extension is optional: a failing compiler is a warning, and the wheel is the
    pure-Python package (no fused launch: every call takes the generic path)."""
    sdist, _ = built
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    (unpacked,) = (tmp_path / "src").iterdir()
    env = {**os.environ, "CC": "false", "LDSHARED": "false"}
    wheel = _build("build_wheel", tmp_path, unpacked, env)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert "tunedsl/runtime/native.py" in names
    assert not [n for n in names if "_native_fused" in n]
    log = (tmp_path / "build.log").read_text()
    assert "building 'tunedsl.runtime._native_fused' extension" in log
    assert re.search(r"building extension \"tunedsl.runtime._native_fused\" failed", log), log


def test_readme_links_work_on_the_package_index() -> None:
    readme = (REPO / "README.md").read_text()
    relative = [
        link
        for link in re.findall(r"\]\(([^)]+)\)", readme)
        if not link.startswith(("https://", "http://", "#", "..."))
    ]
    assert relative == []
