"""Which GPUs a tuning measures on (``multi_device.tune_devices``, ``TUNEDSL_TUNE_DEVICES``):
the caller's first, only its model, counts and lists, and clear errors for bad settings."""

from __future__ import annotations

import pytest

from tunedsl import knobs
from tunedsl.backends.multi_device import tune_devices
from tunedsl.errors import UsageError

H200 = "NVIDIA H200 (cuda 9.0)"
A100 = "NVIDIA A100 (cuda 8.0)"
FOUR = {0: H200, 1: H200, 2: H200, 3: H200}
MIXED = {0: H200, 1: A100, 2: H200, 3: A100}


def test_all_is_every_gpu_of_the_callers_model_with_the_caller_first() -> None:
    assert tune_devices("all", [0, 1, 2, 3], 2, FOUR) == [2, 0, 1, 3]
    assert tune_devices("", [0, 1, 2, 3], 0, FOUR) == [0, 1, 2, 3]
    # Mixed models never share: an A100 caller gets the A100s, an H200 caller the H200s.
    assert tune_devices("all", [0, 1, 2, 3], 1, MIXED) == [1, 3]
    assert tune_devices("ALL", [0, 1, 2, 3], 0, MIXED) == [0, 2]


def test_a_count_takes_the_caller_and_the_next_of_its_model() -> None:
    assert tune_devices("1", [0, 1, 2, 3], 1, FOUR) == [1]
    assert tune_devices("2", [0, 1, 2, 3], 1, FOUR) == [1, 0]
    assert tune_devices("3", [0, 1, 2, 3], 2, MIXED) == [2, 0]  # only two H200s exist
    assert tune_devices("2", [0], 0, {0: H200}) == [0]


def test_a_list_names_devices_and_always_includes_the_caller() -> None:
    assert tune_devices("0,1", [0, 1, 2, 3], 0, FOUR) == [0, 1]
    assert tune_devices("2, 3", [0, 1, 2, 3], 0, FOUR) == [0, 2, 3]
    assert tune_devices("3,", [0, 1, 2, 3], 3, FOUR) == [3]
    assert tune_devices("1,1,0", [0, 1, 2, 3], 0, FOUR) == [0, 1]


@pytest.mark.parametrize(
    ("setting", "caller", "message"),
    [
        ("0,1", 0, "device 1 is a NVIDIA A100"),
        ("0,7", 0, "device 7 is not visible"),
        ("0,x", 0, "'x' is not a device index"),
        ("0", 0, "the count must be at least 1"),
        ("some", 0, "expected 'all', a count"),
        ("all", 9, "the caller's device 9 is not visible"),
    ],
)
def test_bad_settings_name_the_variable_and_the_fix(
    setting: str, caller: int, message: str
) -> None:
    with pytest.raises(UsageError, match="TUNEDSL_TUNE_DEVICES") as err:
        tune_devices(setting, [0, 1, 2, 3], caller, MIXED)
    assert message in str(err.value)


def test_the_knob_defaults_to_all_and_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TUNEDSL_TUNE_DEVICES", raising=False)
    assert knobs.tune_devices() == "all"
    monkeypatch.setenv("TUNEDSL_TUNE_DEVICES", " 0,1 ")
    assert knobs.tune_devices() == "0,1"
    assert "TUNEDSL_TUNE_DEVICES" in knobs.SETTINGS
