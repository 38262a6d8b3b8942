"""Shared test set-up: an isolated cache directory per test, and GPU tests skipped without CUDA."""

from __future__ import annotations

import glob
import importlib.util
import os
import signal

import pytest

# A shell that starts the tests in the background (`cmd &` without job control) has them
# ignore SIGINT, and every process they start inherits that: the tests that press Ctrl-C
# on a child would press it on a process that cannot hear it. A handler here is reset to
# the default in each child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Triton fixes interpreter-or-not when triton.language is imported. On a machine without a
# GPU, a tests/gpu module imported during collection (before tests/integration/conftest.py
# sets the variable) would otherwise fix it to "off", and interpreted kernels calling
# @jit library functions (tl.sum, ...) then fail in the integration tests.
GPU_DEVICES = glob.glob("/dev/nvidia[0-9]*") or glob.glob("/dev/dri/renderD*")
if not GPU_DEVICES:
    os.environ.setdefault("TRITON_INTERPRET", "1")

# At most this many pytest-xdist workers for `-n auto` (pyproject's addopts): many tests start
# processes of their own, so workers past the cores only wait, and each holds a torch import.
MAX_WORKERS = 8


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """How many workers `-n auto` starts: one per usable core, and none on a machine with a
    GPU, where tests time kernels and a second worker's kernels would share the device."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    if GPU_DEVICES:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, cores or 1))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Every test gets its own TUNEDSL_CACHE_DIR so no test sees another's records or bytecode."""
    monkeypatch.setenv("TUNEDSL_CACHE_DIR", str(tmp_path_factory.mktemp("tunedsl-cache")))
    yield


def _has_cuda() -> bool:
    from tunedsl import knobs

    if knobs.triton_interpret_env():
        return False
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_triton = (
        importlib.util.find_spec("triton") is not None
        and importlib.util.find_spec("torch") is not None
    )
    cuda = None
    for item in items:
        if "needs_triton" in item.keywords and not has_triton:
            item.add_marker(pytest.mark.skip(reason="needs torch and triton"))
        if "gpu" in item.keywords:
            if cuda is None:
                cuda = _has_cuda()
            if not cuda:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
