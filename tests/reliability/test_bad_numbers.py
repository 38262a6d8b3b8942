"""Every number a user gives tunedsl (an environment variable, a site option, a command-line
flag) is parsed in one place, and ``nan`` and ``inf`` are refused there by name: ``nan <= 0``
is false, so a plain range check lets them through, and a budget or timeout of ``nan`` never
runs out (a search that never stops, a lock wait that never gives up, a Redis client that
raises on every miss) while a budget of ``inf`` is stored as ``Infinity``, which every later
load rejects.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import child_env

from tunedsl import knobs
from tunedsl.errors import UsageError
from tunedsl.model.settings import resolve

# Every float variable, with its reader and whether 0 is a valid value.
FLOAT_VARIABLES = {
    "TUNEDSL_BUDGET": (knobs.budget_s, False),
    "TUNEDSL_CONFIG_TIMEOUT": (knobs.config_timeout_s, False),
    "TUNEDSL_LOCK_TIMEOUT": (knobs.lock_timeout_s, False),
}
NOT_FINITE = ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"]


def test_every_float_setting_is_in_this_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new float variable must be added above (so it is tested): any setting that reads
    ``2.5`` as a float is one."""
    floats = set()
    for name, read in knobs.SETTINGS.items():
        monkeypatch.setenv(name, "2.5")
        try:
            value = read()
        except UsageError:
            continue
        finally:
            monkeypatch.delenv(name)
        if isinstance(value, float):
            floats.add(name)
    assert floats == set(FLOAT_VARIABLES)


@pytest.mark.parametrize("variable", sorted(FLOAT_VARIABLES))
@pytest.mark.parametrize("value", NOT_FINITE)
def test_a_float_variable_refuses_nan_and_inf_naming_itself(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    read, _ = FLOAT_VARIABLES[variable]
    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError) as info:
        read()
    text = str(info.value)
    assert f"environment variable {variable}={value!r}" in text
    assert "finite number of seconds" in text and "unset it" in text


@pytest.mark.parametrize("variable", sorted(FLOAT_VARIABLES))
def test_a_float_variable_still_reads_good_values(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    read, zero_ok = FLOAT_VARIABLES[variable]
    monkeypatch.setenv(variable, " 2.5 ")
    assert read() == 2.5
    monkeypatch.setenv(variable, "0")
    if zero_ok:
        assert read() == 0.0
    else:
        with pytest.raises(UsageError, match=f"{variable}='0' must be a positive, finite"):
            read()
    monkeypatch.setenv(variable, "soon")
    with pytest.raises(UsageError, match=f"{variable}='soon' is not a number"):
        read()


def test_tunedsl_env_lists_nan_and_inf_as_invalid(tmp_path: Path) -> None:
    bad = {name: ("inf" if i % 2 else "nan") for i, name in enumerate(FLOAT_VARIABLES)}
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "env", "--json", "--no-device-probe"],
        env=child_env(tmp_path / "cache", **bad),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    settings = json.loads(proc.stdout)["settings"]
    for name, value in bad.items():
        assert settings[name].startswith(f"{value!r}: INVALID: "), settings[name]
        assert name in settings[name]


@pytest.mark.parametrize("budget", [math.inf, math.nan, -math.inf, 0, -1, "10", True])
def test_the_budget_option_must_be_a_finite_positive_number(budget: object) -> None:
    with pytest.raises(UsageError) as info:
        resolve({"tile": [16, 32]}, {}, {"budget": budget}, "site.py:3")
    text = str(info.value)
    assert text.startswith(f"site.py:3: budget={budget!r} ")
    assert "positive, finite number of seconds" in text
    assert "leave budget= out" in text


@pytest.mark.parametrize("option", ["rtol", "atol"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
def test_tolerances_must_be_finite_and_non_negative(option: str, value: float) -> None:
    with pytest.raises(UsageError, match=f"site.py:3: {option}={value!r} must be a non-negative"):
        resolve({"tile": [16, 32]}, {}, {option: value}, "site.py:3")
    assert getattr(resolve({"tile": [16]}, {}, {option: 0}, "s"), option) == 0.0


# -- end to end: a real kernel through the interpreter ------------------------------------------


def _launch(**options: object) -> object:
    import torch
    from rel_kernels import vadd

    from tunedsl import autotune_launch, cdiv

    n = 64
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    return autotune_launch(
        vadd,
        space={"TILE": [16, 32]},
        grid=lambda cfg: (cdiv(n, cfg.TILE),),
        args=(a, b, c, n),
        kwargs=lambda cfg: {"TILE": cfg.TILE},
        **options,
    )


@pytest.mark.needs_triton
def test_an_infinite_budget_is_refused_before_anything_is_tuned_or_stored() -> None:
    from tunedsl.store import paths

    with pytest.raises(UsageError, match="budget=inf must be a positive, finite number"):
        _launch(name="inf-budget", budget=float("inf"))
    records = paths.records_dir()
    assert not records.exists() or list(records.iterdir()) == []


@pytest.mark.needs_triton
@pytest.mark.parametrize("variable", ["TUNEDSL_BUDGET", "TUNEDSL_LOCK_TIMEOUT"])
def test_a_nan_variable_stops_the_launch_with_its_name(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "nan")
    with pytest.raises(UsageError, match=f"environment variable {variable}='nan'"):
        _launch(name=f"nan-{variable.lower()}")


CLI_CASES = {
    "precompile": (["precompile", "x.py", "--timeout", "inf"], 2, "--timeout=inf"),
    "gallery": (["gallery", "--timeout", "nan"], 1, "--timeout=nan"),
    "sweep": (["sweep", "x.py", "--gpus-per-task", "nan"], 1, "--gpus-per-task=nan"),
}


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_a_float_flag_refuses_nan_and_inf(name: str, tmp_path: Path) -> None:
    argv, code, words = CLI_CASES[name]
    (tmp_path / "x.py").write_text("x = 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", *argv],
        env=child_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(tmp_path),
    )
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert words in proc.stderr and "finite number" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("variable", sorted(FLOAT_VARIABLES))
def test_a_float_variable_beyond_any_wait_is_refused_naming_itself(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Finite but past what a wait can take (threading.TIMEOUT_MAX, about 292 years): a
    # lock, select or queue wait given it raises OverflowError deep inside a tuning.
    read, _ = FLOAT_VARIABLES[variable]
    monkeypatch.setenv(variable, "1e300")
    with pytest.raises(UsageError) as info:
        read()
    text = str(info.value)
    assert f"environment variable {variable}='1e300'" in text and "at most" in text, text
    monkeypatch.setenv(variable, "86400")  # a day is fine
    assert read() == 86400.0


@pytest.mark.needs_triton
def test_a_config_timeout_beyond_any_wait_is_one_line_under_an_isolated_tune(
    tmp_path: Path,
) -> None:
    from rel_helpers import DSL_KERNELS, write_script

    write_script(tmp_path / "rel_dsl_kernels.py", DSL_KERNELS.replace(
        'effort="quick",', 'effort="quick", isolate=True,'))  # fmt: skip
    main = write_script(tmp_path / "main.py", "import rel_dsl_kernels\nrel_dsl_kernels.tune(40)\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tunedsl", "run", str(main)],
        env=child_env(tmp_path / "cache", TUNEDSL_CONFIG_TIMEOUT="1e300"),
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "TUNEDSL_CONFIG_TIMEOUT='1e300'" in proc.stderr and "at most" in proc.stderr
    # The user's frames only (as for any UsageError), none of tunedsl's.
    assert "OverflowError" not in proc.stderr and "/tunedsl/" not in proc.stderr, proc.stderr
