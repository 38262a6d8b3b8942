"""An eighth batch of other autotuners' test suites, ported to tunedsl: Kernel Tuner's
search-space restrictions (test_searchspace.py: a restriction written as a function of the
parameters by name, or of a dict of them, over a space of ints, floats, strings and bools),
Helion's tuning of a strided slice and of an expanded (stride-0) argument
(test_autotuner.py::test_autotune_noncontiguous_arg, test_autotune_broadcast_arg), Helion's
explicit value lists (test_config_api.py) and its settings read from the environment,
Triton's HIP configurations (``num_stages=0``), and TileLang's trial reporting
(test_autotune_trial_reporting.py: each configuration's outcome reported once, a
configuration the reference rejects, an observer that raises or interrupts) against the
``tunedsl`` logger.

Found and fixed: a ``Space`` constraint written as a function of the parameters by name
(Kernel Tuner's ``def restrict(block_x, block_y)``) failed on the site's first call with a
bare ``TypeError`` from inside the space (tunedsl calls ``constraint(cfg)`` with one
configuration); it is now a ``UsageError`` where the ``Space`` is made, with the form to
write (test_a_restriction_by_parameter_names_is_named_with_the_form_to_write). A space axis
given as a generator (``block=(2**i for i in range(5, 8))``) was read once, so the next
reading of the space found it empty and said "space axis 'block' is empty" of an axis the
user gave values; it is now an error saying to give a list
(test_an_axis_given_as_a_generator_is_named_with_the_fix). A handler of the ``tunedsl``
logger whose ``emit`` raises threw a finished tuning away (its error came out of the release
of the measuring lock: no launch, no record); it is now passed over with one warning, and
the choice is launched and stored (test_a_log_handler_that_raises_loses_no_tuning).
``num_stages=0``, which Triton compiles and its HIP configurations are written with, was
refused as "not a positive integer"; it is now tuned like any other value
(test_num_stages_zero_as_hip_configurations_write_it_is_tuned).
A constraint that returns nothing (``None``: Kernel Tuner's restriction falling off its end)
was told only to loosen it; the error now names the missing ``return``
(test_a_restriction_that_returns_nothing_is_named_as_a_missing_return).

Each test names the upstream test it ports (``# ported from: repo path::test``). Real
kernels under Triton's interpreter, through DSL macros compiled by ``tunedsl.frontend``.

Not ported, for want of a counterpart or because an earlier batch has it: Kernel Tuner's
restriction strings (``"block_x * block_y <= 256"``: tunedsl evaluates no strings; a string
constraint is refused as not callable) and its python-constraint objects
(``ExactSumConstraint``), its 3.1-million-point space whose restriction keeps 0.3% of the
points (tunedsl samples a large space by rejection and names a constraint that rejects 200
draws per point: docs/runtime.md "Large spaces and search"), its neighbour and index tests
(tests/unit has the axes' neighbours); Helion's backend-specific configuration fields
(block sizes per loop, Pallas and CuTe fields), best-of-k and its final re-benchmark
settings (tunedsl races the leaders: tests/unit), ``test_autotune_effort_quick`` and the
seed tests (test_ported_autotuners_more.py and test_ported_autotuners_third.py have them);
TileLang's cache-key tests of a reference function and of skipped checks (a record tuned without
``verify=`` is checked once per process before a site with ``verify=`` uses it:
tests/integration/test_runtime_decisions.py) and of compile flags (Triton's launch options
passed in a launch are keyed by value: test_ported_autotuners_seventh.py), its atomic
save (a torn record is a miss: test_ported_autotuners_more.py) and its per-configuration
timeout (the interpreter compiles nothing); Triton's newest test_autotuner.py cases are in
the earlier batches, but for ``prune_configs_by``'s fractional ``top_k`` (``prune=`` is one
user function).
"""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from runtime_helpers import new_process, record_files

from tunedsl import Config, Space, UsageError
from tunedsl.frontend.compile import compile_source
from tunedsl.warn import forget

pytestmark = pytest.mark.needs_triton

