"""Shared test set-up: an isolated cache directory per test, and GPU tests skipped without CUDA."""

from __future__ import annotations

import glob
import importlib.util
import os

import pytest

# Triton fixes interpreter-or-not when triton.language is imported. On a machine without a
# GPU, a tests/gpu module imported during collection (before tests/integration/conftest.py
# sets the variable) would otherwise fix it to "off", and interpreted kernels calling
# @jit library functions (tl.sum, ...) then fail in the integration tests.
if not glob.glob("/dev/nvidia[0-9]*") and not glob.glob("/dev/dri/renderD*"):
    os.environ.setdefault("TRITON_INTERPRET", "1")


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
