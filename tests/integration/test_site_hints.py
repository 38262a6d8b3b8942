"""A new user's DSL scripts under ``tunedsl run`` in real subprocesses (real Triton kernels
under the interpreter): what a site says when an option names no argument, where the
warnings of a decision point, and the hint a site gives once it has tuned many sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_triton

HEADER = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv, workload


@triton.jit
def scale(x, out, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) * 2, mask=m)

"""


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    out = dict(os.environ, TUNEDSL_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")
    for name in ("TUNEDSL_QUIET", "TUNEDSL_RECORDS_PATH", "TUNEDSL_AUTOTUNE"):
        out.pop(name, None)
    out.update(extra)
    return out


def tunedsl(tmp_path: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env(tmp_path, **extra),
    )  # fmt: skip


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# -- restore_value= / reset_to_zero= / verify= naming no argument -----------------------------


OPTION_SITES = """\
def run(option, value):
    x = torch.randn(300)
    out = torch.zeros(300)
    n = 300
    try:
        if option == "restore_value":
            autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
                     restore_value=value, scale(x, out, n, TILE=$tile))  # SITE restore
        elif option == "reset_to_zero":
            autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
                     reset_to_zero=value, scale(x, out, n, TILE=$tile))  # SITE reset
        else:
            autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
                     verify=value, scale(x, out, n, TILE=$tile))  # SITE verify
    except Exception as err:
        print(option, "|", type(err).__name__, "|", err)
    else:
        print(option, "| no error")


run("restore_value", ["outt"])
run("reset_to_zero", ["ot"])
run("verify", ["outt"])
run("restore_value", ["out", 3])
run("reset_to_zero", "n")
run("verify", ["n"])
"""


def test_an_option_naming_no_argument_names_the_users_line_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "opts.py"
    path.write_text(HEADER + OPTION_SITES)
    proc = tunedsl(tmp_path, "run", str(path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 6, proc.stdout
    restore, reset, verify = (
        line_of(path, f"# SITE {s}") - 1 for s in ("restore", "reset", "verify")
    )
    # Every message starts at the site's file:line, as every other error of a site does.
    for text, site in zip(lines, [restore, reset, verify, restore, reset, verify], strict=True):
        assert "| UsageError |" in text, text
        assert f"| {path}:{site}:" in text, text
    assert "restore_value=" in lines[0] and "'outt'" in lines[0]
    assert "did you mean 'out'" in lines[0]  # the parameter it is closest to
    assert "reset_to_zero=" in lines[1] and "did you mean 'out'" in lines[1]
    assert "verify=" in lines[2] and "did you mean 'out'" in lines[2]
    assert "restore_value=" in lines[3] and "['out', 3]" in lines[3]
    assert "reset_to_zero=" in lines[4] and "'n'" in lines[4] and "not a tensor" in lines[4]
    assert "verify=" in lines[5] and "'n'" in lines[5] and "x, out" in lines[5]


# -- warnings of a decision point at the user's line ------------------------------------------


RULED = """\
def double(x):
    out = torch.empty_like(x)
    n = x.numel()
    autotune(space=dict(tile=[64, 128, 256]), blocks=cdiv(n, $tile),
             scale(x, out, n, TILE=$tile))  # SITE
    return out


@workload
def sizes(n=1024):
    x = torch.randn(n)
    torch.testing.assert_close(double(x), x * 2)


if __name__ == "__main__":
    sizes(100_000)  # beyond the sweep
    print("OK")
"""


def test_warnings_of_a_rule_decision_point_at_the_users_line(tmp_path: Path) -> None:
    path = tmp_path / "kern.py"
    path.write_text(HEADER + RULED)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"n": n} for n in (256, 512, 1024, 2048)]))
    sweep = tunedsl(tmp_path, "sweep", "--no-ray", str(path), "--shapes", str(shapes))
    assert sweep.returncode == 0, sweep.stderr
    built = tunedsl(tmp_path, "rules", "build", "--out", str(tmp_path / "rules"))
    assert built.returncode == 0, built.stderr
    # A fresh user with the shipped rule, where tuning cannot run: the key beyond the sweep
    # takes the rule's nearest pick, with one warning, at the line of the user's site.
    proc = tunedsl(
        tmp_path, "run", str(path),
        TUNEDSL_CACHE_DIR=str(tmp_path / "fresh"), TUNEDSL_RECORDS_PATH=str(tmp_path / "rules"),
        TUNEDSL_AUTOTUNE="cached",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "OK" in proc.stdout
    assert "outside the range of rule" in proc.stderr, proc.stderr
    site = line_of(path, "# SITE") - 1
    assert f"{path}:{site}: CacheWarning: a key outside the range" in proc.stderr, proc.stderr
    assert "tunedsl/runtime" not in proc.stderr, proc.stderr


# -- a site that tunes many distinct keys ------------------------------------------------------


LOOP = """\
def double(x, bucket):
    out = torch.empty_like(x)
    n = x.numel()
    if bucket:
        autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
                 key=triton.next_power_of_2(n), scale(x, out, n, TILE=$tile))  # SITE bucketed
    else:
        autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
                 scale(x, out, n, TILE=$tile))  # SITE plain
    return out


@workload
def sweep_all():
    for n in range(100, 100 + 16 * {count}, 16):  # every n its own key
        x = torch.randn(n)
        torch.testing.assert_close(double(x, sys.argv[1:] == ["bucket"]), x * 2)


import sys

if __name__ == "__main__":
    sweep_all()
    print("OK")
"""


def test_a_site_that_tunes_many_sizes_says_once_how_to_stop_it(tmp_path: Path) -> None:
    from tunedsl.runtime.many_keys import MANY_TUNED_KEYS

    path = tmp_path / "loop.py"
    path.write_text(HEADER + LOOP.format(count=MANY_TUNED_KEYS + 3))
    proc = tunedsl(tmp_path, "run", str(path), "plain")
    assert proc.returncode == 0, proc.stderr
    site = line_of(path, "# SITE plain") - 1
    assert proc.stderr.count("distinct keys") == 1, proc.stderr
    warning = next(line for line in proc.stderr.splitlines() if "distinct keys" in line)
    assert f"{path}:{site}: UserWarning: {path}:{site}:" in warning, warning
    assert f"tuned {MANY_TUNED_KEYS} distinct keys" in warning
    assert "bucket the sizes with key=" in warning and "docs/shapes.md" in warning
    # Fewer keys than that (the same loop bucketed by key=): no hint.
    quiet = tunedsl(tmp_path, "run", str(path), "bucket")
    assert quiet.returncode == 0, quiet.stderr
    assert "distinct keys" not in quiet.stderr
    # A sweep tunes every size on purpose: not told.
    sweep = tunedsl(tmp_path, "sweep", "--no-ray", str(path), TUNEDSL_CACHE_DIR=str(tmp_path / "s"))
    assert sweep.returncode == 0, sweep.stderr
    assert f"{MANY_TUNED_KEYS + 3} records written" in sweep.stderr + sweep.stdout
    assert "distinct keys" not in sweep.stderr


WHAT_DIFFERS = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune_launch, cdiv


@triton.jit
def addc(x, bias, out, n, C: tl.constexpr, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    m = i < n
    v = tl.load(x + i, mask=m) + C
    if bias is not None:
        v += tl.load(bias + i, mask=m)
    tl.store(out + i, v, mask=m)


def add(x, c, key, name, bias=None):
    out = torch.empty_like(x)
    n = x.numel()
    autotune_launch(addc, space={{"TILE": [64, 128]}}, grid=lambda cfg: (cdiv(n, cfg.TILE),),
                    args=(x, bias, out, n), kwargs=lambda cfg: {{"C": c, "TILE": cfg.TILE}},
                    key=key, name=name)
    expected = x + c + (0 if bias is None else bias)
    torch.testing.assert_close(out, expected.to(out.dtype))


for c in range({count}):  # one key= value, another constexpr each time
    add(torch.randn(300), c, "one", "flag")
for dtype in (torch.float16, torch.float32, torch.float64, torch.int32):
    for c in (2, 3):
        for with_bias in (False, True):
            x = torch.ones(300, dtype=dtype)
            add(x, c, "one", "mixed", torch.ones_like(x) if with_bias else None)
for n in range(100, 100 + 16 * {count}, 16):  # every size its own key= value
    add(torch.randn(n), 1, n, "sizes")
print("OK")
"""


def test_the_many_keys_warning_names_what_differs_and_the_advice_that_fits(
    tmp_path: Path,
) -> None:
    """Keys that differ only in a constexpr, a dtype or None-or-a-tensor (key= one value):
    the warning names those and says each is its own kernel, tuned once per value, with no
    advice to coarsen key= (which cannot merge them); keys that differ in key= keep it."""
    from tunedsl.runtime.many_keys import MANY_TUNED_KEYS

    path = tmp_path / "differs.py"
    path.write_text(WHAT_DIFFERS.format(count=MANY_TUNED_KEYS + 1))
    # Each site its own warning, even where two texts were alike (three name= on one line).
    proc = tunedsl(tmp_path, "run", str(path), PYTHONWARNINGS="always::UserWarning")
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "distinct keys" in line]
    assert len(warnings) == 3, proc.stderr
    flag, mixed, sizes = warnings
    for warning in (flag, mixed):
        assert "the calls vary in size" not in warning, warning
        assert "coarser" not in warning and "bucket the sizes" not in warning, warning
        assert "its own kernel" in warning and "tuned once per value" in warning, warning
        assert "tunedsl sweep" in warning and "docs/shapes.md" in warning, warning
        assert "key=" not in warning.split("differ in", 1)[1].split(". ")[0], warning
    assert "they differ in the constexpr `C` (0, 1, 2, ...)." in flag, flag
    assert "the constexpr `C` (2, 3)" in mixed, mixed
    assert "the dtype of `out` and `x` (float16, float32, float64, ...)" in mixed, mixed
    assert "whether `bias` is None" in mixed, mixed
    assert "they differ in the key= value (16 distinct)." in sizes, sizes
    assert "make key= coarser" in sizes and "constexpr" not in sizes, sizes


PRUNE_READS_SIZES = """\
import sys
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv


@triton.jit
def vcopy(x, y, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)


def cp(x, y, n):
    return autotune(space=dict(TILE=[16, 32]), blocks=cdiv(n, $TILE), key=KEY,
                    prune=lambda cs, args: [c for c in cs if c.TILE <= args["n"]],
                    vcopy(x, y, n, TILE=$TILE))


x = torch.randn(4096); y = torch.empty(4096)
for i in range(1, COUNT):
    cp(x, y, 32 * i)
print("OK")
"""


@pytest.mark.parametrize("key", ["n", "triton.next_power_of_2(n)"])
def test_the_many_keys_warning_under_a_prune_reading_each_size_leaves_out_key_advice(
    tmp_path: Path, key: str
) -> None:
    """prune= reads the exact n: every n is its own key whatever key= is. The warning said
    "make key= coarser, e.g. key=triton.next_power_of_2(n)" (key=n already), and followed,
    it still tuned every size."""
    from tunedsl.runtime.many_keys import MANY_TUNED_KEYS

    path = tmp_path / "sizes.py"
    path.write_text(
        PRUNE_READS_SIZES.replace("KEY", key).replace("COUNT", str(MANY_TUNED_KEYS + 1))
    )
    proc = tunedsl(tmp_path, "run", str(path))
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr
    warning = next(line for line in proc.stderr.splitlines() if "distinct keys" in line)
    assert "`n`, which prune= reads" in warning, warning
    assert "make key= coarser" not in warning and "next_power_of_2(n), docs" not in warning
    assert "make prune= read something coarse that key= holds" in warning, warning
    assert "let prune= decide from the configurations alone" in warning, warning


# -- blocks= from a function ------------------------------------------------------------------


GRID_SITES = """\
def grid(n, tile, shape):
    return {"four": (cdiv(n, tile), 1, 1, 1), "list": [cdiv(n, tile), 1]}[shape]


def run(shape):
    x, out, n = torch.randn(300), torch.zeros(300), 300
    try:
        autotune(space=dict(tile=[64, 128]), blocks=grid(n, $tile, shape),
                 scale(x, out, n, TILE=$tile))  # SITE
    except Exception as err:
        print(type(err).__name__, "|", err)


run("four")
run("list")
"""


def test_a_function_in_blocks_returning_a_tuple_of_wrong_length_is_named_as_such(
    tmp_path: Path,
) -> None:
    path = tmp_path / "grids.py"
    path.write_text(HEADER + GRID_SITES)
    proc = tunedsl(tmp_path, "run", str(path))
    assert proc.returncode == 0, proc.stderr
    four, listed = proc.stdout.strip().splitlines()
    site = line_of(path, "# SITE") - 1
    for text in (four, listed):
        assert text.startswith(f"UsageError | {path}:{site}:"), text  # the site's place
    # Four dimensions: not "a nested tuple", which the user never wrote.
    assert "the tuple (5, 1, 1, 1) of 4 dimensions" in four and "nested" not in four, four
    # The fix indexes what the user wrote (`grid` is their function, not a tuple).
    fix = "blocks=(grid(n, $tile, shape)[0], grid(n, $tile, shape)[1])"
    assert "blocks=grid(n, $tile, shape) is one value, the list [5, 1]" in listed, listed
    assert fix in listed, listed


# -- options whose mistake the values show: each at the site's place, with the fix -------------


VALUE_SITES = """\
def run(case):
    x, out, n = torch.randn(300), torch.zeros(300), 300
    space = "tile" if case == "space" else dict(tile=[64, 128])
    hint = [2, 4] if case == "hint" else None
    pre = (lambda: None) if case == "pre_hook" else None
    post = (lambda args: None) if case == "post_hook" else None
    try:
        autotune(space=space, blocks=cdiv(n, $tile), num_warps=hint, pre_hook=pre,
                 post_hook=post, scale(x, out, n, TILE=$tile))  # SITE
    except Exception as err:
        print(type(err).__name__, "|", err)
    else:
        print("no error")


for case in ["space", "hint", "pre_hook", "post_hook"]:
    run(case)
"""


def test_a_wrong_space_hint_or_hook_signature_is_named_at_the_site(tmp_path: Path) -> None:
    path = tmp_path / "values.py"
    path.write_text(HEADER + VALUE_SITES)
    proc = tunedsl(tmp_path, "run", str(path))
    assert proc.returncode == 0, proc.stderr
    space, hint, pre, post = proc.stdout.strip().splitlines()
    site = line_of(path, "# SITE") - 1
    for text in (space, hint, pre, post):
        assert text.startswith(f"UsageError | {path}:{site}:"), text
    assert "space= must be a dict of sequences" in space
    assert "num_warps=[2, 4] is a static hint" in hint
    # A hook that cannot take tunedsl's call: named before anything runs, with the form to
    # write (a post_hook without exception= was a bare TypeError from inside the tuner).
    assert "cannot be called as pre_hook(args)" in pre and "pre_hook=lambda args:" in pre
    assert "cannot be called as post_hook(args, exception=None)" in post, post
    assert "post_hook=lambda args, exception=None:" in post


# -- IPython: the traceback of a site's error ends at the cell's line -------------------------


CELLS = """\
%load_ext tunedsl
import torch, triton, triton.language as tl
from tunedsl import autotune, cdiv
exec(open("kernel.py").read())
def bad(x, out, n): return autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), reset_to_zero=["outt"], scale(x, out, n, TILE=$tile))

