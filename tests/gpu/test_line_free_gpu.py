"""On a GPU a kernel's records leave out the lines its functions start on: a DSL site tuned
by ``tunedsl precompile --tune`` keeps its records when lines are added above its kernel, and
a record stored under Triton's own hash (lines included, as tunedsl keyed records before) is
found again and moved to the line-free digest. Real scripts, real processes, a real GPU.

Skipped without a GPU (see tests/conftest.py); the lead runs these on the device machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunedsl import knobs

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if knobs.triton_interpret_env() or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]

KERNEL = """\
# ABOVE
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv, workload


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


def add(n):
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    r = autotune(space=dict(tile=[256, 1024], num_warps=[2, 4]), blocks=cdiv(n, $tile),
                 vadd_kernel(a, b, c, n, TILE=$tile))
    return r, c, a, b


@workload
def warm():
    add(1 << 16)


if __name__ == "__main__":
    r, c, a, b = add(1 << 16)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    print("RESULT", r.source, r.site, flush=True)
"""

# The line-bound form: tunedsl's source hash as it was before the lines were left out.
OLD_FORM = """\
import sys
from tunedsl.backends import kernel_source, triton as bt

def with_lines(kernel, fn, constexprs, defaults):
    return kernel_source.line_bound_source_hash(kernel, constexprs, defaults)

bt.kernel_source_hash = with_lines
from tunedsl.cli import main
sys.argv = ["tunedsl", *sys.argv[1:]]
raise SystemExit(main())
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TUNEDSL_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def _run(tmp_path: Path, *argv: str, old: bool = False) -> tuple[str, str]:
    """(source, site) of the script's launch, run by ``tunedsl run`` from another directory."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    head = [sys.executable, str(tmp_path / "old_form.py")] if old else [sys.executable, "-m"]
    command = [*head, *([] if old else ["tunedsl"]), *argv]
    done = subprocess.run(
        command, env=_env(tmp_path), cwd=elsewhere, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT"))
    return line.split()[1], line.split()[2]


def _records(tmp_path: Path) -> dict[str, str]:
    """digest -> the source hash of each record in the cache."""
    records = {}
    for path in (tmp_path / "cache" / "records").glob("*.json"):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "digest" in data and "kernel" in data:
            records[data["digest"]] = data["kernel"]["source_hash"]
    return records


def test_lines_added_above_a_tuned_kernel_keep_its_records_on_a_gpu(tmp_path: Path) -> None:
    """Triton's hash covers the line a kernel starts on, and records were keyed by it: an
    import added above the kernel tuned every key of its site again."""
    project = tmp_path / "project"
    project.mkdir()
    script = project / "lf_gpu.py"
    script.write_text(KERNEL, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", "--tune", str(project)],
        env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _run(tmp_path, "run", str(script)) == ("disk", "lf_gpu.py:add:vadd_kernel")
    script.write_text(KERNEL.replace("# ABOVE", "import os\nimport sys\n\n"), encoding="utf-8")
    assert _run(tmp_path, "run", str(script))[0] == "disk"
    assert len(_records(tmp_path)) == 1


def test_a_record_keyed_by_tritons_hash_with_lines_is_found_and_moved(tmp_path: Path) -> None:
    """A record stored under the line-bound source hash (every record tunedsl tuned on a
    GPU before) is this kernel's where the kernel has not moved: it decides the key and is
    stored again under the line-free digest, the old file removed."""
    (tmp_path / "old_form.py").write_text(OLD_FORM, encoding="utf-8")
    script = tmp_path / "lf_gpu_old.py"
    script.write_text(KERNEL, encoding="utf-8")
    assert _run(tmp_path, "run", str(script), old=True)[0] == "tuned"
    (old_digest, old_hash), *more = _records(tmp_path).items()
    assert not more
    assert _run(tmp_path, "run", str(script))[0] == "disk"
    records = _records(tmp_path)
    assert len(records) == 1 and old_digest not in records
    assert next(iter(records.values())) != old_hash
    assert _run(tmp_path, "run", str(script))[0] == "disk"
