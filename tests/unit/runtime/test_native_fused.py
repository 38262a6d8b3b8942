"""The C fused launch (``runtime/native_fused.c``, built at install as
``tunedsl.runtime._native_fused``) against its reference, the generated Python fused launch: on
real CPU tensors and PyTorch's real tensor guard, both forms must make the same decision for
every call (launch, the launcher, or None) and launch with the same arguments. Without the
extension the package runs the Python form, with the same results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tunedsl.backends import compat, torch_compile  # noqa: E402
from tunedsl.backends.triton_launch import DirectPlan  # noqa: E402
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

    def run(self, *args: Any) -> None:
        self.calls.append(("run", args))

    def launch(self, *args: Any) -> None:
        self.calls.append(("launch", args))

    def get_device(self) -> int:
        return self.device

    def get_stream(self, device: int) -> int:
        return 1000 + device


KERNEL = object()


def pair(
    fused_type: Any,
    sample: tuple[Any, ...],
    *,
    constexprs: frozenset[int] = frozenset(),
    packs_args: bool = False,
    dyn0: dict[str, Any] | None = None,
) -> tuple[Any, Any, Recorder, Recorder, Entry, Entry, Runtime]:
    """The Python and the C fused launch of one sample layout, each with its own recorder."""
    code = repeat_check.repeat_check_code(sample, constexprs, HOLE, True, compat.layout_check)
    assert code is not None
    runtime = Runtime()
    made = []
    for build in (fused.make_python_fused, "native"):
        rec = Recorder()
        entry = Entry(Config({"BM": 64}), rec.launch, object(), (), ())  # type: ignore[arg-type]
        plan = DirectPlan(
            run=rec.run,
            middle=("function", "metadata"),
            packs_args=packs_args,
            tail=("tail0",),
            device=0,
            get_device=rec.get_device,
            get_stream=rec.get_stream,
            dyn0=dyn0 if dyn0 is not None else {"BM": 64},
            runtime=runtime,
            hooked_code=fused.NATIVE_HOOKED_CODE,
            int_pointers=True,
        )
        if build == "native":
            f = fused.make_native_fused(fused_type, KERNEL, entry, code, plan)
        else:
            f = fused.make_python_fused(KERNEL, entry, code, plan)
        made.append((f, rec, entry))
    (py, py_rec, py_entry), (c, c_rec, c_entry) = made
    return py, c, py_rec, c_rec, py_entry, c_entry, runtime


def outcome(f: Any, rec: Recorder, entry: Entry, *call: Any) -> tuple[Any, ...]:
    rec.calls.clear()
    entry.used = False
    try:
        result = f(*call)
    except Exception as err:  # the same error from both forms
        return ("raised", type(err).__name__)
    kind = "none" if result is None else "result" if result is entry.result else repr(result)
    return (kind, entry.used, _comparable(rec.calls))


def _comparable(calls: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    # The launcher gets the args tuple, the kwargs and the bind result: compare by value.
    return [(name, tuple(_plain(a) for a in args)) for name, args in calls]


def _plain(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return ("tensor", x.data_ptr(), tuple(x.shape), x.stride(), x.dtype)
    if isinstance(x, tuple):
        return tuple(_plain(a) for a in x)
    return x


def bind_2d(m: int, n: int, dyn: dict[str, Any] | None = None) -> Any:
    return lambda cfg: ((), dyn if dyn is not None else {"BM": cfg.BM}, (-(-m // cfg.BM), n))


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


def test_same_decisions_as_python_over_many_calls(fused_type: Any) -> None:
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    sample = mm_args(a, b, c)
    py, cf, py_rec, c_rec, py_entry, c_entry, _ = pair(fused_type, sample)
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
    for args in calls:
        for kwargs in ({}, {"extra": 1}):
            for kernel in (KERNEL, object()):
                call = (kernel, args, kwargs, bind_2d(64, 64))
                want = outcome(py, py_rec, py_entry, *call)
                got = outcome(cf, c_rec, c_entry, *call)
                assert got == want, (args, kwargs)
    # The first call launched, with the addresses in place of the tensors.
    first = outcome(cf, c_rec, c_entry, KERNEL, mm_args(a, b, c), {}, bind_2d(64, 64))
    assert first[0] == "result" and first[1] is True
    ((name, launched),) = first[2]
    assert name == "run"
    assert launched[:4] == (1, 64, 1, 1000)  # grid (cdiv(64, 64), 64, 1), stream of device 0
    assert launched[4:6] == ("function", "metadata")
    assert launched[6:9] == (a.data_ptr(), b.data_ptr(), c.data_ptr())
    assert launched[9:] == (*mm_args(a, b, c)[3:], "tail0")


def test_packed_args_holes_dyn_hooks_and_device_match_python(fused_type: Any) -> None:
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    args = mm_args(a, b, c)
    for packs in (False, True):
        py, cf, py_rec, c_rec, py_entry, c_entry, runtime = pair(fused_type, args, packs_args=packs)
        binds = [
            bind_2d(64, 64),  # direct
            bind_2d(64, 64, dyn={"BM": 32}),  # another constexpr: the launcher
            lambda cfg: ((1,), {"BM": 64}, (1,)),  # holes: not fused
            lambda cfg: ((), {"BM": 64}, (4,)),  # a 1-d grid
            lambda cfg: ((), {"BM": 64}, [2, 3, 4, 5]),  # a list, longer than 3
            lambda cfg: ((), {"BM": 64}, ()),  # empty: an IndexError in both
            lambda cfg: ((), {"BM": 64}),  # two values: a ValueError in both
            lambda cfg: [(), {"BM": 64}, (2, 2)],  # a list of three unpacks
        ]
        for bind in binds:
            want = outcome(py, py_rec, py_entry, KERNEL, args, {}, bind)
            assert outcome(cf, c_rec, c_entry, KERNEL, args, {}, bind) == want
        # A launch hook sends the call to the launcher in both forms.
        runtime.launch_enter_hook.calls.append(print)
        want = outcome(py, py_rec, py_entry, KERNEL, args, {}, bind_2d(64, 64))
        assert want[2][0][0] == "launch"
        assert outcome(cf, c_rec, c_entry, KERNEL, args, {}, bind_2d(64, 64)) == want
        runtime.launch_enter_hook.calls.clear()
        runtime.launch_exit_hook = print  # type: ignore[assignment]  # a hook in place of the chain
        want = outcome(py, py_rec, py_entry, KERNEL, args, {}, bind_2d(64, 64))
        assert want[2][0][0] == "launch"
        assert outcome(cf, c_rec, c_entry, KERNEL, args, {}, bind_2d(64, 64)) == want
        runtime.launch_exit_hook = Chain()
        # Another current device: the launcher.
        py_rec.device = c_rec.device = 1
        want = outcome(py, py_rec, py_entry, KERNEL, args, {}, bind_2d(64, 64))
        assert want[2][0][0] == "launch"
        assert outcome(cf, c_rec, c_entry, KERNEL, args, {}, bind_2d(64, 64)) == want


def test_floats_none_holes_and_constexprs_match_python(fused_type: Any) -> None:
    x = torch.randn(32)
    sample = (x, 0.5, None, HOLE, 3)
    py, cf, py_rec, c_rec, py_entry, c_entry, _ = pair(
        fused_type, sample, constexprs=frozenset({4})
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
        call = (KERNEL, args, {}, lambda cfg: ((), {"BM": 64}, (1,)))
        assert outcome(cf, c_rec, c_entry, *call) == outcome(py, py_rec, py_entry, *call)


def test_errors_from_the_callables_propagate(fused_type: Any) -> None:
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    args = mm_args(a, b, c)
    _, cf, *_ = pair(fused_type, args)

    def bad_bind(cfg: Any) -> Any:
        raise KeyError("from bind")

    with pytest.raises(KeyError, match="from bind"):
        cf(KERNEL, args, {}, bad_bind)

    class FailingLaunch(Recorder):
        def run(self, *args: Any) -> None:
            raise RuntimeError("from the launch")

    code = repeat_check.repeat_check_code(args, frozenset(), HOLE, True, compat.layout_check)
    assert code is not None
    rec = FailingLaunch()
    entry = Entry(Config({"BM": 64}), rec.launch, object(), (), ())  # type: ignore[arg-type]
    plan = DirectPlan(
        rec.run, (), False, (), 0, rec.get_device, rec.get_stream, {"BM": 64}, Runtime(),
        fused.NATIVE_HOOKED_CODE, True,
    )  # fmt: skip
    failing = fused.make_native_fused(fused_type, KERNEL, entry, code, plan)
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
    code = repeat_check.repeat_check_code(args, frozenset(), HOLE, True, compat.layout_check)
    assert code is not None
    rec = Recorder()
    entry = Entry(Config({"BM": 64}), rec.launch, object(), (), ())  # type: ignore[arg-type]
    plan = DirectPlan(
        rec.run, (), False, (), 0, rec.get_device, rec.get_stream, {"BM": 64}, Runtime(),
        fused.NATIVE_HOOKED_CODE, True,
    )  # fmt: skip
    fell_back: list[tuple[Any, ...]] = []
    sentinel = object()

    def fallback(*call: Any) -> Any:
        fell_back.append(call)
        return sentinel

    whole = fused.make_native_fused(fused_type, KERNEL, entry, code, plan, fallback)
    if not torch_compile.whole_calls():  # this PyTorch's Dynamo is loaded and cannot trace it
        assert not fused.takes_whole_call(whole)
        pytest.skip(f"torch {torch.__version__} with Dynamo loaded: no C launch takes a call")
    assert fused.takes_whole_call(whole)
    assert not fused.takes_whole_call(
        fused.make_native_fused(fused_type, KERNEL, entry, code, plan)
    )
    bind = bind_2d(64, 64)
    assert whole(KERNEL, args, {}, bind, None, None) is entry.result
    assert not fell_back and rec.calls[0][0] == "run"
    other = mm_args(a, b, c.t())
    assert whole(KERNEL, other, {}, bind, "key", "lazy") is sentinel
    assert fell_back == [(KERNEL, other, {}, bind, "key", "lazy")]
    assert whole(KERNEL, other, {}, bind) is None  # the four-argument form still answers None
    with pytest.raises(TypeError):
        whole(KERNEL, other, {}, bind, None)


def test_keyword_arguments_computed_per_call_launch_only_when_equal_to_the_samples(
    fused_type: Any,
) -> None:
    """A site whose call computes a keyword argument from its arguments
    (``BLOCK=triton.next_power_of_2(n)``) keeps its fused launch: a call with the sample's
    names, and values of the same classes that compare equal, launches with the sample's
    tail; any other goes back to the site (None), where the call key decides. Both forms
    decide alike."""
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    args = mm_args(a, b, c)
    sample = {"BLOCK": 1024, "EPS": 1e-5, "MODE": "fast", "FLAG": True, "BIAS": None}
    code = repeat_check.repeat_check_code(
        args, frozenset(), HOLE, True, compat.layout_check, sample
    )
    assert code is not None
    check = repeat_check.compile_repeat_check(code)
    tail = (1024, 1e-5, "fast", True, None)
    forms = []
    for build in (fused.make_python_fused, "native"):
        rec = Recorder()
        entry = Entry(Config({"BM": 64}), rec.launch, object(), (), ())  # type: ignore[arg-type]
        plan = DirectPlan(
            rec.run, (), False, tail, 0, rec.get_device, rec.get_stream, {"BM": 64}, Runtime(),
            fused.NATIVE_HOOKED_CODE, True,
        )  # fmt: skip
        if build == "native":
            made = fused.make_native_fused(fused_type, KERNEL, entry, code, plan)
        else:
            made = fused.make_python_fused(KERNEL, entry, code, plan)
        forms.append((made, rec, entry))
    bind = bind_2d(64, 64)
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
    for made, rec, entry in forms:
        assert made(KERNEL, args, dict(sample), bind) is entry.result
        assert rec.calls[-1][0] == "run" and rec.calls[-1][1][-5:] == tail
        for kwargs in unlike:
            rec.calls.clear()
            assert made(KERNEL, args, kwargs, bind) is None and not rec.calls, kwargs
    assert check(args, dict(sample))
    assert not any(check(args, kwargs) for kwargs in unlike)
    tensor_kwarg = repeat_check.repeat_check_code(
        args, frozenset(), HOLE, True, compat.layout_check, {"W": a}
    )
    assert tensor_kwarg is None  # a tensor by keyword: the call key decides every call


# A run of make_fused as the site makes it: the form it picked, the launch status, and what
# every call of a fixed sequence did (compared by value: kinds, launch arguments, fallbacks).
FALLBACK_RUN = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "blocked":
    class Block:  # the extension is not installed
        def find_spec(self, name, path=None, target=None):
            if name == "tunedsl.runtime._native_fused":
                raise ImportError("blocked by the test")
    sys.meta_path.insert(0, Block())
import test_native_fused as t
from tunedsl.runtime import fused, native
a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
args = t.mm_args(a, b, c)
code = t.repeat_check.repeat_check_code(args, frozenset(), t.HOLE, True, t.compat.layout_check)
rec = t.Recorder()
entry = t.Entry(t.Config({"BM": 64}), rec.launch, object(), (), ())
plan = t.DirectPlan(rec.run, (), False, (), 0, rec.get_device, rec.get_stream, {"BM": 64},
                    t.Runtime(), fused.NATIVE_HOOKED_CODE, True)
made = fused.make_fused(t.KERNEL, entry, code, plan, lambda *call: "fallback")
seen = []
for call in (args, t.mm_args(a, b, c, m=17), t.mm_args(a, b, c.t()), args[:-1]):
    rec.calls.clear()
    if fused.takes_whole_call(made):
        result = made(t.KERNEL, call, {}, t.bind_2d(64, 64), None, None)
    else:
        result = made(t.KERNEL, call, {}, t.bind_2d(64, 64)) or "fallback"
    kind = "result" if result is entry.result else repr(result)
    launched = repr(t._comparable(rec.calls))
    for name, x in (("A", a), ("B", b), ("C", c)):  # addresses differ between processes
        launched = launched.replace(str(x.data_ptr()), name)
    seen.append([kind, launched])
print(json.dumps([type(made).__name__, native.status(), seen]))
"""


