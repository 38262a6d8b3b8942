"""Bad arguments to the runtime and the CLI: a clear error that names what is wrong.

Each case asserts on the message's content: the argument or variable named, the bad
value, and what would be accepted.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env, write_dsl_project

from tunedsl import knobs
from tunedsl.errors import TunedslSyntaxError, UsageError
from tunedsl.model.space import expand_space

SPACE_CASES = {
    "empty_dict": ({}, ["space is empty"]),
    "empty_list": ([], ["space is an empty list"]),
    "empty_axis": ({"TILE": []}, ["'TILE'", "is empty"]),
    "object_value": ({"TILE": [object()]}, ["'TILE'", "JSON scalars"]),
    "nan_value": ({"TILE": [float("nan")]}, ["'TILE'", "NaN"]),
    "list_in_list_space": ([{"TILE": [16]}], ["space[0]", "'TILE'", "JSON scalars"]),
    "bad_field_name": ({"1tile": [16]}, ["'1tile'", "identifier"]),
    "private_field_name": ({"_tile": [16]}, ["'_tile'", "not starting with '_'"]),
    "a_string": ("TILE=16", ["space=", "dict of sequences"]),
    "list_of_ints": ([16, 32], ["space[0]", "list space holds dicts"]),
    # An axis is listed: one of 10**18 values was a MemoryError from inside the listing.
    "huge_range_axis": (
        {"TILE": [64], "x": range(10**18)},
        ["'x'", "1,000,000,000,000,000,000 values", "Axis.pow2"],
    ),
    "range_past_maxsize": ({"x": range(10**20)}, ["'x'", "more than an axis lists"]),
    # An endless iterable without a length: its listing took all the memory there was.
    "endless_iterable": (
        {"x": type("Sizes", (), {"__iter__": lambda self: itertools.count(16, 16)})()},
        ["'x'", "more values than an axis lists"],
    ),
}


def test_a_power_of_two_axis_too_long_to_list_is_refused_before_it_is_built() -> None:
    """``Axis.pow2(1, 2**1_500_000)`` built 1.5 million ever larger ints (a MemoryError after
    seconds); the count is known from the bounds' bits."""
    from tunedsl.model.space import Axis

    with pytest.raises(UsageError, match=r"Axis.pow2: more values than an axis lists"):
        Axis.pow2(1, 2**1_500_000)
    with pytest.raises(UsageError, match=r"Axis has more values than an axis lists"):
        Axis(itertools.count(16, 16))  # endless, and no length to count first
    assert list(Axis.pow2(16, 256).values) == [16, 32, 64, 128, 256]


@pytest.mark.parametrize("name", sorted(SPACE_CASES))
def test_bad_space_is_a_clear_usage_error(name: str) -> None:
    space, words = SPACE_CASES[name]
    with pytest.raises(UsageError) as info:
        expand_space(space)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_a_tl_constexpr_in_a_space_is_named_with_its_value() -> None:
    # A `tl.constexpr` global in a space (`tile=[64, BIG]`) is no JSON scalar; the error
    # said so without the fix that is one attribute away.
    tl = pytest.importorskip("triton.language")
    with pytest.raises(UsageError) as info:
        expand_space({"tile": [64, tl.constexpr(128)]})
    message = str(info.value)
    assert "'tile'" in message and "a tl.constexpr: write its .value (128)" in message


ENV_CASES = {
    "TUNEDSL_AUTOTUNE": ("maybe", knobs.autotune_mode, ["TUNEDSL_AUTOTUNE", "'maybe'", "on"]),
    "TUNEDSL_EFFORT": ("max", knobs.effort, ["TUNEDSL_EFFORT", "'max'", "thorough"]),
    "TUNEDSL_FORCE_RETUNE": ("perhaps", knobs.force_retune, ["TUNEDSL_FORCE_RETUNE", "1 or 0"]),
    "TUNEDSL_COMPILE_WORKERS": (
        "abc",
        knobs.compile_workers,
        ["TUNEDSL_COMPILE_WORKERS", "integer"],
    ),
    "TUNEDSL_CONFIG_TIMEOUT": (
        "-3",
        knobs.compile_timeout_s,
        ["TUNEDSL_CONFIG_TIMEOUT", "positive"],
    ),
    "TUNEDSL_QUIET": ("2", knobs.quiet, ["TUNEDSL_QUIET", "not a boolean"]),
}


