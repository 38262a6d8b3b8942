"""The C fused launch (``runtime/native_fused.c``, built at install as
``tunedsl.runtime._native_fused``), the site's fast path, against the site's generic path:
the entry's repeat check, ``Entry.launch`` and the real ``Launcher``, with Triton's JIT and
the driver played by recorders (no GPU here). On real CPU tensors and PyTorch's real tensor
guard, a call given to the C form first and to the generic path when the C form turns it
down must end exactly as the same call given to the generic path alone; and the C form must
take exactly the calls that repeat the entry's layout. Without the extension every call
takes the generic path, with the same results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tunedsl.backends import compat, torch_compile  # noqa: E402
from tunedsl.backends.triton_launch import DirectPlan, Launcher  # noqa: E402
from tunedsl.model import keys, repeat_check  # noqa: E402
from tunedsl.model.config import Config  # noqa: E402
from tunedsl.model.hole import HOLE  # noqa: E402
from tunedsl.runtime import fused, native  # noqa: E402
from tunedsl.runtime.entry import Entry  # noqa: E402

if compat.layout_check([torch.zeros(2)]) is None:
    pytest.skip("this PyTorch has no tensor guard: no fused launch", allow_module_level=True)


@pytest.fixture(scope="module")
def fused_type() -> Any:
    found = native.fused_type()
    assert found is not None, native.status()  # scripts/setup.sh builds it (pip install -e .)
    return found


class Chain:  # Triton's HookChain: hooks in .calls
    def __init__(self) -> None:
        self.calls: list[Any] = []


class Runtime:
    def __init__(self) -> None:
        self.launch_enter_hook = Chain()
        self.launch_exit_hook = Chain()


class Recorder:
    """Stands for the C launch, the launcher and the getters: records what each is given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.device = 0
        self.packs = False  # the C launch takes the kernel's arguments as one tuple

    def run(self, *args: Any) -> None:
        self.calls.append(("run", args))

    def launch(self, *args: Any) -> None:
        self.calls.append(("launch", args))

    def get_device(self) -> int:
        return self.device

    def get_stream(self, device: int) -> int:
        return 1000 + device


KERNEL = object()


# -- the generic path, with Triton's JIT and the driver as recorders ------------------------


class Compiled:  # what the JIT returns: compat.direct_launch_parts reads it (patched below)
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec


class Param:
    def __init__(self, name: str, is_constexpr: bool) -> None:
        self.name = name
        self.is_constexpr = is_constexpr


class FakeJit:
    """A ``JITFunction`` as the launcher sees it (``fn``, ``params``, ``device_caches``,
    ``run``), recording each JIT launch; its "CompiledKernel" launches into ``rec.run``."""

    def __init__(self, fn: Any, constexprs: set[str], rec: Recorder) -> None:
        import inspect

        self.fn = fn
        self.params = [Param(n, n in constexprs) for n in inspect.signature(fn).parameters]
        self.device_caches: dict[Any, Any] = {}
        self.rec = rec

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Compiled:
        self.rec.calls.append(("jit", (*args, grid, tuple(sorted(kwargs.items())))))
        return Compiled(self.rec)


def mm_kernel(a, b, c, M, N, K, sa0, sa1, sb0, sb1, sc0, sc1, BM, EXTRA="tail0"):
    pass


def scalars_kernel(x, f, opt, h, C, BM):
    pass


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """The driver (current device, streams), Triton's runtime knobs and the direct launch of
    a CompiledKernel, as the launcher's first launch captures them: recorders. Returns the
    recorder whose ``device`` is the current device."""
    current = Recorder()
    runtime = Runtime()
    monkeypatch.setattr(
        compat, "device_and_stream", lambda: (current.get_device, current.get_stream)
    )
    monkeypatch.setattr(compat, "runtime_knobs", lambda: runtime)
    monkeypatch.setattr(
        compat,
        "direct_launch_parts",
        lambda compiled: compat.LaunchParts(
            compiled.rec.run, ("function", "metadata"), compiled.rec.packs
        ),
    )
    monkeypatch.delenv("TUNEDSL_SAFE", raising=False)
    current.runtime = runtime  # type: ignore[attr-defined]
    return current


