"""The direct launcher's bookkeeping, driven through a stand-in for Triton's JIT.

No GPU here, so the JITFunction is a small stand-in with Triton's own calling convention:
``run(*args, grid=, warmup=, **kwargs)`` returns a "CompiledKernel" whose ``run`` is the
launcher ``(gx, gy, gz, stream, function, packed_metadata, launch_metadata, enter, exit,
*all_args)``. The tests check which path each call takes and what reaches the launcher.
The real thing runs in tests/gpu/test_runtime_gpu.py.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import pytest

from tunedsl import warn
from tunedsl.backends import compat
from tunedsl.backends import triton as bt
from tunedsl.backends import triton_launch as tlaunch

pytestmark = pytest.mark.needs_triton


class Param:
    def __init__(self, name: str, is_constexpr: bool) -> None:
        self.name = name
        self.is_constexpr = is_constexpr


class FakeCompiled:
    def __init__(self, log: list) -> None:
        self.function = "fn-handle"
        self.packed_metadata = "packed"
        self.log = log

    @property
    def run(self):
        def launcher(*a: Any) -> None:
            self.log.append(("direct", a))

        return launcher


class FakeJit:
    """Quacks like triton.runtime.jit.JITFunction for the launcher."""

    def __init__(self) -> None:
        def kern(a, n, TILE, EVEN=False):
            pass

        self.fn = kern
        self.params = [
            Param("a", False),
            Param("n", False),
            Param("TILE", True),
            Param("EVEN", True),
        ]
        self.device_caches: dict = {}
        self.log: list = []

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> FakeCompiled:
        self.log.append(("jit", args, grid, kwargs))
        return FakeCompiled(self.log)


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch) -> dict:
    state = {"device": 0}

    class Hooks:
        def __init__(self) -> None:
            self.calls: list = []

    class Runtime:
        launch_enter_hook = Hooks()
        launch_exit_hook = Hooks()

    monkeypatch.setattr(
        compat, "device_and_stream", lambda: (lambda: state["device"], lambda d: 1000 + d)
    )
    monkeypatch.setattr(compat, "runtime_knobs", lambda: Runtime)
    monkeypatch.delenv("TUNEDSL_SAFE", raising=False)
    state["runtime"] = Runtime
    return state


def make() -> tuple[FakeJit, tlaunch.Launcher]:
    kernel = FakeJit()
    info = bt.kernel_info(kernel)
    assert info.jit and info.constexpr_names == {"TILE", "EVEN"}
    assert list(inspect.signature(kernel.fn).parameters) == list(info.arg_names)
    return kernel, tlaunch.Launcher(kernel, {"num_warps": 4})


def test_first_launch_through_jit_then_direct(fake_driver: dict) -> None:
    kernel, launch = make()
    launch((4,), ("A", 64), {}, {"TILE": 16}, ())
    assert kernel.log[-1] == ("jit", ("A", 64), (4,), {"TILE": 16, "num_warps": 4})
    launch((4, 2), ("B", 64), {}, {"TILE": 16}, ())
    # grid padded to 3 dims, stream of device 0, no launch metadata or hooks, then every
    # parameter in order: positional, the constexpr, and EVEN's default.
    assert kernel.log[-1] == (
        "direct",
        (4, 2, 1, 1000, "fn-handle", "packed", None, None, None, "B", 64, 16, False),
    )


def test_static_keyword_arguments_are_read_per_call(fake_driver: dict) -> None:
    kernel, launch = make()
    launch((1,), ("A",), {"n": 5}, {"TILE": 16}, ())
    launch((1,), ("B",), {"n": 7}, {"TILE": 16}, ())
    assert kernel.log[-1][1][-4:] == ("B", 7, 16, False)


def test_changed_config_dependent_constexpr_goes_through_jit(fake_driver: dict) -> None:
    kernel, launch = make()
    launch((1,), ("A", 64), {}, {"TILE": 16, "EVEN": True}, ())
    launch((1,), ("A", 65), {}, {"TILE": 16, "EVEN": False}, ())
    assert kernel.log[-1][0] == "jit" and kernel.log[-1][3]["EVEN"] is False
    launch((1,), ("A", 64), {}, {"TILE": 16, "EVEN": True}, ())
    assert kernel.log[-1][0] == "direct"


def test_holes_and_hooks_go_through_jit(fake_driver: dict) -> None:
    kernel, launch = make()
    launch((1,), ("A", 64), {}, {"TILE": 16}, ())
    launch((1,), ("A", 64), {}, {"TILE": 16}, ("A",))
    assert kernel.log[-1][0] == "jit"
    fake_driver["runtime"].launch_enter_hook.calls = [print]
    try:
        launch((1,), ("A", 64), {}, {"TILE": 16}, ())
        assert kernel.log[-1][0] == "jit"
    finally:
        fake_driver["runtime"].launch_enter_hook.calls = []
    launch((1,), ("A", 64), {}, {"TILE": 16}, ())
    assert kernel.log[-1][0] == "direct"


def test_another_device_gets_its_own_first_launch(fake_driver: dict) -> None:
    kernel, launch = make()
    launch((1,), ("A", 64), {}, {"TILE": 16}, ())
    fake_driver["device"] = 1
    launch((1,), ("A", 64), {}, {"TILE": 16}, ())
    assert kernel.log[-1][0] == "jit"
    launch((1,), ("A", 64), {}, {"TILE": 16}, ())
    assert kernel.log[-1] == (
        "direct",
        (1, 1, 1, 1001, "fn-handle", "packed", None, None, None, "A", 64, 16, False),
    )


def test_switched_off_by_knob(fake_driver: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEDSL_SAFE", "direct")
    kernel = FakeJit()
    launcher = tlaunch.Launcher(kernel, {})
    assert launcher.disabled
    launcher((1,), ("A", 64), {}, {"TILE": 16}, ())
    launcher((1,), ("A", 64), {}, {"TILE": 16}, ())
    assert [entry[0] for entry in kernel.log] == ["jit", "jit"]


def test_a_kernel_with_pre_run_hooks_keeps_the_jit(fake_driver: dict) -> None:
    kernel, launch = make()
    kernel.pre_run_hooks = [lambda *a, **k: None]  # JITFunction.add_pre_run_hook
    for _ in range(3):
        launch((1,), ("A", 64), {}, {"TILE": 16}, ())
    assert [entry[0] for entry in kernel.log] == ["jit", "jit", "jit"]


def test_unexpected_compiled_object_disables_direct_launch(fake_driver: dict) -> None:
    kernel, launch = make()
    kernel.run = lambda *a, **k: None  # type: ignore[method-assign]
    launch((1,), ("A", 64), {}, {"TILE": 16}, ())
    assert launch.disabled


class FakeTensor:
    """What the key reads from a tensor; ``ptr`` decides Triton's 16-byte alignment."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr
        self.dtype = "float32"
        self.shape = (64,)

    def stride(self) -> tuple[int, ...]:
        return (1,)

    def data_ptr(self) -> int:
        return self.ptr


