"""The gallery end to end: the real ``tunedsl gallery`` command over the real examples.

Runs on the CPU through the Triton interpreter (TRITON_INTERPRET=1) at the examples' small
CPU sizes, in subprocesses, and checks the report it writes.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from importlib.metadata import version
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
ALL_EXAMPLES = sorted(p.stem for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))


def _version(package: str) -> tuple[int, int]:
    major, minor = version(package).split(".")[:2]
    return int(major), int(minor)


# Triton 3.6's interpreter turns a loop bound over a runtime int into int(one-element array),
# which NumPy 2.4 rejects, so a loop like matmul.py's `range(0, K, BLOCK_K)` cannot run there
# (Triton 3.9's interpreter and compiled 3.6 on a GPU are fine). Every other example still
# must pass.
RUNTIME_LOOP_BOUNDS = ("matmul", "persistent_matmul", "fused_attention")
INTERPRETER_BREAKS_LOOPS = _version("triton") < (3, 7) and _version("numpy") >= (2, 4)
EXAMPLE_NAMES = [
    n for n in ALL_EXAMPLES if not (INTERPRETER_BREAKS_LOOPS and n in RUNTIME_LOOP_BOUNDS)
]


def run_gallery(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TRITON_INTERPRET="1")  # CPU run, even on a machine with a GPU
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", "gallery", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def assert_valid_png(path: Path) -> None:
    """A real PNG: signature, an IHDR with a non-empty image, every chunk's CRC, IEND last."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG signature"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"{path}: bad CRC in chunk {kind!r}"
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND", f"{path}: malformed chunks"
    width, height = struct.unpack(">II", chunks[0][1][:8])
    assert width > 100 and height > 100, f"{path}: {width}x{height} image"
    assert any(kind == b"IDAT" for kind, _ in chunks), f"{path}: no image data"


def table_rows(markdown: str) -> dict[str, list[str]]:
    """Example name -> cells of its row in report.md's table."""
    rows = {}
    for line in markdown.splitlines():
        if line.startswith("| ") and not line.startswith("| Example"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0]] = cells
    return rows


