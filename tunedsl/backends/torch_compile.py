"""A plain DSL site inside ``torch.compile``: what Dynamo traces in place of the site's call
(backends layer; the only module that touches Dynamo's private hooks).

Eager calls are untouched: the expansion calls ``site.launch`` (``Site._call``, or the C
fused launch that takes the whole call). Dynamo never runs those; it is told to trace
:func:`_traced_call`: for ``Site._call`` and ``Site.__call__`` through the attribute Dynamo
reads on a function it inlines, and for the C fused type's ``__call__`` registered with
``torch.compiler.substitute_in_graph`` once both Dynamo and the C type are loaded (a
PyTorch below ``FUSED_CALL_MIN_TORCH`` ignores that for a C type: there, once Dynamo is
loaded, no site's call is a C fused launch). It traces :func:`_trace`, which puts one call
of the custom operator ``tunedsl::site_call`` in the graph.

Private PyTorch used here (checked on 2.11, 2.12 and 2.13): ``_torchdynamo_inline`` (the
function Dynamo inlines in place of another); ``torch._dynamo.comptime`` and its
``_i_will_not_complain_if_bc_breaks_VariableTracker`` (the traced variables of the site and
the kernel, a ``TritonKernelVariable``'s ``kernel`` or another variable's ``value``: the
only way to reach the objects, which Dynamo will not hand to a constant-folded call);
``torch._dynamo.guards.install_guard`` and ``GuardBuilder.ID_MATCH`` (the compiled code
holds for that site and kernel only).

The operator's body is the ordinary eager call of the site, so the decision is made at run
time with the same table, records, rules and capture rule as an eager call. What the trace
cannot hand over at run time is the expansion's ``bind`` (a closure over the caller's
locals), so the trace evaluates it once per distinct value of the site's placeholders
(``$tile``...) and passes the results: constants stay in the plan, ints and floats (symbolic
under ``dynamic=True``) and tensors become the operator's inputs. Every tensor argument is
declared written (the kernel may store into any of them).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunedsl.backends import dynamo_watch
from tunedsl.backends.compat import dynamo
from tunedsl.errors import UsageError
from tunedsl.warn import warnings_at

OP_NAME = "tunedsl::site_call"
SCHEMA = "(int plan_id, Tensor(a!)[] tensors, SymInt[] ints, float[] floats) -> ()"
#: Distinct placeholder values a compiled site may launch with (its bind runs once for each
#: while tracing): beyond this, wrap the call in ``tunedsl.torch_op``.
MAX_POINTS = 1024

_lock = threading.Lock()
_plans: list[_Plan | None] = []  # by plan id (an int in the graph); only grows, like Triton's table
_captured: dict[int, tuple[Any, Any]] = {}  # plan id -> (owner, kernel) while a trace runs
_comptime: Any = None  # torch._dynamo.comptime.comptime, once Dynamo is loaded
_op: Any = None
_fused_types: list[Any] = []  # the C fused types loaded in this process (one, but for tests)

# Leaf tags of a flattened value: a constant, or an index into the operator's inputs.
_CONST, _TENSOR, _INT, _FLOAT, _TUPLE = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class _Plan:
    """What the operator's body needs to rebuild the site's call."""

    site: Any
    kernel: Any
    names: tuple[str, ...]  # the placeholders bind reads
    args: tuple[Any, ...]  # leaves: (tag, value-or-index)
    kwargs: tuple[tuple[str, Any], ...]
    key: Any
    binds: Mapping[tuple[Any, ...], Any]  # placeholder values -> flattened bind(cfg)
    lazy: Any  # the values lazy() gave while tracing, or None


class _Point:
    """The stand-in configuration the trace calls ``bind`` with (it reads ``cfg.name``)."""

    def __init__(self, fields: tuple[tuple[str, Any], ...]) -> None:
        for name, value in fields:
            setattr(self, name, value)


# -- what Dynamo traces ------------------------------------------------------------------
def _traced_call(
    owner: Any,
    kernel: Any,
    args: tuple[Any, ...],
    static_kwargs: dict[str, Any],
    bind: Callable[..., Any],
    key: Any = None,
    lazy: Callable[[], Any] | None = None,
) -> None:
    """Traced by Dynamo in place of a site's call: ``Site._call`` / ``Site.__call__`` (the
    owner is the site) or the C fused launch's ``__call__`` (the owner is the fused launch)."""
    return _trace(owner, kernel, args, static_kwargs, bind, key, lazy)


