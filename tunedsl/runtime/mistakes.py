"""Run-time mistakes in a macro call, reported at the user's line with the fix.

The front end catches what it can see in the text (``tunedsl expand --check``); these are
the mistakes only the values show: a kernel that is not a Triton kernel, a ``blocks=`` that
is a tensor, a nested tuple or a function, a ``key=`` that differs on every call or that
names parameters (``triton.autotune``'s form). Each becomes a ``UsageError`` naming the macro
part and the fix, raised once, on the first call, before any configuration is tried (the
alternative was one Triton error per configuration).

``at_user_frame`` strips tunedsl's frames from such an error: the site re-raises it, so the
traceback ends at the user's line (``tunedsl run`` and IPython hide the site's last frame).
"""

from __future__ import annotations

import ast
import difflib
import operator
import sys
import types
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tunedsl.errors import UsageError, callable_name
from tunedsl.model.config import Config
from tunedsl.model.hints import missing_fix
from tunedsl.model.keys import is_tensor, is_triton_constexpr, is_triton_dtype
from tunedsl.model.options import HINT_NAMES, did_you_mean
from tunedsl.model.variant import Variant
from tunedsl.runtime import foreign
from tunedsl.runtime.blocks_advice import DOLLAR, for_comprehension, python_text
from tunedsl.warn import is_own_file, warn_once, without_frames

if TYPE_CHECKING:
    from tunedsl.backends.triton import KernelInfo

_ABSENT = object()

E = TypeVar("E", bound=BaseException)


def at_user_frame(err: E) -> E:
    """``err`` without the frames below the site's call (tunedsl's own)."""
    return err.with_traceback(None)


def user_frames_only(err: E) -> E:
    """``err`` with tunedsl's own frames unlinked from its traceback and its chained cause
    dropped (a ``TuningError`` repeats its cause's one line per configuration): a failed
    tune or a Ctrl-C shows the user's frames, hooks included. ``python -X dev`` keeps
    everything, for a report of a bug in tunedsl itself."""
    if sys.flags.dev_mode:
        return err
    err.__cause__ = None
    err.__suppress_context__ = True
    return err.with_traceback(without_own_frames(err.__traceback__))


def without_own_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback chain with tunedsl's own frames unlinked."""
    return without_frames(tb, is_own_file)


def warn_prune_splits_key(label: str, prune: Any, names: Sequence[str]) -> None:
    """``prune=`` read arguments: their values join the key (docs/runtime.md, "The prune
    rule"), so ``key=`` no longer groups the calls it would group. Said once per site."""
    read = ", ".join(f"`{n}`" for n in names)
    fn = callable_name(prune)
    warn_once(
        f"prune-splits-key:{label}:{read}",  # each argument named once (prune_key_holds.py)
        f"{label}: prune={fn} reads {read}, so each distinct value of {read} (for a tensor, its "
        "dtype and shape) is decided on its own and key= no longer groups calls: two calls "
        "with the same key= value but another value there each tune. To keep key= buckets, "
        "let prune= decide from the configurations alone, or key= on what prune= reads",
        UserWarning,
        stacklevel="user",
    )


def check_kernel(kernel: Any, label: str, kernel_text: str) -> None:
    """The launch must call a Triton kernel: a ``@triton.jit`` function (or Triton's wrappers)."""
    if hasattr(kernel, "run") or hasattr(kernel, "fn"):
        return
    if _launcher_of_a_kernel(kernel):
        base = kernel_text.rsplit("[", 1)[0] if kernel_text.endswith("]") else "kernel"
        raise UsageError(
            f"{label}: the launch `{kernel_text}(...)` is Triton's `kernel[grid](...)` form, "
            f"which launches at once; autotune(...) launches the kernel itself: write "
            f"`{base}(...)` and give the grid as blocks=, e.g. blocks=cdiv(n, $tile) "
            "(autotune_launch: grid=)"
        )
    name = getattr(kernel, "__qualname__", None) or type(kernel).__name__
    what = "a plain Python function" if callable(kernel) else f"a {type(kernel).__name__}"
    raise UsageError(
        f"{label}: the kernel launch `{kernel_text}` calls {name}, {what}, not a Triton "
        f"kernel; decorate it with @triton.jit:\n    @triton.jit\n    def {name}(...): ..."
    )


