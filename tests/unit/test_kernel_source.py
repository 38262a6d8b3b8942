"""The labels a kernel's identity is made of (``backends/kernel_source.py``): the
``tl.constexpr`` and ``tl.dtype`` values it and its helpers read, as ``name=value``, in a
fixed order. They feed every record key under the interpreter (and on a GPU the ``tl.dtype``
globals and the values read through a module, which Triton's hash leaves out), so the same
kernel must give the same labels, in the same order, from one version of tunedsl to the
next: a change would send every stored decision to a new key.

The expected values below were computed by the code before the module walk was merged
into one (``_globals_read`` and ``_code_values`` each walked the modules a kernel reads).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.needs_triton

# A package the kernels reach by path (pkg.lib.X), with a helper that reads its own
# constexpr and dtype globals, a module reached through another (pkg.lib.sub), and one
# module under two names (lib, lib_again).
FILES = {
    "kslabels_pkg/__init__.py": "from kslabels_pkg import lib\n",
    "kslabels_pkg/sub.py": """\
import triton.language as tl

DEPTH = tl.constexpr(3)
""",
    "kslabels_pkg/lib.py": """\
import triton
import triton.language as tl

from kslabels_pkg import sub

WIDTH = tl.constexpr(4)
ACC = tl.float32
NOTE = "not a constexpr"


@triton.jit
def helper(x):
    return x.to(ACC) * WIDTH + sub.DEPTH
""",
    "kslabels_kernels.py": """\
import triton
import triton.language as tl

import kslabels_pkg
import kslabels_pkg.lib as lib
import kslabels_pkg.lib as lib_again
from kslabels_pkg.lib import helper

OUT = tl.float16
SHIFT = tl.constexpr(2)
WIDTH = tl.constexpr(8)