bad(torch.randn(300), torch.zeros(300), 300)
"""


def test_ipython_shows_a_sites_error_without_tunedsls_frames(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    (tmp_path / "kernel.py").write_text(HEADER.split("from tunedsl")[1].split("\n", 1)[1])
    proc = subprocess.run(
        [sys.executable, "-m", "IPython", "--simple-prompt", "--colors=nocolor"],
        input=CELLS, capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env=env(tmp_path),
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert "'outt' is not a parameter of scale(x, out, n, TILE)" in out, out
    assert "Cell In[5], line 1, in bad" in out, out  # the user's frames...
    assert "tunedsl/runtime" not in out and "site.py" not in out, out  # ...and only those


# -- tunedsl precompile under the interpreter -------------------------------------------------


CHECKED_WORKLOAD = """\
def double(x):
    out = torch.full_like(x, float("nan"))
    n = x.numel()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), scale(x, out, n, TILE=$tile))
    return out


@workload
def checked():
    x = torch.randn(300)
    torch.testing.assert_close(double(x), x * 2)


if __name__ == "__main__":
    checked()
    print("OK")
"""


def test_precompile_replay_under_the_interpreter_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "work.py"
    path.write_text(HEADER + CHECKED_WORKLOAD)
    ran = tunedsl(tmp_path, "run", str(path))  # a record to replay
    assert ran.returncode == 0 and "OK" in ran.stdout, ran.stderr
    # --replay asked Triton for the GPU's target and died with "0 active drivers".
    proc = tunedsl(tmp_path, "precompile", "--replay")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert "--replay: nothing to recompile in Triton's CPU interpreter" in out, out
    assert "--target cuda:90" in out


def test_a_workload_that_checks_outputs_is_told_that_precompile_does_not_launch(
    tmp_path: Path,
) -> None:
    path = tmp_path / "work.py"
    path.write_text(HEADER + CHECKED_WORKLOAD)
    proc = tunedsl(tmp_path, "precompile", str(path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "workload checked failed: AssertionError" in out, out
    assert "sites compile and do not launch" in out, out
    # At the user's failed check, not inside torch.testing.
    assert f"(at {path}:{line_of(path, 'assert_close(double(x)')})" in out, out


def test_a_workload_that_reads_a_results_config_is_told_a_site_returns_none_there(
    tmp_path: Path,
) -> None:
    """A workload that picks its output by the chosen configuration (``res.config.split``)
    failed on the ``None`` a site returns in precompile mode with a bare AttributeError."""
    path = tmp_path / "work.py"
    text = CHECKED_WORKLOAD.replace(
        "    autotune(space=dict(tile=[64, 128])", "    res = autotune(space=dict(tile=[64, 128])"
    ).replace("    return out\n", "    print(res.config.tile)\n    return out\n", 1)
    assert "res.config.tile" in text
    path.write_text(HEADER + text)
    proc = tunedsl(tmp_path, "precompile", str(path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "workload checked failed: AttributeError" in out, out
    assert "returns None here, not a LaunchResult" in out and "if res is not None" in out, out


RUNTIME_FIELD = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv, workload


@triton.jit
def rows_scale(x, n, BLOCK: tl.constexpr, ROWS):
    for r in tl.static_range(ROWS):
        i = (tl.program_id(0) * ROWS + r) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)


@workload
def scaled():
    x = torch.randn(1000)
    autotune(space=dict(rows=[2, 4]), blocks=cdiv(1000, 64 * $rows),
             rows_scale(x, 1000, BLOCK=64, ROWS=$rows))
"""