def _launcher_of_a_kernel(fn: Any) -> bool:
    """``kernel[grid]``: a function whose closure holds a Triton kernel (its ``run``)."""
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            if hasattr(cell.cell_contents, "run"):
                return True
        except ValueError:  # an empty cell
            continue
    return False


def grid_dims(
    grid: Any, label: str, arg: str = "blocks=", launch: str | None = None
) -> tuple[int, ...]:
    """``blocks=`` (``arg``: ``grid=`` of ``autotune_launch``) as 1 to 3 ints, or an error
    (``launch``: a DSL site's launch text, whose ``blocks=`` an error quotes)."""
    eg = "blocks=cdiv(n, $tile)" if arg == "blocks=" else "grid=lambda cfg: (cdiv(n, cfg.tile),)"
    fix = f"pass an int or a flat tuple of 1 to 3 ints, e.g. {eg}"
    grid = grid.value if is_triton_constexpr(grid) else grid  # callable, yet no function
    if callable(grid) and not is_tensor(grid):
        raise UsageError(
            f"{label}: {arg} is a function: tunedsl takes the grid itself, not Triton's "
            "`lambda meta: ...`; write it with configuration fields instead, e.g. "
            f"{eg} (autotune_launch: grid=lambda cfg: ... receives the configuration)"
        )
    if is_tensor(grid):
        raise UsageError(
            f"{label}: {arg} is a tensor ({getattr(grid, 'shape', '?')}); {fix} (use "
            "int(x) or x.item() for a count held in a tensor)"
        )
    out: tuple[Any, ...]
    if isinstance(grid, int) and not isinstance(grid, bool):
        out = (grid,)
    else:
        try:
            out = tuple(d.value if is_triton_constexpr(d) else d for d in grid)  # tl.constexpr
        except TypeError:
            out = ()
    if not 1 <= len(out) <= 3:
        raise UsageError(f"{label}: {arg} must have 1 to 3 dimensions, got {grid!r}; {fix}")
    # A float or str dimension failed deep in the launch; a negative one "tuned" nothing.
    for dim in out:
        if callable(dim) and not is_tensor(dim):
            return grid_dims(dim, label, arg)  # `blocks=fn` arrives as `(fn,)`: a function's
        if isinstance(dim, (tuple, list)) and len(out) == 1 and arg == "blocks=":
            # `blocks=grid` (`grid = (x, y)`) or a function's tuple: only a written one unpacks.
            what = f"{type(dim).__name__} {dim!r}"
            text = _written_blocks(launch)
            if not 1 <= len(dim) <= 3:
                raise UsageError(
                    f"{label}: blocks={text} is one value, the {what} of {len(dim)} "
                    f"dimensions; {fix}"
                )
            raise UsageError(
                f"{label}: blocks={text} is one value, the {what}: a grid of several dimensions "
                "is a tuple written in blocks=, so write its dimensions in blocks=: "
                + _unpacked(text, len(dim))
            )
        if isinstance(dim, (tuple, list)):
            raise UsageError(
                f"{label}: {arg} is a nested tuple {grid!r}; a launch grid is flat: (x, y, z)"
            )
        if is_tensor(dim):
            raise UsageError(
                f"{label}: {arg} has a tensor dimension in {grid!r}; {fix} (use int(x))"
            )
        if isinstance(dim, float):  # `n / 2` or a float size: Triton's launch rejects it
            raise UsageError(
                f"{label}: {arg} must be an int or a tuple of 1 to 3 non-negative ints, "
                f"got {grid!r}: {dim!r} is a float (`/` divides into one); compute the grid "
                f"from ints with cdiv, {eg}: cdiv rounds up, so the last, partial block is "
                "launched"
            )
        if isinstance(dim, bool) or not hasattr(dim, "__index__") or operator.index(dim) < 0:
            raise UsageError(
                f"{label}: {arg} must be an int or a tuple of 1 to 3 non-negative ints, "
                f"got {grid!r}"
            )
    return tuple(operator.index(d) for d in out)