SCRIPT = """\
import triton
import triton.language as tl
from tunedsl import Space, autotune, cdiv
from ported_kernels_eighth import add_bias_rows, add_one_strided, copy_bump, copy_mixed, copy_tiles


def tiles(dst, src, space):
    return autotune(space=space, blocks=cdiv(src.numel(), $BX * $BY),
        copy_tiles(dst, src, src.numel(), BX=$BX, BY=$BY))


def mixed(dst, src, space):
    return autotune(space=space, blocks=cdiv(src.numel(), 64),
        copy_mixed(dst, src, src.numel(), INT=$INT, F=$F, NAME=$NAME, FLAG=$FLAG, BLOCK=64))


def bump_restored(x):
    return autotune(space=dict(block=[32, 128]), blocks=cdiv(x.numel(), $block),
        restore_value=["x"], verify=True, add_one_strided(x, x.numel(), x.stride(0), BLOCK=$block))


def bump(x):
    return autotune(space=dict(block=[32, 128]), blocks=cdiv(x.numel(), $block),
        add_one_strided(x, x.numel(), x.stride(0), BLOCK=$block))


def biased(x, b, out):
    m, n = x.shape
    return autotune(space=dict(bm=[8, 16], bn=[16, 32]), blocks=(cdiv(m, $bm), cdiv(n, $bn)),
        verify=True, add_bias_rows(x, b, out, m, n, b.stride(0), b.stride(1), BM=$bm, BN=$bn))


def checked(dst, src, reference):
    return autotune(space=dict(bump=[0, 1], block=[32, 64]), blocks=cdiv(src.numel(), $block),
        verify=reference, copy_bump(dst, src, src.numel(), BUMP=$bump, BLOCK=$block))


def staged(dst, src, stages):
    return autotune(space=dict(BX=[16, 32], num_stages=stages), blocks=cdiv(src.numel(), $BX),
        copy_tiles(dst, src, src.numel(), BX=$BX, BY=1))


def generated(dst, src):
    return autotune(space=dict(BX=(2**i for i in range(4, 6)), BY=[1, 2]),
        blocks=cdiv(src.numel(), $BX * $BY), copy_tiles(dst, src, src.numel(), BX=$BX, BY=$BY))
"""


def load(path: Path) -> dict[str, Any]:
    """``SCRIPT`` written to ``path``, expanded by the front end and run as a new module."""
    path.write_text(SCRIPT, encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "ported_eighth", "__file__": str(path)}
    exec(compile_source(path.read_bytes(), str(path)), namespace)
    return namespace


@pytest.fixture
def dsl(tmp_path: Path) -> dict[str, Any]:
    return load(tmp_path / "ported_eighth.py")


# --- Kernel Tuner test_searchspace: restrictions -------------------------------------------

TILE_AXES = {"BX": [16, 32, 64, 128], "BY": [1, 2, 4, 8]}


