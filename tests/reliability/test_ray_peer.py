"""A sweep joins a Ray cluster only where it is not another local user's
(``precompile/ray_peer.py``): a real second user (uid 65534) runs a real ``ray start --head``
whose actors answer with a pickle that runs code in the process that loads it; the sweep
refuses it by ``auto``, by its address and by loopback, and sends it nothing, while a cluster
of the user's own is joined by address and by ``auto``."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import swap_attack
from rel_helpers import running_in_session

from tunedsl.errors import UsageError
from tunedsl.precompile.sweep import sweep

pytestmark = pytest.mark.needs_triton

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "tests" / "integration" / "sweep_fixtures" / "sweep_vadd.py")

# The other user's cluster runs this in each of its processes (their sitecustomize): the
# sweep's actor answers with an object whose unpickling runs a command in the process that
# loads it, and the head reports the victim's Python version (Ray's check reads what the
# head itself wrote).
EVIL_SITE = """
import importlib.abc, importlib.util, os, sys

class _Evil:
    def __reduce__(self):
        return (os.system, ("id > " + os.environ["PWNED"],))

def _patch(mod):
    if mod.__name__ == "tunedsl.precompile.sweep":
        mod._Worker.run = lambda self, task: [_Evil()]
    elif mod.__name__ == "ray._private.utils":
        orig = mod.compute_version_info
        mod.compute_version_info = lambda: (orig()[0], os.environ["FAKE_PY"])

class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in ("tunedsl.precompile.sweep", "ray._private.utils"):
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        orig = spec.loader.exec_module
        def exec_module(module, orig=orig):
            orig(module)
            _patch(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _Hook())