class Form:
    """One side of a comparison: a kernel, its launcher after the sample's first launch, the
    entry, and the call (``generic``, or the C form with the generic path behind it)."""

    def __init__(
        self,
        fused_type: Any,
        fn: Any,
        sample: tuple[Any, ...],
        *,
        constexprs: set[str],
        packs_args: bool,
        dyn0: dict[str, Any],
        sample_kwargs: dict[str, Any] | None = None,
        c_form: bool,
    ) -> None:
        self.rec = Recorder()
        self.rec.packs = packs_args
        self.kernel = FakeJit(fn, constexprs, self.rec)
        kwargs = sample_kwargs or {}
        launcher = Launcher(self.kernel, {"num_warps": 4}, sample, kwargs)
        assert not launcher.disabled
        launcher((1,), sample, kwargs, dyn0, ())  # the first launch: the JIT, then captured
        assert launcher.dyn0 == dyn0, "the direct launch was not captured"
        self.rec.calls.clear()
        info = launcher.info
        code = repeat_check.repeat_check_code(
            sample, info.constexpr_positions, HOLE, True, compat.layout_check, kwargs
        )
        assert code is not None
        self.entry = Entry(Config({"BM": 64}), launcher, object(), (), ())  # type: ignore[arg-type]
        self.entry.repeat = repeat_check.compile_repeat_check(code)
        self.c: Any = None
        if c_form:
            plan = launcher.plan(kwargs)
            assert plan is not None and plan.hooked_code == fused.NATIVE_HOOKED_CODE
            self.c = fused.make_fused(fused_type, self.kernel, self.entry, code, plan)
        self.taken_by_c = False

    def generic(self, kernel: Any, args: Any, kwargs: Any, bind: Any) -> Any:
        """``Site._call`` for a site whose last entry is this one (``kernel`` is the site's
        kernel): a call the repeat check refuses goes to the call key."""
        entry = self.entry
        if kernel is not self.kernel or not entry.repeat(args, kwargs):  # type: ignore[misc]
            return "keyed"
        entry.used = True
        entry.launch(args, kwargs, bind)
        return entry.result

    def __call__(self, kernel: Any, args: Any, kwargs: Any, bind: Any) -> Any:
        kernel = self.kernel if kernel is KERNEL else kernel
        self.taken_by_c = False
        if self.c is not None:
            result = self.c(kernel, args, kwargs, bind)
            if result is not None:
                self.taken_by_c = True
                return result
        return self.generic(kernel, args, kwargs, bind)


def pair(
    fused_type: Any,
    driver: Recorder,
    sample: tuple[Any, ...],
    *,
    fn: Any = mm_kernel,
    constexprs: frozenset[str] = frozenset({"BM"}),
    packs_args: bool = False,
    dyn0: dict[str, Any] | None = None,
    sample_kwargs: dict[str, Any] | None = None,
) -> tuple[Form, Form]:
    """The generic path alone, and the C form before the generic path, for one sample."""
    made = [
        Form(
            fused_type,
            fn,
            sample,
            constexprs=set(constexprs),
            packs_args=packs_args,
            dyn0=dyn0 if dyn0 is not None else {"BM": 64},
            sample_kwargs=sample_kwargs,
            c_form=c_form,
        )
        for c_form in (False, True)
    ]
    return made[0], made[1]


def outcome(form: Form, *call: Any) -> tuple[Any, ...]:
    form.rec.calls.clear()
    form.entry.used = False
    try:
        result = form(*call)
    except Exception as err:  # the same error from both
        return ("raised", type(err).__name__)
    kind = "result" if result is form.entry.result else repr(result)
    return (kind, form.entry.used, _comparable(form.rec.calls))