def _written_blocks(launch: str | None) -> str:
    """The ``blocks=`` of a DSL site's launch text (``frontend/launch_text.py``: its parts,
    then ``blocks=``, then ``key=``), as Python writes it; "" where there is none."""
    parts = (launch or "").split("; ")
    if len(parts) > 1 and parts[-1].startswith("key="):
        parts.pop()
    if not parts[-1].startswith("blocks="):
        return ""
    text = parts[-1][len("blocks=") :]
    try:  # the tokens as written, joined one way: `[: 2]` is Python's `[:2]`
        return python_text(ast.parse(text.replace("$", _DOLLAR), mode="eval"))
    except (SyntaxError, ValueError, RecursionError):
        return text


_DOLLAR = DOLLAR


def _unpacked(written: str, count: int) -> str:
    """How to write a grid of ``count`` dimensions held in one value (``written``: its
    ``blocks=`` text) as the tuple blocks= needs, in the user's words."""

    def of(name: str) -> str:
        parts = ", ".join(f"{name}[{i}]" for i in range(count))
        return f"blocks=({parts})" if count > 1 else f"blocks={name}[0]"

    if written.isidentifier():
        return of(written)
    if (comprehension := for_comprehension(written, count)) is not None:
        return comprehension  # unrolled, or said: indexing it would run it once per dimension
    if written and "$" not in written:
        return f"compute it first (`grid = {written}`) and write {of('grid')}"
    if written:  # `$` fields: computed under each configuration, so indexed where it is
        try:
            node = ast.parse(written.replace("$", _DOLLAR), mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            node = None
        atom = isinstance(node, ast.Call | ast.Name | ast.Attribute | ast.Subscript)
        return of(written if atom else f"({written})")
    return f"{of('grid')}, where `grid` holds the tuple"


# -- the launch against the kernel's parameters --------------------------------------------


def check_launch(
    kernel: Any,
    info: KernelInfo,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    label: str,
    launch_options: Callable[[], frozenset[str]] = frozenset,
    space_hints: Sequence[str] = (),
    dependent: Collection[str] | None = None,
) -> None:
    """The launch's arguments must bind to the kernel's parameters, as Python would bind
    them: checked on the first configuration, before any is tried (Triton's own message
    came once per configuration, after all were tried, and never named a misspelling).
    ``launch_options()`` gives the other keywords Triton takes (``num_warps``, ...; asked only
    when a keyword is no parameter; empty: any).
    A kernel in ``@triton.heuristics`` is checked with the parameters its heuristics compute
    counted as passed, and a launch passing one of them with a value of the configuration
    (in ``dependent``, the names whose values do; None: any), or a launch hint of
    ``space_hints`` (the space's fields named like hints) that one computes, is an error
    (Triton would replace its value). A value the same for every configuration (a flag a
    heuristic normalises, ``lambda args: bool(args["CAP"])``) is Triton's to replace. A
    kernel in ``@triton.autotune`` is left to Triton, unless its configurations set a
    parameter the launch passes too (Triton then fails every configuration: "Conflicting
    meta-parameters")."""
    if type(kernel).__name__ == "Autotuner":
        both = sorted(
            {k for c in getattr(kernel, "configs", ()) for k in getattr(c, "kwargs", {})}
            & set(kwargs)
        )
        if both:
            raise UsageError(
                f"{label}: the kernel is wrapped in @triton.autotune, whose configurations set "
                f"{', '.join(f'`{k}`' for k in both)} that this launch passes too; remove "
                "@triton.autotune and put its configurations in space= (autotune(...) tunes "
                "them)"
            )
    wrappers = _wrappers(kernel)
    heuristics = [w for w in wrappers if type(w).__name__ == "Heuristics"]
    computed = {n for w in heuristics for n in getattr(w, "values", None) or ()}
    passed = [k for k in [*info.arg_names[: len(args)], *kwargs] if k in computed]
    passed = [k for k in passed if dependent is None or k in dependent]
    hinted = [k for k in space_hints if k in computed]
    if passed or hinted:  # Triton would replace the launch's value with the heuristic's
        name, where = (passed[0], "the launch") if passed else (hinted[0], "space=")
        raise UsageError(
            f"{label}: the kernel is wrapped in @triton.heuristics, which computes "
            f"`{name}` that {where} gives too: Triton replaces that value with the "
            f"heuristic's, so every configuration would run the same kernel (and blocks= "
            f"could cover another tile); stop giving `{name}` in {where}, or remove it from "
            f"@triton.heuristics to tune it"
        )
    if len(heuristics) < len(wrappers):  # @triton.autotune fills parameters of its own
        return
    params = info.arg_names
    name = info.qualname.rsplit(".", 1)[-1]
    signature = f"{name}({', '.join(params)})"
    if len(args) > len(params):
        raise UsageError(
            f"{label}: the launch passes {len(args)} positional arguments but {signature} "
            f"takes {len(params)}; remove the extra ones or add parameters to {name}"
        )
    bound = set(params[: len(args)])
    for key in kwargs:
        if key in bound:
            raise UsageError(
                f"{label}: the launch gives `{key}` twice, by position and as `{key}=`, "
                f"to {signature}; pass it once"
            )
    unknown = [k for k in kwargs if k not in params]
    passes = {*bound, *kwargs, *info.defaults, *computed}  # heuristics pass theirs
    missing = [p for p in params if p not in passes]
    for key in unknown:
        close = difflib.get_close_matches(key, missing or params, n=1)
        if close:
            raise UsageError(
                f"{label}: {signature} has no parameter `{key}`; did you mean "
                f"`{close[0]}`? (rename `{key}=` to `{close[0]}=` in the launch)"
            )
    options = launch_options() if unknown else frozenset()
    strange = [k for k in unknown if options and k not in options]
    if strange and not missing:  # Triton's GPU launch rejects it, its interpreter ignores it
        raise UsageError(
            f"{label}: {signature} has no parameter `{strange[0]}`; remove `{strange[0]}=` "
            f"from the launch or add the parameter to {name}"
        )
    if missing:
        names = ", ".join(f"`{p}`" for p in missing)
        given = ", ".join(f"`{k}=`" for k in unknown)
        raise UsageError(
            f"{label}: the launch passes nothing for {names} of {signature}"
            + (f" (it passes {given}, which {name} does not take)" if unknown else "")
            + f"; {missing_fix(name, missing, space_hints)}"
        )
    for param, value in [*zip(params, args, strict=False), *kwargs.items()]:
        why = foreign.foreign_value(value, param, param in info.constexpr_names)
        if why is None and param not in info.constexpr_names and is_triton_dtype(value):
            # Triton's GPU launch cannot specialize it; its interpreter takes it.
            why = (
                f"{value}, a Triton dtype, but `{param}` is not a `tl.constexpr` parameter: "
                f"annotate it `{param}: tl.constexpr` in {name}"
            )
        if why:
            raise UsageError(f"{label}: `{param}` of {name} is {why}")


def _wrappers(kernel: Any) -> list[Any]:
    # The objects around the @triton.jit function, outermost first (heuristics, autotune).
    chain: list[Any] = []
    for _ in range(8):
        inner = getattr(kernel, "fn", None)
        if getattr(inner, "fn", None) is None:
            break
        chain.append(kernel)
        kernel = inner
    return chain


def runtime_fields(info: KernelInfo, variants: Sequence[Variant]) -> dict[str, str]:
    """Parameters not declared ``tl.constexpr`` whose value changes from one configuration
    to the next (a ``$x`` given to a runtime argument), each with an example."""
    if len(variants) < 2:
        return {}
    out: dict[str, str] = {}
    for i, param in enumerate(info.arg_names):
        if param in info.constexpr_names:
            continue
        seen: dict[Config, Any] = {}
        for v in variants:
            value = v.args[i] if i < len(v.args) else v.kwargs.get(param, _ABSENT)
            if value is _ABSENT or is_tensor(value) or not isinstance(value, int | float):
                break
            seen[v.config] = value
        else:
            if len(set(seen.values())) > 1:
                cfg, value = next(iter(seen.items()))
                out[param] = f"{param}={value!r} in {cfg}"
    return out


def runtime_field_error(
    info: KernelInfo, fields: Mapping[str, str], config: Config, reason: str
) -> UsageError:
    """The first configuration failed and a configuration field feeds a runtime argument:
    that is the likely cause, and its fix is one annotation."""
    name = info.qualname.rsplit(".", 1)[-1]
    params = ", ".join(f"`{p}`" for p in fields)
    fixes = "; ".join(f"`{p}: tl.constexpr`" for p in fields)
    examples = "; ".join(fields.values())
    return UsageError(
        f"{name} takes a configuration field in {params} ({examples}), which it does not "
        f"declare `tl.constexpr`, and the first configuration tried, {config}, failed: "
        f"{reason}\n  fix: declare {fixes} in {name}'s parameters (a configuration field "
        "is a compile-time constant), or pass a constant there"
    )


def runtime_field_hint(kernel: Any, variants: Sequence[Variant]) -> str | None:
    """Where compiles failed: a configuration field given to a parameter not declared
    ``tl.constexpr`` (``ROWS=$rows`` for ``def k(..., ROWS)``), the likely cause, and the fix."""
    from tunedsl.backends import triton as bt

    try:
        fields = runtime_fields(bt.kernel_info(kernel), variants)
    except Exception:  # only a hint: never fail a precompile over it
        return None
    if not fields:
        return None
    return (
        f"a configuration field reaches {', '.join(f'`{p}`' for p in fields)} "
        f"({'; '.join(fields.values())}), not declared tl.constexpr: declare "
        f"{'; '.join(f'`{p}: tl.constexpr`' for p in fields)} in the kernel's parameters"
    )


# -- space fields nothing reads --------------------------------------------------------------


class _FieldReads:
    """A configuration that notes which fields its reader reads; any other use of it
    (``to_json()``, iterating, ``get``) counts as reading them all."""

    __slots__ = ("_all", "_cfg", "_read")

    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        self._read: set[str] = set()
        self._all = False

    def __getattr__(self, name: str) -> Any:
        if name in self._cfg:
            self._read.add(name)
            return self._cfg[name]
        self._all = True
        return getattr(self._cfg, name)

    def __getitem__(self, name: str) -> Any:
        self._read.add(name)
        return self._cfg[name]

    def __contains__(self, name: object) -> bool:
        self._all = True
        return name in self._cfg

    def __iter__(self) -> Any:
        self._all = True
        return iter(self._cfg)

    def __len__(self) -> int:
        self._all = True
        return len(self._cfg)


def check_fields_read(
    bind: Any, configs: Sequence[Config], placeholders: set[str], label: str
) -> None:
    """Every field of the space is read by the launch (``bind``: the kernel's arguments and
    the grid; a DSL site's ``$name`` placeholders count as reads) or is a launch hint; a
    field nothing reads would tune the same kernel once per value. The front end checks a
    literal space when the module compiles; this is for the rest (a computed space,
    ``autotune_launch``'s functions). Each configuration is probed, so a field read only
    under some others' values (``cfg.a if cfg.mode else cfg.b``) counts as read."""
    if len(configs) < 2:  # one configuration is launched as is: nothing is tuned twice
        return
    read = set(placeholders) | set(HINT_NAMES)
    fields: dict[str, None] = {}
    for config in configs[:_PROBED]:
        fields.update(dict.fromkeys(config))
        probe = _FieldReads(config)
        try:
            bind(probe)
        except Exception:  # the launch itself reports it, with the real configuration
            return
        if probe._all:
            return
        read |= probe._read
    for name in fields:
        close = did_you_mean(name, HINT_NAMES)
        values = {(type(c[name]), c[name]) for c in configs if name in c}
        if name in read or (len(values) < 2 and not close):  # one value: tuned once
            continue
        fix = (
            f"did you mean the launch hint `{close}`?"
            if close
            else f"pass `{name}` to the kernel (e.g. `{name.upper()}=${name}` in the launch, or "
            f"`cfg.{name}` in autotune_launch's args=/kwargs=/grid=) or remove the field"
        )
        raise UsageError(
            f"{label}: space field `{name}` is read by nothing in the launch (the kernel's "
            f"arguments and the grid) and is not a launch hint, so "
            + (
                "each of its values would tune the same kernel again"
                if len(values) > 1
                else "it changes nothing"
            )
            + f"; {fix}"
        )


# Configurations probed for the fields they read (each probe runs ``bind`` once more).
_PROBED = 256


def reentered(label: str, this_key: bool) -> UsageError:
    """A site called again from its own hook while it decides a key (it would wait forever
    on itself)."""
    return UsageError(
        f"{label}: the site was called again from its own pre_hook=, post_hook=, verify= or "
        f"prune= while it was deciding {'this' if this_key else 'a'} key; launch another "
        "kernel (or call the kernel directly) from hooks"
    )