@pytest.mark.parametrize("variable", sorted(ENV_CASES))
def test_bad_environment_variable_is_named(variable: str, monkeypatch) -> None:
    value, read, words = ENV_CASES[variable]
    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError) as info:
        read()
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize("value", ["100000", "9" * 30])
def test_a_compile_pool_beyond_any_machine_is_named(value: str, tmp_path: Path) -> None:
    # TUNEDSL_COMPILE_WORKERS had no upper bound: 100000 forked a compile process (and a
    # thread) for every variant of a space at once (400 variants: 400 processes, 5 GB).
    env = {**os.environ, "TUNEDSL_COMPILE_WORKERS": value}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUNEDSL_COMPILE_WORKERS", value)
        with pytest.raises(UsageError, match=rf"TUNEDSL_COMPILE_WORKERS={value} must be at most"):
            knobs.compile_workers()
    listed = subprocess.run(
        [sys.executable, "-m", "tunedsl", "env"], env=env, capture_output=True, text=True,
        timeout=120, cwd=str(tmp_path),
    )  # fmt: skip
    line = next(x for x in listed.stdout.splitlines() if "TUNEDSL_COMPILE_WORKERS" in x)
    assert "INVALID" in line and "at most" in line, line


# -- the runtime, end to end ---------------------------------------------------------------

N = 40


