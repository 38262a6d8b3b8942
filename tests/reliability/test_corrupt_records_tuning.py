"""End to end: a damaged tuning record is a miss with one warning, tuning runs again, and
the rewritten record is valid (real kernels under Triton's interpreter)."""

from __future__ import annotations

import json

import pytest
from rel_helpers import cache_warnings, load_json, only_cache_warnings, record_files
from test_corrupt_cache import RECORD_CORRUPTIONS

from tunedsl.model.config import Config
from tunedsl.store import paths, records

pytestmark = pytest.mark.needs_triton

N = 70
SPACE = {"TILE": [16, 32]}


def _args():
    import torch

    a, b = torch.arange(N, dtype=torch.float32), torch.ones(N)
    return a, b, torch.zeros(N)


def _launch(name: str):
    """Fresh tensors and the autotune_launch options of the site id ``name``."""
    a, b, c = _args()
    common = dict(
        space=SPACE,
        grid=lambda cfg: ((N + cfg.TILE - 1) // cfg.TILE,),
        args=(a, b, c, N),
        kwargs=lambda cfg: {"TILE": cfg.TILE},
        effort="quick",
        name=name,
    )
    return a, b, c, common


@pytest.mark.parametrize(
    "kind",
    [
        "empty",
        "truncated",
        "random_bytes",
        "json_wrong_shape",
        "future_schema",
        "chosen_wrong_type",
        "int_of_5000_digits",
        "negative_median_ms",  # right types, no sense: it decided without a word
        "negative_reps",
    ],
)
def test_corrupt_record_is_retuned_and_rewritten(kind: str) -> None:
    import torch
    from rel_kernels import vadd

    from tunedsl import autotune_launch

    # Three call sites (sites are per code location) sharing one site id through name=:
    # the second and third have no in-memory decision and go to the disk for it.
    name = f"corrupt-{kind}"
    a, b, c, common = _launch(name)
    first = autotune_launch(vadd, **common)
    assert first.source == "tuned"
    (path,) = record_files(paths.cache_root())
    path.write_bytes(RECORD_CORRUPTIONS[kind](path.read_bytes()))

    a, b, c, common = _launch(name)
    with cache_warnings() as caught:
        again = autotune_launch(vadd, **common)
    messages = only_cache_warnings(caught)
    assert len(messages) == 1, messages
    assert again.source == "tuned"
    assert torch.equal(c, a + b)
    rebuilt = records.Record.from_json(load_json(path))  # valid against the schema
    assert rebuilt.digest == first.digest
    assert rebuilt.chosen in {Config(TILE=t) for t in SPACE["TILE"]}

    a, b, c, common = _launch(name)
    with cache_warnings() as caught:
        third = autotune_launch(vadd, **common)
    assert only_cache_warnings(caught) == []
    assert third.source == "disk"
    assert third.config == rebuilt.chosen
    assert torch.equal(c, a + b)


@pytest.mark.parametrize(
    ("limit", "source"),
    [
        (10**400, "disk"),  # an int past any float: it raised OverflowError from the call
        (1e308, "disk"),
        ("nan", "disk"),
        ([30], "disk"),
        (True, "disk"),
        (-1, "tuned"),
    ],
    ids=["int_past_any_float", "huge_float", "text", "list", "bool", "negative"],
)
def test_a_record_stating_damaged_limits_is_read_never_a_crash(limit: object, source: str) -> None:
    """A record whose timed-out configuration was made under limits it states as something
    no limit is (an int past any float, text, a list, a bool) keeps that timeout out, as a
    record stating no limits does, and decides the key; one stating a limit smaller than any
    has the timeout measured again. Never an exception from the user's call."""
    import torch
    from rel_kernels import vadd

    from tunedsl import autotune_launch

    name = f"damaged-limits-{type(limit).__name__}-{source}"
    a, b, c, common = _launch(name)
    assert autotune_launch(vadd, **common).source == "tuned"
    (path,) = record_files(paths.cache_root())
    data = load_json(path)
    (other,) = [r for r in data["results"] if r["config"] != data["chosen"]]
    other.update(status="failed", reason="compile timed out after 1 s", median_ms=None)
    data["context"]["limits"] = {"compile_s": limit, "answer_s": limit}
    path.write_text(json.dumps(data))

    a, b, c, common = _launch(name)
    again = autotune_launch(vadd, **common)
    assert again.source == source
    assert torch.equal(c, a + b)