def same(generic: Form, c: Form, *call: Any) -> tuple[Any, ...]:
    """The call's outcome, the same through both; whether the C form took it is checked
    against what it must take: a call of the entry's kernel and layout (the repeat check)
    with no holes."""
    want = outcome(generic, *call)
    got = outcome(c, *call)
    assert got == want, call
    if want[0] != "raised":
        kernel, args, kwargs, bind = call
        repeats = (kernel is KERNEL) and generic.entry.repeat(args, kwargs)  # type: ignore[misc]
        assert c.taken_by_c == bool(repeats and not bind(c.entry.config)[0]), call
    return want


def _comparable(calls: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    # The generic path passes tensors where the C form passes the addresses it read.
    return [(name, tuple(_plain(a) for a in args)) for name, args in calls]


def _plain(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.data_ptr()
    if isinstance(x, tuple):
        return tuple(_plain(a) for a in x)
    return x


def bind_2d(m: int, n: int, dyn: dict[str, Any] | None = None) -> Any:
    return lambda cfg: ((), dyn if dyn is not None else {"BM": cfg.BM}, (-(-m // cfg.BM), n))


def kwargs_pair(
    fused_type: Any, driver: Recorder, sample: dict[str, Any]
) -> tuple[Any, Any, tuple[Any, ...], Any]:
    """The generic path and the C form of ``kwargs_kernel`` on a 64x64 matmul's arguments,
    made with the keyword arguments ``sample``; with those arguments and the grid's binder."""
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    args = mm_args(a, b, c)
    generic, cf = pair(
        fused_type,
        driver,
        args,
        fn=kwargs_kernel,
        constexprs=frozenset({"BM", "BLOCK", "MODE"}),
        sample_kwargs=sample,
    )
    return generic, cf, args, bind_2d(64, 64)


def mm_args(a: Any, b: Any, c: Any, m: int = 64, n: int = 64, k: int = 64) -> tuple[Any, ...]:
    return (a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride())


def test_the_extension_is_installed_and_nothing_is_compiled_at_run_time(tmp_path: Path) -> None:
    """``pip install`` built the extension: a process with no C compiler on its PATH and an
    empty cache runs the C form, and writes nothing of it into the cache."""
    cache = tmp_path / "cache"
    script = (
        "from tunedsl.runtime import native; print(native.fused_type().__module__, native.status())"
    )
    env = {"TUNEDSL_CACHE_DIR": str(cache), "PATH": str(tmp_path), "CC": "false"}
    out = _python(script, env)
    assert out.startswith("tunedsl.runtime._native_fused C ("), out
    assert not cache.exists() or not any(cache.iterdir())


def test_same_decisions_as_the_generic_path_over_many_calls(
    fused_type: Any, driver: Recorder
) -> None:
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    generic, cf = pair(fused_type, driver, mm_args(a, b, c))
    unaligned = torch.empty(64 * 64 + 1)[1:].view(64, 64)  # 4 bytes past an aligned start
    calls: list[tuple[Any, ...]] = [
        mm_args(a, b, c),  # the sample itself: launches
        mm_args(torch.randn(64, 64), b, c),  # another tensor, same layout: launches
        mm_args(a, b, c, m=128),  # another size of the same class
        mm_args(a, b, c, m=1),  # an int of another class (1)
        mm_args(a, b, c, m=17),  # ... (not divisible by 16)
        mm_args(a, b, c, m=-16),  # negative: the key sees the sign
        mm_args(a, b, c, m=2**31),  # beyond 32 bits
        mm_args(a, b, c, m=True),  # a bool is not an int here
        mm_args(a, b, c, m=64.0),  # nor a float
        mm_args(a, b, c.t()),  # another stride
        mm_args(a, b, torch.empty(64, 64, dtype=torch.float64)),  # another dtype
        mm_args(a, b, torch.empty(32, 64)),  # another shape
        mm_args(a, b, unaligned),  # an address not 16-byte aligned
        mm_args(a, b, c)[:-1],  # one argument short
        (*mm_args(a, b, c)[:3], None, *mm_args(a, b, c)[4:]),  # None for an int
        [*mm_args(a, b, c)],  # a list, not a tuple
    ]
    taken = []
    for args in calls:
        for kwargs in ({}, {"extra": 1}):
            for kernel in (KERNEL, object()):
                same(generic, cf, kernel, args, kwargs, bind_2d(64, 64))
                taken.append(cf.taken_by_c)
    assert sum(taken) >= 3  # the sample, another tensor, another size: the C form's
    # The first call launched directly, with the addresses in place of the tensors.
    first = outcome(cf, KERNEL, mm_args(a, b, c), {}, bind_2d(64, 64))
    assert first[0] == "result" and first[1] is True and cf.taken_by_c
    ((name, launched),) = cf.rec.calls
    assert name == "run"
    assert launched[:4] == (1, 64, 1, 1000)  # grid (cdiv(64, 64), 64, 1), stream of device 0
    assert launched[4:6] == ("function", "metadata")
    assert launched[6:9] == (a.data_ptr(), b.data_ptr(), c.data_ptr())
    assert launched[9:] == (*mm_args(a, b, c)[3:], 64, "tail0")  # BM, then EXTRA's default


def test_packed_args_holes_dyn_hooks_and_device_as_the_generic_path(
    fused_type: Any, driver: Recorder
) -> None:
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    args = mm_args(a, b, c)
    runtime = driver.runtime  # type: ignore[attr-defined]
    for packs in (False, True):
        driver.device = 0
        generic, cf = pair(fused_type, driver, args, packs_args=packs)
        binds = [
            bind_2d(64, 64),  # direct
            bind_2d(64, 64, dyn={"BM": 32}),  # another constexpr: the JIT
            lambda cfg: ((1,), {"BM": 64}, (1,)),  # holes: the generic path
            lambda cfg: ((), {"BM": 64}, (4,)),  # a 1-d grid
            lambda cfg: ((), {"BM": 64}, [2, 3, 4, 5]),  # a list, longer than 3
            lambda cfg: ((), {"BM": 64}, ()),  # empty: an IndexError in both
            lambda cfg: ((), {"BM": 64}),  # two values: a ValueError in both
            lambda cfg: [(), {"BM": 64}, (2, 2)],  # a list of three unpacks
        ]
        for bind in binds:
            same(generic, cf, KERNEL, args, {}, bind)
        assert same(generic, cf, KERNEL, args, {}, binds[0])[2][0][0] == "run"
        # A launch hook sends the call to the JIT through both.
        runtime.launch_enter_hook.calls.append(print)
        assert same(generic, cf, KERNEL, args, {}, binds[0])[2][0][0] == "jit"
        runtime.launch_enter_hook.calls.clear()
        runtime.launch_exit_hook = print  # a hook in place of the chain
        assert same(generic, cf, KERNEL, args, {}, binds[0])[2][0][0] == "jit"
        runtime.launch_exit_hook = Chain()
        # Another current device: its own first launch (the JIT), then direct on it.
        driver.device = 1
        assert same(generic, cf, KERNEL, args, {}, binds[0])[2][0][0] == "jit"
        launched = same(generic, cf, KERNEL, args, {}, binds[0])[2]
        assert launched[0][0] == "run" and launched[0][1][3] == 1001


def test_floats_none_holes_and_constexprs_as_the_generic_path(
    fused_type: Any, driver: Recorder
) -> None:
    x = torch.randn(32)
    sample = (x, 0.5, None, HOLE, 3)
    generic, cf = pair(
        fused_type, driver, sample, fn=scalars_kernel, constexprs=frozenset({"C", "BM"})
    )
    variants = [
        sample,
        (x, 2.0, None, HOLE, 3),
        (x, 2, None, HOLE, 3),  # an int for the float
        (x, 0.5, 0, HOLE, 3),  # not None
        (x, 0.5, None, None, 3),  # not the hole
        (x, 0.5, None, HOLE, 4),  # another constexpr value
        (x, 0.5, None, HOLE, 3.0),  # equal but another type: another constexpr
        (x, 0.5, None, HOLE, [3]),  # unhashable
    ]
    for args in variants:
        same(generic, cf, KERNEL, args, {}, lambda cfg: ((), {"BM": 64}, (1,)))
    assert outcome(cf, KERNEL, sample, {}, lambda cfg: ((), {"BM": 64}, (1,)))[0] == "result"
    assert cf.taken_by_c


def hand_made(
    fused_type: Any, rec: Recorder, args: tuple[Any, ...], fallback: Any = None
) -> tuple[Entry, Any]:
    """An entry and its C fused launch, from a plan whose every part is ``rec``'s."""
    code = repeat_check.repeat_check_code(args, frozenset(), HOLE, True, compat.layout_check)
    assert code is not None
    entry = Entry(Config({"BM": 64}), rec.launch, object(), (), ())  # type: ignore[arg-type]
    plan = DirectPlan(
        rec.run, (), False, (), 0, rec.get_device, rec.get_stream, {"BM": 64}, Runtime(),
        fused.NATIVE_HOOKED_CODE, True,
    )  # fmt: skip
    return entry, fused.make_fused(fused_type, KERNEL, entry, code, plan, fallback)


def test_errors_from_the_callables_propagate(fused_type: Any) -> None:
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    args = mm_args(a, b, c)
    _, cf = hand_made(fused_type, Recorder(), args)

    def bad_bind(cfg: Any) -> Any:
        raise KeyError("from bind")

    with pytest.raises(KeyError, match="from bind"):
        cf(KERNEL, args, {}, bad_bind)

    class FailingLaunch(Recorder):
        def run(self, *args: Any) -> None:
            raise RuntimeError("from the launch")

    _, failing = hand_made(fused_type, FailingLaunch(), args)
    with pytest.raises(RuntimeError, match="from the launch"):
        failing(KERNEL, args, {}, bind_2d(64, 64))
    assert cf(KERNEL, args, {}, bind_2d(64, 64)) is not None  # the other object is unaffected
    with pytest.raises(TypeError):
        cf(KERNEL, args, {})  # three arguments


def test_bad_construction_is_an_error(fused_type: Any) -> None:
    x = torch.randn(4)
    code = repeat_check.repeat_check_code((x, 1), frozenset(), HOLE, True, compat.layout_check)
    assert code is not None
    common = (HOLE, keys.constexpr_key, code.env["check"], None, None, None, None, {}, None)
    tail = (print, 0, int, int, (), (), False)
    with pytest.raises(ValueError, match="unknown kind"):
        fused_type(KERNEL, (0, 42), (0, 0), (None, None), (0,), True, True, *common, *tail)
    with pytest.raises(ValueError, match="differ in length"):
        fused_type(KERNEL, (0, 3), (0,), (None, None), (0,), True, True, *common, *tail)
    with pytest.raises(ValueError, match="non-tensor kind"):
        fused_type(KERNEL, (0, 3), (0, 0), (None, None), (1,), True, True, *common, *tail)


def test_with_a_fallback_it_takes_the_whole_call(fused_type: Any) -> None:
    """Built with the site's call as fallback, the C form is what the expansion calls: six
    arguments, a call it turns down goes to the fallback whole."""
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    args = mm_args(a, b, c)
    rec = Recorder()
    fell_back: list[tuple[Any, ...]] = []
    sentinel = object()

    def fallback(*call: Any) -> Any:
        fell_back.append(call)
        return sentinel

    entry, whole = hand_made(fused_type, rec, args, fallback)
    if not torch_compile.whole_calls():  # this PyTorch's Dynamo is loaded and cannot trace it
        assert not fused.takes_whole_call(whole)
        pytest.skip(f"torch {torch.__version__} with Dynamo loaded: no C launch takes a call")
    assert fused.takes_whole_call(whole)
    assert not fused.takes_whole_call(hand_made(fused_type, rec, args)[1])
    bind = bind_2d(64, 64)
    assert whole(KERNEL, args, {}, bind, None, None) is entry.result
    assert not fell_back and rec.calls[0][0] == "run"
    other = mm_args(a, b, c.t())
    assert whole(KERNEL, other, {}, bind, "key", "lazy") is sentinel
    assert fell_back == [(KERNEL, other, {}, bind, "key", "lazy")]
    assert whole(KERNEL, other, {}, bind) is None  # the four-argument form still answers None
    with pytest.raises(TypeError):
        whole(KERNEL, other, {}, bind, None)


def kwargs_kernel(a, b, c, M, N, K, sa0, sa1, sb0, sb1, sc0, sc1, BM, BLOCK, EPS, MODE, FLAG, BIAS):
    pass


def test_keyword_arguments_computed_per_call_launch_only_when_equal_to_the_samples(
    fused_type: Any, driver: Recorder
) -> None:
    """A site whose call computes a keyword argument from its arguments
    (``BLOCK=triton.next_power_of_2(n)``) keeps its fused launch: a call with the sample's
    names, and values of the same classes that compare equal, launches with the sample's
    tail; any other goes back to the site (None), where the call key decides, as the
    generic path's repeat check decides."""
    sample = {"BLOCK": 1024, "EPS": 1e-5, "MODE": "fast", "FLAG": True, "BIAS": None}
    generic, cf, args, bind = kwargs_pair(fused_type, driver, sample)
    a = args[0]
    unlike = [
        {},
        {**sample, "BLOCK": 2048},
        {**sample, "BLOCK": 1024.0},  # equal, but of another class
        {**sample, "FLAG": 1},
        {**sample, "BIAS": 0},
        {**sample, "EXTRA": 1},
        {k: v for k, v in sample.items() if k != "MODE"},
        {**{k: v for k, v in sample.items() if k != "MODE"}, "MORE": "fast"},
    ]
    assert same(generic, cf, KERNEL, args, dict(sample), bind)[0] == "result"
    assert cf.taken_by_c
    ((name, launched),) = cf.rec.calls
    assert name == "run" and launched[-6:] == (64, 1024, 1e-5, "fast", True, None)
    for kwargs in unlike:
        assert same(generic, cf, KERNEL, args, kwargs, bind) == ("'keyed'", False, []), kwargs
    tensor_kwarg = repeat_check.repeat_check_code(
        args, frozenset(), HOLE, True, compat.layout_check, {"W": a}
    )
    assert tensor_kwarg is None  # a tensor by keyword: the call key decides every call


def test_a_keyword_zero_of_the_other_sign_is_not_the_samples(
    fused_type: Any, driver: Recorder
) -> None:
    """-0.0 == 0.0, but the fused launch passes the sample's tail: a call giving EPS=-0.0
    (a plain float parameter) after a sample of 0.0 ran with 0.0. Such a call is no repeat
    (the call key decides, and its launch passes -0.0), in the C form and the generic
    path's repeat check alike."""
    sample = {"BLOCK": 1024, "EPS": 0.0, "MODE": "fast", "FLAG": True, "BIAS": None}
    generic, cf, args, bind = kwargs_pair(fused_type, driver, sample)
    assert same(generic, cf, KERNEL, args, {**sample, "EPS": float("0")}, bind)[0] == "result"
    assert cf.taken_by_c
    negative = {**sample, "EPS": -0.0}
    assert same(generic, cf, KERNEL, args, negative, bind) == ("'keyed'", False, [])


# A site's calls, through its C fused launch or through the generic path alone: a real
# Triton kernel under the interpreter (its launcher: the JIT), and a JITFunction stand-in whose
# launcher launches directly (the driver: recorders). Prints what every call did.
SITE_RUN = """
import json, sys
if sys.argv[1] == "blocked":
    class Block:  # the extension is not installed
        def find_spec(self, name, path=None, target=None):
            if name == "tunedsl.runtime._native_fused":
                raise ImportError("blocked by the test")
    sys.meta_path.insert(0, Block())
import torch, triton, triton.language as tl
from tunedsl.backends import compat
from tunedsl.runtime import dsl, native

def site_of(name, space):
    return dsl.make_site(filename=__file__, line=1, col=0, kernel_text=name, space=space,
                         static_hints={}, options={"mode": "off", "name": name})

def count_keys(site):  # counts the call keys built (the repeat check skips them)
    base, built = site._key_fn, []
    def key_fn(*a):
        built.append(1)
        return base(*a)
    site._key_fn = site._base_key_fn = key_fn
    return built

def forms(site):
    return [type(e.fused).__name__ for e in site._table.values()], site.launch == site._call

@triton.jit
def scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)

real = site_of("scale", {"block": [32, 64]})
seen, built = [], None
for x, f in [(torch.arange(100.0), 2.0), (torch.arange(100.0) + 1, 3.0), (torch.arange(64.0), 2.0),
             (torch.arange(100, dtype=torch.float64), 0.5), (torch.arange(100.0) - 5, 2.0),
             (torch.arange(100.0), 4.0)]:
    out, n = torch.empty_like(x), x.numel()
    bind = lambda cfg: ((), {"BLOCK": cfg.block}, (triton.cdiv(n, cfg.block),))
    before = len(built) if built is not None else None
    real(scale, (x, out, n, f), {}, bind, None, None)
    if built is None:
        built = count_keys(real)
    seen.append([torch.equal(out, x * f), before is not None and len(built) > before])

class Param:
    def __init__(self, name, is_constexpr):
        self.name, self.is_constexpr = name, is_constexpr

class Compiled:  # a CompiledKernel whose launcher records its direct launches
    function, packed_metadata = "fn-handle", "packed"
    def __init__(self, log):
        self.log = log
    @property
    def run(self):
        return lambda *a: self.log.append(["direct", a])

class FakeJit:  # a JITFunction as the launcher sees it
    def __init__(self):
        def kern(x, n, TILE, EVEN=False):
            pass
        self.fn, self.device_caches, self.log = kern, {}, []
        self.params = [Param("x", False), Param("n", False), Param("TILE", True),
                       Param("EVEN", True)]
    def run(self, *args, grid, warmup, **kwargs):
        self.log.append(["jit", args])
        return Compiled(self.log)

class Runtime:  # Triton's launch hooks: none
    launch_enter_hook = launch_exit_hook = type("Chain", (), {"calls": []})()

compat.device_and_stream = lambda: (lambda: 0, lambda d: 1000 + d)
compat.runtime_knobs = lambda: Runtime
kernel, fake = FakeJit(), site_of("fake", {"tile": [16, 32]})
x, y = torch.zeros(64), torch.ones(64)
bind = lambda cfg: ((), {"TILE": cfg.tile}, (4,))
for args in [(x, 64), (x, 64), (y, 48), (x, 65), (y, 64), (x, 64)]:
    fake(kernel, args, {}, bind, None, None)
names = {x.data_ptr(): "x", y.data_ptr(): "y"}  # tensors, or the addresses the C form passes
log = [[kind, [names.get(a.data_ptr() if isinstance(a, torch.Tensor) else a, a) for a in args]]
       for kind, args in kernel.log]
print(json.dumps([native.status(), seen, forms(real), log, forms(fake)]))
"""


@pytest.mark.parametrize("switch", ["blocked", "TUNEDSL_SAFE=fused"])
def test_without_the_c_form_the_generic_path_decides_and_launches_alike(
    switch: str, tmp_path: Path
) -> None:
    """Where the extension is missing (its import blocked) or switched off, a site has no
    fused launch: every call takes the generic path, whose repeat check still skips the call
    key of a repeated layout and whose launcher launches directly; every call ends as with
    the C form, and ``native.status()`` says which ran."""
    script = tmp_path / "site_run.py"
    script.write_text(SITE_RUN)
    env = {
        "PATH": "/usr/bin:/bin",
        "TUNEDSL_CACHE_DIR": str(tmp_path / "cache"),
        "TRITON_INTERPRET": "1",
    }
    c_run = json.loads(_python(str(script), env, "installed", file=True))
    if switch == "blocked":
        run = json.loads(_python(str(script), env, "blocked", file=True))
        assert run[0].startswith(
            "off: the C extension is not installed (blocked by the test; the generic path runs)"
        )
    else:
        run = json.loads(_python(str(script), {**env, "TUNEDSL_SAFE": "fused"}, "x", file=True))
        assert run[0] == "off: TUNEDSL_SAFE=fused (the generic path runs)"
    _, seen, real_forms, log, fake_forms = run
    assert c_run[0].startswith("C (")
    # The real kernel: right results; a call key built for every call but the repeats of
    # the last entry's layout (the 5th and 6th calls repeat the 1st's after a miss each).
    assert seen == c_run[1]
    assert seen == [[True, False], [True, True], [True, True], [True, True], [True, False],
                    [True, False]]  # fmt: skip
    assert real_forms == c_run[2] == [["NoneType"] * 3, True]  # the interpreter: the JIT
    # The direct launcher: the same launches, in the same order, with the same arguments.
    assert log == c_run[3]
    assert [kind for kind, _ in log] == ["jit", "direct", "direct", "jit", "direct", "direct"]
    assert log[2][1][-4:] == ["y", 48, 16, False]
    assert fake_forms == [["NoneType", "NoneType"], True]  # no fused launch: the generic path
    assert "Fused" in c_run[4][0]  # where the C form runs, a repeated layout took it


def test_an_extension_built_from_another_source_is_not_loaded(tmp_path: Path) -> None:
    """A checkout whose ``native_fused.c`` changed after its last build (a pull, an edit)
    must not run the old C: the copy of the package here holds the real extension built from
    the real source, then the source changes; the process warns, names the rebuild and runs
    the generic path. Unchanged, the same copy loads the C form."""
    import shutil

    import tunedsl

    package = Path(tunedsl.__file__).parent
    copy = tmp_path / "tunedsl"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    script = (
        "import warnings; warnings.simplefilter('always')\n"
        "from tunedsl.runtime import native\n"
        f"assert native.__file__.startswith({str(copy)!r}), native.__file__\n"
        "print(native.fused_type() is not None, '|', native.status())"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": str(tmp_path)}

    def run() -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    assert run().stdout.startswith("True | C ("), "the copy as built loads the C form"
    source = copy / "runtime" / "native_fused.c"
    source.write_text(source.read_text() + "/* changed after the build */\n")
    done = run()
    assert done.stdout.startswith("False | off:"), done.stdout
    assert "built from another version" in done.stdout
    assert "rebuild it (pip install -e . or python setup.py build_ext --inplace)" in done.stderr


def _python(script: str, env: dict[str, str], *argv: str, file: bool = False) -> str:
    command = [sys.executable, script] if file else [sys.executable, "-c", script]
    done = subprocess.run([*command, *argv], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


ENV_COMMAND = """
import sys
if sys.argv[1] == "blocked":
    class Block:  # the extension is not installed
        def find_spec(self, name, path=None, target=None):
            if name == "tunedsl.runtime._native_fused":
                raise ImportError("blocked by the test")
    sys.meta_path.insert(0, Block())
from tunedsl.cli import main
sys.exit(main(["env", "--no-device-probe"]))
"""


def test_tunedsl_env_says_which_fused_launch_runs_and_why() -> None:
    def line(mode: str, **env: str) -> str:
        out = _python(ENV_COMMAND, {"PATH": "/usr/bin:/bin", **env}, mode)
        (found,) = [x.strip() for x in out.splitlines() if x.strip().startswith("fused launch")]
        return found

    assert line("installed") == "fused launch  C (tunedsl.runtime._native_fused, built at install)"
    assert line("installed", TUNEDSL_SAFE="fused") == (
        "fused launch  off: TUNEDSL_SAFE=fused (the generic path runs)"
    )
    blocked = line("blocked")
    assert blocked.startswith("fused launch  off: the C extension is not installed")
    assert "the generic path runs" in blocked and "python3-dev" in blocked
