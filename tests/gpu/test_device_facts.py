"""Device facts are per device: each visible GPU's own facts, and the
key names the device only on a host whose GPUs are of more than one model."""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.needs_triton]

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from tunedsl.backends import triton as bt  # noqa: E402


def test_device_facts_follow_the_current_device() -> None:
    models = set()
    for index in range(torch.cuda.device_count()):
        with torch.cuda.device(index):
            props = torch.cuda.get_device_properties(index)
            facts = bt.device_facts()
            assert facts["name"] == props.name
            assert facts["capability"] == f"{props.major}.{props.minor}"
            assert bt.current_device_index() == index
            models.add((props.name, props.major, props.minor))
    assert bt.mixed_device_models() == (len(models) > 1)
