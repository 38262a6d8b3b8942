"""Finding in-place writes while tuning (backends layer): arguments a kernel changes again
on every launch are restored to the caller's values before each further launch.

A tuning launches the kernel many times on the caller's tensors. An argument written but
never read (an output) is harmless: every launch writes it anew. An argument read and
written (``x += 1``, an atomic accumulation) is corrupted: each launch starts from the
last one's result. ``InPlaceWatch`` tells them apart with the launches tuning makes anyway:

- before the first launch, a copy of every tensor argument not already handled by
  ``restore_value``/``reset_to_zero``;
- before the second launch, the arguments that differ from their copy were written;
- before the third launch, a written argument that differs (beyond ``rtol``/``atol``; an
  integer one at all, as ``verify=`` compares them) from its value after the first launch
  was changed again: it is in place. From then on it is
  restored before every launch (as if named in ``restore_value``), and one warning names it.

A launch that raises (a configuration that fails as it launches) is not one of the three, and
what it wrote before raising is put back to the caller's values before the next launch.

Launching twice gives the same outputs as launching once for every argument that is not
flagged, within the tolerance ``verify=`` uses; but only for the configuration of those
launches: a later one may add into what they stored (split-K's atomics), so every written
argument is put back to the caller's values after tuning, and so is one the first launches
left alone that a later configuration wrote (compared with its copy once, at the end). The
copies cost one clone of the arguments for the length of the tuning, and three comparisons.

Where the device has no room for them (arguments of tens of GiB), nothing is left changed all
the same: without room for the first copies, they are taken in host memory and put back
after tuning (the tuning's launches may then see what earlier ones wrote; one warning says
so); without room to compare or for the second copies, every argument with a copy is
restored before each further launch, as if all were in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tunedsl.model.keys import is_tensor, is_tensor_descriptor


class InPlaceWatch:
    """Watches ``bound``'s tensors (but ``skip``) over the first three launches."""

    def __init__(
        self,
        bound: Mapping[str, Any],
        skip: Iterable[str],
        rtol: float,
        atol: float,
        exact_ints: bool = False,
    ) -> None:
        from tunedsl.backends import triton as bt

        self.bt = bt
        self.bound = bound
        self.rtol, self.atol, self.exact_ints = rtol, atol, exact_ints
        skipped = set(skip)
        tensors = {n: v for n, v in bound.items() if n not in skipped and is_tensor(v)}
        self.after_first: dict[str, Any] = {}
        self.seen = 0  # launches observed so far
        self.found: dict[str, Any] = {}  # in-place argument -> the caller's value
        # Every argument with a copy is restored before each launch: there was no room to
        # tell which are in place (``found`` then holds them all, in place or not).
        self.unsure = False
        # The caller's values of the written arguments, put back after tuning: an output
        # the first launches write alike may be added into by a later configuration, or
        # be a hook's doing (a pre_hook zeroing an accumulator makes every launch write it).
        self.kept: dict[str, Any] = {}
        # The caller's values of the arguments the first launches left alone: a later
        # configuration may write one of them (a flag of its own), and is launched many times.
        self.unwritten: dict[str, Any] = {}
        self.original: dict[str, Any] = {}
        try:
            self.original = {n: bt.clone(v) for n, v in tensors.items()}
        except RuntimeError as err:  # no room on the device for the copies: in host memory
            self.kept = self._host_copies(tensors, err)

    @property
    def done(self) -> bool:
        return self.seen >= 3 or not self.original

    def before_launch(self) -> list[str]:
        """Call before every launch of the tuning; the arguments just found in place."""
        if self.done:
            return []
        self.seen += 1
        try:
            if self.seen == 2:
                self._split_written()
            elif self.seen == 3:
                return self._in_place_now()
        except RuntimeError as err:  # no room to compare or copy: restore every copy
            return self._restore_every_copy(err)
        return []

    def _split_written(self) -> None:
        self.bt.synchronize()
        # In parameter order (a set's order follows the hash seed): the warning names them so.
        written = [n for n, c in self.original.items() if not self.bt.equal(self.bound[n], c)]
        self.after_first = {n: self.bt.clone(self.bound[n]) for n in written}
        self.unwritten.update((n, c) for n, c in self.original.items() if n not in written)
        self.original = {n: self.original[n] for n in written}
        self.kept = {**self.original, **self.kept}  # after a verify= check: as before

    def _in_place_now(self) -> list[str]:
        self.bt.synchronize()
        again = [
            n
            for n, first in self.after_first.items()
            if not self.bt.equal(self.bound[n], first)
            and self.bt.allclose(
                self.bound[n], first, self.rtol, self.atol, exact_ints=self.exact_ints
            )
            is not None
        ]
        self.found = {n: self.original[n] for n in again}
        self.original, self.after_first = {}, {}  # outputs: nothing to restore
        return again

    def _restore_every_copy(self, err: BaseException) -> list[str]:
        """No room on the device to tell which arguments are in place: each one with a copy
        is restored before every further launch (restoring an output is harmless)."""
        self.found = {**self.unwritten, **self.original}
        self.kept = {**self.found, **self.kept}
        self.original, self.after_first, self.unwritten = {}, {}, {}
        self.unsure = True
        self._warn(
            "compare",
            f"could not compare the kernel's tensor arguments with their copies ({err}); "
            "every one of them is restored before each further launch while tuning",
        )
        return list(self.found)

    def _host_copies(self, tensors: Mapping[str, Any], err: BaseException) -> dict[str, Any]:
        """The caller's values in host memory, put back after tuning; {} (with a warning
        that nothing is put back) where the host has no room either."""
        try:
            copies = {n: self.bt.clone_to_host(v) for n, v in tensors.items()}
        except RuntimeError as host_err:
            self._warn(
                "none",
                f"could not copy the kernel's tensor arguments on the device ({err}) nor in "
                f"host memory ({host_err}); in-place writes are not detected while tuning: "
                "name arguments the kernel updates in restore_value=",
            )
            return {}
        self._warn(
            "host",
            f"could not copy the kernel's tensor arguments on the device ({err}); they are "
            "copied in host memory and put back after tuning, but the tuning's launches may "
            "see what earlier ones wrote: name arguments the kernel updates in restore_value=",
        )
        return copies

    @staticmethod
    def _warn(kind: str, message: str) -> None:
        from tunedsl.warn import warn_once

        warn_once(f"inplace-copy:{kind}", "tunedsl: " + message, UserWarning)

    def failed(self) -> None:
        """The launch just counted raised (a configuration that fails as it launches: on a
        GPU, one over the shared memory): it is not compared. What it wrote before raising
        (under the interpreter, the programs that ran before the failing one) is put back
        to the caller's values, so the next launch starts from them, as a first launch."""
        saved = {**self.unwritten, **self.kept, **self.original}  # the caller's values
        try:
            if saved:
                self.bt.synchronize()
        except Exception:  # a device the failure left unusable: its next launch says so
            pass
        for name, value in saved.items():  # each on its own: one raising leaves the others
            self._put_back(name, value)
        if not self.done:
            self.seen = 0

    def _put_back(self, name: str, value: Any) -> None:
        """``name`` back to the caller's ``value`` where it differs; where comparing them
        raises (a copy in host memory against a device tensor), put back all the same;
        where that raises too (a device the failure left unusable), left to the next launch
        to report."""
        target = self.bound[name]
        try:
            if self.bt.equal(target, value):
                return
        except Exception:
            pass
        try:
            self.bt.copy_into(target, value)
        except Exception:
            pass

    def fresh_start(self) -> None:
        """The arguments were just put back to the caller's values (a ``verify=`` check runs
        from them): the launch about to run is a first launch again, and the one after it
        is compared with its output, not with another configuration's (a rejected one's
        output differs from the next one's without anything being in place)."""
        if not self.done and self.seen > 1:
            self.seen = 1

    def finish(self) -> tuple[list[str], dict[str, Any]]:
        """At the end of a tuning: the arguments found in place now (fewer than three
        launches), and the caller's values of every written argument, to restore (restoring
        an output is harmless: the real launch writes it again)."""
        if self.done:
            found, written = [], dict(self.kept)
        else:
            found = self.before_launch()
            written = {**self.kept, **(self.original if self.seen == 2 else {})}
        if self.unwritten:
            self.bt.synchronize()
        try:
            later = {n: c for n, c in self.unwritten.items() if not self.bt.equal(self.bound[n], c)}
        except RuntimeError:  # no room to compare: put them all back (unchanged ones alike)
            later = dict(self.unwritten)
        return found, {**later, **written}


