"""State a kernel computes its parameters from, outside its source: a ``@triton.heuristics``
function reading a class's or an object's attribute (``Limits.LIM``, ``cfg.add``) or calling a
global object's method (``policy.lim(n)``), and, under the interpreter, a kernel reaching a
helper or a ``tl.constexpr`` through a class. Edited between processes, each is another kernel,
tuned again, never served the old one's record. State no identity can cover (an environment
variable a heuristic reads) is caught where it matters: a record's choice that no longer
launches is refused for the key, with a warning naming the record, and the key tuned again.

Real kernels under Triton's interpreter, the user's modules written as files and imported
afresh for each "process" (``new_process``: the sites' memory cleared, the records kept).
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from runtime_helpers import new_api_process

from tunedsl import Config

KERNEL = """
import os

import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv
{imports}


@triton.heuristics({{"LIM": lambda args: {heuristic}}})
@triton.jit
def capped(dst, src, n, TILE: tl.constexpr, LIM: tl.constexpr):
    tl.static_assert(TILE <= LIM)
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(dst + i, tl.load(src + i, mask=i < n) + LIM, mask=i < n)


def run(dst, src):
    n = dst.numel()
    return autotune_launch(capped, space=dict(TILE=[64, 128]), grid=lambda c: (cdiv(n, c.TILE),),
                           args=(dst, src, n), kwargs=lambda c: {{"TILE": c.TILE}}, name="state")
"""

# Each form: the state module's text for a limit of 128 (edited to 64), and the heuristic that
# reads it, through the names the kernel's module imports (``from state import *`` and
# ``import state``).
FORMS = {
    "class attribute": ("class Limits:\n    LIM = 128\n", "Limits.LIM"),
    "instance attribute, through a module": (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Cfg:\n    lim: int\n\n\n"
        "cfg = Cfg(lim=128)\n",
        "state.cfg.lim",
    ),
    "method of an object": (
        "class Policy:\n    def lim(self, n):\n        return 128\n\n\npolicy = Policy()\n",
        'policy.lim(args["n"])',
    ),
    "method of an object reading its state": (
        "class Policy:\n    def __init__(self, lim):\n        self.lim = lim\n\n"
        "    def lim_for(self, n):\n        return self.lim\n\n\npolicy = Policy(128)\n",
        'policy.lim_for(args["n"])',
    ),
    "numpy number": ("import numpy as np\n\nLIM = np.int64(128)\n", "int(LIM)"),
    "helper through a table": (
        "def lim(n):\n    return 128\n\n\nTABLE = {'lim': lim}\n",
        'TABLE["lim"](args["n"])',
    ),
    "dict keyed by an int and its text": ("LIMS = {1: 128, '1': 64}\n", "LIMS[1]"),
}


def _load(path: Path, text: str, name: str) -> Any:
    path.write_text(text, encoding="utf-8")
    sys.modules.pop(name, None)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("form", sorted(FORMS))
def test_state_a_heuristic_reads_through_a_global_object_edited_is_another_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    text, reads = FORMS[form]
    state_name = "state_" + "_".join(form.replace(",", "").split())
    kernel_text = KERNEL.format(
        imports=f"import {state_name} as state\nfrom {state_name} import *", heuristic=reads
    )
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    digests = []
    for lim in (128, 64):
        new_api_process()
        _load(tmp_path / f"{state_name}.py", text.replace("128", str(lim)), state_name)
        module = _load(tmp_path / "kernel_state.py", kernel_text, "kernel_state")
        src, dst = torch.randn(300), torch.zeros(300)
        res = module.run(dst, src)
        assert res.source == "tuned", (form, lim, res)
        assert torch.equal(dst, src + lim)
        digests.append(res.digest)
    assert res.config == Config(TILE=64)  # the only one the edited limit builds
    assert digests[0] != digests[1], f"{reads}: the edited state kept the kernel's identity"
    monkeypatch.delitem(sys.modules, state_name, raising=False)
    monkeypatch.delitem(sys.modules, "kernel_state", raising=False)


# A heuristic that is no plain function, or binds its state when it is made: the state
# module's text for a limit of 128 (edited to 64), read through ``from state import *``.
STATE_HELD = """
import dataclasses
import functools

