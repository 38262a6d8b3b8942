"""A second local user (uid 65534) who owns the cache root, or the directory holding it, and
swaps the victim's cache directories for symbolic links to their own, while the victim
loads records and bytecode in a loop. Used by test_security.py and test_record_trust.py.

The attacker's steps run as that user (``setpriv``), with the system Python and only the
standard library; the victim is this checkout's Python, as root (the test's user)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ATTACKER = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
VICTIM_SITE = "victim.py:1:1"
ATTACKER_SITE = "attacker.py:6:6"
DIGEST = "ab" * 32


def need_second_user() -> None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root, to act as a second local user (uid 65534)")
    if shutil.which("setpriv") is None or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip("needs setpriv and /usr/bin/python3 to act as a second local user")


def as_attacker(script: str, *args: str) -> subprocess.Popen[str]:
    cmd = ["setpriv", f"--reuid={ATTACKER}", f"--regid={ATTACKER}", "--clear-groups"]
    return subprocess.Popen(
        [*cmd, SYSTEM_PYTHON, "-I", "-c", script, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
    )  # fmt: skip


def attacker_step(script: str, *args: str) -> None:
    proc = as_attacker(script, *args)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


# Create a directory open to all (the attacker's cache root, or the directory above it) and
# copy the staged files into the attacker's own directory.
SETUP = """
import os, shutil, sys
shared, stage, evil = sys.argv[1:4]
os.mkdir(shared)
os.chmod(shared, 0o777)
shutil.copytree(stage, evil)
"""

# Swap each target for a symbolic link to the attacker's directory and back, until told to
# stop (or a minute has passed); the first swap is announced in `started`.
SWAP = """
import os, sys, time
stop, started, *pairs = sys.argv[1:]
deadline = time.monotonic() + 60
swaps = 0
while not os.path.exists(stop) and time.monotonic() < deadline:
    for i in range(0, len(pairs), 2):
        target, evil = pairs[i], pairs[i + 1]
        aside = target + ".aside"
        try:
            os.rename(target, aside)
        except OSError:
            continue
        os.symlink(evil, target)
        swaps += 1
        if swaps == 1:
            open(started, "w").close()
        os.unlink(target)
        os.rename(aside, target)
print(swaps)
"""

# The victim: first its own record and bytecode entry, then `loads` rounds of loading both
# (as many fresh processes would: the bytecode cache's per-process refusal is reset), running
# whatever code the cache hands back. Prints what it got.
VICTIM = """
import json, sys, warnings
from tunedsl import bytecode
from tunedsl.store import records
sys.path.insert(0, sys.argv[1])
from swap_attack import DIGEST, record_json
phase, source, loads = sys.argv[2], sys.argv[3], int(sys.argv[4])
src = open(source, "rb").read()
if phase == "warm":
    records.save_record(records.Record.from_json(record_json("victim.py:1:1")))
    bytecode.load_or_compile(src, source)
    sys.exit(0)
seen = {"mine": 0, "attacker": 0, "miss": 0, "code": 0}
for _ in range(loads):
    bytecode.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = records.load_record(DIGEST)
        code = bytecode.lookup(src, source)
    for w in caught:
        print("WARNING", w.message, file=sys.stderr)
    if rec is None:
        seen["miss"] += 1
    else:
        seen["mine" if rec.site == "victim.py:1:1" else "attacker"] += 1
    if code is not None:
        seen["code"] += 1
        exec(code, {"__name__": "victim_module"})
