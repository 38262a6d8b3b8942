"""Keeping a tuning's data intact (backends layer): ``Guard`` snapshots, restores and zeroes
the arguments ``restore_value=`` and ``reset_to_zero=`` name (and those the in-place watch
finds) before every launch of the tuning, and ``Verifier`` compares each configuration's
outputs with a reference (``verify=``; docs/runtime.md, "Keeping data intact").

The in-process measurer (``inprocess.py``), the isolated worker and the verify-only path of
the tuner share them, so a configuration runs on the same data wherever it is measured. On
the caller's own tensors (not the worker's copies) the storage around each view argument is
kept too, and put back after the tuning (``view_spans.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from tunedsl.backends.hooks import call_pre_hook, call_user, check_named, check_output
from tunedsl.backends.inplace import InPlaceWatch, data_arguments, restore_copies, tuple_members
from tunedsl.errors import UsageError
from tunedsl.model.keys import is_tensor


class Guard:
    """Snapshots, restores and zeroes arguments by name; ``watch``: in-place ones too."""

    def __init__(
        self,
        bound: Mapping[str, Any],
        req: Any,
        watch: bool = False,
        kernel: str = "",
        around_views: bool = True,
    ) -> None:
        """``around_views``: keep the storage around view arguments (False: they are copies
        of whole storages, as in the isolated worker, where nothing around is the caller's)."""
        from tunedsl.backends import triton as bt
        from tunedsl.backends.view_spans import AroundViews

        info = bt.kernel_info(req.kernel)
        # A site checked these names on its call already (with its place in the message);
        # a tuning asked for without a site gets the same check here.
        check_named(bound, req.settings, info, f"tuning {info.qualname}")
        self.hook_bound = bound  # a descriptor stands for its base here, not for hooks
        bound = data_arguments(bound)
        # A tuple's name stands for the tensors in it; a None (optional buffer) is skipped.
        restore_value = tuple_members(req.settings.restore_value, bound)
        reset_to_zero = tuple_members(req.settings.reset_to_zero, bound)
        self.bt = bt
        self.bound = bound
        self.kernel = kernel
        # Every name, also one the first configuration passes None for (an optional buffer
        # another configuration passes): each configuration's own tensor is restored, zeroed.
        self.zero_names = reset_to_zero
        self.restore_names = restore_value
        self.restore = restore_copies({n: bound[n] for n in restore_value if bound[n] is not None})
        self.verify_snapshot: dict[str, Any] = {}
        # Before any launch: what a configuration writing past a view would change.
        self.around = AroundViews(bound.values() if around_views else ())
        self.around_views = around_views
        self.pre_hook = req.settings.pre_hook
        skip = (*restore_value, *reset_to_zero)
        # Every written argument is put back after tuning: an output the first launches
        # write alike may be added into by a later configuration (split-K's atomics where
        # SPLIT > 1, a store where SPLIT == 1), and a hook may write arguments too.
        settings = req.settings
        self.watch = (
            InPlaceWatch(bound, skip, settings.rtol, settings.atol, not settings.tolerance_given)
            if watch
            else None
        )
        self.on_found: Callable[[], Any] | None = None  # told when in-place writes are found
        # A tensor a configuration passes where the first passes another (a buffer picked
        # per configuration, ``out[$variant]``) in memory of its own: its own copy, taken
        # before its first launch, by its place; and what each configuration's arguments
        # are, by the id of its hooks' dict. A new view of the very memory the first passes
        # under that name (``y.view(-1)`` per configuration) is restored through the first's
        # tensor; any other tensor, another part of the same storage included (a row of one
        # stacked tensor per configuration, ``outs[cfg.variant]``), gets its own copy.
        self.first_memory = {n: _footprint(v) for n, v in bound.items() if is_tensor(v)}
        self.own: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        self.zeroed: dict[tuple[Any, ...], Any] = {}
        self._data: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}

    def snapshot_all(self) -> None:
        """Each tensor argument's values for ``verify=``, sharing the copies taken already."""
        first = self.watch.original if self.watch and not self.watch.seen else {}
        taken = {**first, **self.restore}
        tensors = ((n, v) for n, v in self.bound.items() if is_tensor(v))
        self.verify_snapshot = {n: taken[n] if n in taken else self.bt.clone(v) for n, v in tensors}

    def observe(self) -> None:
        """Before each launch of the tuning: the in-place watch's turn."""
        if self.watch is not None and not self.watch.done:
            self._found(self.watch.before_launch())

    def _found(self, names: list[str]) -> None:
        if not names or self.watch is None:
            return
        from tunedsl.backends.inplace import warn_in_place
        from tunedsl.warn import warn_once

        for name in names:
            self.restore[name] = self.watch.found[name]
        if not self.watch.unsure:  # else restored without being known to be in place
            warn_in_place(self.kernel, names, warn_once)
        if self.on_found is not None:
            self.on_found()

    def data_of(self, hook_args: Mapping[str, Any] | None) -> dict[str, Any]:
        """The data arguments of the configuration whose hooks get ``hook_args`` (None: the
        first's); a tensor it passes where the first passes another gets its own copy."""
        if hook_args is None:
            return self.bound
        known = self._data.get(id(hook_args))
        if known is None:  # the dict is kept with its data, so its id names it
            data = data_arguments(hook_args)
            for name, value in data.items():
                place = self._own_place(name, value)
                if place is not None and place not in self.own:
                    self._put_back_older(value)  # the caller's values, where copies hold them
                    if self.around_views:  # the memory around it, as around the first's
                        self.around.put_back_under(value)
                        self.around.add(value)
                    with contextlib.suppress(RuntimeError):  # no room for it: left as it is
                        self.own[place] = (value, self.bt.clone(value))
            known = self._data[id(hook_args)] = (hook_args, data)
        return known[1]

    def _put_back_older(self, value: Any) -> None:
        """The tensors of earlier configurations that share memory with ``value`` (a whole
        tensor another one passes a view of), back from their copies, before ``value``'s own
        copy is taken: it would hold their writes, run on them and put them back after the
        tuning. The first configuration's copied ones and every earlier one's own."""
        from tunedsl.backends.view_spans import overlaps

        copied = {**self.verify_snapshot, **self.restore}
        older = [(self.bound[n], saved) for n, saved in copied.items()]
        for tensor, saved in [*older, *self.own.values()]:
            if overlaps(tensor, value):
                self.bt.copy_into(tensor, saved)

    def _own_place(self, name: str, value: Any) -> tuple[Any, ...] | None:
        """Where a tensor passed as ``name`` lies, other than the memory the first
        configuration passes as ``name`` (None: not a tensor, or that memory)."""
        if not is_tensor(value) or self.first_memory.get(name) == _footprint(value):
            return None
        return (value.data_ptr(), value.dtype, tuple(value.shape), tuple(value.stride()))

    def _target(self, name: str, saved: Any, data: Mapping[str, Any]) -> tuple[Any, Any] | None:
        """The tensor this configuration passes as ``name`` and the values to put in it: its
        own copy's, else (the first's memory) the first configuration's tensor and copy."""
        first = self.bound.get(name)
        place = self._own_place(name, data.get(name, first))
        if place is not None and place in self.own:
            return self.own[place]
        return None if first is None or saved is None else (first, saved)

    def _restores(self) -> dict[str, Any]:
        """The names to restore, with the first configuration's copy (None where it has none)."""
        return {**dict.fromkeys(self.restore_names), **self.restore}

    def _zero(self, data: Mapping[str, Any]) -> None:
        for name in self.zero_names:
            value = data.get(name, self.bound.get(name))
            if is_tensor(value):
                self.bt.zero(value)
                place = self._own_place(name, value)
                if place is not None:  # zeroed again after the tuning, as the first's are
                    self.zeroed[place] = value

    def before_rep(self, hook_args: Mapping[str, Any] | None = None) -> None:
        self.observe()
        data = self.data_of(hook_args)
        for name, saved in self._restores().items():
            target = self._target(name, saved, data)
            if target is not None:
                self.bt.copy_into(*target)
        self._zero(data)
        if self.pre_hook is not None:
            call_pre_hook(self.pre_hook, self.hook_bound if hook_args is None else hook_args)

    def restore_all(self, hook_args: Mapping[str, Any] | None = None) -> None:
        """Every snapshot back where the kernel changed it (a broadcast input, ``expand``ed
        with stride 0, which it cannot have written, cannot be copied into): the first
        configuration's arguments and those of ``hook_args``'s configuration, or without
        it every configuration's own."""
        data = self.data_of(hook_args)
        restores = self._restores()
        for name, saved in self.verify_snapshot.items():
            target = None if name in restores else self._target(name, saved, data)
            if target is not None and not self.bt.equal(*target):
                self.bt.copy_into(*target)
        for name, saved in restores.items():
            target = self._target(name, saved, data)
            if target is not None:
                self.bt.copy_into(*target)
        if hook_args is None:  # after the tuning: every configuration's own, as it was
            for value, saved in self.own.values():
                if not self.bt.equal(value, saved):
                    self.bt.copy_into(value, saved)
            for value in self.zeroed.values():
                self.bt.zero(value)
        self._zero(data)

    def restore_after_tuning(self) -> None:
        """After the tuning's last launch of the verify-only path: the storage around the
        views, then every snapshot (``restore_all``: zeroing ``reset_to_zero=`` last)."""
        self.around.put_back()
        self.restore_all()

    def close(self) -> None:
        """After the tuning's last launch: every argument back to the caller's values, and
        the storage around the views (first: an argument in it is then restored, zeroed)."""
        try:
            self.around.put_back()
            if self.watch is not None:
                found, written = self.watch.finish()
                self._found(found)
                for name, saved in written.items():
                    self.bt.copy_into(self.bound[name], saved)
            self.restore_all()
        finally:  # the copies go now: a kept exception (a notebook's) keeps this guard
            self.restore, self.verify_snapshot, self.watch = {}, {}, None
            self.own, self.zeroed, self._data = {}, {}, {}