import numpy as np


class Pick:
    def __init__(self, lim):
        self.lim = lim

    def __call__(self, args):
        return self.lim

    def meth(self, args):
        return self.lim


@dataclasses.dataclass
class Opts:
    lim: int
    extra: list = dataclasses.field(default_factory=list)


def cap(args, lim):
    return int(lim.lim if isinstance(lim, Opts) else lim)


LIMIT = 128
"""

HELD = {
    "callable object": "Pick(LIMIT)",
    "bound method": "Pick(LIMIT).meth",
    "default argument": "lambda args, lim=LIMIT: lim",
    "partial binding a numpy number": "functools.partial(cap, lim=np.int64(LIMIT))",
    "partial binding a dataclass": "functools.partial(cap, lim=Opts(LIMIT))",
}


@pytest.mark.parametrize("form", sorted(HELD))
def test_state_a_heuristic_holds_edited_is_another_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """``{"LIM": Pick(LIMIT)}``, ``Pick(LIMIT).meth``, ``lambda args, lim=LIMIT: lim``, a
    ``functools.partial`` binding a numpy number or a dataclass: the heuristic's source is
    the same for 128 and 64, its state is not. The record tuned for 128 was taken from disk
    for 64, another kernel (only the source was hashed)."""
    state_name = "held_" + "_".join(form.split())
    text = KERNEL.format(imports=f"from {state_name} import *", heuristic="0").replace(
        "lambda args: 0", HELD[form]
    )
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    digests = []
    for lim in (128, 64, 64):
        new_api_process()
        _load(tmp_path / f"{state_name}.py", STATE_HELD.replace("128", str(lim)), state_name)
        module = _load(tmp_path / "kernel_held.py", text, "kernel_held")
        src, dst = torch.randn(300), torch.zeros(300)
        res = module.run(dst, src)
        assert torch.equal(dst, src + lim)
        digests.append((res.source, res.digest))
    (first, d1), (second, d2), (third, d3) = digests
    assert (first, second, third) == ("tuned", "tuned", "disk"), f"{form}: {digests}"
    assert d1 != d2 == d3
    monkeypatch.delitem(sys.modules, state_name, raising=False)
    monkeypatch.delitem(sys.modules, "kernel_held", raising=False)


LOOKUP = """
import triton
import triton.language as tl

from tunedsl import autotune_launch


class Lookup:  # a settings client: an unknown attribute is a setting looked up
    asked = []

    def __call__(self, args):
        return 64

    def __getattr__(self, name):
        Lookup.asked.append(name)
        raise KeyError(f"no setting {name!r}")


@triton.heuristics({"B": Lookup()})
@triton.jit
def add(x, n, TILE: tl.constexpr, B: tl.constexpr):
    i = tl.arange(0, TILE)
    tl.store(x + i, tl.load(x + i, mask=i < n) + B, mask=i < n)


def run(x):
    return autotune_launch(add, space=dict(TILE=[16, 32]), grid=(1,), args=(x, x.numel()),
                           kwargs=lambda c: {"TILE": c.TILE}, restore_value=["x"], name="lookup")
"""


def test_a_heuristics_getattr_is_not_run_to_hash_the_kernel(tmp_path: Path) -> None:
    """A callable object whose ``__getattr__`` raises ``KeyError`` (Triton launches its kernel):
    the identity asked it for ``func`` and the first call raised that ``KeyError``; now nothing
    of the user's runs to hash it."""
    module = _load(tmp_path / "lookup.py", LOOKUP, "lookup")
    x = torch.zeros(16)
    res = module.run(x)
    assert res.source == "tuned" and torch.equal(x, torch.full((16,), 64.0))
    assert module.Lookup.asked == []
    sys.modules.pop("lookup", None)


