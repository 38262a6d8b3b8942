"""tunedsl's commands and script imports called in a process that goes on (``tunedsl.cli.main``,
``sweep()``, ``import_script``): the process is left as they found it. Real scripts, real
calls in this process, kernels under Triton's interpreter."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

ADD = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune, cdiv


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(c + i, tl.load(a + i, mask=i < n) + tl.load(b + i, mask=i < n), mask=i < n)


def add(a, b):
    c = torch.empty_like(a)
    n = a.numel()
    launch = autotune(space=dict(tile=[256, 512]), blocks=cdiv(n, $tile), vadd(a, b, c, n, TILE=$tile))
    return c, launch


if __name__ == "__main__":
    import json, sys

    a, b = torch.randn(1000), torch.randn(1000)
    c, launch = add(a, b)
    assert torch.allclose(c, a + b)
    if len(sys.argv) > 2:  # what the script saw: the file to write it to
        seen = {"argv": sys.argv, "name": __name__, "path0": sys.path[0]}
        with open(sys.argv[2], "w") as f:
            json.dump(seen, f)
    print("ADD OK", launch.config)
"""

# A sweep script named as a module of the caller's own (`utils`), beside a `config.py`, whose
# workload imports a neighbour only when it runs; one kernel is its own, one the neighbour's.
SWEEP_SCRIPT = """\
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload

WHO = "the sweep directory"


@triton.jit
def double(x, y, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + i, 2 * tl.load(x + i, mask=i < n), mask=i < n)


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


@workload
def run(n=100):
    import inprocess_neighbour  # at call time, from the script's directory

    a, b = torch.randn(n), torch.randn(n)
    c, y = torch.empty(n), torch.empty(n)
    launched = [
        autotune_launch(
            kernel,
            space={"tile": [64, 128]},
            grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=args,
            kwargs=lambda cfg: {"TILE": cfg.tile},
            name=name,
        )
        for kernel, args, name in [
            (inprocess_neighbour.vadd, (a, b, c, n), "inprocess-vadd"),
            (double, (a, y, n), "inprocess-double"),
        ]
    ]
    if None not in launched:  # (precompile compiles and launches nothing)
        assert torch.equal(c, a + b) and torch.equal(y, 2 * a)
"""

NEIGHBOUR = """\
import triton
import triton.language as tl


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(c + i, tl.load(a + i, mask=i < n) + tl.load(b + i, mask=i < n), mask=i < n)
"""


def _app_and_sweeps(tmp_path: Path) -> tuple[Path, Path]:
    """The caller's own `config` and `utils` in ``app/``; ``sweeps/utils.py``, the script,
    beside a `config.py` and the neighbour its workload imports when it runs."""
    app, sweeps = tmp_path / "app", tmp_path / "sweeps"
    app.mkdir()
    sweeps.mkdir()
    (app / "config.py").write_text("WHO = 'the app'\n")
    (app / "utils.py").write_text("WHO = 'the app'\n")
    (sweeps / "config.py").write_text("WHO = 'the sweep directory'\n")
    (sweeps / "utils.py").write_text(SWEEP_SCRIPT)
    (sweeps / "inprocess_neighbour.py").write_text(NEIGHBOUR)
    return app, sweeps


@pytest.fixture
def own_modules(monkeypatch: pytest.MonkeyPatch):
    """The names the tests import as the caller's modules, gone from sys.modules after."""
    names = ("config", "utils", "inprocess_neighbour")
    assert not [n for n in names if n in sys.modules], "taken by another module of the run"
    yield
    for name in names:
        sys.modules.pop(name, None)