def test_precompile_names_a_field_given_to_a_parameter_not_declared_constexpr(
    tmp_path: Path,
) -> None:
    """The interpreter runs such a kernel; Triton's compiler refuses every configuration with
    its own message: the report names the parameter and the fix, as a tune's error does."""
    path = tmp_path / "rows.py"
    path.write_text(RUNTIME_FIELD)
    proc = tunedsl(tmp_path, "precompile", "--target", "cuda:90", str(path), TRITON_INTERPRET="0")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert out.count("failed: ") == 2, out
    assert "a configuration field reaches `ROWS`" in out, out
    assert "declare `ROWS: tl.constexpr`" in out, out


# -- errors of the tune itself name the site too ----------------------------------------------


TUNE_FAILS = """\
@triton.jit
def runtime_tile(x, out, n, TILE):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(out + i, tl.load(x + i, mask=i < n), mask=i < n)


def run(case):
    x, out, n = torch.randn(300), torch.zeros(300), 300
    try:
        if case == "not constexpr":
            autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
                     runtime_tile(x, out, n, TILE=$tile))  # SITE runtime
        else:
            autotune(space=dict(tile=[100, 30]), blocks=cdiv(n, $tile),
                     scale(x, out, n, TILE=$tile))  # SITE all fail
    except Exception as err:
        print(type(err).__name__, "|", str(err).splitlines()[0])


run("not constexpr")
run("all fail")
"""