def restrict(p: Any) -> bool:
    """Kernel Tuner's old-style restriction: one argument, the parameters by name."""
    return bool(p["BX"] * p["BY"] <= 256 and p["BX"] // p["BY"] >= 4)


def restrict_args(BX: int, BY: int) -> bool:
    """Kernel Tuner's args-style restriction: each parameter by name."""
    return BX * BY <= 256 and BX // BY >= 4


# ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_restriction_backwards_compatibility
def test_a_restriction_of_the_parameters_by_name_keeps_what_the_kernel_compiles(
    dsl: dict[str, Any],
) -> None:
    """Kernel Tuner's old-style restriction ``restrict(p)`` reads the parameters by name
    (``p["BX"]``): a tunedsl constraint gets the configuration, which reads the same way, so
    the function works unchanged. The site measures exactly the configurations a brute-force
    check of the restriction keeps (``copy_tiles`` compiles no other: ``BX * BY <= 256``),
    every one of them runs, and the winner's copy is right."""
    src, dst = torch.randn(1000), torch.zeros(1000)
    res = dsl["tiles"](dst, src, Space(TILE_AXES, constraint=restrict))
    every = [Config(BX=x, BY=y) for x, y in itertools.product(*TILE_AXES.values())]
    kept = [c for c in every if restrict_args(c.BX, c.BY)]
    assert 0 < len(kept) < len(every)
    assert list(res.timings) == kept and all(r.status == "ok" for r in res.timings.values())
    assert res.source == "tuned" and torch.equal(dst, src)


# ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_restriction_backwards_compatibility
def test_a_restriction_by_parameter_names_is_named_with_the_form_to_write(
    dsl: dict[str, Any],
) -> None:
    """Kernel Tuner's args-style restriction ``restrict_args(BX, BY)`` takes each parameter
    by name. tunedsl calls a constraint with one configuration, so such a function cannot be
    called: the ``Space`` refuses it where it is made, naming the function, how tunedsl calls
    it and the form to write, instead of a bare ``TypeError`` from inside the space on the
    site's first call. Nothing runs; written as asked, it keeps what ``restrict`` keeps."""
    with pytest.raises(
        UsageError,
        match=r"constraint=restrict_args\(BX, BY\).*constraint\(cfg\).*"
        r"lambda cfg: restrict_args\(cfg\.BX, cfg\.BY\)",
    ):
        Space(TILE_AXES, constraint=restrict_args)
    src, dst = torch.randn(1000), torch.zeros(1000)
    res = dsl["tiles"](dst, src, Space(TILE_AXES, constraint=lambda c: restrict_args(c.BX, c.BY)))
    assert list(res.timings) == list(Space(TILE_AXES, constraint=restrict).configs())
    assert torch.equal(dst, src)


def restrict_old_style(p: Any) -> Any:
    """Kernel Tuner's test restriction as written there: ``False`` where a warp would get no
    work, and nothing (``None``) otherwise."""
    if p["BX"] // p["BY"] == 0:
        return False


# ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_restriction_backwards_compatibility
def test_a_restriction_that_returns_nothing_is_named_as_a_missing_return(
    dsl: dict[str, Any],
) -> None:
    """Kernel Tuner's old-style ``restrict(p)`` returns ``False`` or falls off its end
    (``None``): falsy, so it keeps nothing, there as here. The site says so, naming the
    function and the missing ``return``, rather than telling the user to loosen a
    constraint that rejects nothing on purpose. Nothing runs."""
    src, dst = torch.randn(1000), torch.zeros(1000)
    with pytest.raises(
        UsageError,
        match=r"restrict_old_style returned None for every configuration.*missing `return`",
    ):
        dsl["tiles"](dst, src, Space(TILE_AXES, constraint=restrict_old_style))
    assert not dst.any()


MIXED_AXES = {
    "INT": [1, 2, 3],
    "F": [1.0, 2.0, 3.0, -4.4],
    "NAME": ["Alpha", "Bravo", "Charlie"],
    "FLAG": [True, False],
}


# ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_mixed_param_types
# ported from: KernelTuner/kernel_tuner test/test_searchspace.py::test_size
def test_a_restricted_space_of_mixed_types_is_tuned_and_stored_with_its_types(
    tmp_path: Path,
) -> None:
    """Kernel Tuner: ints, floats (one negative), strings and bools, restricted by
    ``int_param + float_param > 3`` and ``bool_param == False``, keep 18 of 72
    configurations. Through a site, the 18 are the ones measured (``copy_mixed`` compiles no
    other) and each value keeps its type: ``2`` and ``2.0`` stay two values, and a new process
    is served the stored choice (``disk``) with the float still a float and the bool a bool."""
    space = Space(MIXED_AXES, constraint=lambda c: c.INT + c.F > 3 and c.FLAG is False)
    assert len(space.configs()) == 18
    src, dst = torch.randn(300), torch.zeros(300)
    res = load(tmp_path / "ported_eighth.py")["mixed"](dst, src, space)
    assert list(res.timings) == list(space.configs())
    assert all(r.status == "ok" for r in res.timings.values()) and torch.equal(dst, src)
    new_process()
    dst.zero_()
    again = load(tmp_path / "ported_eighth.py")["mixed"](dst, src, space)
    assert again.source == "disk" and again.config == res.config and torch.equal(dst, src)
    types = {name: type(value) for name, value in again.config.items()}
    assert types == {"INT": int, "F": float, "NAME": str, "FLAG": bool}
    assert len(record_files()) == 1


# --- Helion test_autotuner: arguments that are not contiguous -------------------------------


# ported from: pytorch/helion test/test_autotuner.py::test_autotune_noncontiguous_arg
def test_an_in_place_kernel_on_a_strided_slice_is_tuned_on_its_layout(
    dsl: dict[str, Any],
) -> None:
    """Helion: a kernel bound to a strided slice (``buf[::2]``) must be measured and checked
    on that layout; a contiguous copy would put the stride-2 accesses on other elements.
    With ``restore_value`` and ``verify=True``, every configuration agrees and the slice gets
    exactly one ``+1``, the elements between untouched; without ``restore_value`` the
    in-place watch finds the write and leaves one launch's result just the same."""
    for site in ("bump_restored", "bump"):
        buf = torch.arange(2048, dtype=torch.float32)
        x = buf[::2]
        assert x.stride() == (2,)
        expected = buf.clone()
        expected[::2] += 1
        if site == "bump":
            forget()  # the notice is given once a process: another test's kernel may have had it
            with pytest.warns(UserWarning, match=r"changes 'x' in place"):
                res = dsl[site](x)
        else:
            res = dsl[site](x)
        assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
        assert torch.equal(buf, expected), site


# ported from: pytorch/helion test/test_autotuner.py::test_autotune_broadcast_arg
def test_an_expanded_argument_is_verified_on_its_stride_zero_layout(dsl: dict[str, Any]) -> None:
    """Helion: a bias ``[M, 1]`` expanded to ``[M, N]`` (strides ``(1, 0)``), read through
    its strides; checking configurations against a copy made contiguous would read another
    element per column and reject them all. With ``verify=True`` every configuration is
    compared with the first and agrees, the bias is left as it was, and the output is
    ``x + b``. A bias of another layout (contiguous ``[M, N]``) is another key."""
    m, n = 40, 48
    x, out = torch.randn(m, n), torch.zeros(m, n)
    column = torch.randn(m, 1)
    b = column.expand(m, n)
    assert b.stride() == (1, 0)
    res = dsl["biased"](x, b, out)
    assert res.source == "tuned" and all(r.status == "ok" for r in res.timings.values())
    assert len(res.timings) == 4 and torch.equal(out, x + b)
    assert torch.equal(b, column.expand(m, n))
    out.zero_()
    dense = dsl["biased"](x, b.contiguous(), out)
    assert dense.source == "tuned" and dense.digest != res.digest and torch.equal(out, x + b)


# --- Helion test_config_api / settings: explicit values, the environment ---------------------


# ported from: pytorch/helion test/test_config_api.py::test_rejects_invalid_explicit_lists
def test_an_axis_given_as_a_generator_is_named_with_the_fix(dsl: dict[str, Any]) -> None:
    """Helion refuses an explicit value list it cannot use, naming the field. A space axis
    given as a generator (``BX=(2**i for i in range(4, 6))``) can be read once, and a space is
    read again (to size it, to list it, on every new key): the site names the axis and says
    to give a list, rather than calling an axis of two values empty. Nothing runs."""
    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises(UsageError, match=r"axis 'BX' is an iterator \(generator\).*give a list"):
        dsl["generated"](dst, src)
    assert not dst.any()
    with pytest.raises(UsageError, match=r"axis 'BX' is an iterator \(generator\).*give a list"):
        Space(BX=(b for b in [16, 32]), BY=[1]).configs()


# ported from: triton-lang/triton python/tutorials/03-matrix-multiplication.py::get_hip_autotune_config
def test_num_stages_zero_as_hip_configurations_write_it_is_tuned(tmp_path: Path) -> None:
    """Triton's HIP matmul configurations (and ROCm's tuning scripts built on them) are
    written with ``num_stages=0``, which Triton compiles (0, like 1, pipelines nothing). A
    space with ``num_stages=[0, 2]`` tunes, both values are recorded, and a new process is
    served the stored choice; a negative value is still refused, naming it, before anything
    runs."""
    src, dst = torch.randn(300), torch.zeros(300)
    with pytest.raises(UsageError, match=r"num_stages=-1 must be an integer >= 0"):
        load(tmp_path / "ported_eighth.py")["staged"](dst, src, [-1, 2])
    res = load(tmp_path / "ported_eighth.py")["staged"](dst, src, [0, 2])
    assert res.source == "tuned" and torch.equal(dst, src)
    assert {c.num_stages for c in res.timings} == {0, 2}
    assert all(r.status == "ok" for r in res.timings.values())
    new_process()
    dst.zero_()
    again = load(tmp_path / "ported_eighth.py")["staged"](dst, src, [0, 2])
    assert again.source == "disk" and again.config == res.config and torch.equal(dst, src)


# ported from: pytorch/helion test/test_autotuner.py::test_autotune_cache_invalid_raises
# ported from: pytorch/helion test/test_autotuner.py::test_settings_flag_from_env
@pytest.mark.parametrize(
    ("variable", "value", "choices"),
    [
        ("TUNEDSL_EFFORT", "fast", "quick, default, thorough"),
        ("TUNEDSL_AUTOTUNE", "always", "on, cached, off"),
        ("TUNEDSL_SEARCH", "grid", "auto, exhaustive, random, pattern, model"),
    ],
)
def test_a_setting_from_the_environment_is_checked_before_anything_runs(
    dsl: dict[str, Any], monkeypatch: pytest.MonkeyPatch, variable: str, value: str, choices: str
) -> None:
    """Helion reads its autotuner settings from the environment and raises on a value it does
    not know. tunedsl's ``TUNEDSL_EFFORT``, ``TUNEDSL_AUTOTUNE`` and ``TUNEDSL_SEARCH`` name the
    variable, the value and the choices on the site's first call; nothing runs and no record
    is written. The same setting, spelled in capitals, is taken."""
    src, dst = torch.randn(300), torch.zeros(300)
    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError, match=rf"{variable}='{value}': expected one of {choices}"):
        dsl["tiles"](dst, src, {"BX": [16, 32], "BY": [1]})
    assert not dst.any() and not record_files()
    monkeypatch.setenv(variable, choices.split(", ")[0].upper())
    res = dsl["tiles"](dst, src, {"BX": [16, 32], "BY": [1]})
    assert res.source in ("tuned", "default") and torch.equal(dst, src)


