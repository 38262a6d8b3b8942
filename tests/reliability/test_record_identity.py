"""A record read under a digest must be about that lookup: one that states another device,
kernel, Triton version or key (an edited record file, a shipped directory's file, a bundle
line) is a miss with one warning naming where it is and the field that differs, and every
record tunedsl writes still hits. Real tuning in subprocesses, real files, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env, run_python, write_script

TUNE = """
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv


@triton.jit
def vadd_kernel(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


n = 40
a, b, c = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
r = autotune_launch(vadd_kernel, space={"tile": [16, 32]}, effort="quick", name="identity",
                    grid=lambda cfg: (cdiv(n, cfg.tile),),
                    args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile})
assert torch.equal(c, a + b)
print("RESULT", r.source, r.config.tile, r.digest, flush=True)
"""

# Each edit makes the record state another identity than the lookup's, under its digest.
EDITS = {
    "device.name": lambda r: r["device"].__setitem__("name", "NVIDIA A100-SXM4-80GB"),
    "device.type": lambda r: r["device"].__setitem__("type", "cuda"),
    "kernel.source_hash": lambda r: r["kernel"].__setitem__("source_hash", "0" * 64),
    "kernel.qualname": lambda r: r["kernel"].__setitem__("qualname", "other_kernel"),
    "versions.triton": lambda r: r["versions"].__setitem__("triton", "2.0.0"),
    "key": lambda r: r["key"].__setitem__("args", ["edited"]),
}


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[str, str, str]:
    """Run the site once in a subprocess: (its source, the key's digest, its stderr)."""
    script = write_script(tmp_path / "identity_main.py", TUNE)
    out = run_python(script, env, timeout=180)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    _, source, _, digest = line.split()
    return source, digest, out.stderr


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """A real record of the site, tuned once, and its digest."""
    tmp = tmp_path_factory.mktemp("identity")
    cache = tmp / "cache"
    source, digest, _ = _run(tmp, child_env(cache))
    assert source == "tuned"
    return json.loads((cache / "records" / f"{digest}.json").read_text()), digest


def _place(root: Path, digest: str, record: dict) -> Path:
    root.mkdir(parents=True, mode=0o700, exist_ok=True)
    path = root / f"{digest}.json"
    path.write_text(json.dumps(record))
    path.chmod(0o600)
    return path


def test_a_record_tunedsl_wrote_still_hits(tmp_path: Path, tuned: tuple[dict, str]) -> None:
    record, digest = tuned
    _place(tmp_path / "cache" / "records", digest, record)
    source, got, stderr = _run(tmp_path, child_env(tmp_path / "cache"))
    assert (source, got) == ("disk", digest)
    assert "not about this call" not in stderr


@pytest.mark.parametrize("field", list(EDITS))
def test_a_cached_record_of_another_identity_is_a_miss(
    tmp_path: Path, tuned: tuple[dict, str], field: str
) -> None:
    record, digest = tuned
    edited = json.loads(json.dumps(record))
    EDITS[field](edited)
    path = _place(tmp_path / "cache" / "records", digest, edited)
    source, got, stderr = _run(tmp_path, child_env(tmp_path / "cache"))
    assert (source, got) == ("tuned", digest)
    warnings = [line for line in stderr.splitlines() if "not about this call" in line]
    assert len(warnings) == 1, stderr
    assert str(path) in warnings[0] and f"({field} is " in warnings[0], warnings[0]
    # Tuning again replaced the edited record with this machine's own.
    assert json.loads(path.read_text())["device"] == record["device"]


def test_a_shipped_record_of_another_device_is_a_miss(
    tmp_path: Path, tuned: tuple[dict, str]
) -> None:
    record, digest = tuned
    edited = json.loads(json.dumps(record))
    EDITS["device.name"](edited)
    shipped = _place(tmp_path / "shipped", digest, edited)
    env = child_env(tmp_path / "cache", TUNEDSL_RECORDS_PATH=str(tmp_path / "shipped"))
    source, _, stderr = _run(tmp_path, env)
    assert source == "tuned"
    assert f"ignoring tuning record {shipped}: it is not about this call (device.name" in stderr


def test_an_imported_bundle_record_of_another_kernel_is_a_miss(
    tmp_path: Path, tuned: tuple[dict, str]
) -> None:
    record, _ = tuned
    edited = json.loads(json.dumps(record))
    EDITS["kernel.source_hash"](edited)
    bundle = tmp_path / "edited.jsonl"
    bundle.write_text(json.dumps({"tunedsl_records": 2}) + "\n" + json.dumps(edited) + "\n")
    env = child_env(tmp_path / "cache")
    imported = subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", "import", str(bundle)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr
    source, _, stderr = _run(tmp_path, env)
    assert source == "tuned"
    assert "(kernel.source_hash is '" + "0" * 64 + "'" in stderr