THROUGH_A_CLASS = """
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


class NS:
    @staticmethod
    @triton.jit
    def step(x):
        return x + {step}

    W = tl.constexpr({width})


@triton.jit
def apply(dst, src, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, NS.step(tl.load(src + i, mask=i < n)) * NS.W, mask=i < n)


def run(dst, src):
    n = dst.numel()
    return autotune_launch(apply, space=dict(BLOCK=[32, 64]), grid=lambda c: (cdiv(n, c.BLOCK),),
                           args=(dst, src, n), kwargs=lambda c: {{"BLOCK": c.BLOCK}}, name="ns")
"""


@pytest.mark.parametrize("edit", [{"step": 2, "width": 1}, {"step": 1, "width": 2}])
def test_a_helper_or_constexpr_reached_through_a_class_edited_is_another_kernel(
    tmp_path: Path, edit: dict[str, int]
) -> None:
    """Under the interpreter a kernel may call ``NS.step`` and read ``NS.W`` (a compiled
    kernel may not: Triton refuses a class global)."""
    sources = []
    for values in ({"step": 1, "width": 1}, edit):
        new_api_process()
        module = _load(tmp_path / "through_class.py", THROUGH_A_CLASS.format(**values), "tc")
        src, dst = torch.randn(100), torch.zeros(100)
        res = module.run(dst, src)
        assert torch.equal(dst, (src + values["step"]) * values["width"])
        sources.append(res.source)
    assert sources == ["tuned", "tuned"]
    sys.modules.pop("tc", None)


def test_a_records_choice_that_no_longer_launches_is_refused_and_the_key_tuned_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit comes from an environment variable, which no identity can cover: the record
    tuned under 128 chose the only tile that built (128); under 64 that choice fails on its
    first launch. It is refused with a warning naming the record, the key is tuned again and
    the call's result is right; the next process is decided by the new record."""
    text = KERNEL.format(imports="", heuristic='int(os.environ["TEST_LIM"])').replace(
        "TILE <= LIM", "TILE == LIM"
    )
    results = []
    for lim in (128, 64, 64):
        monkeypatch.setenv("TEST_LIM", str(lim))
        new_api_process()
        module = _load(tmp_path / "env_limit.py", text, "env_limit")
        src, dst = torch.randn(300), torch.zeros(300)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = module.run(dst, src)
        assert torch.equal(dst, src + lim)
        results.append((res.source, res.config, [str(w.message) for w in caught]))
    (first, c1, _), (second, c2, said), (third, c3, _) = results
    assert (first, c1) == ("tuned", Config(TILE=128))
    assert (second, c2) == ("tuned", Config(TILE=64))
    assert any("chose Config(TILE=128), which fails on its first launch here" in w for w in said)
    assert (third, c3) == ("disk", Config(TILE=64))
    sys.modules.pop("env_limit", None)