@triton.jit
def plain(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@triton.jit
def typed(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n) + SHIFT
    tl.store(y + offs, v.to(OUT), mask=offs < n)


@triton.jit
def through_package(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = kslabels_pkg.lib.helper(tl.load(x + offs, mask=offs < n)) + kslabels_pkg.lib.WIDTH
    tl.store(y + offs, v + lib.sub.DEPTH + lib_again.WIDTH, mask=offs < n)


@triton.jit
def twice(v):
    return helper(v) * WIDTH


@triton.jit
def helpers(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = twice(tl.load(x + offs, mask=offs < n)) + lib.helper(SHIFT)
    tl.store(y + offs, v.to(lib.ACC).to(OUT), mask=offs < n)
""",
}

EXPECTED: dict[str, dict[str, Any]] = {
    "plain": {
        "labels": [],
        "dtypes": [],
        "hash": "9be7dc6e15ccdcaee4afcd808e37157dde760d92eadcf1a2c0b96332a7ad754c",
    },
    "typed": {
        "labels": [
            "OUT=triton.language.float16",
            "SHIFT=2",
        ],
        "dtypes": ["OUT=triton.language.float16"],
        "hash": "342fe50b426f9f5a3ca4793001aae397cc314dbe0bd23f3dd4f68c1f46d1b7e7",
    },
    "through_package": {
        "labels": [
            "WIDTH=8",
            "kslabels_pkg.lib.WIDTH=4",
            "kslabels_pkg.sub.DEPTH=3",
            "ACC=triton.language.float32",
            "WIDTH=4",
            "kslabels_pkg.sub.DEPTH=3",
        ],
        # On a GPU, the values read through a module too (Triton's hash leaves them out).
        "dtypes": [
            "kslabels_pkg.lib.WIDTH=4",
            "kslabels_pkg.sub.DEPTH=3",
            "ACC=triton.language.float32",
            "kslabels_pkg.sub.DEPTH=3",
        ],
        "hash": "3b9dfde42d5316fb11e8ff2928a33a0dd371f1729e416bca66d97e820ad4cffe",
    },
    "helpers": {
        "labels": [
            "OUT=triton.language.float16",
            "SHIFT=2",
            "kslabels_pkg.lib.ACC=triton.language.float32",
            "ACC=triton.language.float32",
            "WIDTH=4",
            "kslabels_pkg.sub.DEPTH=3",
            "WIDTH=8",
        ],
        "dtypes": [
            "OUT=triton.language.float16",
            "kslabels_pkg.lib.ACC=triton.language.float32",
            "ACC=triton.language.float32",
            "kslabels_pkg.sub.DEPTH=3",
        ],
        "hash": "9af4e1368383c02dd502ba5bdb5a30dd159c7ee43cb5b43dab2a276b0cf18f85",
    },
}


def write(root: Path) -> None:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def labels_of(kernel: Any) -> dict[str, Any]:
    """The labels, the dtype globals and the interpreter's source hash of ``kernel``."""
    from tunedsl.backends import kernel_source as ks

    fn = ks.python_fn(kernel)
    parts = ks._called_sources(fn, {id(fn)})
    return {
        "labels": [p for p in parts if not p.startswith("@")],  # sources start "@triton.jit"
        "dtypes": ks._not_in_tritons_hash(fn, {id(fn)}),
        "hash": ks.interpreted_source_hash(kernel),
    }


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    write(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    for name in [m for m in sys.modules if m.startswith("kslabels_")]:
        monkeypatch.delitem(sys.modules, name)
    yield importlib.import_module("kslabels_kernels")
    for name in [m for m in sys.modules if m.startswith("kslabels_")]:
        del sys.modules[name]


@pytest.mark.parametrize("name", ["plain", "typed", "through_package", "helpers"])
def test_the_labels_of_a_kernel_are_those_the_previous_code_gave(kernels: Any, name: str) -> None:
    assert labels_of(getattr(kernels, name)) == EXPECTED[name]


HEURISTIC_KERNELS = """\
import functools

import triton
import triton.language as tl


def even(args, m):
    return args["n"] % m == 0


class Cap:
    def __call__(self, args):
        return 64


def kernel(values):
    @triton.heuristics(values)
    @triton.jit
    def k(x, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, CAP: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x + offs, 1.0, mask=offs < n)

    return k


def hashes():
    from tunedsl.backends import triton as bt

    made = [kernel({"EVEN": functools.partial(even, m=2), "CAP": Cap()}) for _ in range(2)]
    edited = kernel({"EVEN": functools.partial(even, m=2), "CAP": lambda args: 16})
    return [bt.kernel_info(k).source_hash for k in (*made, edited)]
"""


def test_a_heuristic_that_is_no_plain_function_hashes_by_its_source_not_its_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``functools.partial`` or a callable object given to ``@triton.heuristics`` is hashed
    by its function's source (or its type), never by a ``repr`` holding an address, which
    would make every new object, and every process, another kernel; an edited heuristic is
    another kernel."""
    (tmp_path / "ks_heuristics.py").write_text(HEURISTIC_KERNELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    first, second, edited = importlib.import_module("ks_heuristics").hashes()
    assert first == second
    assert edited != first


HELPER_DEFAULT = """\
import triton
import triton.language as tl

WIDTH = {width}


@triton.jit
def check(block, WIDE: tl.constexpr = WIDTH):
    tl.static_assert(block == WIDE)


@triton.jit
def kernel(x, BLOCK: tl.constexpr):
    check(BLOCK)
"""


def test_a_called_functions_defaults_are_what_tritons_hash_leaves_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A called ``@triton.jit`` function's default (``WIDE: tl.constexpr = WIDTH``) is in
    neither its source nor Triton's hash: it is among the values added to Triton's hash on a
    GPU, and in the interpreter's hash, so another value is another kernel."""
    from tunedsl.backends import kernel_source as ks

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    kernels = []
    for width in (32, 64):
        name = f"ks_helper_default_{width}"
        (tmp_path / f"{name}.py").write_text(HELPER_DEFAULT.format(width=width), encoding="utf-8")
        kernels.append(importlib.import_module(name).kernel)
        monkeypatch.delitem(sys.modules, name)
    fns = [ks.python_fn(k) for k in kernels]
    assert [ks._not_in_tritons_hash(fn, {id(fn)}) for fn in fns] == [
        ["check.WIDE=32"],
        ["check.WIDE=64"],
    ]
    assert ks.interpreted_source_hash(kernels[0]) != ks.interpreted_source_hash(kernels[1])


HEURISTIC_CLOSURES = """\
import triton
import triton.language as tl

class Settings:
    cap = 64


SETTINGS = Settings()  # not a plain value: printed by its address


def kernel(width):
    @triton.heuristics({"WIDE": lambda args: width, "CAP": lambda args: SETTINGS.cap})
    @triton.jit
    def k(x, n, WIDE: tl.constexpr, CAP: tl.constexpr):
        offs = tl.arange(0, WIDE)
        tl.store(x + offs, 1.0, mask=offs < n)

    return k


def hashes():
    from tunedsl.backends import triton as bt

    return [bt.kernel_info(kernel(w)).source_hash for w in (32, 32, 64)]
"""


def test_a_heuristics_plain_closure_value_is_part_of_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heuristic's closure value (``lambda args: width``) is hashed like a global it reads:
    the same width is the same kernel, another width another; an object it reads is left out
    (printed by its address, it would make every process another kernel)."""
    (tmp_path / "ks_heuristic_closures.py").write_text(HEURISTIC_CLOSURES)
    monkeypatch.syspath_prepend(str(tmp_path))
    first, same, other = importlib.import_module("ks_heuristic_closures").hashes()
    assert first == same
    assert other != first


def test_a_heuristic_partials_bound_values_are_part_of_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``functools.partial(even, m=2)`` given to ``@triton.heuristics`` computes another
    parameter with ``m=4``: the bound values are hashed with the function's source."""
    (tmp_path / "ks_heuristic_partials.py").write_text(
        HEURISTIC_KERNELS
        + "\n\ndef partial_hashes():\n"
        + "    from tunedsl.backends import triton as bt\n\n"
        + "    made = [kernel({'EVEN': functools.partial(even, m=m), 'CAP': Cap()}) for m in (2, 2, 4)]\n"
        + "    return [bt.kernel_info(k).source_hash for k in made]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    first, same, other = importlib.import_module("ks_heuristic_partials").partial_hashes()
    assert first == same
    assert other != first


EXEC_SCRIPT = """\
import sys

import torch

from tunedsl import autotune_launch, cdiv

SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def scale(x, y, n, TILE: tl.constexpr):
    o = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = o < n
    tl.store(y + o, tl.load(x + o, mask=m) * FACTOR, mask=m)
'''
namespace = {}
exec(compile(SOURCE.replace("FACTOR", sys.argv[1]), "<generated>", "exec"), namespace)
scale = namespace["scale"]
x = torch.arange(300, dtype=torch.float32)
y = torch.empty_like(x)
res = autotune_launch(
    scale,
    space={"TILE": [64, 128]},
    grid=lambda cfg: (cdiv(300, cfg.TILE),),
    args=lambda cfg: (x, y, 300),
    kwargs=lambda cfg: {"TILE": cfg.TILE},
)
assert torch.equal(y, x * float(sys.argv[1]))
print(res.source)
"""


def test_a_kernel_made_by_exec_finds_its_record_in_the_next_process(tmp_path: Path) -> None:
    """A kernel whose source Python cannot read back (made by ``exec``, as code generators
    make them; Triton's interpreter runs it) is known by its code, not by an address: the
    next process uses its record, and a kernel whose code differs (another constant) is
    another kernel that tunes."""
    import os
    import subprocess

    script = tmp_path / "generated.py"
    script.write_text(EXEC_SCRIPT)
    env = {**os.environ, "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "1"}

    def run(factor: str) -> str:
        done = subprocess.run(
            [sys.executable, str(script), factor], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[-1]

    assert run("2") == "tuned"
    assert run("2") == "disk"
    assert run("3") == "tuned"


EXEC_HEURISTICS = """\
import triton
import triton.language as tl


@triton.jit
def k(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)


def hashes():
    from tunedsl.backends import triton as bt

    out = []
    for text in ("lambda args: 64", "lambda args: 64", "lambda args: 128"):
        block = eval(compile(text, "<generated>", "eval"))
        out.append(bt.kernel_info(triton.heuristics({"BLOCK": block})(k)).source_hash)
    return out
"""


def test_heuristics_made_by_exec_that_differ_by_a_constant_are_other_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two heuristic functions without a source file whose bytecode is the same but whose
    constants differ (``lambda args: 64`` and ``lambda args: 128``) compute another
    ``BLOCK``, so they launch other kernels and must not share records; the same text
    made twice is the same kernel."""
    (tmp_path / "ks_exec_heuristics.py").write_text(EXEC_HEURISTICS)
    monkeypatch.syspath_prepend(str(tmp_path))
    first, same, other = importlib.import_module("ks_exec_heuristics").hashes()
    assert first == same
    assert other != first


PLAIN_GLOBAL = """\
import triton
import triton.language as tl

W: tl.constexpr = {width}
OTHER = "unread"


@triton.jit
def fill(x, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, offs * W)


def source_hash():
    from tunedsl.backends import triton as bt

    return bt.kernel_info(fill).source_hash
"""


@pytest.mark.parametrize("width", ["3", "2.5"])
def test_a_plain_global_the_interpreter_reads_is_part_of_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: str
) -> None:
    """``W: tl.constexpr = 2`` leaves ``W`` a plain number (the annotation wraps nothing):
    Triton refuses it in a compiled kernel, but its interpreter reads the value as the
    kernel runs, so another value computes other results and must not reuse the record of
    the old one. A value the kernel does not read changes nothing."""
    monkeypatch.syspath_prepend(str(tmp_path))
    hashes = []
    for name, text in (
        ("ks_plain_a", PLAIN_GLOBAL.format(width=2)),
        ("ks_plain_b", PLAIN_GLOBAL.format(width=2).replace('"unread"', '"edited"')),
        ("ks_plain_c", PLAIN_GLOBAL.format(width=width)),
    ):
        (tmp_path / f"{name}.py").write_text(text)
        hashes.append(importlib.import_module(name).source_hash())
    first, unread_edited, other = hashes
    assert unread_edited == first
    assert other != first


CLOSURE_DTYPE = """\
import triton
import triton.language as tl


def make(dtype):
    @triton.jit
    def cast_copy(dst, src, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + i, tl.load(src + i, mask=i < n).to(dtype), mask=i < n)

    return cast_copy


def hashes():
    from tunedsl.backends import triton as bt

    kernels = [make(tl.float16), make(tl.float16), make(tl.bfloat16)]
    return [bt.kernel_info(k).source_hash for k in kernels]
"""


def test_a_tl_dtype_a_compiled_kernel_reads_from_its_closure_is_part_of_it(
    tmp_path: Path,
) -> None:
    """A kernel made by a factory (``make(tl.float16)``, ``make(tl.bfloat16)``) reads its
    ``tl.dtype`` from its closure. Triton's hash leaves ``tl.dtype`` values out (tunedsl adds
    those of globals): the two were one kernel, and the record of one was the other's."""
    import os
    import subprocess

    (tmp_path / "ks_closure_dtype.py").write_text(CLOSURE_DTYPE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # Triton's own hash
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    code = "import ks_closure_dtype as m; print(*m.hashes())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    first, same, other = done.stdout.split()
    assert same == first
    assert other != first


CONSTEXPR_FUNCTION = """\
import triton
import triton.language as tl


@triton.jit
def act(x):
    return tl.maximum(x, {floor})


ACT = tl.constexpr(act)


@triton.jit
def apply(dst, src, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, ACT(tl.load(src + i, mask=i < n)), mask=i < n)


if __name__ == "__main__":
    from tunedsl.backends import triton as bt

    print(bt.kernel_info(apply).source_hash)
"""


def test_a_global_constexpr_holding_a_triton_function_is_one_kernel_in_every_process(
    tmp_path: Path,
) -> None:
    """``ACT = tl.constexpr(act)`` read by a kernel under the interpreter: its label was the
    function's repr, an address, so each process had another kernel and tuned it again; it
    is the function's name and source, and an edited function is another kernel."""
    import os
    import subprocess

    env = {**os.environ, "TRITON_INTERPRET": "1"}

    def source_hash(floor: str) -> str:
        script = tmp_path / f"ks_constexpr_fn_{floor.replace('.', '_')}.py"
        script.write_text(CONSTEXPR_FUNCTION.format(floor=floor), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    first = source_hash("0.0")
    assert source_hash("0.0") == first
    assert source_hash("1.0") != first


def test_a_plain_constexpr_that_reads_like_an_address_keeps_its_value_in_the_label() -> None:
    """Only a value whose repr holds an address is labelled by its function or type: a
    string that happens to read like one is its own value, and two such are two kernels."""
    import triton.language as tl

    from tunedsl.backends.function_reads import value_label

    one, two = tl.constexpr("reads at 0x1"), tl.constexpr("reads at 0x2")
    assert value_label("MODE", one) == "MODE='reads at 0x1'"
    assert value_label("MODE", one) != value_label("MODE", two)


CLOSURE_READS = """\
import triton
import triton.language as tl

FLOOR = {floor}


@triton.jit
def relu(x):
    return tl.maximum(x, FLOOR)


@triton.jit
def neg(x):
    return -x


def make(act, dtype, scale):
    @triton.jit
    def apply(dst, src, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + i, (act(tl.load(src + i, mask=i < n)) * scale).to(dtype), mask=i < n)

    return apply


if __name__ == "__main__":
    from tunedsl.backends import triton as bt

    two, three = tl.constexpr(2), tl.constexpr(3)
    kernels = [make(relu, tl.float16, two), make(relu, tl.float16, two),
               make(neg, tl.float16, two), make(relu, tl.bfloat16, two),
               make(relu, tl.float16, three)]
    print(*[bt.kernel_info(k).source_hash for k in kernels])
"""


def test_what_an_interpreted_kernel_reads_from_its_closure_is_part_of_it(tmp_path: Path) -> None:
    """A kernel made by a factory under the interpreter: the Triton function, ``tl.dtype``
    and ``tl.constexpr`` it reads from its closure were left out of its identity (Triton's
    hash on a GPU has them), so ``make(relu)`` and ``make(neg)`` were one kernel and the
    record tuned for one decided the other; the same factory call is one kernel in every
    process, and so is a plain value that function reads."""
    import os
    import subprocess

    env = {**os.environ, "TRITON_INTERPRET": "1"}

    def hashes(floor: str = "0.0") -> list[str]:
        script = tmp_path / f"ks_closure_reads_{floor.replace('.', '_')}.py"
        script.write_text(CLOSURE_READS.format(floor=floor), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first, same, other_act, other_dtype, other_scale = hashes()
    assert same == first
    assert len({first, other_act, other_dtype, other_scale}) == 4
    assert hashes()[0] == first
    assert hashes("1.0")[0] != first  # a plain value the closure's function reads


MODULE_VALUES_LIB = """\
import triton.language as tl

WIDTH = tl.constexpr({width})
ACC = tl.{acc}
"""

MODULE_VALUES_KERNEL = """\
import triton
import triton.language as tl

import ks_module_values_lib as lib


@triton.jit
def scale(dst, src, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, (tl.load(src + i, mask=i < n) * lib.WIDTH).to(lib.ACC), mask=i < n)


if __name__ == "__main__":
    from tunedsl.backends import triton as bt

    print(bt.kernel_info(scale).source_hash)
"""


def test_a_value_a_compiled_kernel_reads_through_a_module_is_part_of_it(tmp_path: Path) -> None:
    """``lib.WIDTH`` (a ``tl.constexpr``) and ``lib.ACC`` (a ``tl.dtype``) read through a
    module: Triton's hash leaves both out (it records only the globals a kernel names), and
    tunedsl added only ``tl.dtype`` globals, so on a GPU a kernel whose module was edited
    kept the record tuned for the old values. The interpreter's identity had them."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # Triton's own hash

    def source_hash(width: int, acc: str) -> str:
        where = tmp_path / f"w{width}_{acc}"
        where.mkdir()
        (where / "ks_module_values_lib.py").write_text(
            MODULE_VALUES_LIB.format(width=width, acc=acc), encoding="utf-8"
        )
        (where / "ks_module_values.py").write_text(MODULE_VALUES_KERNEL, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "ks_module_values.py"], env=env, cwd=where, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    first = source_hash(4, "float16")
    assert len({first, source_hash(8, "float16"), source_hash(4, "bfloat16")}) == 3


PLAIN_THROUGH_MODULE = """\
import triton
import triton.language as tl

import ks_plain_module_lib as lib


@triton.jit
def scale(dst, src, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n) * lib.W, mask=i < n)


if __name__ == "__main__":
    from tunedsl.backends import triton as bt

    print(bt.kernel_info(scale).source_hash)
"""


@pytest.mark.parametrize("interpret", [True, False])
def test_a_plain_value_a_kernel_reads_through_a_module_is_part_of_it(
    tmp_path: Path, interpret: bool
) -> None:
    """``lib.W`` with ``W = 2`` in the module: the interpreter reads the value as the kernel
    runs, and Triton compiles it in as a constant (``W = 3`` computes other results), but
    only plain values read from the kernel's own globals were part of it (under the
    interpreter; on a GPU, Triton's hash leaves it out), so the record of one decided the
    other's calls."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"

    def source_hash(width: str) -> str:
        where = tmp_path / f"w{width}"
        where.mkdir()
        (where / "ks_plain_module_lib.py").write_text(f"W = {width}\n", encoding="utf-8")
        (where / "ks_plain_module.py").write_text(PLAIN_THROUGH_MODULE, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "ks_plain_module.py"], env=env, cwd=where, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    first = source_hash("2")
    assert len({first, source_hash("3"), source_hash("2.5")}) == 3


HEURISTIC_THROUGH_MODULE = """\
import triton
import triton.language as tl

import ks_heuristic_module_lib as lib


def wide(args):
    return lib.W * 2


@triton.heuristics({"BLOCK": lambda args: lib.W, "WIDE": wide})
@triton.jit
def fill(dst, n, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(dst + i, WIDE, mask=i < n)


if __name__ == "__main__":
    from tunedsl.backends import triton as bt

    print(bt.kernel_info(fill).source_hash)
"""


@pytest.mark.parametrize("interpret", [True, False])
def test_a_value_a_heuristic_reads_through_a_module_is_part_of_the_kernel(
    tmp_path: Path, interpret: bool
) -> None:
    """``@triton.heuristics({"BLOCK": lambda args: lib.W})``: ``W = 32`` in the module
    launches another kernel than ``W = 16`` for every configuration, but only the values a
    heuristic reads from its own globals or closure were part of it, so the record tuned
    for one decided the other's calls."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"

    def source_hash(value: str) -> str:
        where = tmp_path / f"w{len(list(tmp_path.iterdir()))}"
        where.mkdir()
        lib = f"import triton.language as tl\n\nW = {value}\n"
        (where / "ks_heuristic_module_lib.py").write_text(lib, encoding="utf-8")
        (where / "ks_heuristic_module.py").write_text(HEURISTIC_THROUGH_MODULE, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "ks_heuristic_module.py"], env=env, cwd=where, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    first = source_hash("16")
    assert source_hash("16") == first  # the same value: the same kernel in every process
    assert len({first, source_hash("32"), source_hash("tl.constexpr(64)")}) == 3


HEURISTIC_ENUMS = """\
import enum

import triton
import triton.language as tl


class Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"


ACT = Act.RELU


def kernel(act):
    @triton.heuristics({"GELU": lambda args: act is Act.GELU, "SAME": lambda args: ACT.value})
    @triton.jit
    def k(x, n, GELU: tl.constexpr, SAME: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x + offs, tl.load(x + offs, mask=offs < n) + GELU, mask=offs < n)

    return k


def hashes():
    from tunedsl.backends import triton as bt

    made = [bt.kernel_info(kernel(a)).source_hash for a in (Act.RELU, Act.RELU, Act.GELU)]
    global ACT
    ACT = Act.GELU
    return [*made, bt.kernel_info(kernel(Act.RELU)).source_hash]
"""


def test_an_enum_member_a_heuristic_reads_is_part_of_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An activation chosen by an ``enum.Enum`` member that a heuristic reads (from its
    closure or a global: ``lambda args: act is Act.GELU``) computes another parameter for
    another member, so another kernel, on a GPU too; an enum member was no plain value,
    so it was left out, and the record tuned for one decided the other's calls. Its repr
    (class, name and value) is the same in every process."""
    (tmp_path / "ks_heuristic_enums.py").write_text(HEURISTIC_ENUMS)
    monkeypatch.syspath_prepend(str(tmp_path))
    relu, same, gelu, global_gelu = importlib.import_module("ks_heuristic_enums").hashes()
    assert relu == same
    assert len({relu, gelu, global_gelu}) == 3


def test_what_a_heuristic_reads_through_an_object_is_hashed_without_running_a_property() -> None:
    """``lambda args: cfg.lim`` and ``lambda args: cfg.calls``: the plain attribute is part of
    the kernel (another value, another hash), the property is not run to find its value (it
    may do anything: the counter stays at 0), and the same object state is the same hash."""
    import triton
    import triton.language as tl

    from tunedsl.backends.kernel_source import interpreted_source_hash

    class Limits:
        def __init__(self, lim: int) -> None:
            self.lim, self.runs = lim, 0

        @property
        def calls(self) -> int:
            self.runs += 1
            return self.runs

    def kernel_reading(cfg: Limits) -> Any:
        @triton.heuristics({"LIM": lambda args: cfg.lim, "N": lambda args: cfg.calls})
        @triton.jit
        def k(x, LIM: tl.constexpr, N: tl.constexpr):
            pass

        return k

    small, same, large = Limits(64), Limits(64), Limits(128)
    hashes = [interpreted_source_hash(kernel_reading(c)) for c in (small, same, large)]
    assert hashes[0] == hashes[1] != hashes[2]
    assert small.runs == same.runs == large.runs == 0


def test_state_in_slots_and_attribute_dicts_is_part_of_the_kernel() -> None:
    """``cfg.lim`` of a class with ``__slots__`` (a slotted dataclass) is read through the
    slot (the lookup found the slot's descriptor and stopped, so an edit kept the record);
    ``cfg.opts.lim`` of an attribute-style dict (``__getattr__ = dict.__getitem__``, which
    raises ``KeyError`` for a name it lacks) is hashed, not a crash of the first call."""
    import triton
    import triton.language as tl

    from tunedsl.backends.kernel_source import interpreted_source_hash

    class AttrDict(dict):  # type: ignore[type-arg]
        __getattr__ = dict.__getitem__

    class Slotted:
        __slots__ = ("lim", "opts")

        def __init__(self, lim: int) -> None:
            self.lim, self.opts = lim, AttrDict(lim=lim)

    def kernels(cfg: Slotted) -> list[Any]:
        @triton.heuristics({"LIM": lambda args: cfg.lim})
        @triton.jit
        def by_slot(x, LIM: tl.constexpr):
            pass

        @triton.heuristics({"LIM": lambda args: cfg.opts.lim})
        @triton.jit
        def by_attribute_dict(x, LIM: tl.constexpr):
            pass

        return [by_slot, by_attribute_dict]

    small, same, large = (
        [interpreted_source_hash(k) for k in kernels(Slotted(v))] for v in (64, 64, 128)
    )
    assert small == same
    assert all(a != b for a, b in zip(small, large, strict=True))


def test_a_global_holding_itself_is_left_out_of_the_identity_not_a_crash() -> None:
    """``REC = [1]; REC.append(REC)`` read by a heuristic: Triton launches such a kernel; the
    identity walked the list without end (a RecursionError from the first call)."""
    import triton
    import triton.language as tl

    from tunedsl.backends.kernel_source import interpreted_source_hash

    held: list[Any] = [1]
    held.append(held)

    @triton.heuristics({"S": lambda args: held[0]})
    @triton.jit
    def k(x, S: tl.constexpr):
        pass

    assert interpreted_source_hash(k) == interpreted_source_hash(k)


SEEDED = """\
import dataclasses
import enum
import functools
import json
import sys

import numpy as np
import triton
import triton.language as tl

from tunedsl.backends import triton as bt

W = int(sys.argv[1])


class Features(enum.Enum):
    FAST = frozenset({"vec4", "unroll", "prefetch", "split", "swizzle", f"w{W}"})


class Pick:
    def __init__(self, w):
        self.w, self.tags = w, {"a", "b", "c", "d", "e", f"w{w}"}

    def __call__(self, args):
        return self.w

    def meth(self, args):
        return self.w


@dataclasses.dataclass
class Opts:
    w: int
    extra: list = dataclasses.field(default_factory=list)


def by(args, w):
    return int(getattr(w, "w", w))


def pick(args):
    return W


CFG = Pick(W)
NPW = np.int64(W)
TABLE = {"pick": pick}
KEYED = {1: W, "1": 32}
MODE = Features.FAST

HEURISTICS = {
    "enum member holding a set": lambda args: len(Features.FAST.value),
    "default argument": lambda args, w=W: w,
    "callable object": Pick(W),
    "bound method": Pick(W).meth,
    "method of a global object": lambda args: CFG.meth(args),
    "partial binding a numpy number": functools.partial(by, w=np.int64(W)),
    "partial binding a dataclass": functools.partial(by, w=Opts(W)),
    "numpy number global": lambda args: int(NPW),
    "helper through a table": lambda args: TABLE["pick"](args),
    "dict with 1 and '1' as keys": lambda args: KEYED[1],
}


def made(heuristic):
    @triton.heuristics({"B": heuristic})
    @triton.jit
    def k(x, B: tl.constexpr):
        pass

    return k


@triton.jit
def reads_enum(x):
    if MODE is not None:
        pass


hashes = {name: bt.kernel_info(made(h)).source_hash for name, h in HEURISTICS.items()}
hashes["enum member holding a set, read by the kernel"] = bt.kernel_info(reads_enum).source_hash
print(json.dumps(hashes))
"""


def test_what_a_heuristic_holds_is_part_of_the_kernel_alike_in_every_process(
    tmp_path: Path,
) -> None:
    """Each heuristic here reads state its source does not show: a default argument, a
    callable object's or a bound method's own object, a global object's method reading
    ``self.w``, a ``functools.partial``'s numpy number or dataclass, a numpy global, a helper
    called through a table, a dict holding both ``1`` and ``"1"``, an enum member holding a
    frozenset. ``W`` 64 and 128 were one kernel (a record reused for the other); an enum
    member holding a set was another kernel under each hash seed (retuned in every process).
    Now: the same ``W`` is the same hash in every process and under every seed, another
    ``W`` another hash."""
    import json
    import os
    import subprocess

    import tunedsl

    (tmp_path / "ks_seeded.py").write_text(SEEDED, encoding="utf-8")

    def hashes(w: int, seed: int) -> dict[str, str]:
        env = dict(os.environ, TRITON_INTERPRET="1", PYTHONHASHSEED=str(seed))
        here = str(Path(tunedsl.__file__).resolve().parents[1])  # this tunedsl, not another
        env["PYTHONPATH"] = os.pathsep.join([here, env.get("PYTHONPATH", "")])
        done = subprocess.run(
            [sys.executable, "ks_seeded.py", str(w)], env=env, cwd=tmp_path, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    first, same, other = hashes(64, 1), hashes(64, 2), hashes(128, 1)
    assert len(first) == 11
    assert {n for n in first if first[n] != same[n]} == set()  # alike under every seed
    assert {n for n in first if first[n] == other[n]} == set()  # another W: another kernel


def test_a_table_holding_a_helper_that_reads_the_table_is_hashed_not_a_crash() -> None:
    """``TABLE = {"pick": pick}`` where ``pick`` reads ``TABLE`` itself: the helpers a table
    holds are part of the kernel, and one met again while its own digest is being made is
    its name alone there (walking it again never ended: a RecursionError)."""
    import triton
    import triton.language as tl

    from tunedsl.backends.kernel_source import interpreted_source_hash

    def pick(args: Any) -> int:
        return int(table["size"](args)) if args else 1

    def size(args: Any) -> int:
        return len(table)

    table: dict[str, Any] = {"pick": pick, "size": size}

    @triton.heuristics({"B": lambda args: table["pick"](args)})
    @triton.jit
    def k(x, B: tl.constexpr):
        pass

    first = interpreted_source_hash(k)
    assert interpreted_source_hash(k) == first
    table["size"] = lambda args: 2  # another helper in the table: another kernel
    assert interpreted_source_hash(k) != first


LIBRARY_STATE = """\
import fractions
import functools
import json
import logging
import sys
import threading
import types

import triton
import triton.language as tl

from tunedsl.backends import triton as bt

log = logging.getLogger(__name__)
STEP = int(sys.argv[1])


def own_helper(n):
    return 64 * STEP


class Holder:
    def __init__(self):
        self.thread = threading.main_thread()  # a library's object in the user's state
        self.log = log
        self.lim = 64 * STEP


HOLDER = Holder()
NS = types.SimpleNamespace(lim=64 * STEP)
RATIO = fractions.Fraction(STEP, 3)


def made(heuristic):
    @triton.heuristics({"B": heuristic})
    @triton.jit
    def k(x, B: tl.constexpr):
        pass

    return k


HEURISTICS = {
    "current thread": lambda args: 64 if threading.current_thread().name else 32,
    "module logger": lambda args: (log.debug("n=%s", args), 64)[1],
    "own helper calling a library": lambda args: own_helper(len(threading.enumerate())),
    "object holding a thread and a logger": lambda args: HOLDER.lim,
    "partial of a library function": functools.partial(max, 64),
    "namespace": lambda args: NS.lim,
    "library value": lambda args: int(RATIO * 64),
}
first = {name: bt.kernel_info(made(h)).source_hash for name, h in HEURISTICS.items()}
# The process runs on: another logger, threads started, a thread's own first launch.
logging.getLogger("a.library.imported.later").setLevel(logging.INFO)
threads = [threading.Thread(target=lambda: None) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
later = {name: bt.kernel_info(made(h)).source_hash for name, h in HEURISTICS.items()}
print(json.dumps([first, later]))
"""


def test_a_heuristic_calling_the_standard_library_is_one_kernel_in_every_process(
    tmp_path: Path,
) -> None:
    """Heuristics calling ``threading.current_thread()``, logging through a module logger,
    or reading an object that holds a thread: the standard library's functions and objects
    are named, not walked into (the running threads' ids, the logging manager's registry
    were part of the kernel: another kernel in every process, and after any new logger).
    The user's own helper and state still are: another ``STEP``, another kernel."""
    import json
    import os
    import subprocess

    import tunedsl

    (tmp_path / "ks_library_state.py").write_text(LIBRARY_STATE, encoding="utf-8")

    def hashes(step: int) -> list[dict[str, str]]:
        env = dict(os.environ, TRITON_INTERPRET="1")
        here = str(Path(tunedsl.__file__).resolve().parents[1])  # this tunedsl, not another
        env["PYTHONPATH"] = os.pathsep.join([here, env.get("PYTHONPATH", "")])
        done = subprocess.run(
            [sys.executable, "ks_library_state.py", str(step)], env=env, cwd=tmp_path,
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout.strip().splitlines()[-1]))

    (first, later), (again, _), (other, _) = hashes(1), hashes(1), hashes(2)
    assert len(first) == 7
    assert {n for n in first if first[n] != later[n]} == set()  # within the process
    assert {n for n in first if first[n] != again[n]} == set()  # in the next process
    edited = {n for n in first if first[n] != other[n]}  # the user's own code and state
    assert edited == {
        "own helper calling a library", "object holding a thread and a logger", "namespace",
        "library value",
    }  # fmt: skip


def test_what_a_library_holds_is_named_and_the_users_own_code_walked() -> None:
    """The rule for what is walked: the user's own modules (a script, a test's module)
    are; the standard library's and installed packages' (under ``site-packages``) are not."""
    import logging
    import threading

    from tunedsl.backends.function_reads import library_function, library_module, user_object

    assert library_module("threading") and library_module("logging.handlers")
    assert library_module("sys") and library_module("triton.language")
    assert library_module("pytest")  # an installed third-party package
    assert not library_module(__name__)  # this test's own module: the user's code
    assert library_function(threading.current_thread)
    assert not library_function(test_what_a_library_holds_is_named_and_the_users_own_code_walked)
    assert not user_object(logging.getLogger("x")) and not user_object(threading.main_thread())

    class Mine:
        pass

    assert user_object(Mine())


def test_a_large_value_a_heuristic_reads_is_its_size_alone() -> None:
    """A table of 200,000 entries, an object holding a million ints: written part by part
    they took seconds at the first launch and megabytes of identity text; over
    ``VALUE_PARTS`` parts a value is a marker naming its kind and size (not covered: such a
    table belongs in ``key=``; its text is short, so no part of it was walked), and another
    size is another kernel."""

    import triton
    import triton.language as tl

    from tunedsl.backends.heuristic_reads import heuristic_sources

    parts = 4096  # function_reads.VALUE_PARTS
    table = {i: i % 7 for i in range(200_000)}

    class Holder:
        def __init__(self) -> None:
            self.items = [list(range(50)) for _ in range(20_000)]

    holder = Holder()

    def made(heuristic: Any) -> Any:
        @triton.heuristics({"B": heuristic})
        @triton.jit
        def k(x, B: tl.constexpr):
            pass

        return k

    by_table = made(lambda args: 64 if table.get(args["n"], 0) >= 0 else 128)
    by_object = made(lambda args: 64 if holder.items else 128)
    for kernel, marker in ((by_table, "<dict of 200000 items"), (by_object, "<list of 20000")):
        text = "\n".join(heuristic_sources(kernel))
        assert marker in text and len(text) < 10 * parts
    before = heuristic_sources(by_table)
    table[-1] = 0
    assert heuristic_sources(by_table) != before  # another size: another kernel
    small = {i: i for i in range(parts // 2)}
    by_small = made(lambda args: small[1])
    before = heuristic_sources(by_small)
    small[5] = -5  # a value under the cap is written whole: an edit is another kernel
    assert heuristic_sources(by_small) != before


def test_a_table_another_thread_changes_is_hashed_without_an_error() -> None:
    """A dict a heuristic reads (directly, or in an object's attributes), changed by
    another thread as the kernel's identity is made: each container is copied at once, so
    no ``RuntimeError: dictionary keys changed during iteration`` reaches the launch."""
    import threading

    import triton
    import triton.language as tl

    from tunedsl.backends.heuristic_reads import heuristic_sources

    table = {i: i % 7 for i in range(3000)}

    class Live:
        def __init__(self) -> None:
            self.seen = {i: [i] for i in range(2000)}

    live = Live()

    @triton.heuristics(
        {"B": lambda args: table.get(args["n"], 64), "C": lambda args: len(live.seen)}
    )
    @triton.jit
    def k(x, B: tl.constexpr, C: tl.constexpr):
        pass

    stop = threading.Event()

    def mutate() -> None:
        i = 10**7
        while not stop.is_set():
            table[i] = 1
            table.pop(i - 1, None)
            live.seen[i] = [i]
            live.seen.pop(i - 1, None)
            i += 1

    thread = threading.Thread(target=mutate, daemon=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns often: a change lands mid-read
    thread.start()
    try:
        for _ in range(20):
            assert heuristic_sources(k)
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)


PROFILED = """
import json, sys
import triton, triton.language as tl
from tunedsl.backends.heuristic_reads import heuristic_sources

WIDTH = int(sys.argv[1])


def helper(n):
    return WIDTH * 2


@triton.heuristics({"B": lambda args: helper(args["n"]) + WIDTH})
@triton.jit
def k(x, n, B: tl.constexpr):
    pass


print(json.dumps(heuristic_sources(k)))
"""


def test_a_script_run_under_a_profiler_is_the_users_code(tmp_path: Path) -> None:
    """Under ``python -m cProfile`` the script's module is run by the profiler, whose own
    ``__main__`` is the standard library's: the script's heuristic and helper were taken for
    a library's, named and not walked, so an edit of what they read was the same kernel."""
    script = tmp_path / "profiled.py"
    script.write_text(PROFILED)
    texts = []
    for width in ("64", "128"):
        out = subprocess.run(
            [sys.executable, "-m", "cProfile", "-o", os.devnull, str(script), width],
            capture_output=True, text=True, check=True, cwd=tmp_path,
        )  # fmt: skip
        texts.append(out.stdout.strip().splitlines()[-1])
    assert texts[0] != texts[1]
    assert "WIDTH=64" in texts[0] and "def helper" in texts[0], texts[0]


def test_a_helper_behind_lru_cache_is_walked() -> None:
    """``@functools.lru_cache`` wraps a helper in an object no function: it was left out, so
    an edit of the helper or of what it reads was the same kernel."""
    import functools

    import triton
    import triton.language as tl

    from tunedsl.backends.heuristic_reads import heuristic_sources

    scope: dict[str, Any] = {"W": 64, "functools": functools}
    exec(
        "@functools.lru_cache(maxsize=None)\ndef pick(n):\n    return W\n", scope
    )  # a module's globals, as a helper has

    @triton.heuristics({"B": lambda args: pick(args["n"])})
    @triton.jit
    def k(x, n, B: tl.constexpr):
        pass

    pick = scope["pick"]  # the heuristic reads it, through its closure
    before = heuristic_sources(k)
    assert any(t.startswith("pick=") for t in before) and "W=64" in before, before
    scope["W"] = 128
    assert heuristic_sources(k) != before


class _Limits:
    def __init__(self, hi: int) -> None:
        from tunedsl import Space

        self.hi = hi
        self.space = Space(BLOCK=[32, 64, 128], PAD=list(range(5000)), constraint=self.ok)

    def ok(self, c: Any) -> bool:
        return bool(c["BLOCK"] <= self.hi and c["PAD"] < 2)


def test_a_method_of_an_object_holding_a_space_reads_alike_before_and_after_a_search() -> None:
    from tunedsl.backends.heuristic_reads import state_text

    limits = _Limits(128)
    before = state_text(limits.space.constraint)
    assert limits.space.first_valid() is not None  # fills the space's caches
    assert state_text(limits.space.constraint) == before
    assert state_text(_Limits(32).space.constraint) != before  # what self holds counts