def test_each_alignment_gets_its_own_compiled_kernel(fake_driver: dict) -> None:
    """Alignment is part of Triton's specialization, so an unaligned call must never reuse
    the aligned CompiledKernel; it is part of the record too (its own decision), since the
    two compiled kernels may rank configurations differently."""
    from tunedsl.runtime import dsl

    kernel = FakeJit()
    site = dsl.make_site(
        filename=__file__, line=1, col=0, kernel_text="kern", space={"tile": [16, 32]},
        static_hints={}, options={"mode": "off", "name": "align"}, placeholders=(), has_key=False,
    )  # fmt: skip

    def bind(cfg):
        return (), {"TILE": cfg.tile}, (4,)

    def paths() -> list[str]:
        return [entry[0] for entry in kernel.log]

    aligned, unaligned = FakeTensor(4096), FakeTensor(4100)
    site(kernel, (aligned, 64), {}, bind, None, None)
    site(kernel, (aligned, 64), {}, bind, None, None)
    assert paths() == ["jit", "direct"]
    res = site(kernel, (unaligned, 64), {}, bind, None, None)
    assert paths()[-1] == "jit"  # its own first launch, not the aligned kernel
    first = site.table()[next(iter(site.table()))]
    assert res.digest != first.digest  # its own decision and record
    site(kernel, (unaligned, 64), {}, bind, None, None)
    site(kernel, (aligned, 64), {}, bind, None, None)
    assert paths() == ["jit", "direct", "jit", "direct", "direct"]
    assert len(site.table()) == 2


