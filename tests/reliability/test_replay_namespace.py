"""`precompile --replay` imports the kernel module a record names. A record may come from a
colleague's bundle or a shared store, so the module must not be one another user could
have written. A namespace package (a directory without ``__init__.py``) has no file of its
own to check: a second local user (uid 65534) plants ``evilns/mod.py`` in the shared
directory the replay runs from (on ``python -m``'s path), and it must not run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import swap_attack
from rel_helpers import child_env

PLANT = """
import os, sys
base, marker = sys.argv[1:3]
os.mkdir(os.path.join(base, "evilns"))
with open(os.path.join(base, "evilns", "mod.py"), "w") as f:
    f.write(f"open({marker!r}, 'w').write('ran')\\nk = None\\n")
"""


def test_replay_never_imports_a_namespace_package_another_user_planted() -> None:
    swap_attack.need_second_user()
    with swap_attack.shared_tmp() as base:
        marker = base / "ran"
        swap_attack.attacker_step(PLANT, str(base), str(marker))
        record = swap_attack.record_json("kernels.py:1:1")
        record["kernel"] = {
            "module": "evilns.mod",
            "qualname": "k",
            "file": str(base / "gone" / "kernels.py"),  # gone: the module name is used
            "source_hash": "0" * 8,
        }
        bundle = base / "bundle.jsonl"
        bundle.write_text(json.dumps({"tunedsl_records": 2}) + "\n" + json.dumps(record) + "\n")
        env = child_env(base / "victim-cache")
        for argv in (["cache", "import", str(bundle)],
                     ["precompile", "--replay", "--target", "cuda:90"]):  # fmt: skip
            done = subprocess.run(
                [sys.executable, "-m", "tunedsl", *argv], capture_output=True, text=True,
                env=env, cwd=base, timeout=600, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            assert "Traceback" not in done.stderr, done.stderr
        assert not os.path.exists(marker), "replay ran code another user planted"
        text = done.stdout + done.stderr
        assert done.returncode == 1, text
        assert "kernel module evilns.mod not imported" in text, text
        assert f"{base / 'evilns'} is owned by another user (uid 65534)" in text, text
