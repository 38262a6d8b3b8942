"""A sweep's local Ray instance is its own (``precompile/ray_instance.py``): ``ray.init()``
without an address joins the cluster that Ray's shared directory names, a file any local
user can write there. Real Ray, a real second local user, real files."""

from __future__ import annotations

import io
import json
import os
import socket
import tempfile
from pathlib import Path

import pytest
import swap_attack

from tunedsl.precompile.sweep import sweep

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "tests" / "integration" / "sweep_fixtures" / "sweep_vadd.py")

# Another user's `ray start` (or the user alone) leaves the address of their cluster in Ray's
# directory, which Ray opens to every user: here, an address nothing answers on.
PLANT_CLUSTER = """
import os, sys
ray_dir, address = sys.argv[1:3]
os.mkdir(ray_dir)
os.chmod(ray_dir, 0o777)
with open(os.path.join(ray_dir, "ray_current_cluster"), "w") as fh:
    fh.write(address)
"""


def test_a_sweep_never_joins_the_ray_cluster_another_user_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `tunedsl sweep` without --ray called `ray.init()`, which joined the cluster named in
    # Ray's shared directory: another user's, whose actors would run the tasks and whose
    # pickled answers this process would load (here it waited on a dead address, then
    # failed: "cannot join a Ray cluster"). Its own instance starts, and keeps nothing in
    # that directory.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    swap_attack.need_second_user()
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with swap_attack.shared_tmp() as base:
        ray_dir = base / "ray"
        swap_attack.attacker_step(PLANT_CLUSTER, str(ray_dir), f"127.0.0.1:{port}")
        monkeypatch.setenv("RAY_TMPDIR", str(base))  # Ray's directory: base/ray
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        shapes = tmp_path / "shapes.json"
        shapes.write_text(json.dumps([{"n": 100}]))
        env = {
            "TRITON_INTERPRET": "1",
            "TUNEDSL_QUIET": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        written, outcomes = sweep(
            SCRIPT, str(shapes), use_ray=True, gpus_per_task=0, actors=1, runner_env=env,
            out=io.StringIO(),
        )  # fmt: skip
        assert [o.error for o in outcomes] == [None] and len(written) == 1
        assert os.listdir(ray_dir) == ["ray_current_cluster"]  # nothing of this sweep's
    left = [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("tunedsl-ray-")]
    assert left == [], "the instance's private directory outlived the sweep"