def _trace(
    owner: Any,
    kernel: Any,
    args: tuple[Any, ...],
    static_kwargs: dict[str, Any],
    bind: Callable[..., Any],
    key: Any,
    lazy: Callable[[], Any] | None,
    dynamo_traces: bool = True,
) -> None:
    import torch

    # The plan's id comes first, a constant; _capture then files the real owner and kernel
    # under it (Dynamo cannot pass a site or a Triton kernel to a constant-folded call:
    # neither is a Python constant to it), and _points and _register take the id.
    plan = _reserve()
    if dynamo_traces:
        _comptime(_capture)
    else:  # a trace that runs this Python as written: the objects are at hand
        _captured[plan] = (owner, kernel)
    lazy_values = lazy() if lazy is not None else None
    if dynamo_traces:
        _comptime(_check_constant)
    names, points = _points(plan, lazy_values)
    tensors: list[Any] = []
    ints: list[Any] = []
    floats: list[Any] = []
    flat_args = tuple(_leaf(a, tensors, ints, floats) for a in args)
    flat_kwargs = tuple((k, _leaf(v, tensors, ints, floats)) for k, v in static_kwargs.items())
    flat_key = _leaf(key, tensors, ints, floats)
    binds = []
    for point in points:
        holes, dyn, grid = bind(_Point(tuple(zip(names, point, strict=True))))
        binds.append(
            (
                tuple(_leaf(h, tensors, ints, floats) for h in holes),
                tuple((k, _leaf(v, tensors, ints, floats)) for k, v in dyn.items()),
                _leaf(grid, tensors, ints, floats),
            )
        )
    plan = _register(
        plan, names, points, flat_args, flat_kwargs, flat_key, tuple(binds), lazy_values
    )
    torch.ops.tunedsl.site_call(plan, tensors, ints, floats)


def traced_without_dynamo(
    site: Any,
    kernel: Any,
    args: tuple[Any, ...],
    static_kwargs: dict[str, Any],
    bind: Callable[..., Any],
    key: Any,
    lazy: Callable[[], Any] | None,
) -> bool:
    """In a trace without Dynamo (non-strict ``torch.export``: fake tensors, no kernel can
    run), put the operator's call in the trace and return True; else False (launch)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.compiler.is_compiling():
        return False
    _trace(site, kernel, args, static_kwargs, bind, key, lazy, dynamo_traces=False)
    return True


def _leaf(value: Any, tensors: list[Any], ints: list[Any], floats: list[Any]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return (_TENSOR, len(tensors) - 1)
    if isinstance(value, bool) or value is None:
        return (_CONST, value)
    if isinstance(value, (int, torch.SymInt)):  # a SymInt: a size in a trace without Dynamo
        ints.append(value)
        return (_INT, len(ints) - 1)
    if isinstance(value, (float, torch.SymFloat)):
        floats.append(value)
        return (_FLOAT, len(floats) - 1)
    if isinstance(value, (tuple, list)):  # a grid, a key=(...): its ints may be symbolic
        return (_TUPLE, tuple(_leaf(v, tensors, ints, floats) for v in value))
    return (_CONST, value)


def _site_of(owner: Any) -> Any:
    """The site of a traced call: the site itself, or the one a C fused launch falls back to."""
    if hasattr(owner, "literal_space"):
        return owner
    fallback = getattr(owner, "fallback", None)
    if fallback is None:  # a C module built from an older source
        raise UsageError(
            "tunedsl's C fused launch is older than this tunedsl (it cannot name its site): "
            "rebuild it with `pip install -e .` (or reinstall tunedsl)"
        )
    return fallback.__self__


def _points(plan_id: int, lazy_values: Any) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """The placeholders the site's bind reads and each distinct combination of their
    values over the site's space (and its ``default=``)."""
    from tunedsl.model.config import as_config
    from tunedsl.model.space import search_space

    site = _site_of(_captured[plan_id][0])
    space = site.literal_space
    options = dict(site.literal_options)
    if lazy_values is not None:
        lazy_space, _, lazy_options = lazy_values
        space = lazy_space if lazy_space is not None else space
        options.update(lazy_options)
    names = tuple(dict.fromkeys(name for name, _, _ in site.placeholders))
    configs = list(search_space(space).iter_valid())
    if options.get("default") is not None:
        configs.append(as_config(options["default"], "default="))
    if not names and configs:
        names = tuple(sorted(configs[0]))
    # A key decided under another space keeps its configuration, as in eager: trace it too.
    configs += [r.config for r in site.table().values() if all(n in r.config for n in names)]
    points: dict[tuple[Any, ...], None] = {}
    for cfg in configs:
        points[tuple(cfg.get(n) for n in names)] = None
        if len(points) > MAX_POINTS:
            raise UsageError(
                f"{site.label}: torch.compile traces this site's launch once per value of "
                f"{', '.join('$' + n for n in names)}, and its space has more than "
                f"{MAX_POINTS}; wrap the call in a function decorated with tunedsl.torch_op"
            )
    return names, tuple(points)