def _footprint(t: Any) -> tuple[Any, ...]:
    """The memory ``t``'s elements cover, the same for every view of it: where it starts and
    its bytes (contiguous), or its sizes with their strides (a strided view)."""
    item = t.element_size()
    if t.is_contiguous():
        return (t.data_ptr(), t.numel() * item)
    dims = sorted((s * item, n) for n, s in zip(t.shape, t.stride(), strict=True) if n != 1)
    return (t.data_ptr(), *dims)


class Verifier:
    """Compares each configuration's outputs with a reference (see docs/runtime.md)."""

    def __init__(self, req: Any, guard: Guard) -> None:
        self.req = req
        self.guard = guard
        self.reference: dict[str, Any] | None = None
        verify = req.settings.verify
        tensors = [n for n, v in guard.bound.items() if is_tensor(v)]
        if callable(verify):
            guard.snapshot_all()
            inputs = _reference_inputs(guard.hook_bound, guard.bt)
            expected = call_user(
                verify, inputs, "verify=fn", "fix it: no configuration was measured"
            )
            if not isinstance(expected, Mapping) or not expected:
                raise UsageError(
                    "verify=fn must return a dict {parameter name: expected tensor}, "
                    f"got {type(expected).__name__}"
                )
            self.reference = _by_member(expected, guard.hook_bound)
            self.outputs = list(self.reference)
        elif verify is True:
            self.outputs = tensors
        else:  # a tuple's name stands for its tensors; an optional buffer passed as None
            # is no output of this call, as restore_value= and reset_to_zero= skip it
            given = [str(n) for n in verify if guard.bound.get(str(n), 0) is not None]
            self.outputs = tuple_members(given, guard.bound)
        for name in self.outputs:
            check_output(name, tensors, self.reference, guard.bound, guard.bt)
        if not guard.verify_snapshot:
            guard.snapshot_all()

    def check(
        self, run: Callable[[], Any], hook_args: Mapping[str, Any] | None = None
    ) -> str | None:
        """Run once from the snapshot (after ``pre_hook``); None when outputs agree."""
        self.guard.observe()
        self.guard.restore_all(hook_args)
        if self.guard.watch is not None:
            self.guard.watch.fresh_start()
        if self.guard.pre_hook is not None:
            hooked = self.guard.hook_bound if hook_args is None else hook_args
            call_pre_hook(self.guard.pre_hook, hooked)
        run()
        self.guard.bt.synchronize()
        data = self.guard.data_of(hook_args)  # a configuration's own output is compared
        outputs = {n: self.guard.bt.clone(data.get(n, self.guard.bound[n])) for n in self.outputs}
        if self.reference is None:
            self.reference = outputs  # the first configuration that finished successfully
            return None
        for name in self.outputs:
            settings = self.req.settings
            problem = self.guard.bt.allclose(
                outputs[name],
                self.reference[name],
                settings.verify_rtol(self.guard.bt.precision(outputs[name])),
                settings.atol,
                exact_ints=not settings.tolerance_given,
            )
            if problem is not None:
                return f"verify: output {name!r} differs from the reference: {problem}"
        return None