def test_errors_of_the_tune_start_at_the_sites_place(tmp_path: Path) -> None:
    path = tmp_path / "fails.py"
    path.write_text(HEADER + TUNE_FAILS)
    proc = tunedsl(tmp_path, "run", str(path))
    assert proc.returncode == 0, proc.stderr
    runtime, failed = proc.stdout.strip().splitlines()
    first = line_of(path, "# SITE runtime") - 1
    second = line_of(path, "# SITE all fail") - 1
    assert runtime.startswith(f"UsageError | {path}:{first}:"), runtime
    assert "does not declare `tl.constexpr`" in runtime
    assert failed.startswith(f"TuningError | {path}:{second}:"), failed
    assert "every configuration of scale failed" in failed


COMPILED = """\
def double(x):
    out = torch.empty_like(x)
    n = x.numel()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), scale(x, out, n, TILE=$tile))  # DOUBLE
    return out


@triton.jit
def bump_kernel(x, n, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)
    tl.store(x + i, tl.load(x + i, mask=i < n) + 1, mask=i < n)


def bump(x):
    n = x.numel()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), bump_kernel(x, n, TILE=$tile))  # BUMP
    return x


class Model(torch.nn.Module):
    def forward(self, x):
        return bump(double(x))


model = torch.compile(Model(), fullgraph=True, dynamic=True, backend="aot_eager")
for n in range(100, 100 + 16 * {count}, 16):
    x = torch.randn(n)
    torch.testing.assert_close(model(x), x * 2 + 1)
print("OK")
"""


