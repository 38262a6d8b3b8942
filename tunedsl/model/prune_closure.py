"""What a ``prune=`` function reads from the code that calls the site, past its ``args``.

A prune written in the call (``prune=lambda configs, args: [c for c in configs if c.BLOCK >=
N]``, with ``N`` a local of the calling function) reads a value of this call that no key
holds: the site keys the arguments prune reads from ``args`` (docs/runtime.md, "The prune
rule"), never a captured local, so a decision made while ``N`` was 100 would be reused
for a call whose ``N`` is 200, launching a configuration that call's prune drops. This
module finds such reads: the closure variables of a prune defined inside a function that
is running now (the caller, whose locals change from call to call), holding data.
A prune made by a factory that has returned (``prune=make_prune(64)``) is fixed for the
process and is not one of them. A default bound from the caller's local of its name
(``lambda configs, args, N=N:``, Python's idiom against late binding) holds this call's
value as a closure does, and is looked at the same way. The attributes of an object the
caller holds are such reads too (``self.live`` in an ``nn.Module``'s ``forward``, read by a
lambda written there or by a method, ``prune=self.keep``), where a method of an object no
running function holds (a pruner made once at a module's top level) is fixed like a
factory's. So are the constant items of a dict or list the caller holds (``hp["n"]``).

At a script's or a notebook cell's top level the caller's variables are the module's
globals: a prune there that reads a name the module may still rebind as it runs on (a
loop's variable while the loop runs, a name bound again further down), itself or through
an attribute or item of what it holds, has the same fault. Those names are found in the
module's source, seen from the line its top-level code runs now; a module constant, or a
name whose every binding has run, is not one of them.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tunedsl.errors import UsageError, callable_name
from tunedsl.model.code_reads import (
    GLOBAL_OPS,
    attribute_chains,
    first_data,
    globals_loaded,
    is_data,
    source_span,
)
from tunedsl.model.prune_elsewhere import set_elsewhere
from tunedsl.model.prune_held import argument_named_alike, root_held_by_key
from tunedsl.model.prune_key_holds import KeyHolds
from tunedsl.model.running_frames import (
    FUNCTION_FLAGS,
    MAX_FRAMES,
    bound_arguments,
    line_of,
    running_frame,
    top_level_running,
    user_frame,
)
from tunedsl.warn import is_own_file


class Source(Protocol):
    """What the front end reads from a module's source for these checks
    (``tunedsl.frontend.rebinding``)."""

    def rebound_at_top_level(
        self, filename: str, line: int, *, later: bool = True
    ) -> Mapping[str, int]:
        """The names the top-level code, running ``line`` now, may still rebind as it runs
        on, each with a line that rebinds it (``later=False``: only in a loop around
        ``line``, for a site that runs again only as such a loop does)."""

    def chains_read_by_option(
        self, filename: str, span: tuple[int, int, int, int], option: str
    ) -> set[tuple[Any, ...]]:
        """The variables, attributes and constant items the macro's ``option=`` expression
        reads where it is evaluated (outside the lambdas it makes)."""

    def chains_read_by_argument(
        self, filename: str, span: tuple[int, int, int, int], position: int | None, name: str
    ) -> set[tuple[Any, ...]] | None:
        """What the call at ``span`` passes for the parameter ``name`` reads (None: cannot
        be told)."""

    def called_as(self, filename: str, span: tuple[int, int, int, int]) -> tuple[str, ...] | None:
        """How the call at ``span`` names what it calls (``("attribute", "o", "m")`` for
        ``o.m(...)``), or None."""

    def chains_assigned_to_names_read(
        self, filename: str, span: tuple[int, int, int, int], option: str
    ) -> Mapping[str, set[tuple[Any, ...]]]:
        """What the scope around the ``option=`` expression assigns to each bare name it
        reads (``keep = covering(n)``, then ``prune=keep``), read the same way."""


def check(
    prune: Any,
    label: str,
    key: Any,
    arg_names: Sequence[str],
    args: Any,
    source: Source,
    lazy: Any = None,
    alone: bool = False,
    holds: KeyHolds | None = None,
) -> None:
    """A ``UsageError`` at the site when ``prune`` reads a local of the calling function, or
    a name the running script rebinds, that the ``key=`` value does not hold: the key would
    not tell two of its values apart. ``lazy``: the call's thunk of its non-literal options
    (a DSL site's), whose ``prune=`` expression may make the prune from such a value.
    ``alone``: no other place in the code calls this site (a macro, or an
    ``autotune_launch`` call without ``name=``), so where it is written in a script's
    top-level code, a name bound further down in no loop around it is no rebinding of it.
    ``holds``: the site's record of what the key held on its earlier calls
    (``prune_key_holds.py``), so that a value equal to a key item on each call by
    coincidence, at another place each time, is seen not held; without it, this call alone."""
    caller = [*caller_locals_read(prune), *bound_attributes_read(prune)]
    reads = [(n, v, "the function that calls the site") for n, v in caller]
    for name, value, line in rebound_globals_read(prune, source.rebound_at_top_level, alone):
        reads.append((name, value, f"the module, which rebinds it as it runs ({line})"))
    reads += set_elsewhere(prune, source.rebound_at_top_level)
    seen = {name for name, _, _ in reads}
    reads += [r for r in made_from_caller(lazy, source, alone) if r[0] not in seen]
    values: dict[str, Any] = {}
    for name, value, _ in reads:
        values.setdefault(name, value)
    unheld = set((holds or KeyHolds("")).unheld(values, key)) if values else set()
    for name, value, where in reads:
        if name not in unheld or root_held_by_key(name, prune, key):
            continue
        param = argument_named_alike(name, value, arg_names, args)
        read = f'args["{param}"]' if param else 'args["..."] (pass it to the kernel)'
        raise UsageError(
            f"{label}: prune={callable_name(prune)} reads `{name}` ({value!r:.60}) from "
            f"{where}, not from its args: no key holds it, so the "
            f"decision made for one value of `{name}` would be reused for a call with another, "
            f"launching a configuration its prune drops. Read it as {read}, whose value then "
            f"joins the key, or put `{name}` in key="
        )


def made_from_caller(lazy: Any, source: Source, alone: bool = False) -> list[tuple[str, Any, str]]:
    """The (name, value, where) of data a site's ``prune=`` expression reads outside the
    lambdas it makes, from the function that calls the site or from a name the running
    script may still rebind: a prune made per call from it (``covering(n)``,
    ``functools.partial(keep, low=n)``, ``PRUNES[mode]``) changes with it, as a closure's
    read does. ``lazy`` is the call's thunk of its non-literal options: a DSL site's, in
    the user's code; ``autotune_launch``'s, tunedsl's own, whose ``prune=`` is the keyword
    of the call the user's frame is making."""
    code = getattr(lazy, "__code__", None)
    if not isinstance(code, types.CodeType):
        return []
    if is_own_file(code.co_filename):  # autotune_launch(..., prune=...)
        frame = user_frame()
        if frame is None:
            return []
        code, span = frame.f_code, source_span(frame.f_code, frame.f_lasti)
        function = bool(code.co_flags & FUNCTION_FLAGS)
        local, namespace = (frame.f_locals if function else {}), frame.f_globals
        module = None if function else frame  # a call at a script's top level
        top = not function
        running = None
    else:
        span = source_span(code, None)
        running = running_frame(code)  # its locals: what `keep = at_most(limit)` read
        local = dict(running.f_locals) if running is not None else {}
        for name, cell in zip(code.co_freevars, lazy.__closure__ or (), strict=False):
            try:
                local[name] = cell.cell_contents
            except ValueError:
                continue
        namespace = getattr(lazy, "__globals__", {})
        module = None
        top = True  # a thunk the module's own code made is the macro's there, if any
    if span is None:  # Python 3.10 keeps no columns
        return []
    chains = source.chains_read_by_option(code.co_filename, span, "prune")
    if not chains:
        return []
    # A name holding the prune (`keep = covering(n)`, then `prune=keep`) holds what it was
    # made from; a name holding data (`i = levels[0]`, then `PRUNES[i]`) is itself checked.
    assigned = source.chains_assigned_to_names_read(code.co_filename, span, "prune")
    for name, origin in assigned.items():
        if not is_data(local[name] if name in local else namespace.get(name)):
            chains = chains | origin
    made = " (the prune= expression makes the prune from it)"
    out = [
        (n, v, f"the function that calls the site{made}") for n, v in _chain_values(chains, local)
    ]
    if running is not None:
        out += _passed_in(chains, local, running, source)
    module = module or top_level_running(namespace)
    if module is not None:
        later = not (alone and top)
        lines = source.rebound_at_top_level(module.f_code.co_filename, module.f_lineno, later=later)
        rebound = {
            c[0]: namespace[c[0]]
            for c in chains
            if c[0] in lines and c[0] in namespace and c[0] not in local
        }
        for label, value in _chain_values(chains, rebound):
            root = label.split(".")[0].split("[")[0]
            line = line_of(module, code, lines[root])
            where = f"the module, which rebinds it as it runs ({line}){made}"
            out.append((label, value, where))
    return out


def _passed_in(
    chains: set[tuple[Any, ...]], local: Mapping[str, Any], running: types.FrameType, source: Source
) -> list[tuple[str, Any, str]]:
    """The data that the call of ``running`` (the function holding the site) passed in a
    prune through one of its parameters is made from (``topk(x, covering(n))``, then
    ``prune=prune`` inside ``topk``): the caller's expression for the parameter, read as the
    ``prune=`` expression is. Only a direct call whose argument can be told is read (a
    method's positional one where the call shows whether ``self`` is bound:
    ``running_frames.bound_arguments``)."""
    code = running.f_code
    params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    caller = running.f_back
    if caller is None or is_own_file(caller.f_code.co_filename):
        return []
    span = source_span(caller.f_code, caller.f_lasti)
    if span is None:
        return []
    out: list[tuple[str, Any, str]] = []
    bound: int | None = 0
    if params and params[0] in ("self", "cls"):
        bound = bound_arguments(source.called_as(caller.f_code.co_filename, span), caller, code)
    for chain in chains:
        name = chain[0]
        if len(chain) != 1 or name not in params or is_data(local.get(name)):
            continue
        index = params.index(name)
        position = None if bound is None or index >= code.co_argcount else index - bound
        passed = source.chains_read_by_argument(caller.f_code.co_filename, span, position, name)
        if not passed:
            continue
        function = bool(caller.f_code.co_flags & FUNCTION_FLAGS)
        values = caller.f_locals if function else {}
        if not function:  # a script's top level: the names it may still rebind
            lines = source.rebound_at_top_level(caller.f_code.co_filename, caller.f_lineno)
            values = {c[0]: caller.f_globals[c[0]] for c in passed
                      if c[0] in lines and c[0] in caller.f_globals}  # fmt: skip
        where = (
            f"the code that calls {code.co_name}() (the prune it passes as `{name}` is made "
            "from it)"
        )
        out += [(n, v, where) for n, v in _chain_values(passed, values)]
    return out


def _chain_values(chains: set[tuple[Any, ...]], values: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The data the chains read from ``values``: a variable itself where the expression
    reads it whole, else the data it reads from it (``x.shape[1]`` of a tensor, a prune
    out of a tuple is none)."""
    bare = {c[0] for c in chains if len(c) == 1 and c[0] in values}
    found = [(name, values[name]) for name in sorted(bare) if is_data(values[name])]
    rest = {c for c in chains if c[0] in values and c[0] not in bare and len(c) > 1}
    data = {c for c in rest if is_data(values[c[0]])}
    for chain in sorted(data, key=repr):
        read = _data_along(chain, values[chain[0]])
        if read is not None:
            found.append(read)
    return found + _values_read(rest - data, values)


def _data_along(chain: tuple[Any, ...], value: Any) -> tuple[str, Any] | None:
    """The last data that ``chain`` reads from the data ``value`` (``x.shape[1]``: the
    length), None where it reads a function out of it (a prune held in a tuple), ``value``
    itself where the chain cannot be followed or ends on other objects (``x.dtype``)."""
    label, last = str(chain[0]), (str(chain[0]), value)
    for kind, part in chain[1:]:
        try:
            value = getattr(value, part) if kind == "." else value[part]
        except Exception:
            return last
        label += f".{part}" if kind == "." else f"[{part!r}]"
        if not is_data(value):
            plain = callable(value) and getattr(value, "__self__", None) is None
            return None if plain else last  # a function, not a method of the data
        last = (label, value)
    return last


def caller_locals_read(prune: Any) -> list[tuple[str, Any]]:
    """The (name, value) pairs of data that ``prune`` captured from a running function."""
    code = getattr(prune, "__code__", None)
    closure = getattr(prune, "__closure__", None) or ()
    if not isinstance(code, types.CodeType):
        return []
    defaults = _defaults(prune, code)
    if not closure and not defaults:
        return []
    frame = running_frame(code)
    if frame is None:
        return []
    # A default bound from the caller's local of its name (`lambda configs, args, N=N:`,
    # Python's idiom against late binding): the value of this call, as a closure's is.
    local = frame.f_locals if defaults else {}
    out = [(n, v) for n, v in defaults.items() if n in local and local[n] is v]
    objects = {}
    for name, cell in zip(code.co_freevars, closure, strict=False):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: assigned later in the caller
            continue
        if is_data(value):
            out.append((name, value))
        else:
            objects[name] = value
    if objects:  # `self.live` of a method's `self`: the object's data, read per call
        out.extend(_attributes_read(code, objects))
    return out


def bound_attributes_read(prune: Any) -> list[tuple[str, Any]]:
    """The (``self.attr``, value) pairs of data that ``prune``, a method bound to an object a
    running function holds (``prune=self.keep`` in a module's ``forward``), reads from that
    object. A method of an object no running function holds (a pruner made once, at a
    module's top level) reads state fixed for the process and is not looked at."""
    obj = getattr(prune, "__self__", None)
    code = getattr(getattr(prune, "__func__", None), "__code__", None)
    if not isinstance(code, types.CodeType) or not code.co_argcount:
        return []
    if obj is None or isinstance(obj, (type, types.ModuleType)):
        return []
    me = code.co_varnames[0]
    chains = attribute_chains(code, {me})
    if not chains or not _held_by_running_function(obj):
        return []
    return _values_read(chains, {me: obj})


def _held_by_running_function(obj: Any) -> bool:
    """Whether a local variable of a function running now, outside tunedsl, holds ``obj``."""
    frame = sys._getframe(1)
    for _ in range(MAX_FRAMES):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_flags & FUNCTION_FLAGS and not is_own_file(code.co_filename):
            if any(value is obj for value in frame.f_locals.values()):
                return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _attributes_read(code: types.CodeType, objects: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The (``obj.attr``, value) pairs of data that ``code`` (and the code nested in it, a
    comprehension) reads as an attribute or a constant item of one of ``objects``, its free
    variables that hold no data themselves (a method's ``self``, a dict of settings), at the
    first step of a chain that gives data (``self.cfg.live`` reads ``cfg``'s ``live``,
    ``hp["n"]`` the dict's item ``"n"``)."""
    return _values_read(attribute_chains(code, set(objects)), objects)


def _values_read(chains: set[tuple[Any, ...]], objects: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The (``obj.attr``, value) pairs of the first step of each chain that gives data."""
    found: dict[str, Any] = {}
    for chain in sorted(chains, key=repr):
        read = first_data(chain, objects[chain[0]])
        if read is not None:
            found.setdefault(read[0], read[1])
    return list(found.items())


def rebound_globals_read(
    prune: Any, rebound: Callable[..., Mapping[str, int]], alone: bool = False
) -> list[tuple[str, Any, str]]:
    """The (name, value, line) of data that ``prune``, of a module whose top-level code is
    running now (a notebook cell's, in the session's namespace), reads from the module's
    globals where the running code may still rebind the name (``line``: where, as ``line
    N``), itself or as an attribute or constant item of an object the name holds
    (``hp["n"]``, ``run.n`` of a loop over settings). ``alone``: as for :func:`check`."""
    code = getattr(prune, "__code__", None)
    namespace = getattr(prune, "__globals__", None)
    if not isinstance(code, types.CodeType) or not isinstance(namespace, dict):
        return []
    frame = top_level_running(namespace)
    if frame is None:  # no top-level code of the module running now
        return []
    top = alone and user_frame() is frame  # the site is called by that code itself
    lines = rebound(frame.f_code.co_filename, frame.f_lineno, later=not top)
    out = []
    objects = {}
    for name in sorted(globals_loaded(code)):
        if name in lines and name in namespace:
            if is_data(namespace[name]):
                out.append((name, namespace[name], line_of(frame, code, lines[name])))
            else:
                objects[name] = namespace[name]
    if objects:
        chains = attribute_chains(code, set(objects), GLOBAL_OPS)
        for label, value in _values_read(chains, objects):
            line = lines[label.split(".")[0].split("[")[0]]
            out.append((label, value, line_of(frame, code, line)))
    for name, value in _defaults(prune, code).items():  # `lambda configs, args, N=N:`
        if name in lines and namespace.get(name, _MISSING) is value:
            out.append((name, value, line_of(frame, code, lines[name])))
    return out


_MISSING = object()


def _defaults(prune: Any, code: types.CodeType) -> dict[str, Any]:
    """The data ``prune``'s parameters default to, by parameter name."""
    given = getattr(prune, "__defaults__", None) or ()
    names = code.co_varnames[code.co_argcount - len(given) : code.co_argcount]
    found = dict(zip(names, given, strict=True))
    found.update(getattr(prune, "__kwdefaults__", None) or {})
    return {name: value for name, value in found.items() if is_data(value)}