def _reference_inputs(bound: Mapping[str, Any], bt: Any) -> dict[str, Any]:
    """``verify=fn``'s inputs: the arguments by parameter name, each tensor a copy (a
    descriptor's base tensor for the descriptor), a tuple a tuple of them."""

    def copy(value: Any) -> Any:
        if isinstance(value, tuple) and not is_tensor(value):
            return tuple(copy(v) for v in value)
        data = data_arguments({"x": value})["x"]
        return bt.clone(data) if is_tensor(data) else data

    return {name: copy(value) for name, value in bound.items()}


def _by_member(expected: Mapping[Any, Any], bound: Mapping[str, Any]) -> dict[str, Any]:
    """``verify=fn``'s reference keyed as the outputs are compared: a tuple argument's
    expected tuple (or list) of one value per element becomes ``pair[0]``, ``pair[1]``, ...
    (a ``None`` in it: that element is not compared); other keys are kept as given."""
    out: dict[str, Any] = {}
    for name, value in expected.items():
        given = bound.get(str(name))
        if (
            isinstance(given, tuple)
            and not is_tensor(given)
            and isinstance(value, (tuple, list))
            and len(value) == len(given)
        ):
            members = {f"{name}[{i}]": v for i, v in enumerate(value) if v is not None}
            out.update(_by_member(members, {f"{name}[{i}]": v for i, v in enumerate(given)}))
        else:
            out[str(name)] = value
    return out