def _launch(**overrides):
    import torch
    from rel_kernels import vadd

    from tunedsl import autotune_launch

    a, b, c = torch.ones(N), torch.ones(N), torch.zeros(N)
    options = dict(
        space={"TILE": [16, 32]},
        grid=lambda cfg: ((N + cfg.TILE - 1) // cfg.TILE,),
        args=(a, b, c, N),
        kwargs=lambda cfg: {"TILE": cfg.TILE},
        effort="quick",
    )
    options.update(overrides)
    options.setdefault("name", "bad-" + "-".join(sorted(overrides)))
    return autotune_launch(vadd, **options)


def _torch():
    import torch

    return torch


def _tl():
    import triton.language as tl

    return tl


def _vadd_args(**given):
    torch = _torch()
    args = {"a": torch.ones(N), "b": torch.ones(N), "c": torch.zeros(N), "n": N, **given}
    return tuple(args.values())


RUNTIME_CASES = {
    "grid_4d": (dict(grid=lambda cfg: (1, 1, 1, 1)), UsageError, ["grid", "1 to 3"]),
    "grid_float": (dict(grid=lambda cfg: (1.5,)), UsageError, ["grid", "(1.5,)", "ints"]),
    "grid_none": (dict(grid=lambda cfg: None), UsageError, ["grid", "None"]),
    "grid_negative": (dict(grid=lambda cfg: (-1,)), UsageError, ["grid", "non-negative"]),
    "grid_string": (dict(grid="2"), UsageError, ["grid", "'2'"]),
    "unknown_field": (
        dict(kwargs=lambda cfg: {"TILE": cfg.TILEE}),
        AttributeError,
        ["no field 'TILEE'", "fields are: TILE"],
    ),
    "unknown_hint": (
        dict(num_wraps=4),
        UsageError,
        ["unknown launch hint 'num_wraps'", "num_warps"],
    ),
    # Tuned without a word under the interpreter; every GPU compile of it fails.
    "num_warps_not_power_of_two": (
        dict(space={"TILE": [16, 32], "num_warps": [3, 4]}),
        UsageError,
        ["num_warps=3", "power of 2"],
    ),
    "bad_mode": (dict(mode="sometimes"), UsageError, ["mode='sometimes'", "on, cached, off"]),
    "bad_effort": (dict(effort="max"), UsageError, ["effort='max'", "quick"]),
    "restore_unknown_param": (
        dict(restore_value=["zz"]),
        UsageError,
        [
            "restore_value=",
            "'zz'",
            "not a parameter of vadd(a, b, c, n",
            "tensor parameters are: a, b, c",
        ],
    ),
    "verify_unknown_param": (dict(verify=["zz"]), UsageError, ["verify", "'zz'", "tensor"]),
    "negative_rtol": (dict(rtol=-1), UsageError, ["rtol=", "non-negative"]),
    "prune_keeps_nothing": (
        dict(prune=lambda cfgs, args: []),
        UsageError,
        ["prune=", "at least one"],
    ),
    # verify=1 equals True, so it passed the check and failed deep in the measurer with
    # "'int' object is not iterable"; verify=0 turned verification off without a word.
    "verify_one": (dict(verify=1), UsageError, ["verify=1", "True", "list of", "function"]),
    "verify_zero": (dict(verify=0), UsageError, ["verify=0", "False"]),
    "prune_returns_a_number": (
        dict(prune=lambda cfgs, args: 5),
        UsageError,
        ["prune=", "returned 5", "list of configurations"],
    ),
    # An empty name was taken for no name: the site was named by its line, without a word.
    "empty_name": (dict(name=""), UsageError, ["name= must be a non-empty string", "''"]),
    "missing_kernel_argument": (  # named before any configuration runs
        dict(args=lambda cfg: (1,)),
        UsageError,
        ["passes nothing for `b`, `c`, `n` of vadd(a, b, c, n, TILE)"],
    ),
    "empty_space": (dict(space={}), UsageError, ["space is empty"]),
    # Triton failed every configuration with an AttributeError deep in its code generator.
    "torch_dtype_argument": (
        dict(args=lambda cfg: _vadd_args(n=_torch().int32)),
        UsageError,
        ["`n` of vadd is torch.int32, a PyTorch dtype", "tl.int32"],
    ),
    # Triton's GPU launch failed every configuration ("failed to specialize argument of
    # type: dtype", naming no parameter); its interpreter took it.
    "triton_dtype_to_plain_parameter": (
        dict(args=lambda cfg: _vadd_args(n=_tl().int32)),
        UsageError,
        ["`n` of vadd is int32, a Triton dtype", "`n: tl.constexpr`"],
    ),
    "numpy_array_argument": (
        dict(args=lambda cfg: _vadd_args(a=_torch().ones(N).numpy())),
        UsageError,
        ["`a` of vadd is a numpy.ndarray", "torch.from_numpy"],
    ),
    # A keyword the kernel lacks, like nothing it has: Triton's GPU launch rejects it per
    # configuration, its interpreter ignores it.
    "unknown_keyword_argument": (
        dict(kwargs=lambda cfg: {"TILE": cfg.TILE, "SCALE": 2}),
        UsageError,
        ["vadd(a, b, c, n, TILE) has no parameter `SCALE`", "remove `SCALE=`"],
    ),
    # Only the first configuration's keywords were checked: a later one's keyword the
    # kernel lacks was measured as fine under the interpreter, and failed on a GPU.
    "unknown_keyword_of_a_later_configuration": (
        dict(space=[{"TILE": 16}, {"TILE": 32, "EXTRA": 1}], kwargs=lambda cfg: cfg.as_dict()),
        UsageError,
        ["Config(TILE=32, EXTRA=1)", "has no parameter `EXTRA`", "remove `EXTRA=`"],
    ),
    # A later configuration was checked for unknown keywords only: a launch hint it gives
    # both as a keyword and as a field (Triton's GPU launch then fails it, "multiple values
    # for keyword argument"), and a keyword naming a parameter passed by position, went on
    # to be compiled and measured.
    "hint_twice_in_a_later_configuration": (
        dict(
            space=[{"TILE": 16}, {"TILE": 32, "num_warps": 2}],
            kwargs=lambda cfg: cfg.as_dict(),
            name="bad-later-hint-twice",
        ),
        UsageError,
        ["Config(TILE=32, num_warps=2)", "`num_warps=` is given in the launch and by the space's"],
    ),
    "hint_twice_in_a_later_configuration_with_the_same_keywords": (
        dict(
            space=[{"TILE": 16}, {"TILE": 32, "num_warps": 2}],
            kwargs=lambda cfg: {"TILE": cfg.TILE, "num_warps": 4},
            name="bad-later-hint-twice-same-keywords",
        ),
        UsageError,
        ["Config(TILE=32, num_warps=2)", "`num_warps=` is given in the launch and by the space's"],
    ),
    "positional_given_again_by_a_later_configuration": (
        dict(
            space=[{"TILE": 16}, {"TILE": 32, "n": 8}],
            kwargs=lambda cfg: cfg.as_dict(),
            name="bad-later-positional-again",
        ),
        UsageError,
        ["Config(TILE=32, n=8)", "gives `n` twice, by position and as `n=`"],
    ),
    # A default= outside the space was ignored without a word: the first configuration ran.
    "default_not_in_space": (
        dict(default={"TILE": 48}, mode="off"),
        UsageError,
        ["default=Config(TILE=48) is not a configuration of space=", "Config(TILE=16)"],
    ),
    "default_misspelled_field": (
        dict(default={"TLE": 16}, mode="off"),
        UsageError,
        ["default=Config(TLE=16)", "its fields are TLE; the space's, TILE"],
    ),
    # Triton's early_config_prune takes (configs, named_args): a prune= of another arity
    # raised TypeError from inside the tuner.
    "prune_of_one_argument": (
        dict(prune=lambda configs: configs),
        UsageError,
        ["cannot be called as prune(configs, args)", "prune=lambda configs, args: configs"],
    ),
    # Raw TypeErrors from the API's own code, naming no option.
    "args_none": (
        dict(args=None, name="bad-args-none"),
        UsageError,
        ["(autotune_launch): args=None: give a tuple of the kernel's arguments", "lambda cfg"],
    ),
    "kwargs_a_list": (
        dict(kwargs=[1], name="bad-kwargs-list"),
        UsageError,
        ["(autotune_launch): kwargs=[1]: give a dict of keyword arguments"],
    ),
    # A ValueError from the key's text: Python writes no int of over 4300 digits.
    "key_of_5000_digits": (
        dict(key=10**5000, name="bad-key-digits"),
        UsageError,
        ["(autotune_launch): this call's key cannot be written", "key= a value of fewer digits"],
    ),
    "field_nothing_reads": (
        dict(space={"TILE": [16, 32], "num_warp": [4, 8]}),
        UsageError,
        ["space field `num_warp` is read by nothing", "did you mean the launch hint `num_warps`?"],
    ),
}


@pytest.mark.needs_triton
@pytest.mark.parametrize("name", sorted(RUNTIME_CASES))
def test_bad_runtime_argument_is_a_clear_error(name: str) -> None:
    overrides, error, words = RUNTIME_CASES[name]
    with pytest.raises(error) as info:
        _launch(**overrides)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.needs_triton
@pytest.mark.parametrize("passed", [True, False])
def test_a_kernel_parameter_named_like_a_tuned_hint_gets_a_fix_that_works(passed: bool) -> None:
    # Tutorial 02's kernel takes `num_stages: tl.constexpr`. With a space field `num_stages`,
    # passing `num_stages=` was "given in one place" and leaving it out "pass it in the
    # launch": each error's fix led to the other.
    import torch
    from rel_kernels import copy_staged

    from tunedsl import autotune_launch

    x, y = torch.ones(N), torch.zeros(N)
    with pytest.raises(UsageError) as info:
        autotune_launch(
            copy_staged,
            space={"num_stages": [1, 2]},
            grid=(1,),
            args=(x, y, N),
            kwargs=lambda cfg: {"TILE": 16, **({"num_stages": cfg.num_stages} if passed else {})},
            name=f"hint-named-parameter-{passed}",
        )
    text = str(info.value)
    assert "copy_staged takes a parameter `num_stages`" in text, text
    assert "`stages=[...]`" in text and "`num_stages=cfg.stages`" in text, text


@pytest.mark.needs_triton
def test_a_triton_autotune_kernel_is_named_before_any_configuration_runs() -> None:
    # Every configuration failed with Triton's "Conflicting meta-parameters: TILE".
    import torch
    import triton
    from rel_kernels import vadd

    from tunedsl import autotune_launch

    tuned = triton.autotune(configs=[triton.Config({"TILE": 16})], key=["n"])(vadd)
    a, b, c = torch.ones(N), torch.ones(N), torch.zeros(N)
    with pytest.raises(UsageError) as info:
        autotune_launch(
            tuned,
            space={"TILE": [16, 32]},
            grid=lambda cfg: ((N + cfg.TILE - 1) // cfg.TILE,),
            args=(a, b, c, N),
            kwargs=lambda cfg: {"TILE": cfg.TILE},
            name="bad-triton-autotune",
        )
    text = str(info.value)
    assert "wrapped in @triton.autotune" in text and "set `TILE` that" in text, text
    assert "remove @triton.autotune" in text


@pytest.mark.needs_triton
def test_bad_environment_variable_in_a_run_is_named(tmp_path: Path) -> None:
    script = write_dsl_project(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script)],
        env=child_env(tmp_path / "cache", TUNEDSL_AUTOTUNE="sometimes"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(tmp_path),
    )
    assert proc.returncode == 1
    assert "TUNEDSL_AUTOTUNE='sometimes'" in proc.stderr
    assert "expected one of on, cached, off" in proc.stderr


# Variables only some machines read while tuning (compiling for a GPU, several GPUs, a
# torch.distributed job): a bad value was accepted in silence elsewhere, so a typo stayed
# hidden until the program moved to a machine that reads it.
UNREAD_ON_THE_INTERPRETER = {
    "TUNEDSL_CONFIG_TIMEOUT": ("banana", "not a number"),
    "TUNEDSL_COMPILE_PROCESSES": ("banana", "expected one of auto, on, off"),
    "TUNEDSL_DISTRIBUTED": ("banana", "expected one of broadcast, allreduce, off"),
    "TUNEDSL_TUNE_DEVICES": ("banana", "expected 'all', a count"),
}


@pytest.mark.needs_triton
@pytest.mark.parametrize("variable", sorted(UNREAD_ON_THE_INTERPRETER))
def test_a_bad_value_of_a_setting_this_machine_does_not_use_is_named_when_tuning(
    variable: str, monkeypatch
) -> None:
    value, words = UNREAD_ON_THE_INTERPRETER[variable]
    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError) as info:
        _launch(name=f"unread-{variable}")
    assert f"{variable}='{value}'" in str(info.value) and words in str(info.value)


