"""A tunedsl run whose home directory (or ``XDG_CACHE_HOME``) is another user's, as under
``sudo`` keeping the caller's ``HOME``: the cache there is refused, and nothing is created in
that user's directories, nor through a link they planted there. Real files, a real second
user (``setpriv``), a real kernel under the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import swap_attack
from rel_helpers import TUNE_VADD, child_env, write_script

pytestmark = pytest.mark.needs_triton


# The attacker's home: its cache directory open to all, or a link to a directory of the
# victim's (a link in a directory that is not sticky is followed).
PLANT = """
import os, sys
home, how, target = sys.argv[1:4]
os.mkdir(home, 0o755)
if how == "open":
    os.mkdir(os.path.join(home, ".cache"))
    os.chmod(os.path.join(home, ".cache"), 0o777)
else:
    os.symlink(target, os.path.join(home, ".cache"))
"""

# A link planted in a directory open to all but sticky (/tmp), where the victim's missing
# TUNEDSL_CACHE_DIR would be made.
PLANT_IN_TMP = """
import os, sys
os.symlink(sys.argv[2], sys.argv[1])
"""


@pytest.mark.parametrize("how", ["open", "link", "sticky"])
def test_a_cache_under_another_users_home_creates_nothing_there(tmp_path: Path, how: str) -> None:
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        home, victims = base / "home", base / "victims"
        victims.mkdir(mode=0o700)
        swap_attack.attacker_step(PLANT, str(home), how, str(victims))
        env = child_env(tmp_path / "unused")
        del env["TUNEDSL_CACHE_DIR"]
        env.pop("XDG_CACHE_HOME", None)
        env["HOME"] = str(home)
        if how == "sticky":  # base is sticky and open to all, as /tmp
            swap_attack.attacker_step(PLANT_IN_TMP, str(base / "app"), str(victims))
            env["TUNEDSL_CACHE_DIR"] = str(base / "app" / "cache")
        script = write_script(tmp_path / "home_main.py", TUNE_VADD)
        out = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True,
            timeout=300, cwd=str(tmp_path),
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "TUNED" in out.stdout
        assert "owned by another user (uid 65534)" in out.stderr, out.stderr
        made = [
            f"{p} (uid {p.lstat().st_uid})"
            for p in (*home.rglob("*"), *victims.rglob("*"))
            if p.lstat().st_uid == os.getuid() and not p.is_symlink()
        ]
        assert made == []  # (a root-owned `tunedsl` directory was made there, through the link)