def restore_copies(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """``restore_value=``'s copies of the caller's values of ``tensors``, put back before
    every launch: each on the device, or, where the device has no room for it, in host
    memory (put back from there; one warning says so). Where the host has no room either,
    the device's error is raised."""
    from tunedsl.backends import triton as bt

    copies: dict[str, Any] = {}
    for name, value in tensors.items():
        try:
            copies[name] = bt.clone(value)
        except RuntimeError as err:  # no room on the device for this copy: in host memory
            try:
                copies[name] = bt.clone_to_host(value)
            except RuntimeError:
                raise err from None
            InPlaceWatch._warn(
                "restore",
                f"could not copy {name!r} of restore_value= on the device ({err}); it is "
                "copied in host memory and put back from there before every launch",
            )
    return copies


def data_arguments(bound: Mapping[str, Any]) -> dict[str, Any]:
    """The data of a launch's arguments by name: a tensor descriptor stands for its base
    tensor, and a tuple for its elements, ``pair[0]``, ``pair[1]`` (Triton passes them one
    by one, and a kernel may write any of them)."""
    out: dict[str, Any] = {}
    for name, value in bound.items():
        if isinstance(value, tuple) and not is_tensor(value):
            out.update(data_arguments({f"{name}[{i}]": v for i, v in enumerate(value)}))
        else:
            out[name] = value.base if is_tensor_descriptor(value) else value
    return out


def tuple_members(names: Iterable[str], data: Mapping[str, Any]) -> list[str]:
    """``names`` (of ``data_arguments(bound)``) with a tuple argument's name replaced by the
    names of the tensors in it (``pair[0]``, ...; its other elements are left alone)."""
    return [m for n in names for m in ([n] if n in data else _members(n, data) or [n])]


def names_tensors(name: str, data: Mapping[str, Any]) -> bool:
    """Whether the argument ``name`` stands for tensors: it is a tensor (or a tensor
    descriptor's) or a tuple holding at least one (what ``restore_value=``,
    ``reset_to_zero=`` and ``verify=`` may name, ``hooks.check_named``)."""
    return any(m in data and is_tensor(data[m]) for m in tuple_members([name], data))


def _members(name: str, data: Mapping[str, Any]) -> list[str]:
    return [k for k in data if k.startswith(name + "[") and is_tensor(data[k])]


def warn_in_place(kernel: str, names: list[str], warn: Callable[..., Any]) -> None:
    """One warning per kernel and arguments, attributed to the caller's line."""
    quoted = ", ".join(repr(n) for n in names)
    # A tuple's element (``pair[1]``) is restored by naming its parameter.
    params = ", ".join(repr(n) for n in dict.fromkeys(n.split("[")[0] for n in names))
    warn(
        f"inplace:{kernel}:{quoted}",
        f"tunedsl: {kernel} changes {quoted} in place: tuning restores "
        f"{'it' if len(names) == 1 else 'them'} before every launch, so the tuning and your "
        f"result see the original values; pass restore_value=[{params}] to say so (and "
        "silence this warning)",
        UserWarning,
        stacklevel="user",
    )