def test_a_warning_of_a_site_inside_torch_compile_points_at_the_sites_line(
    tmp_path: Path,
) -> None:
    from tunedsl.runtime.many_keys import MANY_TUNED_KEYS

    path = tmp_path / "compiled.py"
    path.write_text(HEADER + COMPILED.format(count=MANY_TUNED_KEYS))
    proc = tunedsl(tmp_path, "run", str(path))
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr
    warning = next(line for line in proc.stderr.splitlines() if "distinct keys" in line)
    # The site's autotune(...) line in the user's file (as for an eager call), not
    # torch/_library/custom_ops.py, which called the site, nor the model's forward.
    assert warning.startswith(f"{path}:{line_of(path, '# DOUBLE')}: UserWarning"), warning
    # The same for the warning about a kernel that writes its input in place.
    in_place = next(line for line in proc.stderr.splitlines() if "in place" in line)
    assert in_place.startswith(f"{path}:{line_of(path, '# BUMP')}: UserWarning"), in_place


ZEROED = """\
import sys


def total(x):
    out = torch.zeros_like(x)
    n = x.numel()
    r = autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile), reset_to_zero=[sys.argv[1]],
                 scale(x, out, n, TILE=$tile))  # SITE
    return r


print(total(torch.randn(300)).source)
"""


