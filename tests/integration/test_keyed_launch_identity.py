"""The record key of an ``autotune_launch`` line is the same whichever call reaches it first:
a sweep (or `precompile --tune`) whose workloads pass ``key=`` writes the records that a run
passing ``key=`` uses, even where that run's first call of the line passed no key (real
`tunedsl sweep` and `tunedsl run` in subprocesses, real kernels under the interpreter); and
it tells apart every two unequal ``key=`` values (a dataclass by its fields; a custom class
is an error)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from key_helpers import Shape, copy_keyed

from tunedsl.errors import UsageError

pytestmark = pytest.mark.needs_triton

SCRIPT = """
import json
import sys

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv, workload


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


def add(n, bucket):
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    res = autotune_launch(
        vadd, space={"tile": [32, 64, 128]}, grid=lambda cfg: (cdiv(n, cfg.tile),),
        args=(a, b, c, n), kwargs=lambda cfg: {"TILE": cfg.tile}, name="bucketed",
        key=(n // 256) if bucket else None,
    )
    assert torch.equal(c, a + b)
    return res


@workload
def keyed(n=300):
    add(n, bucket=True)


if __name__ == "__main__":
    calls = json.loads(sys.argv[1])
    print(json.dumps([[add(n, bucket).source, add(n, bucket).key] for n, bucket in calls]))
"""


def _tunedsl(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "1"}
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(tmp_path),
        check=False,
    )


def test_a_run_whose_first_call_has_no_key_uses_the_records_swept_with_key(
    tmp_path: Path,
) -> None:
    script = tmp_path / "bucketed.py"
    script.write_text(SCRIPT)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": 300}, {"n": 1000}]))
    swept = _tunedsl(tmp_path, "sweep", str(script), "--no-ray", "--shapes", str(shapes))
    assert swept.returncode == 0 and "2 records written" in swept.stdout, swept.stderr
    # An unkeyed call first (its own record, tuned), then keyed calls of the swept buckets:
    # each is the swept record (the key given), not a new record keyed by shapes.
    ran = _tunedsl(
        tmp_path, "run", str(script), json.dumps([[64, False], [310, True], [1010, True]])
    )
    assert ran.returncode == 0, ran.stderr
    (first, _), (source_1, key_1), (source_3, key_3) = json.loads(ran.stdout.splitlines()[-1])
    assert first == "tuned"
    assert (source_1, key_1["user_key"]) == ("disk", 1)
    assert (source_3, key_3["user_key"]) == ("disk", 3)


SET_KEY = """
import sys

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


n = 100
a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
res = autotune_launch(
    vadd, space={"tile": [32, 64]}, grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
    kwargs=lambda cfg: {"TILE": cfg.tile}, name="set-keyed",
    key=frozenset({"alpha", "beta", "gamma", "delta", "epsilon"}),
)
print(res.source)
"""


def test_a_key_holding_a_set_names_one_record_in_every_process(tmp_path: Path) -> None:
    # A set's order follows the process's hash seed (PYTHONHASHSEED, random by default):
    # its repr named another record in each process, so every run tuned again.
    script = tmp_path / "set_keyed.py"
    script.write_text(SET_KEY)
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "1"}
    sources = []
    for seed in ("1", "2", "3"):
        done = subprocess.run(
            [sys.executable, str(script)], env={**env, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        sources.append(done.stdout.split()[-1])
    assert sources == ["tuned", "disk", "disk"]


@dataclasses.dataclass(frozen=True)
class Problem:  # prints as Problem(batch=8) whatever its dtype_tag
    batch: int
    dtype_tag: str = dataclasses.field(repr=False, default="fp32")


class Tag:  # no __eq__ of its own: equal only to itself, and printed alike by every instance
    def __repr__(self) -> str:
        return "Tag()"


def test_a_dataclass_key_is_written_by_its_fields_so_unequal_values_decide_apart() -> None:
    # field(repr=False) left dtype_tag out of the printed form the record key was written
    # by: fp16 shared fp32's record (digest) and reused its decision from memory.
    first = copy_keyed(Problem(8, "fp32"), "dataclass-key")
    second = copy_keyed(Problem(8, "fp16"), "dataclass-key")
    assert (first.source, second.source) == ("tuned", "tuned")
    assert first.digest != second.digest
    assert second.key["user_key"] == {
        "dataclass": f"{Problem.__module__}.Problem",
        "fields": {"batch": 8, "dtype_tag": "fp16"},
    }
    again = copy_keyed(Problem(8, "fp16"), "dataclass-key")
    assert again.digest == second.digest


def test_a_custom_class_key_is_refused_whatever_its_eq_as_its_printed_form_is_written() -> None:
    # Shape(4, 4096) printed as Shape(4, 1) did, so it reused its decision in silence; a
    # table of printed forms in one process could not protect a later process's read.
    for key, where in ((Shape(4, 1), "`key=`"), (("rows", Tag()), "`key=[1]`")):
        with pytest.raises(UsageError) as err:
            copy_keyed(key, "custom-class-key")
        message = str(err.value)
        assert f"{where} is a {type(key if where == '`key=`' else Tag()).__name__} (" in message
        assert "Fix: pass a tuple of its fields, or make it a dataclass" in message
    assert copy_keyed((4, 1), "custom-class-key").source == "tuned"  # its fields: a key


@dataclasses.dataclass(frozen=True)
class Holder:
    rows: int
    weights: Any = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True)
class Cached:
    rows: int
    memo: object = dataclasses.field(default_factory=object, compare=False)  # prints 0x...


def test_a_dataclass_key_is_checked_by_the_fields_it_compares() -> None:
    # Its fields are the record key now: a tensor field would key on the tensor's values.
    with pytest.raises(UsageError, match=r"`key=.weights` is a tensor \(shape \(3,\)\)"):
        copy_keyed(Holder(2, torch.ones(3)), "dataclass-tensor-key")
    # A field == ignores is not written, so its address is no matter: equal values, one key.
    assert copy_keyed(Cached(2), "dataclass-memo-key").source == "tuned"
    assert copy_keyed(Cached(2), "dataclass-memo-key").source == "memory"


DATACLASS_KEY = """
import dataclasses
import sys

import torch
import triton
import triton.language as tl

from tunedsl import autotune_launch, cdiv


@triton.jit
def vadd(a, b, c, n, TILE: tl.constexpr):
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)


@dataclasses.dataclass(frozen=True)
class Problem:
    batch: int
    dtype_tag: str = dataclasses.field(repr=False, default="fp32")


n = 100
a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
res = autotune_launch(
    vadd, space={"tile": [32, 64]}, grid=lambda cfg: (cdiv(n, cfg.tile),), args=(a, b, c, n),
    kwargs=lambda cfg: {"TILE": cfg.tile}, name="dataclass-keyed",
    key=Problem(8, sys.argv[1]),
)
assert torch.equal(c, a + b)
print(res.source)
"""


def test_a_dataclass_keys_record_is_read_by_a_later_process_only_for_an_equal_value(
    tmp_path: Path,
) -> None:
    script = tmp_path / "dataclass_keyed.py"
    script.write_text(DATACLASS_KEY)
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "1"}
    sources = []
    for tag in ("fp32", "fp32", "fp16"):
        done = subprocess.run(
            [sys.executable, str(script), tag], env=env,
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        sources.append(done.stdout.split()[-1])
    assert sources == ["tuned", "disk", "tuned"]