def _reserve() -> int:
    """A new plan id (runs for real while Dynamo traces); :func:`_register` fills it."""
    op()
    with _lock:
        _captured.clear()  # left by a trace that failed (Dynamo traces one frame at a time)
        _plans.append(None)
        return len(_plans) - 1


def _capture(ctx: Any) -> None:
    """Run by Dynamo while it traces :func:`_trace` (``comptime``): file the real owner and
    kernel of the traced call under its plan id, and guard the compiled code on both."""
    plan_id = ctx.get_local("plan").as_python_constant()
    owner, kernel = ctx.get_local("owner"), ctx.get_local("kernel")
    _captured[plan_id] = (dynamo.traced_object(owner), dynamo.traced_object(kernel))


def _check_constant(ctx: Any) -> None:
    """Run by Dynamo in :func:`_trace`: options reach compiled code as constants, so one
    holding a symbolic value breaks the graph (the call runs eagerly; fullgraph=True: an error)."""
    if ctx.get_local("lazy_values").is_python_constant():
        return
    site = _site_of(_captured[ctx.get_local("plan").as_python_constant()][0])
    ctx.graph_break(
        f"{site.label}: this site's non-literal options (space=, prune=, default=, ...) read "
        "a value that is symbolic in this trace (a size or an int under dynamic=True, or one "
        "torch.compile made dynamic after a recompile), and torch.compile can hand them to "
        "the compiled code only as constants: the call runs eagerly (a graph break). Fix: "
        "compute those options from constants (pass sizes through key= or blocks=), or "
        "compile with dynamic=False"
    )


def _register(
    plan_id: int,
    names: tuple[str, ...],
    points: tuple[Any, ...],
    args: tuple[Any, ...],
    kwargs: tuple[tuple[str, Any], ...],
    key: Any,
    binds: tuple[Any, ...],
    lazy_values: Any,
) -> int:
    """Fill the plan ``plan_id`` (runs for real while Dynamo traces); return its id."""
    owner, kernel = _captured.pop(plan_id)
    site = _site_of(owner)
    site.launch_held = True
    plan = _Plan(
        site,
        kernel,
        names,
        args,
        kwargs,
        key,
        dict(zip(points, binds, strict=True)),
        lazy_values,
    )
    with _lock:
        _plans[plan_id] = plan
    return plan_id


# -- what the compiled code runs -----------------------------------------------------------
def _run(
    plan_id: int, tensors: Sequence[Any], ints: Sequence[int], floats: Sequence[float]
) -> None:
    """The operator's body: the site's ordinary eager call."""
    plan = _plans[plan_id] if 0 <= plan_id < len(_plans) else None
    if plan is None:
        raise UsageError(
            f"tunedsl::site_call: no traced site {plan_id} in this process: this compiled code "
            "was traced by another process (a saved torch.compile artifact); compile the "
            "model in this process, or wrap the site's call in tunedsl.torch_op"
        )

    def value(leaf: Any) -> Any:
        tag, x = leaf
        if tag == _CONST:
            return x
        if tag == _TUPLE:
            return tuple(value(v) for v in x)
        return (tensors, tensors, ints, floats)[tag][x]

    def bind(cfg: Any) -> Any:
        point = tuple(cfg.get(n) for n in plan.names)
        flat = plan.binds.get(point)
        if flat is None:
            raise UsageError(
                f"{plan.site.label}: the configuration {cfg} was not in the site's space when "
                "torch.compile traced it; give the site a space that contains it"
            )
        holes, dyn, grid = flat
        return tuple(value(h) for h in holes), {k: value(v) for k, v in dyn}, value(grid)

    lazy_values = plan.lazy
    # Warnings too are the macro's line's: compiled code has no frame of the user's there.
    before = warnings_at((plan.site.filename, plan.site.line))
    try:
        plan.site(
            plan.kernel,
            tuple(value(a) for a in plan.args),
            {k: value(v) for k, v in plan.kwargs},
            bind,
            value(plan.key),
            None if lazy_values is None else (lambda: lazy_values),
        )
    except UsageError as err:  # the user's mistake: end the traceback at the macro's line
        __tracebackhide__ = True  # IPython and pytest hide this frame
        _raise_at_site(err.with_traceback(None), plan.site)
    finally:
        warnings_at(before)


def _raise_at_site(err: BaseException, site: Any) -> None:
    """Raise ``err`` from a frame at the site's file and line: compiled code has no frame of
    the user's function, so the traceback would otherwise end in the compiled graph."""
    code = compile("\n" * (site.line - 1) + "raise err", site.filename, "exec")
    exec(code, {"err": err})