"""

PLANT = "import sys; open(sys.argv[1], 'w').write(sys.argv[2])"

RAY_START = [
    "-c",
    "import sys; from ray.scripts.scripts import main; sys.argv = ['ray', 'start', '--head', "
    "'--block', '--port=0', '--num-cpus=1', '--include-dashboard=false', "
    "'--disable-usage-stats']; main()",
]


@contextmanager
def ray_head(ray_tmp: Path, *, as_other_user: bool, env: dict[str, str]) -> Iterator[str]:
    """A real ``ray start --head`` keeping its files in ``ray_tmp/ray``: its address, read
    from the ``ray_current_cluster`` it writes there; all its processes killed after."""
    env = {"PATH": "/usr/bin:/bin", "RAY_TMPDIR": str(ray_tmp), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", **env}  # fmt: skip
    if as_other_user:
        argv = ["setpriv", f"--reuid={swap_attack.ATTACKER}", f"--regid={swap_attack.ATTACKER}",
                "--clear-groups", swap_attack.SYSTEM_PYTHON, *RAY_START]  # fmt: skip
    else:
        argv = [sys.executable, *RAY_START]
    head = subprocess.Popen(
        argv, env=env, cwd=str(ray_tmp), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    current = ray_tmp / "ray" / "ray_current_cluster"
    try:
        deadline = time.monotonic() + 60
        while not (current.exists() and current.read_text().strip()):
            assert head.poll() is None, head.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "ray start --head did not start in 60 s"
            time.sleep(0.1)
        yield current.read_text().strip()
    finally:
        for line in running_in_session(head.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)
        head.communicate(timeout=30)


def _jobs(ray_tmp: Path, at_least: int = 0) -> list[str]:
    """The drivers that joined the cluster in ``ray_tmp/ray``, as its GCS logged them
    (waiting a few seconds for ``at_least`` of them: the log is written a moment after)."""
    logs = ray_tmp / "ray" / "session_latest" / "logs"
    deadline = time.monotonic() + 10
    while True:
        found = [
            line
            for log in logs.glob("gcs_server*.out")
            for line in log.read_text(errors="replace").splitlines()
            if "Registering job" in line
        ]
        if len(found) >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _shapes(tmp_path: Path) -> str:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 100}]))
    return str(shapes)


RUNNER_ENV = {
    "TRITON_INTERPRET": "1",
    "TUNEDSL_QUIET": "1",
    "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
}


def test_a_sweep_never_joins_another_local_users_ray_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--ray auto` (or RAY_ADDRESS=auto, or the cluster's address) joined the cluster another
    # local user started: its actor's pickled answer ran `id` in the sweep's process, as
    # this user, and that user chose the records. The sweep now asks the kernel who runs the
    # cluster's port and refuses another user's before ray.init sends anything; `auto` is
    # read only from a ray_current_cluster of the user's own.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    swap_attack.need_second_user()
    import ray

    with swap_attack.shared_tmp() as base:
        site = base / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(EVIL_SITE)
        pwned = base / "pwned"
        home = base / "home"
        home.mkdir(mode=0o777)
        purelib = str(Path(ray.__file__).parents[1])
        attacker_env = {
            "HOME": str(home), "PWNED": str(pwned), "RAY_AUTH_MODE": "disabled",
            "FAKE_PY": ".".join(map(str, sys.version_info[:3])),
            "PYTHONPATH": os.pathsep.join([str(site), str(REPO), purelib]),
        }  # fmt: skip
        monkeypatch.setenv("RAY_TMPDIR", str(base))  # `auto` reads base/ray/ray_current_cluster
        monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        with ray_head(base, as_other_user=True, env=attacker_env) as address:
            port = address.rpartition(":")[2]
            tries = [("auto", "auto", r"ray_current_cluster names, and .*\(uid 65534\)")]
            tries += [(a, a, r"is run by nobody \(uid 65534\)")
                      for a in (address, f"127.0.0.1:{port}", f"localhost:{port}")]  # fmt: skip
            tries += [(None, "auto", r"ray_current_cluster names, and .*\(uid 65534\)")]  # env
            # The user's own Ray directory (Ray opens it to all), the other user's file in it
            own = base / "own"
            (own / "ray").mkdir(parents=True)
            (own / "ray").chmod(0o777)
            swap_attack.attacker_step(PLANT, str(own / "ray" / "ray_current_cluster"), address)
            tries += [("auto", str(own), r"was written by nobody \(uid 65534\), not by you")]
            for given, env_address, said in tries:
                if given is None:
                    monkeypatch.setenv("RAY_ADDRESS", env_address)
                elif env_address.startswith("/"):
                    monkeypatch.setenv("RAY_TMPDIR", env_address)
                with pytest.raises(UsageError, match=said) as caught:
                    sweep(SCRIPT, _shapes(tmp_path), ray_address=given, use_ray=True,
                          gpus_per_task=0, actors=1, runner_env=RUNNER_ENV, out=io.StringIO())  # fmt: skip
                assert "Start a cluster of your own" in str(caught.value)
                assert not ray.is_initialized()
            time.sleep(1)  # what a joined driver would have made the GCS log
            assert not pwned.exists(), f"the other user's code ran here: {pwned.read_text()}"
            assert _jobs(base) == [], "a driver joined the other user's cluster"


def test_a_sweep_joins_a_ray_cluster_of_your_own_by_address_and_by_auto(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check lets the user's own cluster (`ray start --head` as themselves) through, also
    # after a sweep on an instance of its own in the same process (Ray had left token mode
    # on in the process, and the cluster, which takes no token, was refused). Joining left
    # Ray's debugger as this process's breakpoint() (PYTHONBREAKPOINT) after the sweep.
    pytest.importorskip("ray", reason="needs Ray: pip install 'tunedsl[ray]'")
    if not hasattr(os, "geteuid"):
        pytest.skip("needs a POSIX host")
    ray_tmp = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: Ray's sockets go below
    try:
        monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
        monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        # A home of the test's own: a token Ray left in ~/.ray/auth_token turns token mode on
        # for the cluster, which a join by address then needs RAY_AUTH_MODE=token to reach.
        home = tmp_path / "home"
        home.mkdir()
        monkeypatch.setenv("HOME", str(home))
        head_env = {"HOME": str(home), "PYTHONPATH": RUNNER_ENV["PYTHONPATH"]}
        monkeypatch.delenv("PYTHONBREAKPOINT", raising=False)
        with ray_head(ray_tmp, as_other_user=False, env=head_env) as address:
            for given in (None, address, "auto"):
                written, outcomes = sweep(
                    SCRIPT, _shapes(tmp_path), ray_address=given, use_ray=True,
                    gpus_per_task=0, actors=1, runner_env=RUNNER_ENV, out=io.StringIO(),
                )  # fmt: skip
                assert [o.error for o in outcomes] == [None] and len(written) == 1, given
                assert "RAY_AUTH_MODE" not in os.environ, given
                assert "PYTHONBREAKPOINT" not in os.environ, given
            assert len(_jobs(ray_tmp, 2)) >= 2, "the sweeps did not run on the user's cluster"
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
