"""A workload script that is a module of a package, importing its neighbours relatively
(`from .act import silu`, the layout of a kernel library): `tunedsl sweep` and `tunedsl
precompile` import it by its dotted name from the package's root, as `import` does, and the
records the sweep writes serve the module imported by an application. Imported by its stem,
its relative import failed: `sweep` died with a traceback, `precompile` with an import error.
Real commands in subprocesses, real kernels under the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

ACT = """\
import triton
import triton.language as tl


@triton.jit
def silu(a):
    return a * tl.sigmoid(a)
"""

OPS = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload

from .act import silu


@triton.jit
def silu_mul(x, out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < n
    a = tl.load(x + row * 2 * n + cols, mask=m)
    b = tl.load(x + row * 2 * n + n + cols, mask=m)
    tl.store(out + row * n + cols, silu(a) * b, mask=m)


def run(t, check=True):
    x = torch.randn(t, 64)
    out = torch.empty(t, 32)
    launch = autotune(space=dict(block=[16, 32]),
                      blocks=(t, cdiv(32, $block)),
                      key=t,
                      silu_mul(x, out, 32, BLOCK=$block))
    if check:  # not in the workload: under precompile, sites compile and do not launch
        torch.testing.assert_close(out, torch.nn.functional.silu(x[:, :32]) * x[:, 32:])
    return launch


@workload
def sizes():
    for t in (2, 4):
        run(t, check=False)
"""


def command(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), **env},
        timeout=600,
        check=False,
    )


def test_a_package_module_with_relative_imports_is_swept_and_its_records_serve(
    tmp_path: Path,
) -> None:
    package = tmp_path / "kernlib"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "act.py").write_text(ACT)
    (package / "ops.py").write_text(OPS)
    done = command(tmp_path, "-m", "tunedsl", "sweep", "--no-ray", "kernlib/ops.py")
    assert done.returncode == 0, done.stderr
    assert "1 task, 2 records written, 0 failed" in done.stderr + done.stdout
    served = command(
        tmp_path,
        "-c",
        "import tunedsl.activate\nfrom kernlib.ops import run\nprint(run(4).source, run(3).source)",
    )
    assert served.returncode == 0, served.stderr
    assert served.stdout.split() == ["disk", "tuned"], served.stdout
    done = command(tmp_path, "-m", "tunedsl", "precompile", "kernlib/ops.py", TRITON_INTERPRET="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "import failed" not in done.stdout + done.stderr
    assert "kernlib/ops.py:" in done.stdout and "(silu_mul)" in done.stdout, done.stdout


def test_a_package_whose_init_others_can_write_is_not_imported(tmp_path: Path) -> None:
    """Importing the module by its dotted name runs its packages' ``__init__.py``: one that
    others can write is refused as the script itself would be, naming it and the fix."""
    package = tmp_path / "kernlib"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__init__.py").chmod(0o666)
    (package / "act.py").write_text(ACT)
    (package / "ops.py").write_text(OPS)
    done = command(tmp_path, "-m", "tunedsl", "precompile", "kernlib/ops.py", TRITON_INTERPRET="1")
    assert done.returncode == 1, done.stdout + done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert f"{package / '__init__.py'} is writable by group or others (mode 666)" in said, said
    assert "chmod go-w" in said, said


def test_a_package_module_imported_again_runs_the_file_as_it_is_now(tmp_path: Path) -> None:
    """A process that imports a script again (a sweep's, when the file changed) gets the
    file as it is now, as a script outside a package does, not the module imported first."""
    package = tmp_path / "kernlib"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "version.py").write_text("from . import __name__ as parent\nVERSION = 1\n")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tunedsl.precompile.workload import import_script\n"
        "path = Path(sys.argv[1])\n"
        "first = import_script(path).VERSION\n"
        "path.write_text(path.read_text().replace('VERSION = 1', 'VERSION = 22'))\n"
        "print(first, import_script(path).VERSION)\n"
    )
    done = command(tmp_path, "-c", code, str(package / "version.py"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "22"], done.stdout
