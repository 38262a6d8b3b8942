"""Configurations that fail to build, fail at run time, or give wrong results (``verify=``):
each is excluded with its reason in the record; when all fail, one ``TuningError`` lists each.

Under Triton's interpreter there is no ahead-of-time compile: a configuration that fails to
build (a failed ``tl.static_assert``) fails when the interpreter first runs it, so its
reason reads ``run: ...`` (the compile path proper is covered by tests/integration).
"""

from __future__ import annotations

import pytest

from tunedsl.errors import TuningError
from tunedsl.model.config import Config

pytestmark = pytest.mark.needs_triton

N = 50
GOOD = [Config(TILE=16, MODE=0), Config(TILE=32, MODE=0)]
STATIC_FAIL = Config(TILE=16, MODE=1)
WRONG = Config(TILE=16, MODE=2)
RUN_FAIL = Config(TILE=16, MODE=3)


def _tune(space, name):
    import torch
    from rel_kernels import vadd_flaky

    from tunedsl import autotune_launch

    a = torch.arange(N, dtype=torch.float32)
    b = torch.ones(N)
    c = torch.zeros(N)
    result = autotune_launch(
        vadd_flaky,
        space=[cfg.as_dict() for cfg in space],
        grid=lambda cfg: ((N + cfg.TILE - 1) // cfg.TILE,),
        args=(a, b, c, N),
        kwargs=lambda cfg: {"TILE": cfg.TILE, "MODE": cfg.MODE},
        verify=lambda inputs: {"c": inputs["a"] + inputs["b"]},
        effort="quick",
        name=name,
    )
    return result, a, b, c


def test_each_failing_configuration_is_excluded_with_its_reason() -> None:
    import torch

    space = [STATIC_FAIL, GOOD[0], WRONG, RUN_FAIL, GOOD[1]]
    result, a, b, c = _tune(space, "flaky-mixed")
    assert result.source == "tuned"
    assert result.config in GOOD
    assert torch.equal(c, a + b)  # the real launch used a correct configuration
    record = result.record
    assert record is not None
    by_config = {r.config: r for r in record.results}
    assert set(by_config) == set(space)
    for cfg in GOOD:
        assert by_config[cfg].status == "ok"
    static = by_config[STATIC_FAIL]
    assert static.status == "failed"
    assert "MODE 1 is rejected at compile time on purpose" in (static.reason or "")
    wrong = by_config[WRONG]
    assert wrong.status == "rejected"
    assert "verify" in (wrong.reason or "") and "'c'" in (wrong.reason or "")
    run_fail = by_config[RUN_FAIL]
    assert run_fail.status == "failed"
    assert (run_fail.reason or "").startswith("run: ")
    assert "arange" in (run_fail.reason or "")


def test_every_configuration_failing_is_one_clear_tuning_error() -> None:
    space = [STATIC_FAIL, WRONG, RUN_FAIL]
    with pytest.raises(TuningError) as info:
        _tune(space, "flaky-all")
    err = info.value
    assert set(err.failures) == {repr(cfg) for cfg in space}
    text = str(err)
    assert "every configuration" in text
    for cfg in space:
        assert repr(cfg) in text
    assert "MODE 1 is rejected" in err.failures[repr(STATIC_FAIL)]
    assert "verify" in err.failures[repr(WRONG)]
    assert "arange" in err.failures[repr(RUN_FAIL)]


def test_a_failure_in_the_kernel_names_the_kernels_line() -> None:
    # `tl.static_assert(TILE <= 32)` under the interpreter failed as
    # "run: InterpreterError: AssertionError('')": nothing said which assertion, or where.
    import inspect

    import torch
    from rel_kernels import copy_capped

    from tunedsl import autotune_launch

    x, y = torch.randn(N), torch.zeros(N)
    result = autotune_launch(
        copy_capped,
        space={"TILE": [16, 64]},
        grid=lambda cfg: ((N + cfg.TILE - 1) // cfg.TILE,),
        args=(x, y, N),
        kwargs=lambda cfg: {"TILE": cfg.TILE},
        name="capped",
    )
    assert result.config == Config(TILE=16) and torch.equal(y, x)
    lines, first = inspect.getsourcelines(copy_capped.fn)
    line = first + next(i for i, text in enumerate(lines) if "static_assert" in text)
    reason = result.timings[Config(TILE=64)].reason or ""
    assert reason.startswith("run: "), reason
    assert f"rel_kernels.py:{line}: tl.static_assert(TILE <= 32)" in reason, reason