@pytest.mark.needs_triton
def test_a_misspelt_setting_is_named_with_the_one_meant(tmp_path: Path) -> None:
    # TUNEDSL_AUTOTUNING=off (for TUNEDSL_AUTOTUNE) changed nothing and said nothing: the
    # program tuned as usual while its user believed tuning was off.
    script = write_dsl_project(tmp_path)
    env = child_env(tmp_path / "cache", TUNEDSL_AUTOTUNING="off", TUNEDSL_CACHEDIR="x")
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(script)], env=env, capture_output=True,
        text=True, timeout=120, cwd=str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for wrong, meant in (("TUNEDSL_AUTOTUNING", "TUNEDSL_AUTOTUNE"),
                         ("TUNEDSL_CACHEDIR", "TUNEDSL_CACHE_DIR")):  # fmt: skip
        said = [line for line in proc.stderr.splitlines() if wrong in line]
        assert len(said) == 1 and f"did you mean {meant}" in said[0], proc.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "tunedsl", "env", "--no-device-probe"], env=env,
        capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
    )  # fmt: skip
    line = next(x for x in listed.stdout.splitlines() if "TUNEDSL_AUTOTUNING" in x)
    assert "not a tunedsl setting" in line and "TUNEDSL_AUTOTUNE" in line, listed.stdout