def test_a_site_made_with_the_direct_launch_off_never_launches_an_unaligned_call_directly(
    fake_driver: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TUNEDSL_SAFE=direct when the site met its kernel, unset later (a test's monkeypatch,
    # a debugging session): the call key had been built without alignment, the launchers
    # made afterwards launched directly, and an unaligned tensor of an aligned key's shape
    # ran the kernel compiled for 16-byte-aligned pointers.
    from tunedsl.runtime import dsl

    kernel = FakeJit()
    site = dsl.make_site(
        filename=__file__, line=2, col=0, kernel_text="kern", space={"tile": [16, 32]},
        static_hints={}, options={"mode": "off", "name": "align-later"}, placeholders=(),
        has_key=False,
    )  # fmt: skip

    def bind(cfg):
        return (), {"TILE": cfg.tile}, (4,)

    aligned, unaligned = FakeTensor(4096), FakeTensor(4100)
    monkeypatch.setenv("TUNEDSL_SAFE", "direct")
    site(kernel, (aligned, 64), {}, bind, None, None)
    monkeypatch.delenv("TUNEDSL_SAFE")
    site(kernel, (aligned, 65), {}, bind, None, None)  # a new key: a direct launcher
    site(kernel, (aligned, 65), {}, bind, None, None)
    assert kernel.log[-1][0] == "direct"
    site(kernel, (unaligned, 65), {}, bind, None, None)
    assert kernel.log[-1][0] == "jit"  # its own first launch, not the aligned kernel
    assert len(site.table()) == 3


def test_arguments_the_key_does_not_refine_keep_the_jit(fake_driver: dict) -> None:
    kernel = FakeJit()

    def direct(args: tuple, kwargs: dict) -> bool:
        return not tlaunch.Launcher(kernel, {}, args, kwargs).disabled

    assert direct((FakeTensor(0), 64, 16), {})
    assert direct((FakeTensor(0), 1.5, None), {})
    # A tuple is keyed by its class only; Triton specializes on its contents.
    assert not direct(((FakeTensor(0), FakeTensor(4)), 64), {})
    assert not direct((FakeTensor(0),), {"n": object()})
    # Constexprs are keyed by value, whatever they are.
    assert direct((FakeTensor(0), 64, ("any", "value")), {})
    # Such a launcher launches every call through the JIT.
    launcher = tlaunch.Launcher(kernel, {}, ((FakeTensor(0), FakeTensor(4)), 64), {})
    for _ in range(2):
        launcher((1,), ((FakeTensor(0), FakeTensor(4)), 64), {}, {"TILE": 16}, ())
    assert [entry[0] for entry in kernel.log] == ["jit", "jit"]


# -- stored binaries: which path the first launch takes (the real store: test_runtime_binaries)


class BrokenCompiled(FakeCompiled):
    @property
    def run(self):
        raise RuntimeError("cannot load this binary on the device")


@pytest.fixture
def binaries(fake_driver: dict, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The store's three entry points, recording their calls; ``state["load"]`` decides
    what a load returns."""
    from tunedsl.backends import triton_binaries

    state: dict = {"sources": [], "stored": [], "load": None}

    def launch_source(kernel, args, kwargs, options):
        state["sources"].append((args, kwargs, options))
        if state.get("source_error"):
            raise state["source_error"]
        return types.SimpleNamespace(key="launch-key")

    def load(launch):
        state["loads"] = state.get("loads", 0) + 1
        make_compiled = state["load"]  # a FakeCompiled class, or None for a miss
        return make_compiled(state["log"]) if make_compiled is not None else None

    monkeypatch.setattr(triton_binaries, "launch_source", launch_source)
    monkeypatch.setattr(triton_binaries, "load", load)
    monkeypatch.setattr(
        triton_binaries, "store", lambda launch, compiled: state["stored"].append(compiled)
    )
    monkeypatch.setattr(tlaunch, "stored_binaries_enabled", lambda: True)
    monkeypatch.setattr(tlaunch, "_binaries", {}, raising=False)  # this process's binaries
    return state


def make_stored(state: dict) -> tuple[FakeJit, tlaunch.Launcher]:
    kernel = FakeJit()
    state["log"] = kernel.log
    return kernel, tlaunch.Launcher(kernel, {"num_warps": 4}, stored_binary=True)


def test_a_stored_binary_is_launched_directly_without_the_jit(binaries: dict) -> None:
    binaries["load"] = FakeCompiled
    kernel, launch = make_stored(binaries)
    launch((4,), ("A", 64), {}, {"TILE": 16}, ())
    launch((4,), ("B", 64), {}, {"TILE": 16}, ())
    assert [entry[0] for entry in kernel.log] == ["direct", "direct"]
    assert kernel.log[0][1][-4:] == ("A", 64, 16, False)
    # The key is built from the launch's arguments, keywords and options, once.
    assert binaries["sources"] == [(("A", 64), {"TILE": 16}, {"num_warps": 4})]
    assert binaries["stored"] == []


def test_a_second_key_with_the_same_binary_shares_it_without_loading_it_again(
    binaries: dict,
) -> None:
    # Every new size a rule decides is a new key with the same binary: it is read, verified
    # and loaded onto the device once a process, not once a key.
    binaries["load"] = FakeCompiled
    kernel, first = make_stored(binaries)
    first((4,), ("A", 64), {}, {"TILE": 16}, ())
    second = tlaunch.Launcher(kernel, {"num_warps": 4}, stored_binary=True)
    second((8,), ("B", 128), {}, {"TILE": 16}, ())
    assert [entry[0] for entry in kernel.log] == ["direct", "direct"]
    assert binaries["loads"] == 1
    # A binary the JIT compiled (none stored yet) is shared the same way.
    binaries["load"] = None
    other, third = make_stored(binaries)
    binaries["sources"].clear()
    tlaunch._binaries.clear()
    third((4,), ("A", 64), {}, {"TILE": 16}, ())
    fourth = tlaunch.Launcher(other, {"num_warps": 4}, stored_binary=True)
    fourth((4,), ("C", 32), {}, {"TILE": 16}, ())
    assert [entry[0] for entry in other.log] == ["jit", "direct"]
    assert binaries["loads"] == 2  # the miss that compiled; the fourth key loads nothing


def test_a_missing_binary_is_compiled_by_the_jit_then_stored(binaries: dict) -> None:
    kernel, launch = make_stored(binaries)
    launch((4,), ("A", 64), {}, {"TILE": 16}, ())
    launch((4,), ("A", 64), {}, {"TILE": 16}, ())
    assert [entry[0] for entry in kernel.log] == ["jit", "direct"]
    assert len(binaries["stored"]) == 1 and isinstance(binaries["stored"][0], FakeCompiled)


def test_a_binary_the_device_rejects_falls_back_to_the_jit(binaries: dict) -> None:
    from tunedsl.errors import CacheWarning

    warn.forget()
    binaries["load"] = BrokenCompiled
    kernel, launch = make_stored(binaries)
    with pytest.warns(CacheWarning, match="cannot load the stored binary"):
        launch((4,), ("A", 64), {}, {"TILE": 16}, ())
    launch((4,), ("A", 64), {}, {"TILE": 16}, ())
    assert [entry[0] for entry in kernel.log] == ["jit", "direct"]
    assert not launch.disabled


def test_an_error_while_building_the_key_never_breaks_the_launch(binaries: dict) -> None:
    binaries["source_error"] = AttributeError("an unexpected Triton version")
    kernel, launch = make_stored(binaries)
    launch((4,), ("A", 64), {}, {"TILE": 16}, ())
    launch((4,), ("A", 64), {}, {"TILE": 16}, ())
    assert [entry[0] for entry in kernel.log] == ["jit", "direct"]
    assert binaries["stored"] == []


def test_decisions_that_are_not_stored_never_touch_the_store(binaries: dict) -> None:
    kernel = FakeJit()
    launch = tlaunch.Launcher(kernel, {})  # e.g. a default
    launch((4,), ("A", 64), {}, {"TILE": 16}, ())
    assert binaries["sources"] == [] and binaries["stored"] == []


# -- the fused launch (runtime/fused.py): repeat check, bind and direct launch in one C call


def fused_for(
    fake_driver: dict, sample: tuple, dyn: dict | None = None
) -> tuple[FakeJit, Any, Any]:
    """A launcher that made its first launch with ``sample`` (and configuration-dependent
    keyword arguments ``dyn``), its entry, the fused launch the site would build for it."""
    from tunedsl.backends.compat import layout_check
    from tunedsl.model import repeat_check
    from tunedsl.model.config import Config
    from tunedsl.model.hole import HOLE
    from tunedsl.runtime import native
    from tunedsl.runtime.entry import Entry
    from tunedsl.runtime.fused import fuse_entry
    from tunedsl.runtime.result import LaunchResult

    if native.fused_type() is None:
        pytest.skip(f"no C fused launch: {native.status()}")
    kernel, launcher = make()
    launcher((4,), sample, {}, dyn or {"TILE": 16}, ())  # the first launch: through the JIT
    entry = Entry(Config(tile=16), launcher, LaunchResult(Config(tile=16), {}, "tuned"), (), ())
    info = bt.kernel_info(kernel)
    code = repeat_check.repeat_check_code(
        sample, info.constexpr_positions, HOLE, True, layout_check
    )
    assert code is not None
    fused = fuse_entry(kernel, entry, code, sample, {})
    assert fused is not None
    return kernel, entry, fused


def bind_for(n: int, even: bool | None = None):
    dyn = {"TILE": 16} if even is None else {"TILE": 16, "EVEN": even}
    return lambda cfg: ((), dyn, (-(-n // cfg.tile),))


def test_fused_launch_passes_every_argument_in_order(fake_driver: dict) -> None:
    torch = pytest.importorskip("torch")
    a = torch.zeros(64)
    kernel, entry, fused = fused_for(fake_driver, (a, 64))
    b = torch.ones(64)  # another tensor of the same layout
    assert fused(kernel, (b, 48), {}, bind_for(48)) is entry.result and entry.used
    # the tensor as the address its check read (the launcher takes an int for a pointer)
    assert kernel.log[-1] == (
        "direct",
        (3, 1, 1, 1000, "fn-handle", "packed", None, None, None, b.data_ptr(), 48, 16, False),
    )
    grid2 = lambda cfg: ((), {"TILE": 16}, (2, 5))  # noqa: E731
    fused(kernel, (b, 48), {}, grid2)
    assert kernel.log[-1][1][:4] == (2, 5, 1, 1000)


def test_fused_launch_refuses_another_layout_before_launching(fake_driver: dict) -> None:
    torch = pytest.importorskip("torch")
    a = torch.zeros(64)
    kernel, _entry, fused = fused_for(fake_driver, (a, 64))
    before = len(kernel.log)
    unaligned = torch.zeros(65)[1:]
    for args, kwargs in [
        ((a, 65), {}),  # the int's class: %16 -> neither
        ((a, 1), {}),  # ==1
        ((a.double(), 64), {}),  # dtype
        ((torch.zeros(8, 8), 64), {}),  # shape
        ((unaligned, 64), {}),  # 16-byte alignment
        ((a, 2**40), {}),  # beyond 32 bits
        ((a,), {}),  # arity
        ((a, 64), {"EVEN": True}),  # a keyword argument
    ]:
        assert fused(kernel, args, kwargs, bind_for(64)) is None, args
    assert fused(FakeJit(), (a, 64), {}, bind_for(64)) is None  # another kernel
    assert len(kernel.log) == before  # nothing was launched


def test_fused_launch_sends_what_direct_launch_does_not_cover_to_the_launcher(
    fake_driver: dict,
) -> None:
    torch = pytest.importorskip("torch")
    a = torch.zeros(64)
    kernel, entry, fused = fused_for(fake_driver, (a, 64))
    # a configuration-dependent constexpr that changed: the JIT, as the launcher decides
    assert fused(kernel, (a, 64), {}, bind_for(64, even=True)) is entry.result
    assert kernel.log[-1][0] == "jit" and kernel.log[-1][3]["EVEN"] is True
    fake_driver["runtime"].launch_enter_hook.calls = [print]  # a profiler's hook
    try:
        fused(kernel, (a, 64), {}, bind_for(64))
        assert kernel.log[-1][0] == "jit"
    finally:
        fake_driver["runtime"].launch_enter_hook.calls = []
    fake_driver["device"] = 1  # another device: the launcher's first launch there
    fused(kernel, (a, 64), {}, bind_for(64))
    assert kernel.log[-1][0] == "jit"
    fused(kernel, (a, 64), {}, bind_for(64))  # the launcher's own direct path on device 1
    assert kernel.log[-1][0] == "direct" and kernel.log[-1][1][3] == 1001
    fake_driver["device"] = 0
    fused(kernel, (a, 64), {}, bind_for(64))
    assert kernel.log[-1][0] == "direct" and kernel.log[-1][1][3] == 1000


# -- configuration-dependent keyword arguments that are not plain values


def test_a_configuration_dependent_tensor_keyword_is_never_compared_by_value(
    fake_driver: dict,
) -> None:
    # `scale(x, out=torch.empty(cdiv(n, $BLOCK) * $BLOCK), ...)` or a descriptor built with
    # `$` passed by keyword: a new object on every call. The direct path compared it with
    # the first launch's by `==`: two tensors of several elements raised "Boolean value of
    # Tensor with more than one value is ambiguous" (on a GPU only: the interpreter never
    # takes that path), and two one-element tensors equal in value launched the first
    # call's tensor in place of this call's, in silence.
    torch = pytest.importorskip("torch")
    kernel, launch = make()
    first = torch.zeros(8)
    for _ in range(2):
        launch((1,), (), {}, {"a": first, "n": 64, "TILE": 16}, ())
    assert kernel.log[-1][0] == "direct" and kernel.log[-1][1][-4] is first  # the same object
    second = torch.zeros(8)
    launch((1,), (), {}, {"a": second, "n": 64, "TILE": 16}, ())
    assert kernel.log[-1][0] == "jit" and kernel.log[-1][1] == ()
    assert kernel.log[-1][3]["a"] is second

    kernel, launch = make()
    one, other = torch.zeros(1), torch.zeros(1)  # equal in value, another tensor
    launch((1,), (), {}, {"a": one, "n": 64, "TILE": 16}, ())
    launch((1,), (), {}, {"a": other, "n": 64, "TILE": 16}, ())
    assert kernel.log[-1][0] == "jit" and kernel.log[-1][3]["a"] is other


def test_a_configuration_dependent_keyword_of_another_class_goes_through_the_jit(
    fake_driver: dict,
) -> None:
    # 1, 1.0 and True are equal in Python but Triton specializes them apart (a constexpr 1,
    # an fp32, a u1): a call giving 1.0 where the first launch gave 1 is not the first
    # launch's binary.
    kernel, launch = make()
    launch((1,), ("A",), {}, {"n": 1, "TILE": 16}, ())
    launch((1,), ("A",), {}, {"n": 1, "TILE": 16}, ())
    assert kernel.log[-1][0] == "direct"
    for other in (1.0, True):
        launch((1,), ("A",), {}, {"n": other, "TILE": 16}, ())
        assert kernel.log[-1][0] == "jit" and kernel.log[-1][3]["n"].__class__ is type(other)
    # A non-constexpr float is passed as the first launch gave it: -0.0 is not 0.0 there.
    kernel, launch = make()
    for zero, path in [(0.0, "jit"), (0.0, "direct"), (-0.0, "jit"), (0.0, "direct")]:
        launch((1,), ("A",), {}, {"n": zero, "TILE": 16}, ())
        assert kernel.log[-1][0] == path, zero
    # A tuple made per call (`SHAPE=($bm, $bn)`) is compared element by element.
    kernel, launch = make()
    for shape, path in [((16, 2), "jit"), ((16, 2), "direct"), ((16, 2.0), "jit")]:
        launch((1,), ("A", 64), {}, {"TILE": tuple(list(shape))}, ())
        assert kernel.log[-1][0] == path, shape


def test_fused_launch_sends_a_keyword_of_another_class_to_the_launcher(fake_driver: dict) -> None:
    # The C fused launch compared bind's keyword arguments with the first launch's by `==`:
    # TILE=16.0 (or a one-element tensor holding 16) after TILE=16 launched the binary
    # compiled for the int 16, passing 16.
    torch = pytest.importorskip("torch")
    a = torch.zeros(64)
    kernel, entry, fused = fused_for(fake_driver, (a, 64))
    for tile in (16.0, torch.tensor(16)):
        bind = lambda cfg, tile=tile: ((), {"TILE": tile}, (4,))  # noqa: E731
        assert fused(kernel, (a, 64), {}, bind) is entry.result
        assert kernel.log[-1][0] == "jit" and kernel.log[-1][3]["TILE"] is tile
    fused(kernel, (a, 64), {}, bind_for(64))
    assert kernel.log[-1][0] == "direct"
    # A tuple made per call is compared element by element, as the launcher does.
    # (Of its floats, a zero of the other sign is another value, as the launcher has it.)
    kernel, entry, fused = fused_for(fake_driver, (a, 64), {"TILE": (16, 0.0)})
    shapes = [((16, 0.0), "direct"), ((16, 0), "jit"), ((16, -0.0), "jit"), ((16, 0.0, 1), "jit")]
    for shape, path in shapes:
        bind = lambda cfg, s=shape: ((), {"TILE": tuple(list(s))}, (4,))  # noqa: E731
        assert fused(kernel, (a, 64), {}, bind) is entry.result
        assert kernel.log[-1][0] == path, shape
    # A tensor the first launch gave (`EVEN=buffers[$i]`): the same object launches
    # directly, another one (equal in value) through the JIT, never compared by `==`.
    first, other = torch.zeros(1), torch.zeros(1)
    kernel, entry, fused = fused_for(fake_driver, (a, 64), {"TILE": 16, "EVEN": first})
    for buffer, path in [(first, "direct"), (other, "jit"), (first, "direct")]:
        bind = lambda cfg, b=buffer: ((), {"TILE": 16, "EVEN": b}, (4,))  # noqa: E731
        assert fused(kernel, (a, 64), {}, bind) is entry.result
        assert kernel.log[-1][0] == path
