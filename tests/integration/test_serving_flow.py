"""A serving application's kernels tuned ahead of time over the batch sizes it meets, as an
inference engineer walks it from the docs: sweep (interrupted and resumed), build, ship, run.
Real commands in subprocesses, real kernels under the interpreter (kernels_serving.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tunedsl.store import records

pytestmark = pytest.mark.needs_triton

HERE = Path(__file__).parent
SCRIPT = str(HERE / "kernels_serving.py")


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "TRITON_INTERPRET": "1", "TUNEDSL_CACHE_DIR": str(cache)}


def _swept_batches(cache: Path) -> list[int]:
    keys = [records.read_record_file(p).key for p in cache.glob("records/*.json")]
    return sorted(k["args"]["g"]["shape"][0] for k in keys if "g" in k["args"])  # silu_gate


def test_a_sweep_interrupted_half_way_names_the_shapes_left_so_none_is_tuned_twice(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    batches = [1, 2, 3, 5, 8, 13, 21, 34]
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"b": b} for b in batches]))
    argv = [sys.executable, "-m", "tunedsl", "sweep", SCRIPT, "--no-ray", "--shapes"]
    proc = subprocess.Popen(
        [*argv, str(shapes)], env=_env(cache), stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while not any(" 2/8 tasks" in line for line in lines):  # two tasks done, six to go
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    reader.join(timeout=30)
    err = "".join(lines)
    assert proc.returncode == 130, err
    first = _swept_batches(cache)
    assert len(first) >= 2 and len(first) < len(batches), err
    # The message names the shapes it did not sweep, as a list to pass as --shapes.
    found = re.search(r"pass this list as --shapes: (\[.*\])$", err, re.M)
    assert found, err
    left = json.loads(found.group(1))
    assert sorted(s["b"] for s in left) == sorted(set(batches) - set(first)), err
    rest = tmp_path / "rest.json"
    rest.write_text(json.dumps(left))
    again = subprocess.run(
        [*argv, str(rest)], env=_env(cache), capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    # The resumed sweep ran only the shapes left: each batch size tuned once in all.
    tasks = "1 task" if len(left) == 1 else f"{len(left)} tasks"
    assert f"sweep: {tasks}, {2 * len(left)} records written" in again.stdout
    assert _swept_batches(cache) == batches


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rules of kernels_serving.py built from a sweep over batch sizes 1 to 32 (the real
    `tunedsl sweep` and `tunedsl rules build`), in a directory of their own."""
    tmp = tmp_path_factory.mktemp("shipped")
    shapes = tmp / "shapes.json"
    shapes.write_text(json.dumps([{"b": b} for b in (1, 2, 4, 8, 16, 32)]))
    env = _env(tmp / "cache")
    tunedsl = [sys.executable, "-m", "tunedsl"]
    for argv in (
        ["sweep", SCRIPT, "--no-ray", "--shapes", str(shapes)],
        ["rules", "build", "--out", str(tmp / "rules")],
    ):
        done = subprocess.run([*tunedsl, *argv], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    (tmp / "build.txt").write_text(done.stdout + done.stderr)
    return tmp / "rules"


SERVE = """
import sys, warnings
sys.path.insert(0, {here!r})
warnings.simplefilter("always")
import torch
from kernels_serving import silu_and_mul
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    out, res = silu_and_mul(torch.randn(5, 64), torch.randn(5, 64))
for w in seen:
    print("WARNING", w.filename, w.lineno, w.message)
print("SOURCE", res.source)
"""


def _serve(
    rules: Path, cache: Path, here: Path = HERE, module: str = "kernels_serving"
) -> subprocess.CompletedProcess[str]:
    env = {**_env(cache), "TUNEDSL_RECORDS_PATH": str(rules)}
    code = SERVE.format(here=str(here)).replace("from kernels_serving", f"from {module}")
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "fault", ["damaged rule", "directory open to others", "missing directory", "bundle on the path"]
)
def test_a_rule_not_used_warns_at_the_users_site_where_their_filters_apply(
    shipped: Path, tmp_path: Path, fault: str
) -> None:
    rules = tmp_path / "rules"
    shutil.copytree(shipped, rules)
    if fault == "damaged rule":
        for path in rules.glob("*.rule.json"):
            data = json.loads(path.read_text())
            data["families"] = "damaged"
            path.write_text(json.dumps(data))
    elif fault == "directory open to others":
        rules.chmod(0o777)
    elif fault == "missing directory":  # a relative path, run from another directory, say
        shutil.rmtree(rules)
    else:
        shutil.rmtree(rules)
        rules.write_text("[]")
    done = _serve(rules, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "SOURCE tuned" in done.stdout, done.stdout  # not used: the key is tuned
    (warned,) = [line for line in done.stdout.splitlines() if line.startswith("WARNING")]
    # At the line of the user's autotune_launch call in kernels_serving.py, not at
    # tunedsl's own source, so a warnings filter on the user's module applies to it.
    assert warned.startswith(f"WARNING {HERE / 'kernels_serving.py'} "), warned
    assert str(rules) in warned, warned


def test_a_shipped_rule_decides_an_unseen_batch_size_in_a_fresh_cache(
    shipped: Path, tmp_path: Path
) -> None:
    done = _serve(shipped, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "SOURCE rule" in done.stdout and "WARNING" not in done.stdout, done.stdout


def test_a_key_alone_in_its_family_is_said_to_be_never_held_out(shipped: Path) -> None:
    # key=(b, n) with b=1 is a family of its own (an int below 2 of key=): one swept key,
    # which leave-one-key-out cannot hold out. The regrets shown are of the other five.
    build = (shipped.parent / "build.txt").read_text()
    assert (
        "decode_mv:autotune_launch: 1 swept key(s) alone in their family, never held out" in build
    ), build
    assert '"key[0]":1' in build, build
    show = subprocess.run(
        [sys.executable, "-m", "tunedsl", "rules", "show", str(shipped)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    bmv = show[show.index("rule for kernels_serving.py:decode_mv") :]
    assert "over 6 swept keys" in bmv and "1 of them alone in their family, never held out" in bmv
    # silu_and_mul's row count is an int argument: 1 is another kernel to Triton, so that
    # swept key is a family of its own too.
    silu = show[show.index("rule for kernels_serving.py:silu_and_mul") :].split("rule for")[1]
    assert "1 of them alone in their family, never held out" in silu, silu
    assert '"args.T":"==1"' in silu, silu


def test_rules_of_a_script_since_renamed_are_named_once_not_passed_over_in_silence(
    shipped: Path, tmp_path: Path
) -> None:
    # The serving module renamed on its way to the other machine: its sites are new sites
    # (a site's identity holds its file's name), so the rules decide nothing and the key is
    # tuned; one warning names the rule and the fix instead of a silent tuning.
    moved = tmp_path / "app"
    moved.mkdir()
    shutil.copy(HERE / "kernels_serving.py", moved / "serving_layers.py")
    done = _serve(shipped, tmp_path / "cache", moved, "serving_layers")
    assert done.returncode == 0, done.stderr
    assert "SOURCE tuned" in done.stdout, done.stdout
    (warned,) = [line for line in done.stdout.splitlines() if line.startswith("WARNING")]
    assert warned.startswith(f"WARNING {moved / 'serving_layers.py'} "), warned
    assert "is a rule for kernels_serving.py:silu_and_mul:autotune_launch" in warned, warned
    assert "in a file of another name" in warned and "`name=`" in warned, warned


def test_a_bundle_given_to_rules_build_as_records_names_how_to_read_it(tmp_path: Path) -> None:
    # The records shipped as a bundle (`tunedsl cache export`): --records takes directories.
    bundle = tmp_path / "records.json"
    exported = subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", "export", str(bundle)],
        env=_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert bundle.is_file(), exported.stdout + exported.stderr
    argv = ["rules", "build", "--records", str(bundle), "--out", str(tmp_path / "rules")]
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        env=_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert f"--records {bundle}: a file, not a directory" in done.stderr, done.stderr
    assert f"tunedsl cache import {bundle}" in done.stderr, done.stderr
    assert not (tmp_path / "rules").exists()