# -- the CLI -----------------------------------------------------------------------------------


def _tunedsl(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tunedsl", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(cwd),
        env=env if env is not None else dict(os.environ),
    )


DSL_KERNELS_HEADER = (
    "import torch\n"
    "import triton\n"
    "import triton.language as tl\n"
    "from tunedsl import autotune, cdiv\n"
    "@triton.jit\n"
    "def vadd_kernel(a, b, c, n, TILE: tl.constexpr):\n"
    "    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)\n"
    "    tl.store(c + offs, tl.load(a + offs, mask=offs < n), mask=offs < n)\n"
)


CLI_CASES = {
    "run_missing_file": (["run", "missing.py"], 2, ["missing.py", "No such file"]),
    "run_directory": (["run", "."], 2, ["'.'", "directory"]),
    "expand_missing_file": (["expand", "missing.py"], 2, ["missing.py", "No such file"]),
    "precompile_missing_file": (["precompile", "missing.py"], 1, ["missing.py", "no such file"]),
    "import_missing_file": (["cache", "import", "missing.json"], 1, ["missing.json", "No such"]),
    "show_short_id": (["cache", "show", "ab"], 1, ["'ab'", "too short"]),
    "show_unknown_id": (["cache", "show", "abcdef"], 1, ["'abcdef'", "tunedsl cache ls"]),
    "unknown_action": (["cache", "frobnicate"], 2, ["'frobnicate'", "ls"]),
    "unknown_option": (["expand", "x.py", "--bogus"], 2, ["--bogus"]),
    "unknown_command": (["frobnicate"], 2, ["'frobnicate'"]),
    "sweep_missing_file": (["sweep", "missing.py"], 1, ["missing.py", "No such file"]),
    "sweep_directory": (["sweep", "."], 1, ["sweep", "'.'", "directory"]),
    "import_directory": (["cache", "import", "."], 1, ["bundle .", "not a regular file"]),
    "gallery_out_cannot_be_made": (
        ["gallery", "--out", "/proc/none/out"],
        1,
        ["--out /proc/none/out", "No such file"],
    ),
}


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_bad_cli_arguments_are_named(name: str, tmp_path: Path) -> None:
    args, code, words = CLI_CASES[name]
    proc = _tunedsl(*args, cwd=tmp_path)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize(
    "args",
    [
        ["sweep", "--no-ray", "script.py"],
        ["rules", "build", "--out", "rules", "--script", "script.py"],
    ],
    ids=["sweep", "rules build"],
)
def test_a_script_that_is_a_fifo_is_named_as_one(args: list[str], tmp_path: Path) -> None:
    # It exists: "no such file" sent the user looking for a missing file.
    os.mkfifo(tmp_path / "script.py")
    proc = _tunedsl(*args, cwd=tmp_path)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "script.py" in proc.stderr and "is a FIFO, not a regular file" in proc.stderr
    assert "Traceback" not in proc.stderr and "no such file" not in proc.stderr.lower()