def test_threads_making_the_first_call_of_a_key_whose_record_fails_all_get_the_redone_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six threads make the first call of a key whose record's choice fails here: the thread
    deciding the key redoes it, and the others, which waited for its decision or found its
    entry meanwhile, launch what was redone (five raised the first choice's error)."""
    import threading

    text = KERNEL.format(imports="", heuristic='int(os.environ["TEST_LIM"])').replace(
        "TILE <= LIM", "TILE == LIM"
    )
    sizes = (300, 700, 1100)  # a key each, each a race of its own
    monkeypatch.setenv("TEST_LIM", "128")
    new_api_process()
    module = _load(tmp_path / "env_threads.py", text, "env_threads")
    for n in sizes:
        module.run(torch.zeros(n), torch.ones(n))
    monkeypatch.setenv("TEST_LIM", "64")
    new_api_process()
    module = _load(tmp_path / "env_threads.py", text, "env_threads")
    out: dict[tuple[int, int], Any] = {}

    def call(n: int, i: int, start: threading.Barrier) -> None:
        src, dst = torch.randn(n), torch.zeros(n)
        start.wait()
        try:
            res = module.run(dst, src)
            out[n, i] = (res.config, bool(torch.equal(dst, src + 64)))
        except Exception as err:  # the failure is what is asserted on
            out[n, i] = (type(err).__name__, False)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in sizes:
            start = threading.Barrier(6)
            threads = [threading.Thread(target=call, args=(n, i, start)) for i in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert len(out) == 6 * len(sizes)
    assert all(v == (Config(TILE=64), True) for v in out.values()), out
    sys.modules.pop("env_threads", None)


FORK_GATE = """
import os, sys, threading
PARENT = os.getpid()
inside, go_on = threading.Event(), threading.Event()


def _in_first_launch():
    frame = sys._getframe()
    while frame is not None and frame.f_code.co_name != "first_launch":
        frame = frame.f_back
    return frame is not None


def gate():  # the prover's first launch waits here, in the parent only, until told
    if os.getpid() == PARENT and threading.current_thread().name == "prover":
        if _in_first_launch():
            inside.set()
            go_on.wait(60)
"""


def test_a_process_forked_during_a_first_launch_decides_the_key_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread is in the first launch of a key whose record's choice fails here when the
    process forks: the child's call of the key decides it anew and is right (it waited
    forever on the parent's thread, which the child does not have)."""
    import os
    import threading

    gate = _load(tmp_path / "fork_gate.py", FORK_GATE, "fork_gate")
    text = KERNEL.format(
        imports="import fork_gate", heuristic='fork_gate.gate() or int(os.environ["TEST_LIM"])'
    ).replace("TILE <= LIM", "TILE == LIM")
    monkeypatch.setenv("TEST_LIM", "128")
    new_api_process()
    _load(tmp_path / "fork_limit.py", text, "fork_limit").run(torch.zeros(300), torch.ones(300))
    monkeypatch.setenv("TEST_LIM", "64")
    new_api_process()
    module = _load(tmp_path / "fork_limit.py", text, "fork_limit")
    prover = threading.Thread(
        target=module.run, args=(torch.zeros(300), torch.ones(300)), name="prover"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prover.start()
        assert gate.inside.wait(60)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: one call of the key, its answer down the pipe
            try:
                src, dst = torch.randn(300), torch.zeros(300)
                res = module.run(dst, src)
                said = f"{res.config.TILE} {torch.equal(dst, src + 64)}"
            except BaseException as err:
                said = type(err).__name__
            os.write(write, said.encode())
            os._exit(0)
        os.close(write)
        gate.go_on.set()
        prover.join(60)
        import select

        ready, _, _ = select.select([read], [], [], 120)  # a child that hangs: no answer
        answer = os.read(read, 100).decode() if ready else "no answer in 120 s"
        os.close(read)
        if not ready:
            os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert answer == "64 True", answer
    sys.modules.pop("fork_limit", None)
    sys.modules.pop("fork_gate", None)


REFUSING = """
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


def checked_limit(args):  # the user's input check: the same under every configuration
    if (args["src"] < 0).any():
        raise ValueError("input must not be negative")
    return 128


@triton.heuristics({"LIM": checked_limit})
@triton.jit
def capped(dst, src, n, TILE: tl.constexpr, LIM: tl.constexpr):
    tl.static_assert(TILE <= LIM)
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(dst + i, tl.load(src + i, mask=i < n) + 1, mask=i < n)


def run(dst, src, mode):
    n = dst.numel()
    return autotune_launch(capped, space=dict(TILE=[32, 64, 128]), mode=mode,
                           grid=lambda c: (cdiv(n, c.TILE),), args=(dst, src, n),
                           kwargs=lambda c: {"TILE": c.TILE}, name="refusing")
"""


@pytest.mark.parametrize("mode", ["on", "cached"])
def test_a_call_failing_whatever_it_launches_keeps_the_record_and_its_own_error(
    tmp_path: Path, mode: str
) -> None:
    """A new process's first call of a recorded key fails for its input (the user's heuristic
    refuses it under every configuration): the caller gets that error (not a failed tune),
    and the record still decides the key's next call."""
    module = _load(tmp_path / "refusing.py", REFUSING, "refusing")
    src = torch.rand(300)
    tuned = module.run(torch.zeros(300), src, "on")
    assert tuned.source == "tuned"
    new_api_process()
    with pytest.raises(ValueError, match="must not be negative"):
        module.run(torch.zeros(300), -src, mode)
    dst = torch.zeros(300)
    again = module.run(dst, src, mode)
    assert again.source in ("memory", "disk") and again.config == tuned.config
    assert torch.equal(dst, src + 1)
    sys.modules.pop("refusing", None)


ONCE = REFUSING.replace(
    """def checked_limit(args):  # the user's input check: the same under every configuration
    if (args["src"] < 0).any():
        raise ValueError("input must not be negative")
    return 128""",
    """DEADLINES = []


def checked_limit(args):  # a request's deadline passes once, while this call runs
    if DEADLINES:
        raise TimeoutError(DEADLINES.pop())
    return 128""",
)


def test_an_error_that_is_not_the_configurations_reaches_the_caller_and_tunes_nothing(
    tmp_path: Path, tune_count: list[Any]
) -> None:
    """An exception raised once during a recorded choice's first launch (a deadline's signal
    handler, the user's own code) is the call's: it reaches the caller as it was, the record
    is not refused, nothing is tuned, and the next call is decided by the record."""
    assert "DEADLINES" in ONCE
    module = _load(tmp_path / "once.py", ONCE, "once")
    src = torch.rand(300)
    tuned = module.run(torch.zeros(300), src, "on")
    new_api_process()
    tunes = len(tune_count)
    module.DEADLINES.append("request deadline passed")
    with pytest.raises(TimeoutError, match="request deadline passed"):
        module.run(torch.zeros(300), src, "on")
    dst = torch.zeros(300)
    again = module.run(dst, src, "on")
    assert again.source in ("memory", "disk") and again.config == tuned.config
    assert len(tune_count) == tunes and torch.equal(dst, src + 1)
    sys.modules.pop("once", None)


LIBRARY_KERNEL = """
import logging
import sys
import threading

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch

log = logging.getLogger(__name__)
if sys.argv[1] == "later":  # the process runs on: a library makes its logger, a thread runs
    logging.getLogger("a.library.imported.later").setLevel(logging.INFO)
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()


def lim(args):
    log.debug("limit for n=%s", args["n"])
    return 64 if threading.current_thread().name else 32


@triton.heuristics({"LIM": lim})
@triton.jit
def capped(x, n, TILE: tl.constexpr, LIM: tl.constexpr):
    i = tl.arange(0, TILE)
    tl.store(x + i, tl.load(x + i, mask=i < n) + LIM, mask=i < n)


x = torch.zeros(64)
res = autotune_launch(capped, space=dict(TILE=[64, 128]), grid=(1,), args=(x, 64),
                      kwargs=lambda c: {"TILE": c.TILE}, restore_value=["x"], name="library")
assert torch.equal(x, torch.full((64,), 64.0)), x
print(res.source)
"""


def test_a_heuristic_calling_threading_and_a_logger_finds_its_record_in_the_next_process(
    tmp_path: Path,
) -> None:
    """A heuristic logging through a module logger and asking ``threading.current_thread()``:
    the standard library's state (the threads' ids, the loggers made) was part of the
    kernel's identity, another in every process, so each run tuned again. Now the second
    process, with another logger made and a thread run first, uses the first one's record."""
    import os
    import subprocess

    import tunedsl

    script = tmp_path / "library_kernel.py"
    script.write_text(LIBRARY_KERNEL, encoding="utf-8")
    here = str(Path(tunedsl.__file__).resolve().parents[1])  # this tunedsl, not another
    env = dict(os.environ, TRITON_INTERPRET="1", TUNEDSL_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([here, env.get("PYTHONPATH", "")])

    def run(when: str) -> str:
        done = subprocess.run(
            [sys.executable, str(script), when], env=env, cwd=tmp_path, capture_output=True,
            text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    assert [run("first"), run("later"), run("first")] == ["tuned", "disk", "disk"]
