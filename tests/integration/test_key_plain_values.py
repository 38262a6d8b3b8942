"""``key=`` is written into the record key (JSON) that later processes read, so its written
form is its equality: unequal plain values are written apart (a dict's int key, a NaN, two
dataclasses of one name in two modules), and what tunedsl cannot write so (a custom class,
a dataclass subclass with its own ``__eq__``, an ``eq=False`` dataclass) is refused at the
site, in the first process, so never written (real kernels under the interpreter, real
subprocesses)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from key_helpers import Shape, copy_keyed

from tunedsl.errors import UsageError

pytestmark = pytest.mark.needs_triton


@dataclasses.dataclass(frozen=True)
class Base:
    n: int


class Sub(Base):  # its own __eq__ compares `mode`, which no dataclass field holds
    def __init__(self, n: int, mode: str) -> None:
        super().__init__(n)
        object.__setattr__(self, "mode", mode)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sub) and (self.n, self.mode) == (other.n, other.mode)

    def __hash__(self) -> int:
        return hash((self.n, self.mode))


@dataclasses.dataclass(eq=False)
class Tagged:  # its own equality, by a value outside the dataclass fields
    n: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tagged) and self.n == other.n

    def __hash__(self) -> int:
        return hash(self.n)


@pytest.mark.parametrize(
    ("key", "where", "kind"),
    [
        ([4, Shape(4, 1)], "`key=[1]`", "Shape"),
        (Sub(4, "fwd"), "`key=`", "Sub"),
        ((Tagged(4),), "`key=[0]`", "Tagged"),
    ],
)
def test_a_key_tunedsl_cannot_write_by_its_equality_is_refused_naming_where_and_the_fix(
    key: object, where: str, kind: str
) -> None:
    # Shape(4, 1) and Shape(4, 4096) were written alike (by repr): a later process read one's
    # decision for the other; Sub and Tagged were written by Base's fields alone.
    with pytest.raises(UsageError) as err:
        copy_keyed(key, f"refused-{kind}")
    message = str(err.value)
    assert f"{where} is a {kind} (" in message
    assert "Fix: pass a tuple of its fields, or make it a dataclass" in message


def _cfg_of(module: str) -> Any:
    m = sys.modules.setdefault(module, types.ModuleType(module))  # dataclasses looks it up
    exec(
        "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass Cfg:\n    n: int\n",
        m.__dict__,
    )
    return m.Cfg


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({1: "x"}, {"1": "x"}),
        (float("nan"), "nan"),
        (_cfg_of("mod_a")(40), _cfg_of("mod_b")(40)),
        (b"x", "b'x'"),
    ],
    ids=["dict-keys", "nan", "two-modules", "bytes"],
)
def test_unequal_plain_keys_once_written_alike_decide_apart(first: object, second: object) -> None:
    one, two = copy_keyed(first, "apart"), copy_keyed(second, "apart")
    assert (one.source, two.source) == ("tuned", "tuned")
    assert one.digest != two.digest
    assert copy_keyed(first, "apart").digest == one.digest  # an equal value: its own record


PLAIN_KEYS = """
import collections, dataclasses, enum, sys

import numpy as np
import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv
from tunedsl.errors import UsageError


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


class Mode(enum.IntEnum):
    FWD = 1


class Layout(enum.Enum):
    ROW = "row"


Pair = collections.namedtuple("Pair", "m n")


@dataclasses.dataclass(frozen=True)
class Inner:
    tag: str


@dataclasses.dataclass(frozen=True)
class Outer:
    inner: Inner
    layout: Layout


class Problem:  # equal by (n, batch), printed without batch
    def __init__(self, n, batch):
        self.n, self.batch = n, batch
    def __eq__(self, o):
        return isinstance(o, Problem) and (self.n, self.batch) == (o.n, o.batch)
    def __hash__(self):
        return hash((self.n, self.batch))
    def __repr__(self):
        return f"Problem(n={self.n})"


KEYS = {
    "intenum": Mode.FWD, "enum": Layout.ROW, "namedtuple": Pair(2, 3),
    "size": torch.Size([4, 5]), "dtype": torch.float16, "class": (100, float),
    "numpy": (np.float32, np.dtype("float32")),
    "torch": (torch.device("cpu"), torch.strided, torch.contiguous_format, tl.float16),
    "dataclass": Outer(Inner("fp16"), Layout.ROW), "dict": {1: "x"}, "nan": float("nan"),
    "custom": Problem(100, int(sys.argv[1])),
}
n = 100
a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
for name, key in KEYS.items():
    try:
        res = autotune_launch(
            vadd, space={"tile": [32, 64]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
            args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="plain-" + name,
            key=key,
        )
        print(name, res.source)
    except UsageError as err:
        print(name, "refused" if "is a Problem (" in str(err) else err)
"""


def test_plain_keys_are_read_back_by_a_later_process_and_a_custom_class_never_written(
    tmp_path: Path,
) -> None:
    script = tmp_path / "plain_keys.py"
    script.write_text(PLAIN_KEYS)
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "1"}
    runs = []
    for batch in ("1", "2"):  # Problem(100, 1) and Problem(100, 2), printed alike
        done = subprocess.run(
            [sys.executable, str(script), batch], env=env,
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs.append(dict(line.split(" ", 1) for line in done.stdout.splitlines()))
    names = ["intenum", "enum", "namedtuple", "size", "dtype", "class", "numpy", "dataclass"]
    names += ["torch", "dict", "nan"]
    assert [runs[0][k] for k in names] == ["tuned"] * len(names)
    assert [runs[1][k] for k in names] == ["disk"] * len(names)
    assert (runs[0]["custom"], runs[1]["custom"]) == ("refused", "refused")


SWEPT_DATACLASS = """
import dataclasses, enum

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


class Layout(enum.Enum):
    ROW = 1


@dataclasses.dataclass(frozen=True)
class Problem:
    n: int
    layout: Layout


def add(n):
    a, b, c = torch.ones(n), torch.ones(n), torch.empty(n)
    return autotune_launch(
        vadd, space={"tile": [16, 32]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, key=Problem(n, Layout.ROW),
    )


@workload
def warm():
    add(40)


if __name__ == "__main__":
    print(add(40).source)
"""


@pytest.mark.parametrize("run", ["python", "tunedsl run"])
def test_a_dataclass_key_of_the_script_finds_the_records_a_sweep_of_it_wrote(
    tmp_path: Path, run: str
) -> None:
    # The sweep imports the script under a module name of its own; run, the script is
    # `__main__`: a class written by its module's name got two record keys, and the run
    # tuned again past every swept record.
    script = tmp_path / "swept_keys.py"
    script.write_text(SWEPT_DATACLASS)
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "1"}

    def done(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, *argv], env=env, cwd=tmp_path.parent,
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip

    swept = done("-m", "tunedsl", "sweep", str(script), "--no-ray")
    assert swept.returncode == 0 and "1 record written" in swept.stdout, swept.stderr
    ran = done(str(script)) if run == "python" else done("-m", "tunedsl", "run", str(script))
    assert ran.returncode == 0 and ran.stdout.split() == ["disk"], ran.stdout + ran.stderr