def test_a_misnamed_reset_to_zero_is_an_error_when_a_record_decides_too(tmp_path: Path) -> None:
    path = tmp_path / "zeroed.py"
    path.write_text(HEADER + ZEROED)
    first = tunedsl(tmp_path, "run", str(path), "out")
    assert first.returncode == 0 and first.stdout.strip() == "tuned", first.stderr
    # The next process finds the record and tunes nothing: the typo was accepted there, and
    # reset_to_zero= did nothing on any call.
    typo = tunedsl(tmp_path, "run", str(path), "outt")
    assert typo.returncode == 1, typo.stdout
    site = line_of(path, "# SITE") - 1
    assert f"{path}:{site}:" in typo.stderr and "did you mean 'out'?" in typo.stderr, typo.stderr


# -- a lambda in a macro's option is named by its place ----------------------------------------


LAMBDA_SITE = """\
def double(x):
    out = torch.empty_like(x)
    n = x.numel()
    autotune(space=dict(tile=[64, 128]), blocks=cdiv(n, $tile),
             prune=lambda configs: configs,
             scale(x, out, n, TILE=$tile))


double(torch.randn(300))
"""


def test_a_lambda_in_a_macro_option_is_named_by_its_file_and_line(tmp_path: Path) -> None:
    # It sits inside the expansion's own lambdas: its qualified name read
    # "double.<locals>.<lambda>.<locals>.<lambda>", which names nothing the user wrote.
    script = tmp_path / "lam.py"
    script.write_text(HEADER + LAMBDA_SITE)
    run = tunedsl(tmp_path, "run", str(script))
    assert run.returncode != 0
    line = line_of(script, "prune=lambda configs")
    assert f"prune=<lambda at lam.py:{line}>(configs) cannot be called" in run.stderr, run.stderr
    assert "<locals>" not in run.stderr, run.stderr