print(json.dumps(seen))
"""


def record_json(site: str) -> dict[str, object]:
    """A valid record of DIGEST, told apart by its site."""
    from tunedsl.model.config import Config
    from tunedsl.store import records

    chosen = Config(TILE=32)
    return records.Record(
        site=site,
        digest=DIGEST,
        key={"n": "i"},
        chosen=chosen,
        results=(records.ConfigResult(chosen, "ok", 1.0, 0.05, 10, 0.9, constexprs={"TILE": 32}),),
        kernel={"module": "m", "qualname": "k", "file": "m.py", "source_hash": "0" * 8},
        signature={"n": "i32"},
        device={"type": "cpu"},
        versions={"tunedsl": "0.1.0"},
        context={},
        tuning_s=0.5,
        timestamp=1.0,
    ).to_json()


def stage_pyc(source: Path, stage: Path, marker: Path, more: str = "") -> str:
    """Stage a pyc whose header matches ``source`` and whose code creates ``marker`` (then
    runs ``more``); return the path Python reads ``source``'s compiled code from."""
    import importlib.util
    import marshal

    st = source.stat()
    code = compile(f"open({str(marker)!r}, 'w').close()\n{more}", str(source), "exec")
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
    header += (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    stage.write_bytes(header + marshal.dumps(code))
    stage.chmod(0o644)
    return importlib.util.cache_from_source(str(source))


# The attacker makes the `__pycache__` beside the victim's script in a shared sticky
# directory, and puts there the staged pyc matching the script.
PLANT_PYCACHE = """
import os, shutil, sys
os.mkdir(os.path.dirname(sys.argv[2]))
shutil.copyfile(sys.argv[1], sys.argv[2])
"""


@dataclass
class Outcome:
    seen: dict[str, int]
    stderr: str
    swaps: int
    ran_attacker_code: bool


@contextmanager
def shared_tmp() -> Iterator[Path]:
    """A directory like /tmp (sticky, open to all), removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="tunedsl-swap-", dir="/tmp"))
    base.chmod(0o1777)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def race(base: Path, attacker_owns: str, loads: int) -> Outcome:
    """The swap race. ``attacker_owns``: "root" (the attacker created the cache root, the
    victim's records/ and bytecode/ are swapped) or "parent" (the attacker owns the directory
    holding the victim's own cache root, which is swapped whole)."""
    from tunedsl import bytecode

    marker = base / "pwned"
    source = base / "victim_module.py"
    source.write_text("VALUE = 1\n")
    source.chmod(0o644)
    shared = base / "shared"
    cache = shared if attacker_owns == "root" else shared / "cache"
    # What the attacker plants: a record of the victim's key choosing their configuration,
    # and a bytecode entry under the victim's key whose code writes the marker.
    stage = base / "stage"
    (stage / "records").mkdir(parents=True)
    (stage / "records" / f"{DIGEST}.json").write_text(json.dumps(record_json(ATTACKER_SITE)))
    scratch = base / "scratch"
    old = os.environ.get("TUNEDSL_CACHE_DIR")
    os.environ["TUNEDSL_CACHE_DIR"] = str(scratch)
    try:
        bytecode.reset()
        evil_code = compile(f"open({str(marker)!r}, 'w').write('pwned')\n", str(source), "exec")
        bytecode.store(source.read_bytes(), str(source), evil_code)
    finally:
        os.environ.pop("TUNEDSL_CACHE_DIR")
        if old is not None:
            os.environ["TUNEDSL_CACHE_DIR"] = old
        bytecode.reset()
    shutil.copytree(scratch / "bytecode", stage / "bytecode")
    for path in [stage, *stage.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    evil = base / "evil"
    attacker_step(SETUP, str(shared), str(stage), str(evil))
    if attacker_owns == "root":
        pairs = [str(cache / "records"), str(evil / "records")]
        pairs += [str(cache / "bytecode"), str(evil / "bytecode")]
    else:
        pairs = [str(cache), str(evil)]

    env = {"TUNEDSL_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"}
    here = str(Path(__file__).parent)

    def victim(phase: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-c", VICTIM, here, phase, str(source), str(loads)]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)

    warm = victim("warm")
    assert warm.returncode == 0, warm.stderr
    if attacker_owns == "root":
        for name in ("records", "bytecode"):  # the victim's own (or empty) directories
            (cache / name).mkdir(mode=0o700, exist_ok=True)
    else:  # the victim's own cache root, made by hand: tunedsl makes none in their directory
        cache.mkdir(mode=0o700, exist_ok=True)
    stop, started = base / "stop", base / "started"
    swapper = as_attacker(SWAP, str(stop), str(started), *pairs)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and swapper.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert started.exists(), swapper.communicate(timeout=60)
        done = victim("race")
    finally:
        stop.touch()
        out, err = swapper.communicate(timeout=120)
    assert swapper.returncode == 0, err
    assert done.returncode == 0, done.stderr[-3000:]
    return Outcome(
        json.loads(done.stdout.strip().splitlines()[-1]),
        done.stderr,
        int(out.strip() or 0),
        marker.exists(),
    )
