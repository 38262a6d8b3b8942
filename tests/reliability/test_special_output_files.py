"""An output file named on the command line that is a FIFO or a device (``--bundle
/dev/null``) is refused before any work, and stays what it was: a bundle is written whole
to a temporary file and renamed over its target, which would put a regular file in place of
the device (as root, /dev/null itself). Real commands in subprocesses, a real FIFO."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env

SCRIPT = """
from tunedsl import workload


@workload
def nothing():
    pass
"""


def _tunedsl(cache: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        env=child_env(cache),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(cwd),
        check=False,
    )


@pytest.mark.parametrize("command", ["cache export", "sweep --bundle"])
def test_a_fifo_named_as_the_output_is_refused_and_left_a_fifo(
    tmp_path: Path, command: str
) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    if command == "cache export":
        argv = ["cache", "export", str(fifo)]
    else:
        script = tmp_path / "work.py"
        script.write_text(SCRIPT)
        argv = ["sweep", str(script), "--no-ray", "--bundle", str(fifo)]
    done = _tunedsl(tmp_path / "cache", *argv, cwd=tmp_path)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{fifo}: not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert "sweep:" not in done.stdout  # refused before the sweep ran


def test_an_empty_bundle_name_is_refused_before_the_sweep(tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    done = _tunedsl(
        tmp_path / "cache", "sweep", str(script), "--no-ray", "--bundle", "", cwd=tmp_path
    )
    assert done.returncode == 1 and "--bundle is empty" in done.stderr, done.stdout + done.stderr
    assert "sweep:" not in done.stdout


TUNED = """
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = i < n
    tl.store(c + i, tl.load(a + i, mask=m) + tl.load(b + i, mask=m), mask=m)


a, b = torch.randn(100), torch.randn(100)
c = torch.empty_like(a)
autotune(space=dict(tile=[64, 128]), blocks=cdiv(100, $tile), vadd(a, b, c, 100, TILE=$tile))
"""

# As the second user, in a shared directory: the name the plot was first written to, as
# a link to a file of the victim's.
PLANT_LINK = """
import os, sys
shared, target = sys.argv[1:3]
os.mkdir(os.path.join(shared, "project"))
os.chmod(os.path.join(shared, "project"), 0o777)
os.symlink(target, os.path.join(shared, "project", ".plot.png.tmp.png"))
"""


def test_cache_show_plot_into_a_shared_directory_writes_no_file_by_a_name_known_ahead(
    tmp_path: Path,
) -> None:
    """``cache show ID --plot DIR/plot.png`` drew into ``DIR/.plot.png.tmp.png`` first: in a
    directory another user can write, their link by that name had the plot written over a
    file of the victim's, and then became the plot's name itself."""
    pytest.importorskip("matplotlib")
    import swap_attack

    swap_attack.need_second_user()
    cache = tmp_path / "cache"
    user = tmp_path / "user.py"
    user.write_text(TUNED)
    done = _tunedsl(cache, "run", str(user), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = _tunedsl(cache, "cache", "ls", "--json", cwd=tmp_path)
    ident = json.loads(listed.stdout)[0]["digest"][:12]
    precious = tmp_path / "precious"
    precious.write_text("the victim's own file\n")
    with swap_attack.shared_tmp() as shared:
        swap_attack.attacker_step(PLANT_LINK, str(shared), str(precious))
        plot = shared / "project" / "plot.png"
        shown = _tunedsl(cache, "cache", "show", ident, "--plot", str(plot), cwd=tmp_path)
        assert precious.read_bytes() == b"the victim's own file\n", "the plot was written over it"
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert stat.S_ISREG(os.lstat(plot).st_mode), "the plot's name is the other user's link"
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
