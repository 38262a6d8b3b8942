"""The memory around the tensor views a tuning launches on (backends layer), kept and put back.

A tuning launches every configuration on the caller's tensors. One that writes past a
view's extent (a mask to the padded size, an off-by-one, a row of a column slice run past
its last column) writes into the storage around the view: the caller's other data, which no
argument names. The in-place watch and ``restore_value=`` put back the view's own elements
only, so the caller's neighbouring data was left as a configuration that lost (or that
``verify=`` rejected) wrote it, a silent wrong result.

So ``AroundViews`` copies, before a tuning's first launch, the bytes of each tensor
argument's storage from its first element to its last (what lies between the elements of a
strided view included) and, on each side, as many bytes as that span again, at least
``MIN_PAD_BYTES`` (windows in one storage that meet are one copy); after the tuning's last
launch, a window that changed is put back. Writes further away, or outside the storage, are
not undone. A tensor that covers its whole storage (the common case) costs a comparison of
two numbers and is not copied. Where the device has no room for a copy, it is taken in host
memory (and put back from there); where the host has none either, that window is left
unprotected, and one warning says so. A tensor a later configuration passes in place of
the first configuration's (a buffer picked per configuration) gets its window too, copied
before that configuration's first launch: the parts no window kept already holds; and its
own memory is first put back from the copies kept already, found by address (an earlier
configuration may have written past its view into it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tunedsl.model.keys import is_tensor

#: The least a window reaches past each side of a view's span: a configuration's overrun is
#: at most one block, or one tile, which a small view's own size may be smaller than.
MIN_PAD_BYTES = 1 << 20


def _span(t: Any) -> tuple[Any, int, int] | None:
    """``(storage, lo, hi)``: the bytes of ``t``'s storage from its first element to its
    last, or None where it has none (no elements, sparse, meta)."""
    try:
        storage = t.untyped_storage()
        storage.nbytes()
    except (RuntimeError, NotImplementedError):
        return None
    if t.numel() == 0:
        return None
    item = t.element_size()
    lo = t.storage_offset() * item
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return storage, lo, lo + (last + 1) * item


def _window(t: Any) -> tuple[Any, int, int] | None:
    """``(storage, lo, hi)``: the bytes of ``t``'s storage to keep, or None where ``t`` covers
    its whole storage (nothing around it), or has no storage to look at (sparse, meta)."""
    span = _span(t)
    if span is None:
        return None
    storage, lo, hi = span
    size = storage.nbytes()
    if lo == 0 and hi >= size:  # the whole storage: a write past it is outside any tensor
        return None
    pad = max(hi - lo, MIN_PAD_BYTES)
    return storage, max(0, lo - pad), min(size, hi + pad)


class AroundViews:
    """Copies of the storage around the views among ``tensors`` (see the module docstring),
    and around those ``add`` is given later, put back by ``put_back``."""

    def __init__(self, tensors: Iterable[Any]) -> None:
        self.kept: list[tuple[Any, Any]] = []  # (a window onto the storage, its copy)
        # Per storage (``_storage_place``): the windows kept of it.
        self.spans: dict[tuple[str, int, int], list[tuple[int, int]]] = {}
        spans: dict[tuple[str, int, int], tuple[Any, Any, list[tuple[int, int]]]] = {}
        for t in tensors:
            if not is_tensor(t):
                continue
            found = _window(t)
            if found is None:
                continue
            storage, lo, hi = found
            where = _storage_place(t, storage)
            spans.setdefault(where, (storage, t.device, []))[2].append((lo, hi))
        for where, (storage, device, windows) in spans.items():
            for lo, hi in _merged(windows):
                self._keep(storage, device, lo, hi)
                self.spans.setdefault(where, []).append((lo, hi))

    def add(self, t: Any) -> None:
        """Keep the storage around ``t`` too, now (a tensor a later configuration passes in
        place of the first's, before its first launch): the parts of its window that no
        window kept already holds. A copy kept already is older (taken before more
        launches), so where windows meet it is the one that counts, and each byte of a
        storage is copied once."""
        found = _window(t) if is_tensor(t) else None
        if found is None:
            return
        storage, lo, hi = found
        kept = self.spans.setdefault(_storage_place(t, storage), [])
        for a, b in _uncovered(lo, hi, kept):
            self._keep(storage, t.device, a, b)
            kept.append((a, b))

    def put_back_under(self, t: Any) -> None:
        """The memory of ``t`` (its first element to its last) back as the copies kept
        already hold it, where they do: a tensor a later configuration passes, before that
        configuration's own copy of it is taken, so that what an earlier configuration wrote
        past its view into it is not what the later one runs on, nor what is put back into
        it after the tuning."""
        span = _span(t) if is_tensor(t) else None
        if span is None or not self.kept:
            return
        storage, lo, hi = span
        # By address: a window of another storage over the same memory (``from_dlpack`` of
        # a slice) holds it too.
        lo, hi, device = storage.data_ptr() + lo, storage.data_ptr() + hi, t.device
        for window, copy in reversed(self.kept):  # the oldest copy last: it counts
            start = window.data_ptr()
            a, b = max(lo, start), min(hi, start + window.numel())
            if a < b and window.device == device:
                part = window[a - start : b - start]
                kept = copy[a - start : b - start]
                if kept.device != part.device or not _equal(part, kept):
                    part.copy_(kept)

    def _keep(self, storage: Any, device: Any, lo: int, hi: int) -> None:
        import torch

        empty = torch.empty(0, dtype=torch.uint8, device=device)
        window = empty.set_(storage, lo, (hi - lo,), (1,))
        try:
            self.kept.append((window, window.clone()))
            return
        except RuntimeError as err:  # no room on the device: in host memory
            failed = err
        if window.device.type != "cpu":
            try:
                self.kept.append((window, window.to("cpu")))
                return
            except RuntimeError as err:
                failed = err
        from tunedsl.warn import warn_once

        warn_once(
            "around-views",
            f"tunedsl: could not copy the {hi - lo} bytes around a tensor view argument "
            f"({failed}); a configuration that writes past the view's extent while tuning "
            "leaves that data changed",
            UserWarning,
        )

    def put_back(self) -> None:
        """Every window that changed back as it was; the copies go."""
        import torch

        kept, self.kept, self.spans = self.kept, [], {}
        # Newest first: where windows of two storages over one memory meet, the older copy
        # (taken before more launches) is written last.
        for window, copy in reversed(kept):
            if copy.device != window.device or not torch.equal(window, copy):
                window.copy_(copy)  # a copy in host memory: put back all the same


def overlaps(a: Any, b: Any) -> bool:
    """Whether tensors ``a`` and ``b`` share memory, by address (their first element to their
    last: a storage's views, or two storages over one memory, ``from_dlpack`` of a slice)."""
    span_a = _span(a) if is_tensor(a) else None
    span_b = _span(b) if is_tensor(b) else None
    if span_a is None or span_b is None or a.device != b.device:
        return False
    (sa, la, ha), (sb, lb, hb) = span_a, span_b
    pa, pb = sa.data_ptr(), sb.data_ptr()
    return pa + la < pb + hb and pb + lb < pa + ha


def _equal(a: Any, b: Any) -> bool:
    import torch

    return bool(torch.equal(a, b))


def _storage_place(t: Any, storage: Any) -> tuple[str, int, int]:
    """A storage's device, address and size: two storages over one memory (two
    ``torch.from_numpy`` of one array, ``a`` and ``a[:k]``) start at one address with two
    sizes, and a window of the larger one does not fit in the smaller."""
    return str(t.device), storage.data_ptr(), storage.nbytes()


def _uncovered(lo: int, hi: int, kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``[lo, hi)`` outside every window of ``kept``."""
    out, at = [], lo
    for a, b in _merged(kept):
        if b <= at or a >= hi:
            continue
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if at < hi:
        out.append((at, hi))
    return out


def _merged(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The windows, those that meet or overlap made one."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(windows):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out