SWEEP_SCRIPT = Path(__file__).parents[1] / "integration" / "sweep_fixtures" / "sweep_vadd.py"


@pytest.mark.needs_triton
@pytest.mark.parametrize("bundle", ["a-directory", "a-file/bundle.json"])
def test_a_sweep_bundle_that_cannot_be_written_is_named_before_any_tuning(
    bundle: str, tmp_path: Path
) -> None:
    """``tunedsl sweep --bundle`` naming a directory, or a file in a directory that cannot
    exist: one error naming ``--bundle`` and the fix, before a shape is tuned (not a
    traceback after the whole sweep)."""
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "a-file").write_text("")
    env = child_env(tmp_path / "cache")
    proc = _tunedsl(
        "sweep", "--no-ray", "--bundle", bundle, str(SWEEP_SCRIPT), cwd=tmp_path, env=env
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("tunedsl: error:")]
    assert len(errors) == 1 and f"--bundle {bundle}" in errors[0], proc.stderr
    assert not (tmp_path / "cache" / "records").exists()  # nothing was tuned


@pytest.mark.needs_triton
def test_dsl_error_names_file_line_and_column(tmp_path: Path) -> None:
    """A `$field` not in a non-literal space: file, line and column, with a suggestion."""
    script = tmp_path / "typo.py"
    kernels = DSL_KERNELS_HEADER + (
        "SPACE = dict(tile=[16, 32])\n"
        "def f(a, b, c, n):\n"
        "    return autotune(space=SPACE, blocks=cdiv(n, $tiel), vadd_kernel(a, b, c, n, TILE=$tile))\n"
        "x = torch.ones(8)\n"
        "f(x, x, x, 8)\n"
    )
    script.write_text(kernels)
    proc = _tunedsl("run", str(script), cwd=tmp_path, env=child_env(tmp_path / "cache"))
    assert proc.returncode == 1, proc.stderr
    line = kernels.splitlines().index(next(ln for ln in kernels.splitlines() if "$tiel" in ln)) + 1
    col = kernels.splitlines()[line - 1].index("$tiel") + 1
    assert f"{script}:{line}:{col}" in proc.stderr, proc.stderr
    assert "did you mean `$tile`" in proc.stderr


def test_undecodable_script_is_a_syntax_error_not_a_crash(tmp_path: Path) -> None:
    script = tmp_path / "latin.py"
    script.write_bytes(b"from tunedsl import autotune\nNAME = 'caf\xe9'\n")
    proc = _tunedsl("run", str(script), cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "SyntaxError" in proc.stderr and "utf-8" in proc.stderr.lower()
    assert f'File "{script}", line 2' in proc.stderr  # where, as Python says it
    with pytest.raises(SyntaxError):
        from tunedsl.frontend.compile import compile_source

        compile_source(script.read_bytes(), str(script))
    assert issubclass(TunedslSyntaxError, SyntaxError)