def test_precompile_in_process_puts_the_environment_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tunedsl precompile` keeps the import hook off Triton's interpreter only while it runs:
    after it, a `tunedsl run` on a host without a GPU turns the interpreter on again, and
    with --target the caller's TRITON_INTERPRET is as it was."""
    from tunedsl.cli import main

    scripts = tmp_path / "scripts"
    scripts.mkdir()
    add = scripts / "add_dsl.py"
    add.write_text(ADD)
    monkeypatch.delenv("TUNEDSL_NO_AUTO_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TUNEDSL_QUIET", "1")
    assert main(["precompile", str(scripts)]) == 0
    assert "TUNEDSL_NO_AUTO_INTERPRET" not in os.environ
    assert "TRITON_INTERPRET" not in os.environ
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(add)],
        capture_output=True, text=True, env=dict(os.environ), cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and "ADD OK" in done.stdout, done.stderr

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert main(["precompile", "--target", "cuda:90", str(scripts)]) == 0
    assert os.environ.get("TRITON_INTERPRET") == "1"
    assert "TUNEDSL_NO_AUTO_INTERPRET" not in os.environ


def test_sweep_in_process_leaves_sys_path_and_the_callers_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_modules: None
) -> None:
    """A sweep of `sweeps/utils.py` in this process: its workload imports its neighbour when
    it runs, and tunes the neighbour's kernel and its own in an isolated worker (which
    imports both by name); after, sys.path is as before and the caller's `import config` and
    `import utils` find the caller's own."""
    from tunedsl.precompile.sweep import sweep

    app, sweeps = _app_and_sweeps(tmp_path)
    monkeypatch.setenv("TUNEDSL_ISOLATE", "1")
    monkeypatch.setenv("TUNEDSL_QUIET", "1")
    monkeypatch.syspath_prepend(str(app))
    before = list(sys.path)
    written, outcomes = sweep(str(sweeps / "utils.py"), use_ray=False, out=io.StringIO())
    assert [o.error for o in outcomes] == [None]
    assert {r.site for r in written} >= {"inprocess-vadd", "inprocess-double"}, written
    assert sys.path == before
    assert "utils" not in sys.modules
    import config
    import utils

    assert (config.WHO, utils.WHO) == ("the app", "the app")


def test_import_script_takes_a_private_name_and_its_directory_off_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_modules: None
) -> None:
    """``import_script``: the script's module is under a private name (its objects pickle
    by it), its directory is on sys.path while it is imported and while its functions run
    within ``script_on_path``; not after, where a neighbour imported at call time is not
    found (the caller's own modules are found instead)."""
    from tunedsl.precompile.workload import import_script

    app, sweeps = _app_and_sweeps(tmp_path)
    monkeypatch.syspath_prepend(str(app))
    before = list(sys.path)
    module = import_script(sweeps / "utils.py")
    assert sys.path == before
    assert module.__name__.startswith("__tunedsl_precompile_") and "utils" not in sys.modules
    point = pickle.loads(pickle.dumps(module.Point(1, 2)))
    assert type(point) is module.Point and (point.x, point.y) == (1, 2)
    from tunedsl.precompile.script_import import script_on_path

    monkeypatch.setenv("TUNEDSL_QUIET", "1")
    with script_on_path(sweeps / "utils.py"):
        assert sys.path[0] == str(sweeps)
        module.run(n=50)  # imports its neighbour from the script's directory
    assert sys.path == before
    sys.modules.pop("inprocess_neighbour")
    with pytest.raises(ModuleNotFoundError, match="inprocess_neighbour"):
        module.run(n=50)
    import utils

    assert utils.WHO == "the app"


def test_precompile_in_process_leaves_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_modules: None
) -> None:
    """`tunedsl precompile sweeps/` in this process calls the workload (its neighbour
    imported as it runs) and leaves sys.path and the caller's modules as they were."""
    from tunedsl.cli import main

    app, sweeps = _app_and_sweeps(tmp_path)
    monkeypatch.setenv("TUNEDSL_QUIET", "1")
    monkeypatch.syspath_prepend(str(app))
    before = list(sys.path)
    assert main(["precompile", "--json", str(sweeps / "utils.py")]) == 0
    assert sys.path == before and "utils" not in sys.modules
    import config

    assert config.WHO == "the app"


def test_run_in_process_puts_back_argv_main_and_path(tmp_path: Path) -> None:
    """`tunedsl run SCRIPT` called through ``tunedsl.cli.main``: the script sees its own
    argv, ``__main__`` and directory, and the caller has its own back after, as
    ``runpy.run_path`` leaves them."""
    import multiprocessing.spawn as spawn

    from tunedsl.cli import main

    script = tmp_path / "scripts" / "add_run.py"
    script.parent.mkdir()
    script.write_text(ADD)
    seen = tmp_path / "seen.json"
    argv, argv_items, main_module = sys.argv, list(sys.argv), sys.modules["__main__"]
    path, prepare = list(sys.path), spawn.get_preparation_data
    assert main(["run", str(script), "x", str(seen)]) == 0
    assert sys.argv is argv and sys.argv == argv_items
    assert sys.modules["__main__"] is main_module
    assert sys.path == path and spawn.get_preparation_data is prepare
    saw = json.loads(seen.read_text())
    assert saw == {"argv": [str(script), "x", str(seen)], "name": "__main__",
                   "path0": str(script.parent)}  # fmt: skip


def test_main_in_process_leaves_the_warnings_formatter(tmp_path: Path) -> None:
    """``tunedsl.cli.main`` leaves ``warnings.formatwarning`` as it found it, however often it
    is called: the caller's own warnings (from its program, ``sys.argv[0]``) keep their file
    and line."""
    from tunedsl.cli import main

    script = tmp_path / "add_check.py"
    script.write_text(ADD)
    before = warnings.formatwarning
    for _ in range(3):
        assert main(["expand", "--check", str(script)]) == 0
    assert warnings.formatwarning is before
    program = os.path.realpath(sys.argv[0])
    shown = warnings.formatwarning("disk almost full", UserWarning, program, 7)
    assert shown.startswith(f"{program}:7: UserWarning: disk almost full")


def test_the_run_command_leaves_the_script_its_process(tmp_path: Path) -> None:
    """`tunedsl run` as a command puts nothing back: its process ends with the script, and
    a thread of the script still running after the script's last line sees its argv and
    its ``__main__``."""
    script = tmp_path / "threads.py"
    script.write_text(
        "import sys, threading, time\n"
        "def later():\n"
        "    time.sleep(0.5)\n"
        "    print('later', sys.argv, sys.modules['__main__'].__file__ == __file__)\n"
        "threading.Thread(target=later).start()\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script), "a"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"later {[str(script), 'a']} True\n"


SPAWNING = """\
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from tunedsl import workload


def square(x):
    return x * x


@workload
def run():
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as pool:
        assert list(pool.map(square, [1, 2, 3], timeout=120)) == [1, 4, 9]
"""


def test_a_workload_s_spawned_children_import_the_script_by_its_private_name(
    tmp_path: Path,
) -> None:
    """A workload's spawn pool maps a function of the script: the child imports the script
    by its private name, from its file (it was found by its stem on sys.path). In a fresh
    process: spawn reads the parent's ``__main__``, which a test runner's worker may have
    replaced."""
    script = tmp_path / "spawning.py"
    script.write_text(SPAWNING)
    code = (
        "import sys\n"
        "from tunedsl.precompile.run import precompile\n"
        "summary = precompile([sys.argv[1]])\n"
        "print(summary.errors, summary.workload_files)\n"
    )
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "TUNEDSL_QUIET": "1", "PYTHONPATH": repo}
    done = subprocess.run(
        [sys.executable, "-c", code, str(script)], env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "1"], done.stdout + done.stderr