@pytest.mark.parametrize("switch", ["blocked", "TUNEDSL_SAFE=native"])
def test_without_the_extension_the_python_form_gives_the_same_results(switch: str) -> None:
    """Where the extension is missing (its import blocked) or switched off, the package runs
    the Python form, says so, and every call ends as the C form's does."""
    here = str(Path(__file__).parent)
    env = {"PATH": "/usr/bin:/bin"}
    c_form, c_status, c_seen = json.loads(_python(FALLBACK_RUN, env, here, "installed"))
    if switch == "blocked":
        py_form, py_status, py_seen = json.loads(_python(FALLBACK_RUN, env, here, "blocked"))
        assert py_status.startswith("Python: the C extension is not installed (blocked by")
    else:
        env["TUNEDSL_SAFE"] = "native"
        py_form, py_status, py_seen = json.loads(_python(FALLBACK_RUN, env, here, "installed"))
        assert py_status == "Python (TUNEDSL_SAFE=native)"
    assert (c_form, py_form) == ("Fused", "function"), c_status
    assert c_status.startswith("C (")
    assert py_seen == c_seen
    assert [kind for kind, _ in c_seen] == ["result", "'fallback'", "'fallback'", "'fallback'"]


def _python(script: str, env: dict[str, str], *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], env=env, capture_output=True, text=True, timeout=300
    )
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
    assert line("installed", TUNEDSL_SAFE="native") == (
        "fused launch  Python (TUNEDSL_SAFE=native)"
    )
    blocked = line("blocked")
    assert blocked.startswith("fused launch  Python: the C extension is not installed")
    assert "python3-dev" in blocked