# --- TileLang test_autotune_trial_reporting: what a tuning reports, and a broken observer ----


class Recording(logging.Handler):
    """Keeps each ``tunedsl_event`` (through JSON, as a sink that stores them would) and,
    with ``fail``, raises it from every per-configuration record after keeping it."""

    def __init__(self, fail: BaseException | None = None) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[dict[str, Any]] = []
        self.fail = fail

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "tunedsl_event", None)
        if event is None:
            return
        self.events.append(json.loads(json.dumps(event)))
        if self.fail is not None and event["event"] not in ("start", "done"):
            raise self.fail


@pytest.fixture
def observed() -> Any:
    """A ``Recording`` handler on the ``tunedsl`` logger (at DEBUG) for the test's length."""
    log = logging.getLogger("tunedsl")
    level, handlers = log.level, []

    def add(handler: logging.Handler) -> logging.Handler:
        log.addHandler(handler)
        handlers.append(handler)
        return handler

    log.setLevel(logging.DEBUG)
    yield add
    for handler in handlers:
        log.removeHandler(handler)
    log.setLevel(level)


# ported from: tile-ai/tilelang testing/python/autotune/test_autotune_trial_reporting.py::test_each_outcome_once_on_aggregation_thread
def test_each_configurations_outcome_is_reported_once(dsl: dict[str, Any], observed: Any) -> None:
    """TileLang's trial observer gets each configuration's outcome once (ok, compile error),
    as JSON-ready records, on one thread. tunedsl's ``tunedsl`` logger gets one start and one
    end record and, per configuration, one outcome: ``measured``, or ``failed`` for the one
    that does not compile (``BX * BY > 256``), each event a plain JSON value; a later call
    served from memory reports nothing."""
    handler = observed(Recording())
    src, dst = torch.randn(1000), torch.zeros(1000)
    space = {"BX": [16, 512, 64], "BY": [1]}
    res = dsl["tiles"](dst, src, space)
    assert res.source == "tuned" and torch.equal(dst, src)
    kinds = [(e["event"], e["config"]) for e in handler.events]
    assert kinds[0] == ("start", None) and kinds[-1] == ("done", str(res.config))
    outcomes = {
        x: [k for k, c in kinds[1:-1] if c == str(Config(BX=x, BY=1)) and k != "compiled"]
        for x in space["BX"]
    }
    # (the interpreter compiles at the first launch: BX=512 is "compiled", then fails there)
    assert outcomes == {16: ["measured"], 512: ["failed"], 64: ["measured"]}
    assert handler.events[-1]["failed"] == 1 and handler.events[-1]["total"] == 3
    handler.events.clear()
    assert dsl["tiles"](dst, src, space).source == "memory" and handler.events == []


