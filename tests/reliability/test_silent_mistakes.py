"""Mistakes that used to pass in silence or surface late: each is named at the user's line.

Real kernels under Triton's interpreter, run by ``tunedsl run`` in a subprocess, so the
traceback checked is the one a user sees.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rel_helpers import child_env

pytestmark = pytest.mark.needs_triton

HEADER = """\
import torch
import triton
import triton.language as tl
from tunedsl import autotune, cdiv


@triton.jit
def copy_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


"""


def _run(tmp_path: Path, body: str, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run HEADER + body with ``tunedsl run``; also the line of the body's `# HERE` marker."""
    text = HEADER + textwrap.dedent(body).lstrip()
    script = tmp_path / "user_script.py"
    script.write_text(text)
    line = next((i for i, t in enumerate(text.splitlines(), 1) if "# HERE" in t), 0)
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script), *args],
        env=child_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path),
    )
    return proc, line


def test_a_tensor_key_is_an_error_at_the_users_line_suggesting_the_shape(tmp_path: Path) -> None:
    proc, line = _run(
        tmp_path,
        """
        def copy(x, y):
            n = x.numel()
            return autotune(space=dict(block=[16, 32]), blocks=cdiv(n, $block),
                            key=x,  # HERE
                            copy_kernel(x, y, n, BLOCK=$block))

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    assert proc.returncode == 1, proc.stderr
    assert "UsageError" in proc.stderr
    assert "`key=` is a tensor (shape (40,))" in proc.stderr
    assert "key=x.shape" in proc.stderr
    assert f'user_script.py", line {line - 1}' in proc.stderr  # the macro's first line
    assert "tunedsl/runtime" not in proc.stderr, proc.stderr


def test_an_object_key_with_an_address_is_an_error(tmp_path: Path) -> None:
    proc, _ = _run(
        tmp_path,
        """
        class Shape:
            pass

        def copy(x, y):
            n = x.numel()
            return autotune(space=dict(block=[16, 32]), blocks=cdiv(n, $block),
                            key=(n, Shape()), copy_kernel(x, y, n, BLOCK=$block))

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    assert proc.returncode == 1, proc.stderr
    assert "`key=[1]` is a Shape whose printed form is its address" in proc.stderr


# -- the launch against the kernel's parameters, before any configuration runs -------------


LAUNCH_CASES = {
    "misspelled_keyword": (
        "copy_kernel(x, y, n, BLCOK=$block)",
        ["has no parameter `BLCOK`", "did you mean `BLOCK`?", "rename `BLCOK=` to `BLOCK=`"],
    ),
    "missing_argument": (
        "copy_kernel(x, y, BLOCK=$block)",
        ["passes nothing for `n` of copy_kernel(x, y, n, BLOCK)"],
    ),
    "extra_argument": (
        "copy_kernel(x, y, n, n, 16)",
        ["passes 5 positional arguments but copy_kernel(x, y, n, BLOCK) takes 4"],
    ),
    "given_twice": (
        "copy_kernel(x, y, n, 16, BLOCK=$block)",
        ["gives `BLOCK` twice"],
    ),
}


@pytest.mark.parametrize("name", sorted(LAUNCH_CASES))
def test_a_launch_that_does_not_fit_the_kernel_is_named_before_any_configuration_runs(
    tmp_path: Path, name: str
) -> None:
    launch, words = LAUNCH_CASES[name]
    proc, line = _run(
        tmp_path,
        f"""
        def copy(x, y):
            n = x.numel()
            return autotune(space=dict(block=[16, 32]), blocks=cdiv(n, $block),  # HERE
                            {launch})

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    assert proc.returncode == 1, proc.stderr
    assert "UsageError" in proc.stderr and "TuningError" not in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    assert f'user_script.py", line {line}' in proc.stderr
    assert "Config(" not in proc.stderr  # no configuration was tried


def test_a_field_given_to_a_parameter_not_constexpr_stops_at_the_first_configuration(
    tmp_path: Path,
) -> None:
    proc, line = _run(
        tmp_path,
        """
        @triton.jit
        def runtime_block(x, y, n, BLOCK):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)

        def copy(x, y):
            n = x.numel()
            return autotune(space=dict(block=[16, 32, 64]), blocks=cdiv(n, $block),  # HERE
                            runtime_block(x, y, n, BLOCK=$block))

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    assert proc.returncode == 1, proc.stderr
    assert "which it does not declare `tl.constexpr`" in proc.stderr, proc.stderr
    assert "declare `BLOCK: tl.constexpr`" in proc.stderr
    assert "Config(block=16), failed" in proc.stderr
    assert "Config(block=32)" not in proc.stderr  # stopped at the first configuration
    assert f'user_script.py", line {line}' in proc.stderr


# -- what a failed tune and a Ctrl-C print --------------------------------------------------

FAILING = """
@triton.jit
def never_fits(x, y, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK > 1000)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)

def copy(x, y):
    n = x.numel()
    return autotune(space=dict(block=[16, 32, 64]), blocks=cdiv(n, $block),  # HERE
                    never_fits(x, y, n, BLOCK=$block))

copy(torch.ones(40), torch.zeros(40))
"""

INTERRUPTED = """
import os
import signal

def interrupt(args):  # the user presses Ctrl-C while the first configuration is measured
    os.kill(os.getpid(), signal.SIGINT)

def copy(x, y):
    n = x.numel()
    return autotune(space=dict(block=[16, 32, 64]), blocks=cdiv(n, $block),  # HERE
                    pre_hook=interrupt, copy_kernel(x, y, n, BLOCK=$block))

copy(torch.ones(40), torch.zeros(40))
"""


def _import_run(tmp_path: Path, body: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """Plain ``python main.py`` importing the DSL module through the import hook."""
    (tmp_path / "user_script.py").write_text(HEADER + body.lstrip())
    (tmp_path / "main.py").write_text("import tunedsl.activate\nimport user_script\n")
    return subprocess.run(
        [sys.executable, *flags, "main.py"],
        env=child_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path),
    )


OWN_FRAMES = ("tunedsl/engine/", "tunedsl/backends/", "tunedsl/runtime/tuner.py", "decide.py")


def test_a_failed_tune_shows_the_users_frames_and_one_line_per_configuration(
    tmp_path: Path,
) -> None:
    proc = _import_run(tmp_path, FAILING)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    # The message starts at the site's place, as every error of a site does.
    assert "user_script.py:21:12 (never_fits): every configuration of never_fits failed" in err
    assert "The above exception was the direct cause" not in err, err
    for frame in OWN_FRAMES:
        assert frame not in err, (frame, err)
    assert 'user_script.py", line' in err
    assert [line.strip()[:18] for line in err.splitlines() if "Config(" in line] == [
        "Config(block=16): ",
        "Config(block=32): ",
        "Config(block=64): ",
    ]
    assert len(err.splitlines()) < 20, err
    # python -X dev keeps tunedsl's frames (and the chained cause) for a bug report.
    dev = _import_run(tmp_path, FAILING, "-X", "dev")
    assert "tunedsl/engine/driver.py" in dev.stderr, dev.stderr


def test_a_ctrl_c_during_tuning_shows_the_users_frames(tmp_path: Path) -> None:
    proc = _import_run(tmp_path, INTERRUPTED)
    assert proc.returncode != 0
    err = proc.stderr
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    assert "in interrupt" in err  # the user's hook, where the interrupt arrived
    for frame in OWN_FRAMES:
        assert frame not in err, (frame, err)
    assert len(err.splitlines()) < 20, err


def test_a_field_of_a_computed_space_that_nothing_reads_is_named(tmp_path: Path) -> None:
    proc, line = _run(
        tmp_path,
        """
        SPACE = dict(block=[16, 32], num_warp=[4, 8])  # a misspelled hint, not literal below

        def copy(x, y):
            n = x.numel()
            return autotune(space=SPACE, blocks=cdiv(n, $block),  # HERE
                            copy_kernel(x, y, n, BLOCK=$block))

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    assert proc.returncode == 1, proc.stderr
    assert "space field `num_warp` is read by nothing in the launch" in proc.stderr, proc.stderr
    assert "did you mean the launch hint `num_warps`?" in proc.stderr
    assert f'user_script.py", line {line}' in proc.stderr
    assert "Config(" not in proc.stderr  # before any configuration was tried


# -- prune= that reads a size under key= ------------------------------------------------------

PRUNE_UNDER_KEY = """
def small_enough(configs, args):
    return [c for c in configs if c.block <= args["n"]]

def copy(x, y):
    n = x.numel()
    return autotune(space=dict(block=[16, 32]), blocks=cdiv(n, $block),  # HERE
                    key=n // 1024, prune=small_enough, copy_kernel(x, y, n, BLOCK=$block))

for n in (2048, 2064):  # one key= bucket, one Triton specialization (n % 16 == 0)
    print("SOURCE", n, copy(torch.ones(n), torch.zeros(n)).source)
"""


def test_a_prune_that_splits_key_buckets_says_so_once_and_ls_tells_the_rows_apart(
    tmp_path: Path,
) -> None:
    proc, line = _run(tmp_path, PRUNE_UNDER_KEY)
    assert proc.returncode == 0, proc.stderr
    assert "SOURCE 2048 tuned" in proc.stdout and "SOURCE 2064 tuned" in proc.stdout
    warnings = [w for w in proc.stderr.splitlines() if "UserWarning" in w]
    assert len(warnings) == 1, proc.stderr
    assert "prune=small_enough reads `n`" in warnings[0], warnings[0]
    assert "key= no longer groups calls" in warnings[0]
    assert f"user_script.py:{line}:" in warnings[0]  # attributed to the user's line
    listed = subprocess.run(
        [sys.executable, "-m", "tunedsl", "cache", "ls"],
        env=child_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("ID  TUNED  SITE"), listed.stdout
    rows = lines[1:]
    assert len(rows) == 2
    # The whole key: the two rows differ in the value prune= reads, at the key's end.
    for n in (2048, 2064):
        assert any(f'"prune":{{"n":{{"type":"int","value":{n}}}}}' in r for r in rows), rows
    assert not any("..." in r for r in rows)


def test_a_field_read_only_under_some_configurations_counts_as_read() -> None:
    """autotune_launch's functions are probed on every configuration: `ALT` is read only
    where `mode` is 0, and that is no mistake."""
    import torch
    from rel_kernels import vadd

    from tunedsl import autotune_launch

    n = 40
    a, b, c = torch.ones(n), torch.ones(n), torch.zeros(n)
    result = autotune_launch(
        vadd,
        space=[{"TILE": 16, "mode": 1, "ALT": 64}, {"TILE": 64, "mode": 0, "ALT": 32}],
        grid=lambda cfg: (triton_cdiv(n, cfg.TILE if cfg.mode else cfg.ALT),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.TILE if cfg.mode else cfg.ALT},
        effort="quick",
        name="silent-conditional-read",
    )
    assert result.config.TILE in (16, 64)
    assert torch.equal(c, a + b)


def triton_cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


# A launch hint given in the launch and by the space (or a static hint): Triton's GPU launch
# failed every configuration on the name given twice, and the interpreter, which takes no
# launch options, tuned the space's values as if they applied.
HINT_TWICE = {
    "space": ("space=dict(block=[16, 32], num_warps=[2, 4])", "copy_kernel(x, y, n, BLOCK=$block, num_warps=8)"),
    "static": ("space=dict(block=[16, 32]), num_warps=4", "copy_kernel(x, y, n, BLOCK=$block, num_warps=8)"),
}  # fmt: skip


@pytest.mark.parametrize("where", sorted(HINT_TWICE))
def test_a_launch_hint_given_in_the_launch_and_by_the_macro_is_named(
    tmp_path: Path, where: str
) -> None:
    macro, launch = HINT_TWICE[where]
    proc, line = _run(
        tmp_path,
        f"""
        def copy(x, y):
            n = x.numel()
            return autotune({macro}, blocks=cdiv(n, $block),  # HERE
                            {launch})

        print(copy(torch.ones(40), torch.zeros(40)).config)
        """,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "UsageError" in proc.stderr, proc.stderr
    assert "`num_warps=` is given in the launch" in proc.stderr, proc.stderr
    assert f'user_script.py", line {line}' in proc.stderr
    assert "tunedsl/runtime" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("space", ["SPACE", "[dict(block=16), dict(num_warps=2)]"])
def test_a_configuration_of_a_list_space_without_a_field_the_launch_reads_is_named(
    tmp_path: Path, space: str
) -> None:
    # A literal space raised AttributeError from inside the tuner, under a dozen of
    # tunedsl's frames; a computed one said "not a field; did you mean" the same name.
    proc, line = _run(
        tmp_path,
        f"""
        SPACE = [dict(block=16), dict(block=32, num_warps=4), dict(num_warps=2)]

        def copy(x, y):
            n = x.numel()
            return autotune(space={space}, blocks=cdiv(n, $block),  # HERE
                            copy_kernel(x, y, n, BLOCK=$block))

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "`$block` is not a field of every configuration" in proc.stderr, proc.stderr
    assert "Config(num_warps=2) has none" in proc.stderr, proc.stderr
    assert "did you mean" not in proc.stderr, proc.stderr
    if space == "SPACE":  # computed: named on the first call, at the user's line
        assert f'user_script.py", line {line}' in proc.stderr
    else:  # literal: named when the module compiles, at the `$block` it cannot give
        assert f"user_script.py:{line}:" in proc.stderr.splitlines()[0], proc.stderr
        assert "Traceback" not in proc.stderr
    assert "tunedsl/" not in proc.stderr, proc.stderr


def test_a_launch_in_tritons_kernel_grid_form_says_the_grid_goes_in_blocks(
    tmp_path: Path,
) -> None:
    # `copy_kernel[grid](...)` handed Triton's launcher (a lambda) to the site, and the error
    # said to decorate that lambda with @triton.jit.
    proc, line = _run(
        tmp_path,
        """
        def copy(x, y):
            n = x.numel()
            grid = (cdiv(n, 16),)
            return autotune(space=dict(block=[16, 32]), blocks=cdiv(n, $block),  # HERE
                            copy_kernel[grid](x, y, n, BLOCK=$block))

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "UsageError" in proc.stderr, proc.stderr
    assert "copy_kernel[grid]" in proc.stderr and "blocks=" in proc.stderr, proc.stderr
    assert "decorate it with @triton.jit" not in proc.stderr, proc.stderr
    assert f'user_script.py", line {line}' in proc.stderr


def test_a_static_hint_of_several_values_says_to_tune_it_in_space(tmp_path: Path) -> None:
    proc, line = _run(
        tmp_path,
        """
        def copy(x, y):
            n = x.numel()
            return autotune(space=dict(block=[16, 32]), blocks=cdiv(n, $block), num_warps=[2, 4],  # HERE
                            copy_kernel(x, y, n, BLOCK=$block))

        copy(torch.ones(40), torch.zeros(40))
        """,
    )
    # Refused when the module is compiled (a literal hint), at the value, before any call.
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "num_warps=[2, 4]" in proc.stderr and "make it a field of space=" in proc.stderr, (
        proc.stderr
    )
    assert f"user_script.py:{line}:83: error:" in proc.stderr, proc.stderr


def test_a_configuration_added_to_the_space_is_raced_with_the_stored_leaders(
    tmp_path: Path,
) -> None:
    # The stored leaders' times come from an earlier process and do not compare with this
    # one's; a new configuration, faster in fact but slower than those old times, was left
    # out of the final race and could never be chosen.
    import json

    body = """
        def copy(x, y):
            n = x.numel()
            return autotune(space=dict(block=BLOCKS), blocks=cdiv(n, $block),  # HERE
                            copy_kernel(x, y, n, BLOCK=$block))

        x = torch.randn(4096)
        y = torch.empty_like(x)
        print(copy(x, y).config.block)
        assert torch.equal(x, y)
        """
    first, _ = _run(tmp_path, "BLOCKS = [16, 32, 64, 128]\n" + textwrap.dedent(body))
    assert first.returncode == 0, first.stderr
    (path,) = (tmp_path / "cache" / "records").glob("*.json")
    record = json.loads(path.read_text())
    for result in record["results"]:  # an earlier process on a quieter machine
        result["median_ms"] = result["min_ms"] = 1e-6
    path.write_text(json.dumps(record))
    second, _ = _run(tmp_path, "BLOCKS = [16, 32, 64, 128, 1024]\n" + textwrap.dedent(body))
    assert second.returncode == 0, second.stderr
    # Under the interpreter 4 programs of 1024 take a fraction of the others' 32 to 256.
    assert second.stdout.split() == ["1024"], second.stdout + second.stderr
