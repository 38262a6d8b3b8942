"""``tunedsl cache`` run as a real command in a subprocess, over records made by real tuning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from runtime_helpers import call, record_files, site
from runtime_kernels import vadd

pytestmark = pytest.mark.needs_triton


def tunedsl_cmd(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", *argv],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def make_records() -> list[str]:
    for n in (128, 256):
        a, b = torch.randn(n), torch.randn(n)
        call(site("cli-demo", space={"tile": [64, 128]}), vadd, (a, b, torch.empty(n), n), n)
    return [p.stem for p in record_files()]


def test_ls_show_export_clear_import(tmp_path: Path) -> None:
    digests = make_records()
    assert len(digests) == 2

    out = tunedsl_cmd("ls", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert sorted(r["digest"] for r in rows) == sorted(digests)
    assert all(r["kernel"] == "vadd" and r["site"] == "cli-demo" for r in rows)

    text = tunedsl_cmd("ls")
    assert all(d[:12] in text.stdout for d in digests)

    shown = tunedsl_cmd("show", digests[0][:8])
    assert shown.returncode == 0 and "chosen:" in shown.stdout and "Config(tile=64)" in shown.stdout
    shown_json = json.loads(tunedsl_cmd("show", digests[0][:8], "--json").stdout)
    assert shown_json["digest"] == digests[0]

    missing = tunedsl_cmd("show", "ffffffff")
    assert missing.returncode == 1 and "no tuning record" in missing.stderr

    bundle = tmp_path / "records.json"
    assert tunedsl_cmd("export", str(bundle)).returncode == 0
    assert len(bundle.read_text().splitlines()) == 3  # a header, then a record a line

    cleared = tunedsl_cmd("clear", digests[0][:10])
    assert cleared.returncode == 0 and "removed 1 record" in cleared.stdout
    assert [p.stem for p in record_files()] == [d for d in digests if d != digests[0]]
    assert "removed 1 record" in tunedsl_cmd("clear", "--all").stdout
    assert record_files() == []

    imported = tunedsl_cmd("import", str(bundle))
    assert imported.returncode == 0, imported.stderr
    assert sorted(p.stem for p in record_files()) == sorted(digests)
    # An imported record is used at run time without tuning.
    n = 128
    a, b = torch.randn(n), torch.randn(n)
    c = torch.empty(n)
    res = call(site("cli-demo", space={"tile": [64, 128]}), vadd, (a, b, c, n), n)
    assert res.source == "disk"
    torch.testing.assert_close(c, a + b)
    # Selective clearing.
    assert "removed 0 records" in tunedsl_cmd("clear", "--kernel", "not_a_kernel").stdout
    assert "removed 0 records" in tunedsl_cmd("clear", "--site", "elsewhere").stdout
    assert "removed 2 records" in tunedsl_cmd("clear", "--kernel", "vadd", "--site", "cli-").stdout
    assert record_files() == []


def test_import_validates_everything(tmp_path: Path) -> None:
    """A bundle of the single-document format (earlier releases) is all or nothing."""
    make_records()
    bundle = tmp_path / "records.json"
    tunedsl_cmd("export", str(bundle))
    lines = bundle.read_text().splitlines()[1:]
    data = {"tunedsl_records": 1, "records": [json.loads(line) for line in lines]}
    data["records"][1]["results"][0]["median_ms"] = "fast"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert "removed" in tunedsl_cmd("clear", "--all").stdout
    out = tunedsl_cmd("import", str(bad))
    assert out.returncode == 1 and "record 1 is invalid" in out.stderr and "median_ms" in out.stderr
    assert record_files() == []  # nothing imported
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2, 3]")
    out = tunedsl_cmd("import", str(junk))
    assert out.returncode == 1 and "not a tunedsl records bundle" in out.stderr


def test_ls_lists_read_only_records_of_the_records_path(tmp_path: Path, monkeypatch) -> None:
    digests = make_records()
    shipped, other = tmp_path / "shipped", tmp_path / "other"
    shipped.mkdir()
    other.mkdir()
    files = record_files()
    # One record only in a read-only directory, one in both (the cache's copy wins).
    files[0].rename(shipped / files[0].name)
    (shipped / files[1].name).write_text(files[1].read_text())
    (other / "broken.json").write_text("{")
    monkeypatch.setenv("TUNEDSL_RECORDS_PATH", os.pathsep.join([str(shipped), str(other)]))

    rows = json.loads(tunedsl_cmd("ls", "--json").stdout)
    flags = sorted((r["digest"], r["read_only"], r["shadowed"]) for r in rows)
    assert flags == sorted(
        [(digests[0], True, False), (digests[1], False, False), (digests[1], True, True)]
    )
    text = tunedsl_cmd("ls")
    assert text.stdout.count("(read-only: ") == 2
    assert "shadowed by another record" in text.stdout
    assert "broken.json" in text.stderr
    # `show` finds a record that only a read-only directory holds.
    shown = tunedsl_cmd("show", digests[0][:10])
    assert shown.returncode == 0 and str(shipped) in shown.stdout
    # `clear` only touches the cache.
    assert "removed 1 record" in tunedsl_cmd("clear", "--all").stdout
    assert sorted(p.name for p in shipped.iterdir()) == sorted(f.name for f in files)