# ported from: tile-ai/tilelang testing/python/autotune/test_autotune_trial_reporting.py::test_validation_label
def test_a_configuration_the_reference_rejects_is_reported_with_the_mismatch(
    dsl: dict[str, Any], observed: Any
) -> None:
    """TileLang labels each trial's validation (passed, not run). tunedsl reports a
    configuration that ``verify=`` rejects as ``failed``, its ``why`` the mismatch, and
    never as ``measured``; the ones that agree are measured, the winner is one of them,
    and the record says ``rejected`` for the others."""
    handler = observed(Recording())
    src, dst = torch.randn(300), torch.zeros(300)
    res = dsl["checked"](dst, src, lambda inputs: {"dst": inputs["src"]})
    assert res.config.bump == 0 and torch.equal(dst, src)
    for cfg, result in res.timings.items():
        events = [e for e in handler.events if e["config"] == str(cfg)]
        outcome = [e["event"] for e in events if e["event"] not in ("compiled", "done")]
        if cfg.bump:
            assert result.status == "rejected" and outcome == ["failed"]
            assert "differs from the reference" in events[-1]["why"]
        else:
            assert result.status == "ok" and outcome == ["measured"]


# ported from: tile-ai/tilelang testing/python/autotune/test_autotune_trial_reporting.py::test_sink_failure_keeps_winner_and_disables_later_calls
def test_a_log_handler_that_raises_loses_no_tuning(tmp_path: Path, observed: Any) -> None:
    """TileLang: an observer that raises keeps the winner (the same as without it). A handler
    of the ``tunedsl`` logger whose ``emit`` raises (an application's bug: logging lets it
    through) is passed over, as a broken stderr is: the tuning's choice is launched, recorded
    (a new process is served it from disk) and the same as a run without the handler, and
    one warning names the handler's error."""
    src, dst = torch.randn(1000), torch.zeros(1000)
    space = {"BX": [16, 32], "BY": [1]}
    baseline = load(tmp_path / "ported_eighth.py")["tiles"](dst, src, space)
    for record in record_files():
        record.unlink()
    new_process()
    dst.zero_()
    handler = observed(Recording(OSError("sink failed")))
    forget("log-handler:")  # warned once per process: an earlier test may have been told
    with pytest.warns(UserWarning, match=r"handler of the 'tunedsl' logger raised.*sink failed"):
        res = load(tmp_path / "ported_eighth.py")["tiles"](dst, src, space)
    assert handler.events and res.source == "tuned" and torch.equal(dst, src)
    assert set(res.timings) == set(baseline.timings) and len(record_files()) == 1
    new_process()
    assert load(tmp_path / "ported_eighth.py")["tiles"](dst, src, space).source == "disk"


# ported from: tile-ai/tilelang testing/python/autotune/test_autotune_trial_reporting.py::test_keyboard_interrupt_propagates_through_cleanup
def test_an_interrupt_from_a_log_handler_stops_the_tuning_and_leaves_nothing_held(
    dsl: dict[str, Any], observed: Any
) -> None:
    """TileLang: a ``KeyboardInterrupt`` raised by the observer reaches the caller, and the
    tuner's compile pool and workers are cleaned up. In tunedsl it stops the tuning (no
    record, no launch); the next call, without the handler, tunes at once (no lock or claim
    on the key left held) and launches the right result."""
    src, dst = torch.randn(1000), torch.zeros(1000)
    space = {"BX": [16, 32], "BY": [1]}
    handler = observed(Recording(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        dsl["tiles"](dst, src, space)
    assert not dst.any() and not record_files()
    logging.getLogger("tunedsl").removeHandler(handler)
    res = dsl["tiles"](dst, src, space)
    assert res.source == "tuned" and torch.equal(dst, src) and len(record_files()) == 1