def op() -> Any:
    """The ``tunedsl::site_call`` operator (registered on first use)."""
    global _op
    if _op is None:
        with _lock:
            if _op is None:
                import torch

                defined = torch.library.custom_op(
                    OP_NAME,
                    _run,
                    mutates_args=("tensors",),
                    schema=SCHEMA,
                )
                defined.register_fake(lambda plan_id, tensors, ints, floats: None)
                _op = defined
    return _op


# -- telling Dynamo ------------------------------------------------------------------------
#: The first PyTorch whose Dynamo traces a site as one operator (checked: 2.11, 2.12 and 2.13
#: on the CPU). Before it, a site inside a compiled function stays a graph break.
MIN_TORCH = (2, 11)
#: The first PyTorch whose Dynamo traces a call of the C fused launch (a C type's call
#: registered with ``substitute_in_graph``). Before it, once Dynamo is loaded, a site's call
#: stays ``Site._call``, which still runs the C fused launch for a repeat: one Python frame
#: more per call, and Dynamo meets only the site's own call.
FUSED_CALL_MIN_TORCH = (2, 13)
_whole_calls = True  # whether a C fused launch may take a site's whole call (see above)
_fused_sites: weakref.WeakSet[Any] = weakref.WeakSet()  # sites given such a launch
_site_classes: list[type] = []


def install(site_cls: type) -> None:
    """Point Dynamo at the traced call for ``site_cls`` once Dynamo is loaded, where its
    PyTorch can run it (no cost to eager calls: Dynamo reads this attribute of the functions
    it inlines; Python never does)."""
    with _lock:
        if site_cls not in _site_classes:
            _site_classes.append(site_cls)
    _watch_dynamo()


def supported(version: str, least: tuple[int, int] = MIN_TORCH) -> bool:
    """Whether a PyTorch of ``version`` traces a site as one operator (``MIN_TORCH``), or
    is at least ``least``."""
    parts = []
    for piece in version.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts) >= least


def note_fused_type(fused_type: Any, fallback: Any) -> bool:
    """A C fused launch of ``fused_type`` is built with the site's call ``fallback``: register
    the type's call with Dynamo (now, or once Dynamo is loaded). Returns whether the launch
    may take the site's whole call (see ``FUSED_CALL_MIN_TORCH``)."""
    site = getattr(fallback, "__self__", None)  # Site._call's site
    with _lock:
        if site is not None:
            _fused_sites.add(site)
        if fused_type in _fused_types:
            return _whole_calls
        _fused_types.append(fused_type)
    if "torch._dynamo" in sys.modules and supported(str(sys.modules["torch"].__version__)):
        _register_fused(fused_type)
    return _whole_calls


def whole_calls() -> bool:
    """Whether a C fused launch may take a site's whole call (``FUSED_CALL_MIN_TORCH``)."""
    return _whole_calls


def _keep_sites_calls() -> None:
    """Dynamo is loaded and cannot trace a call of the C fused launch: no site's call may be
    one from now on (the C launch still runs inside ``Site._call``)."""
    global _whole_calls
    with _lock:
        _whole_calls = False
        sites = list(_fused_sites)
    for site in sites:
        site.hold_launch()


def _register_fused(fused_type: Any) -> None:
    import torch

    if hasattr(torch.compiler, "substitute_in_graph"):  # PyTorch 2.6 and later
        torch.compiler.substitute_in_graph(fused_type.__call__, skip_signature_check=True)(
            _traced_call
        )


def _on_dynamo_loaded() -> None:
    import torch

    if not supported(str(torch.__version__)):
        return  # a graph break, as before
    if not supported(str(torch.__version__), FUSED_CALL_MIN_TORCH):
        _keep_sites_calls()
    with _lock:
        classes = list(_site_classes)
    for site_cls in classes:
        for name in ("_call", "__call__"):
            vars(site_cls)[name]._torchdynamo_inline = _traced_call
            # Where Dynamo cannot inline the call (a graph break), it runs eagerly: Dynamo
            # must not compile the site's own frames (the table, tuning, the Triton launch).
            dynamo.run_eagerly(vars(site_cls)[name].__code__)
    # Dynamo runs these for real while tracing (they read the site, the space, the table);
    # their arguments are Python constants (a plan id, names, flattened leaves).
    for fn in (_reserve, _points, _register):
        torch.compiler.assume_constant_result(fn)
    global _comptime
    _comptime = dynamo.comptime()
    with _lock:
        types = list(_fused_types)
    for fused_type in types:
        _register_fused(fused_type)


def _watch_dynamo() -> None:
    dynamo_watch.when_dynamo_loaded(_on_dynamo_loaded)