@pytest.fixture(scope="module")
def full_gallery(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("gallery-report")
    only = [] if EXAMPLE_NAMES == ALL_EXAMPLES else [f"--only={n}" for n in EXAMPLE_NAMES]
    with pytest.MonkeyPatch.context() as mp:  # module-scoped: the autouse one is per test
        mp.setenv("TUNEDSL_CACHE_DIR", str(tmp_path_factory.mktemp("gallery-cache")))
        proc = run_gallery("--out", str(out), *only)
    return proc, out


def test_every_example_runs_and_is_correct(full_gallery) -> None:
    proc, out = full_gallery
    assert proc.returncode == 0, proc.stderr
    assert len(ALL_EXAMPLES) >= 6
    assert "Triton interpreter" in proc.stderr  # it says how it runs
    for name in EXAMPLE_NAMES:
        assert f"] {name}" in proc.stderr  # progress for each example

    rows = table_rows((out / "report.md").read_text())
    assert sorted(rows) == EXAMPLE_NAMES
    for name, cells in rows.items():
        _example, _problem, _key, config, time, vs_first, vs_torch, correct = cells
        assert correct == "yes", f"{name}: {cells}"
        assert config.startswith("`") and "=" in config, f"{name}: no configuration: {cells}"
        assert time.endswith(("ms", "µs", " s")), f"{name}: no time: {cells}"
        # The interpreter's times measure Python: no ratio of them is shown as a speed-up.
        assert vs_first == vs_torch == "n/a (interpreter)", f"{name}: {cells}"


def test_report_json_and_results_agree(full_gallery) -> None:
    _, out = full_gallery
    report = json.loads((out / "report.json").read_text())
    assert report["passed"] is True
    assert report["environment"]["interpreted"] is True
    by_name = {e["name"]: e for e in report["examples"]}
    assert sorted(by_name) == EXAMPLE_NAMES
    for name, entry in by_name.items():
        assert entry["status"] == "ok" and entry["returncode"] == 0, entry
        result = entry["result"]
        assert result["correct"] is True, result["check_message"]
        timings = result["timings"]
        assert timings, f"{name}: no per-configuration timings"
        # The chosen configuration is one of the space's, with a measured time, and the
        # first configuration reported is the space's first.
        assert result["config"] in [t["config"] for t in timings]
        assert result["first_config"] == timings[0]["config"]
        assert result["chosen_config_tuned_ms"] is not None
        assert result["time_ms"] > 0 and result["torch_time_ms"] > 0
        assert min(t["time_ms"] for t in timings if t["time_ms"] is not None) > 0


def test_a_plot_per_example(full_gallery) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib (the dev extra)")
    _, out = full_gallery
    for name in EXAMPLE_NAMES:
        assert_valid_png(out / "plots" / f"{name}.png")
    markdown = (out / "report.md").read_text()
    for name in EXAMPLE_NAMES:
        assert f"(plots/{name}.png)" in markdown


BROKEN = 'raise RuntimeError("this example is broken on purpose")\n'
HANGS = "import time\n\ntime.sleep(600)\n"


def test_a_broken_example_does_not_stop_the_others(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    examples.mkdir()
    shutil.copy(EXAMPLES / "vector_add.py", examples / "vector_add.py")
    (examples / "a_broken.py").write_text(BROKEN)
    # A kernel that computes the wrong thing: the check must catch it.
    wrong = (EXAMPLES / "vector_add.py").read_text()
    assert "a + b, mask=mask)" in wrong
    wrong = wrong.replace("a + b, mask=mask)", "a - b, mask=mask)")
    (examples / "c_wrong.py").write_text(
        wrong.replace('Example("vector_add")', 'Example("c_wrong")')
    )

    out = tmp_path / "report"
    proc = run_gallery("--examples", str(examples), "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    rows = table_rows((out / "report.md").read_text())
    assert rows["vector_add"][-1] == "yes"
    assert rows["a_broken"][-1] == "**FAILED**"
    assert rows["c_wrong"][-1] == "**NO**"
    assert "this example is broken on purpose" in proc.stderr  # the reason, in one line
    report = json.loads((out / "report.json").read_text())
    status = {e["name"]: e["status"] for e in report["examples"]}
    assert status == {
        "a_broken": "failed",
        "c_wrong": "wrong",
        "vector_add": "ok",
    }
    assert "MISMATCH" in (out / "logs" / "c_wrong.log").read_text()


def test_a_hanging_example_is_killed_at_the_timeout(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "hangs.py").write_text(HANGS)
    out = tmp_path / "report"
    proc = run_gallery("--examples", str(examples), "--out", str(out), "--timeout", "3")
    assert proc.returncode == 1, proc.stderr
    assert table_rows((out / "report.md").read_text())["hangs"][-1] == "**TIMEOUT**"
    (entry,) = json.loads((out / "report.json").read_text())["examples"]
    assert entry["status"] == "timeout" and entry["seconds"] < 60, entry
    assert "did not finish within 3 s" in proc.stderr


def test_only_runs_the_named_example(tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = run_gallery("--only", "vector_add", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(table_rows((out / "report.md").read_text())) == ["vector_add"]
    assert [e["name"] for e in json.loads((out / "report.json").read_text())["examples"]] == [
        "vector_add"
    ]


def test_only_with_an_unknown_name_lists_the_examples(tmp_path: Path) -> None:
    proc = run_gallery("--only", "vectoradd", "--out", str(tmp_path / "report"))
    assert proc.returncode == 1
    assert "--only vectoradd: no such example" in proc.stderr
    assert "vector_add" in proc.stderr  # the available names


def test_workloads_cross_compile_every_gpu_configuration(tmp_path: Path) -> None:
    """``tunedsl precompile --target cuda:90``: the examples' workloads, at their GPU sizes and
    spaces, compile for an H100 without one (real cubins; no GPU, no interpreter)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    scripts = [str(EXAMPLES / "vector_add.py"), str(EXAMPLES / "histogram.py")]
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", "--target", "cuda:90", *scripts],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counts = {}
    for line in proc.stdout.splitlines():
        for name in ("vadd_kernel", "histogram_kernel"):
            if f"({name})" in line:
                compiled, cached, failed, interpreted = (int(x) for x in line.split()[-4:])
                counts[name] = (compiled + cached, failed, interpreted)
    # The GPU spaces: 4 tiles x 3 num_warps, and 5 tiles x 2 num_warps.
    assert counts == {"vadd_kernel": (12, 0, 0), "histogram_kernel": (10, 0, 0)}, proc.stdout


#: The shared memory one block of an H100 may use (the opt-in maximum, as Triton checks it).
H100_SHARED = 232448


@pytest.mark.slow
def test_the_persistent_matmul_space_fits_an_h100(tmp_path: Path) -> None:
    """Every configuration of the persistent matmul's GPU space, in both dtypes, compiles
    for an H100 (``precompile --target cuda:90``) within its shared memory by Triton's own
    count (the compiled kernels' metadata): the space's constraint keeps out exactly what
    would fail to load. Without a GPU to probe, the space has no optional features."""
    triton_cache = tmp_path / "triton"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(triton_cache)
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "precompile", "--target", "cuda:90",
         str(EXAMPLES / "persistent_matmul.py")],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    metadata = [
        json.loads(path.read_text()) for path in triton_cache.glob("*/tma_matmul_kernel.json")
    ]
    # 44 configurations (tiles, stages, warps, epilogue split, flattening) in fp16 and bf16
    assert len(metadata) == 2 * 44, proc.stdout
    assert {m["name"] for m in metadata} == {"tma_matmul_kernel"}
    over = [m for m in metadata if m["shared"] > H100_SHARED]
    assert not over, [(m["shared"], m.get("num_stages"), m.get("num_warps")) for m in over]
    # the constraint is not far from the limit either: the largest tiles use most of it
    assert max(m["shared"] for m in metadata) > 0.9 * H100_SHARED


def test_a_feature_probe_that_crashes_says_so_and_uses_nothing_it_did_not_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tunedsl.gallery.kit import probe_answer

    # A real child that answers for one feature, then dies as a probe missing a module would.
    child = subprocess.run(
        [sys.executable, "-c",
         "import sys; print('feature warp_specialize yes', flush=True); "
         "sys.exit(\"ModuleNotFoundError: No module named 'platformdirs'\")"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    found = probe_answer("persistent_matmul", child, ("warp_specialize", "num_ctas"))
    assert found == frozenset({"warp_specialize"})
    err = capsys.readouterr().err
    assert "[persistent_matmul] feature warp_specialize yes" in err
    assert "no answer for num_ctas (exit code 1: ModuleNotFoundError" in err


def test_the_feature_probe_imports_nothing_from_a_shared_working_directory(
    tmp_path: Path,
) -> None:
    from tunedsl.gallery.kit import PROBE_FLAG, probe_command

    # Another user's package planted in the directory the gallery runs from: the probe's
    # child (`tunedsl run SCRIPT --probe`) must import the real tunedsl, not this one.
    shared = tmp_path / "shared"
    (shared / "tunedsl").mkdir(parents=True)
    planted = tmp_path / "planted-ran"
    (shared / "tunedsl" / "__init__.py").write_text(f"open({str(planted)!r}, 'w').write('ran')\n")
    (shared / "tunedsl" / "__main__.py").write_text("")
    script = tmp_path / "probe_me.py"
    script.write_text(f"import sys\nprint('feature x yes', sys.argv[1:] == [{PROBE_FLAG!r}])\n")
    child = subprocess.run(
        probe_command(str(script)), cwd=shared, capture_output=True, text=True, timeout=120,
        env={**os.environ, "TRITON_INTERPRET": "1"}, check=False,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-2000:]
    assert "feature x yes True" in child.stdout
    assert not planted.exists()


HANGS_AND_SAYS_WHO = """
import os, pathlib, sys, time
pathlib.Path(os.environ["GALLERY_MARK"]).write_text(str(os.getpid()))
time.sleep(600)
"""


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGTERM"])
def test_an_example_does_not_outlive_a_gallery_killed_while_it_runs(
    tmp_path: Path, signal_name: str
) -> None:
    # The example runs in its own session (so a timeout kills its whole group): a gallery
    # killed (SIGKILL, or SIGTERM that runs no clean-up) left it running to its end.
    import signal
    import time

    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "hangs.py").write_text(HANGS_AND_SAYS_WHO)
    mark = tmp_path / "example-pid"
    env = dict(os.environ, TRITON_INTERPRET="1", GALLERY_MARK=str(mark))
    gallery = subprocess.Popen(
        [sys.executable, "-m", "tunedsl", "gallery", "--examples", str(examples), "--out",
         str(tmp_path / "report")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (mark.exists() and mark.read_text()):
        assert gallery.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    example = int(mark.read_text())
    gallery.send_signal(getattr(signal, signal_name))
    gallery.wait(timeout=60)

    def running() -> bool:
        try:
            state = Path(f"/proc/{example}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    try:
        deadline = time.monotonic() + 30
        while running() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(), "the example runs on after its gallery was killed"
    finally:
        if running():
            os.kill(example, signal.SIGKILL)


@pytest.mark.parametrize("name", ["TUNEDSL_QUIET", "TUNEDSL_NO_AUTO_INTERPRET"])
def test_a_bad_setting_of_every_examples_run_is_named_once_before_any_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # Every example's `tunedsl run` refuses it: the gallery ran each to fail alike.
    monkeypatch.setenv(name, "banana")
    out = tmp_path / "report"
    proc = run_gallery("--only", "vector_add", "--out", str(out))
    assert proc.returncode == 1, proc.stderr  # the gallery's usage errors (as --only's)
    assert proc.stderr.startswith(f"tunedsl: error: environment variable {name}='banana' is not "
                                  "a boolean"), proc.stderr  # fmt: skip
    assert "running" not in proc.stderr and not (out / "report.md").exists(), proc.stderr
