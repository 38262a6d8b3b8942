"""``triton.autotune`` code moved to ``autotune_launch``: what a port written the Triton way
runs into, named with tunedsl's form. Real kernels under Triton's interpreter."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton

from tunedsl import autotune_launch, cdiv
from tunedsl.errors import UsageError

pytestmark = pytest.mark.needs_triton


def launch(src: torch.Tensor, **options: Any) -> Any:
    from ported_kernels import add_one

    n = src.numel()
    options.setdefault("grid", lambda c: (cdiv(n, c.BLOCK),))
    return autotune_launch(add_one, space={"BLOCK": [32, 128]},
                           args=(src, n), kwargs=lambda c: {"BLOCK": c.BLOCK},
                           restore_value=["src"], **options)  # fmt: skip


def test_a_prune_that_returns_a_triton_config_is_named_with_its_dict() -> None:
    """An ``early_config_prune`` that builds ``triton.Config`` objects of its own, ported as
    ``prune=``: the error spells out the dict to return, as a ``triton.Config`` in
    ``space=`` does."""
    own = lambda configs, args: [triton.Config({"BLOCK": 64}, num_warps=2)]  # noqa: E731
    src = torch.zeros(300)
    with pytest.raises(UsageError, match=r"prune= result: a triton\.Config.*'BLOCK': 64"):
        launch(src, prune=own, name="prune-triton-config")
    assert not src.any()


def test_a_prune_reading_triton_config_attributes_is_told_how_to_read_a_field() -> None:
    """An ``early_config_prune`` that reads ``c.kwargs["BLOCK"]`` (a ``triton.Config``'s
    form) on tunedsl's configurations: the error says how a tunedsl Config reads a field."""
    small = lambda configs, args: [c for c in configs if c.kwargs["BLOCK"] <= args["N"]]  # noqa: E731
    src = torch.zeros(300)
    with pytest.raises(AttributeError, match=r"not a triton\.Config.*cfg\.BLOCK"):
        launch(src, prune=small, name="prune-kwargs")


@pytest.mark.parametrize(
    ("later", "message"),
    [
        ({"num_stages": 4}, r"passes the launch hints num_stages=4, but the site's first call passed num_stages=2"),
        ({"num_stages": 2, "warmup": 25}, r"`warmup=` is triton.autotune's; in tunedsl: effort= or budget="),
    ],
    ids=["other-hint", "triton-keyword"],
)  # fmt: skip
def test_a_later_call_of_a_site_with_other_hints_is_an_error(
    later: dict[str, Any], message: str
) -> None:
    """A wrapper that passes its caller's options through (``launch(x, **opts)``) is one
    site: its first call's static hints and checks stand for every later call, so a later
    call's other hint (or a ``triton.autotune`` keyword) would be dropped without a word."""
    src = torch.zeros(300)
    name = f"hints-{sorted(later)}"
    assert launch(src, num_stages=2, name=name).source == "tuned"
    with pytest.raises(UsageError, match=message):
        launch(src, **later, name=name)
    torch.testing.assert_close(src, torch.ones(300))  # the later call launched nothing


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        ({"do_bench": lambda fn: 1.0}, r"`do_bench=` is triton.autotune's"),
        ({"num_warps": 3}, r"num_warps=3 must be a power of 2"),
        ({"num_stages": [2, 3]}, r"static hint, one value for every configuration"),
        ({"mode": "cache"}, r"mode='cache'; expected one of"),
        ({"reset_to_zero": ["dst"]}, r"'dst' is not a parameter"),
    ],
    ids=["triton-keyword", "bad-hint", "hint-list", "option-choice", "option-typo"],
)  # fmt: skip
def test_a_call_that_fails_before_any_call_succeeded_fixes_nothing_of_the_site(
    mistake: dict[str, Any], message: str
) -> None:
    """A port's first try at a site is often refused (a ``triton.autotune`` keyword, a hint
    Triton refuses, a typo): the corrected call at the same site then runs with its own hints
    (it was refused for the hints of a call that never ran), and from then on the site keeps
    the hints of that first call that succeeded."""
    src = torch.zeros(300)
    name = f"retry-{sorted(mistake)}"
    with pytest.raises(UsageError, match=message):
        launch(src, **mistake, name=name)
    assert not src.any()
    assert launch(src, num_stages=2, name=name).source == "tuned"
    torch.testing.assert_close(src, torch.ones(300))
    with pytest.raises(UsageError, match=r"the site's first call passed num_stages=2"):
        launch(src, name=name)


def test_a_triton_config_pre_hook_is_ported_as_work_before_the_call() -> None:
    """``triton.Config(..., pre_hook=zero_out)`` runs before every launch under
    ``triton.autotune`` (hits too); tunedsl's ``pre_hook=`` runs only while tuning, so the
    error for such a configuration says to do the hook's work before the call, and that port
    gives Triton's result on every call."""
    from ported_kernels import total

    zero = lambda args: args["out"].zero_()  # noqa: E731
    x = torch.randn(300)
    space = [
        triton.Config({"BLOCK": 32}, pre_hook=zero),
        triton.Config({"BLOCK": 128}, pre_hook=zero),
    ]

    def call(out: torch.Tensor, space: Any) -> Any:
        return autotune_launch(total, space=space, grid=lambda c: (cdiv(300, c.BLOCK),),
                               args=(x, out, 300), kwargs=lambda c: {"BLOCK": c.BLOCK},
                               restore_value=["out"])  # fmt: skip

    with pytest.raises(
        UsageError,
        match=r"runs before every launch.*pre_hook= runs only while tuning.*before the call",
    ):
        call(torch.full((1,), 7.0), space)
    for _ in range(3):  # the port: the hook's work before the call; a hit is right too
        out = torch.full((1,), 7.0)
        out.zero_()
        call(out, [{"BLOCK": 32}, {"BLOCK": 128}])
        torch.testing.assert_close(out, x.sum().reshape(1), rtol=1e-4, atol=1e-4)


def test_a_grid_reading_an_argument_from_meta_is_told_to_use_it_directly() -> None:
    """Triton's grid ``lambda META: (cdiv(META["N"], META["BLOCK"]),)`` reads the call's
    arguments from ``META``; tunedsl's grid function gets the configuration only, and the
    error says so instead of listing the configuration's fields alone."""
    src = torch.zeros(300)
    with pytest.raises(KeyError, match=r"no field 'N'.*the call's arguments.*directly"):
        launch(src, name="meta-grid", grid=lambda meta: (cdiv(meta["N"], meta["BLOCK"]),))
    assert not src.any()


def test_a_list_space_configuration_lacking_a_field_the_others_have_is_named_as_such() -> None:
    """A list space where one configuration leaves out a field the others have: the function
    reading it is told that this configuration lacks it and to give it to every one (as the
    DSL says of ``$BLOCK``), not Triton's META hint, which fits a name no configuration has."""
    from ported_kernels import add_one

    src, n = torch.zeros(300), 300
    space = [{"BLOCK": 128, "num_warps": 4}, {"num_warps": 8}]
    with pytest.raises(AttributeError) as read:  # kwargs= reads cfg.BLOCK
        autotune_launch(add_one, space=space, grid=lambda c: (cdiv(n, 64),), args=(src, n),
                        kwargs=lambda c: {"BLOCK": c.BLOCK}, name="lacking-attr")  # fmt: skip
    with pytest.raises(KeyError) as item:  # grid= reads cfg["BLOCK"]
        autotune_launch(add_one, space=space, grid=lambda c: (cdiv(n, c["BLOCK"]),),
                        args=(src, n), kwargs=lambda c: {"BLOCK": c.get("BLOCK", 64)},
                        name="lacking-item")  # fmt: skip
    for err in (read, item):
        text = str(err.value)
        assert "'BLOCK' is not a field of every configuration of space=" in text, text
        assert "Config(num_warps=8) has none" in text, text
        assert "give every configuration of the list space a 'BLOCK'" in text, text
        assert "META" not in text and "the call's arguments" not in text, text
    assert not src.any()
    # A name no configuration of the list has keeps the META hint.
    with pytest.raises(AttributeError, match=r"no field 'N'.*the call's arguments.*directly"):
        autotune_launch(add_one, space=space, grid=lambda c: (cdiv(c.N, 64),), args=(src, n),
                        kwargs=lambda c: {"BLOCK": 64}, name="lacking-none")  # fmt: skip


# ported from: triton-lang/triton python/tutorials/09-persistent-matmul.py::matmul_tma_set_block_size_hook
def test_a_pre_hook_setting_descriptor_block_shapes_is_named_with_the_port_that_works() -> None:
    """Triton's tutorials build host descriptors with a placeholder block and give each
    ``triton.Config`` a ``pre_hook`` that sets the configuration's block. tunedsl compiles
    configurations before any hook runs and runs ``pre_hook`` only while tuning, so such a hook
    is a ``UsageError`` naming the descriptor and the port: descriptors built per configuration
    in ``kwargs=``, which gives the product on the tuning call and on a hit."""
    from ported_kernels_tenth import mm_desc
    from triton.tools.tensor_descriptor import TensorDescriptor

    m = n = k = 64
    a, b = torch.randn(m, k), torch.randn(k, n)
    space = {"BM": [16, 32], "BN": [32], "BK": [16]}
    c = torch.zeros(m, n)
    descs = [TensorDescriptor.from_tensor(t, [16, 16]) for t in (a, b, c)]

    def hook(nargs: dict[str, Any], reset_only: bool = False) -> None:
        nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
        nargs["b_desc"].block_shape = [nargs["BK"], nargs["BN"]]
        nargs["c_desc"].block_shape = [nargs["BM"], nargs["BN"]]

    with pytest.raises(UsageError, match=r"'b_desc'.*TensorDescriptor.from_tensor\(a, \[cfg.BM"):
        autotune_launch(mm_desc, space=space, grid=lambda cfg: (cdiv(m, cfg.BM), cdiv(n, cfg.BN)),
                        args=(*descs, m, n, k), kwargs=lambda cfg: cfg.as_dict(), pre_hook=hook,
                        key=(m, n, k), name="descriptor-hook")  # fmt: skip
    for _ in range(2):
        c = torch.zeros(m, n)
        res = autotune_launch(
            mm_desc, space=space, grid=lambda cfg: (cdiv(m, cfg.BM), cdiv(n, cfg.BN)),
            kwargs=lambda cfg: {"a_desc": TensorDescriptor.from_tensor(a, [cfg.BM, cfg.BK]),
                                "b_desc": TensorDescriptor.from_tensor(b, [cfg.BK, cfg.BN]),
                                "c_desc": TensorDescriptor.from_tensor(c, [cfg.BM, cfg.BN]),  # noqa: B023
                                "M": m, "N": n, "K": k, **cfg.as_dict()},
            key=(m, n, k, str(a.dtype)), name="descriptor-per-config",
        )  # fmt: skip
        torch.testing.assert_close(c, a @ b, atol=1e-3, rtol=1e-3)
    assert res.source == "memory"


@pytest.mark.parametrize(
    ("typo", "message"),
    [
        ({"mode": "cache"}, r"mode='cache'; expected one of on, cached, off"),
        ({"timing": "cuda_graph"}, r"timing='cuda_graph'; expected one of"),
        ({"effort": "fast"}, r"effort='fast'; expected one of"),
    ],
    ids=["mode", "timing", "effort"],
)
def test_an_option_naming_no_choice_is_an_error_on_a_decided_key_too(
    typo: dict[str, Any], message: str
) -> None:
    """A typo in an option's value was named only on a call that decided a new key: once the
    key was decided (an earlier call in the process, a record), it was taken in silence."""
    src = torch.zeros(300)
    name = f"typo-{sorted(typo)}"
    assert launch(src, name=name).source == "tuned"
    with pytest.raises(UsageError, match=message):
        launch(src, **typo, name=name)
    torch.testing.assert_close(src, torch.ones(300))  # the refused call launched nothing


def test_a_call_failing_while_another_threads_first_call_tunes_keeps_the_site() -> None:
    """Thread A's first call of a site is tuning (held in its pre_hook) when thread B calls
    the same site with a mistake, then with other hints: B's mistake does not unmake the site
    A is tuning (its decision stays in memory), and B's other hints are refused against A's,
    the call that made the site, though it has not returned yet."""
    import threading

    from ported_kernels import add_one

    started, proceed = threading.Event(), threading.Event()

    def hold(args: dict[str, Any]) -> None:
        started.set()
        assert proceed.wait(60)

    src = torch.zeros(300)
    n = src.numel()

    def call(args: Any, **hints: Any) -> Any:
        return autotune_launch(add_one, space={"BLOCK": [32, 128]}, grid=lambda c: (cdiv(n, c.BLOCK),),
                               args=args, kwargs=lambda c: {"BLOCK": c.BLOCK}, restore_value=["src"],
                               pre_hook=hold, name="threads-first-call", **hints)  # fmt: skip

    out: dict[str, Any] = {}
    a = threading.Thread(target=lambda: out.setdefault("A", call((src, n), num_warps=4)))
    a.start()
    try:
        assert started.wait(60)
        with pytest.raises(UsageError, match=r"args=5: give a tuple"):
            call(5, num_warps=4)
        with pytest.raises(UsageError, match=r"num_warps=8, but the site's first call passed"):
            call((src, n), num_warps=8)
    finally:
        proceed.set()
        a.join(60)
    assert out["A"].source == "tuned"
    assert call((src, n), num_warps=4).source == "memory"
    torch.testing.assert_close(src, torch.full((300,), 2.0))


def test_a_prune_reading_a_name_the_call_does_not_pass_is_told_the_names_it_holds() -> None:
    """``args["n"]`` in a prune (Triton's key names its arguments, a port may misspell one):
    still a ``KeyError``, as a dict's, now naming the closest name and every name held."""
    src = torch.zeros(300)
    with pytest.raises(
        KeyError, match=r"args\['n'\], which this call does not pass; did you mean 'N'\?"
    ):
        launch(src, prune=lambda configs, args: [c for c in configs if c.BLOCK <= args["n"]],
               name="prune-missing-name")  # fmt: skip
    assert not src.any()
